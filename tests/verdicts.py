"""What the tests of the exercises' checks assert about a verdict: the one
line a check prints, its status and hint, and a refused call
(checking.run_check's refuse=)."""

from __future__ import annotations

from backprop_lessons.exercises.checking import Verdict


def run(check, answer, capsys, exercise: int = 1) -> Verdict:
    """The verdict of check(answer), which printed exactly itself."""
    verdict = check(answer, exercise=exercise)
    assert capsys.readouterr().out == f"{verdict}\n"
    assert isinstance(verdict, Verdict)
    return verdict


def assert_verdict(verdict: Verdict, status: str, *parts: str) -> None:
    """`verdict` has `status`, and its hint says each of `parts`."""
    assert verdict.status == status, str(verdict)
    for part in parts:
        assert part in verdict.hint, str(verdict)


def assert_not_yet(verdict: Verdict, *parts: str) -> None:
    assert_verdict(verdict, "not yet", *parts)


def refused(verdict, called: str, quoted: bool = True) -> None:
    """`verdict` is "not yet" because the reader's code called `called` (its
    qualified name, or the start of it), and quotes the reader's line that
    called it (none when the book's function itself is the answer:
    quoted=False)."""
    assert verdict.status == "not yet", str(verdict)
    assert verdict.hint.startswith(f"your code called {called}"), verdict.hint
    if quoted:
        assert verdict.where and verdict.where[-1].startswith("in "), verdict
