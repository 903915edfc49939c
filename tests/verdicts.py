"""What the tests of the exercises' checks assert about a verdict that
refuses a call (checking.run_check's refuse=)."""

from __future__ import annotations


def refused(verdict, called: str, quoted: bool = True) -> None:
    """`verdict` is "not yet" because the reader's code called `called` (its
    qualified name, or the start of it), and quotes the reader's line that
    called it (none when the book's function itself is the answer:
    quoted=False)."""
    assert verdict.status == "not yet", str(verdict)
    assert verdict.hint.startswith(f"your code called {called}"), verdict.hint
    if quoted:
        assert verdict.where and verdict.where[-1].startswith("in "), verdict
