"""scripts/mutants.py, the mutation test of the solutions (`make mutants`):
the mutants it makes from a solution cell's syntax tree, the time limit
and the verdicts of its runner, its report, and the known equivalent
mutants' file.  The mutation test itself runs every chapter (many minutes)
and is not part of `make test`; these tests read the notebooks' solution
cells without running them."""

from __future__ import annotations

import ast
import importlib.util
import json
import threading
from pathlib import Path

import pytest

from backprop_lessons import grade

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location(
    "mutants_script", ROOT / "scripts" / "mutants.py"
)
mutants = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(mutants)

CELL = '''\
# @title Exercise 1: a solution
from backprop_lessons.exercises import assert_correct


def f_solution(dinp, x, w):
    """A docstring with 1.0 in it."""
    y = -x * w + 2 - c / x ** 2  # a comment
    dinp += y.sum(axis=(0, 1), keepdims=True) / 2
    if x.shape[0] > 0:
        dinp -= np.maximum(x, w).T
    np.add.at(dinp, x, w)
    return f"{y + 1}"


assert_correct(check_f, f_solution, exercise=1)
'''


def _made(cell=CELL):
    return mutants.mutants(cell)


def test_the_check_is_the_cells_closing_call_without_assert_correct():
    code, check = mutants.split_solution(CELL)
    assert check == "check_f(f_solution, exercise=1)"
    assert [type(s) for s in code.body] == [ast.ImportFrom, ast.FunctionDef]
    assert mutants.exercise_number(CELL) == 1
    with pytest.raises(ValueError, match="assert_correct"):
        mutants.split_solution("x = 1\n")


def test_every_operator_of_the_list_makes_mutants_that_compile():
    found = _made()
    assert {m["operator"] for m in found} == {
        "+= made =",
        "-= made =",
        "operator swapped",
        "operands swapped",
        "term dropped",
        "constant changed",
        "comparison flipped",
        "unary dropped",
        "index or axis changed",
        "arguments swapped",
        "statement dropped",
        "function swapped",
    }
    codes = [m["code"] for m in found]
    assert len(set(codes)) == len(codes)  # one mutant per distinct code
    for code in codes:
        compile(code, "<mutant>", "exec")
        assert "assert_correct(check_f" not in code
        assert "A docstring with 1.0 in it." in code  # docstrings stay


def _afters(operator):
    return {m["after"] for m in _made() if m["operator"] == operator}


def test_the_changes_read_as_the_solution_line_and_the_mutants():
    assert "dinp = y.sum(axis=(0, 1), keepdims=True) / 2" in _afters("+= made =")
    axis = _afters("index or axis changed")
    assert "dinp += y.sum(axis=(0, 1)) / 2" in axis  # keepdims dropped
    assert "dinp += y.sum(axis=1, keepdims=True) / 2" in axis
    assert "dinp += y.sum(keepdims=True) / 2" in axis
    assert "if x.shape[1] > 0:" in axis  # a constant in an index
    assert "dinp -= np.maximum(x, w)" in axis  # a transpose dropped
    assert "if x.shape[0] >= 0:" in _afters("comparison flipped")
    assert "dinp -= np.maximum(w, x).T" in _afters("arguments swapped")
    assert "dinp -= np.minimum(x, w).T" in _afters("function swapped")
    dropped = {
        m["before"] for m in _made() if m["operator"] == "statement dropped"
    }
    assert "np.add.at(dinp, x, w)" in dropped
    # a replacement binding more loosely than what it replaced is
    # parenthesized: ** made * under a division
    ops = _afters("operator swapped")
    assert "y = -x * w + 2 - c / (x * 2) # a comment" in ops
    assert "return f'{y - 1}'" in ops  # inside an f-string
    assert "y = x * w + 2 - c / x ** 2 # a comment" in _afters("unary dropped")


def test_commutative_operands_are_not_swapped():
    swapped = _afters("operands swapped")
    assert "y = -x * w + 2 - x ** 2 / c # a comment" in swapped  # a division
    assert not any("w * -x" in after or "2 + -x" in after for after in swapped)


def test_a_sample_is_deterministic_and_keeps_the_order():
    found = [{"n": i} for i in range(50)]
    a = mutants.sample(found, 10, "04:1")
    assert a == mutants.sample(found, 10, "04:1")
    assert len(a) == 10 and a == sorted(a, key=lambda m: m["n"])
    assert mutants.sample(found, 60, "04:1") == found


def _solutions():
    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            if grade.is_solution(cell):
                yield path.stem.split("_")[0], grade.cell_source(cell)


def test_every_solution_cell_gives_its_check_and_mutants():
    seen = 0
    for _, source in _solutions():
        mutants.split_solution(source)
        assert mutants.exercise_number(source) > 0
        for m in mutants.mutants(source):
            compile(m["code"], "<mutant>", "exec")
        seen += 1
    assert seen > 40


def test_every_known_equivalent_names_a_mutant_of_its_solution():
    """An entry of mutants_equivalent.toml outlives its solution's line
    otherwise (and would hide nothing, or the wrong mutant)."""
    made = {}
    for chapter, source in _solutions():
        key = (chapter, mutants.exercise_number(source))
        made[key] = {(m["before"], m["after"]) for m in mutants.mutants(source)}
    entries = mutants.read_equivalents()
    assert entries
    for entry in entries:
        key = (entry["chapter"], entry["exercise"])
        assert (entry["before"], entry["after"]) in made.get(key, set()), entry
        assert len(entry["reason"]) > 10


def _ns():
    class Verdict:
        def __init__(self, status):
            self.status, self.hint = status, f"hint for {status}"

    def check(fn, *, exercise):
        return Verdict("correct" if fn(2) == 4 else "not yet")

    return {"check": check}


@pytest.mark.skipif(
    threading.current_thread() is not threading.main_thread(),
    reason="the time limit is a signal, which only the main thread receives",
)
def test_the_runner_gives_verdicts_errors_and_time_outs():
    ns, call = _ns(), "check(f, exercise=1)"
    right = mutants._try(ns, "def f(x):\n    return x * 2\n", call, "<m>", 10)
    assert right["status"] == "correct"
    wrong = mutants._try(ns, "def f(x):\n    return x + 3\n", call, "<m>", 10)
    assert (wrong["status"], wrong["hint"]) == ("not yet", "hint for not yet")
    raised = mutants._try(ns, "def f(x):\n    return x / 0\n", call, "<m>", 10)
    assert raised["status"] == "raised"
    assert raised["hint"].startswith("ZeroDivisionError")
    hang = "def f(x):\n    while True:\n        pass\n"
    assert not raised["in_check"]  # the mutant's own code raised
    stuck = mutants._try(ns, hang, call, "<m>", 0.2)
    assert stuck["status"] == "timed out"
    assert "f" not in ns  # the mutants ran in a copy of the namespace


def _row(operator, line, change, verdict, outcome, **more):
    before, after = change.split(" -> ")
    return dict(
        operator=operator,
        line=line,
        before=before,
        after=after,
        verdict=verdict,
        hint=more.pop("hint", ""),
        outcome=outcome,
        **more,
    )


def test_the_report_counts_and_lists_the_survivors():
    rows = [
        _row("+= made =", 3, "a += b -> a = b", "not yet", "rejected"),
        _row("constant changed", 4, "c = 1 -> c = 2", "correct", "survived"),
        _row(
            "arguments swapped",
            5,
            "min(a, b) -> min(b, a)",
            "correct",
            "equivalent",
            reason="min is symmetric",
        ),
        _row("term dropped", 6, "d = e + f -> d = e", "timed out", "rejected"),
        _row(
            "unary dropped",
            7,
            "g = -h -> g = h",
            "raised",
            "rejected",
            hint="TypeError: odd",
            in_check=True,
        ),
    ]
    exercise = {"made": 9, "run": 5, "mutants": rows}
    figures = mutants.figures(exercise)
    assert figures == {
        "made": 9,
        "run": 5,
        "rejected": 3,
        "equivalent": 1,
        "survived": 1,
        "timed out": 1,
        "raised": 1,
        "in check": 1,
    }
    chapter = {"notebook": "04_x.ipynb", "seconds": 3.0, "problems": []}
    chapter["exercises"] = {"2": exercise}
    text = mutants.markdown({"chapters": {"04": chapter}})
    assert (
        "| exercise 2 | 5 of 9 | 3 (1 raised, 1 of them in the check, "
        "1 timed out) | 1 | 1 |" in text
    )
    assert "## Survivors (1)" in text and "  - c = 1\n  + c = 2" in text
    assert "(line 5): min is symmetric" in text
    assert "## Rejected, but the check raised (1)" in text
    assert "(line 7): TypeError: odd" in text
