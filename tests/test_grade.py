"""backprop_lessons.grade on small notebooks built here: each exercise gets
its stub cell's verdict, through the checks' own channel
(`checking.record_verdicts`), whatever the notebook prints.

Two kernel runs in all (a second or two each, plus a deliberate 4-second
time limit): one notebook holds every case of a finished run (answers
that call what their check refuses among them), another a cell that runs
past the time limit and a kernel that dies.  The layout
tests read the stored chapters without running them.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from backprop_lessons import grade
from backprop_lessons.exercises import checking

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))

pytest.importorskip("nbclient")


def _code(source: str, *tags: str) -> dict:
    return {
        "cell_type": "code",
        "execution_count": None,
        "metadata": {"tags": list(tags)} if tags else {},
        "outputs": [],
        "source": source,
    }


def _markdown(source: str) -> dict:
    return {"cell_type": "markdown", "metadata": {}, "source": source}


def _heading(number: int, title: str) -> dict:
    return _markdown(f"### Exercise {number}: {title}\n\nThe task.")


def _write(path: Path, cells: list[dict]) -> Path:
    nb = {
        "cells": cells,
        "metadata": {
            "kernelspec": {"name": "python3", "display_name": "Python 3"},
            "language_info": {"name": "python"},
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    path.write_text(json.dumps(nb), encoding="utf-8")
    return path


RIGHT, WRONG = '{"a": 3.0, "b": 4.0}', '{"a": 3.0, "b": 6.0}'
STUB = '{"a": ..., "b": ...}'
HAND = "check_hand_gradients(answer, exercise={})"

#: (exercise, expected status, a word of the hint) for the finished run
EXPECTED = {
    1: (grade.CORRECT, ""),
    2: (grade.NOT_YET, "dh/db"),
    3: (grade.NOT_ATTEMPTED, "write softplus"),
    4: (grade.NOT_ATTEMPTED, "fill in"),  # printed "correct" after the check
    5: (grade.NOT_ATTEMPTED, "no code cell"),  # a printed verdict alone
    6: (grade.NOT_ATTEMPTED, "fill in"),  # demonstrations before and after
    7: (grade.CORRECT, ""),  # after a cell that raised
    8: (grade.NOT_YET, "NameError"),  # the stub cell raised
    9: (grade.NOT_YET, "not a check of backprop_lessons"),  # a toy check
    10: (grade.CORRECT, ""),  # a prediction
    # gaming: the right numbers, from the book's backward or PyTorch's
    11: (
        grade.NOT_YET,
        "your code called backprop_lessons.scalar.Value.backward",
    ),
    12: (grade.NOT_YET, "your code called Tensor.backward, PyTorch's autograd"),
}

#: exercise 11's answer: the engine's backward gives the right numbers
BY_THE_BOOK = """def answer():
    a, b = Value(-2.0), Value(3.0)
    (a * b + b**2).backward()
    return {"a": a.grad, "b": b.grad}
"""
#: exercise 12's: PyTorch's autograd gives them too
BY_TORCH = """def answer():
    import torch

    a = torch.tensor(-2.0, requires_grad=True)
    b = torch.tensor(3.0, requires_grad=True)
    (a * b + b**2).backward()
    return {"a": a.grad.item(), "b": b.grad.item()}
"""


def _finished_run(folder: Path) -> Path:
    return _write(
        folder / "01_synthetic.ipynb",
        [
            _code(
                "from backprop_lessons.exercises import check_prediction\n"
                "from backprop_lessons.exercises.checking import run_check\n"
                "from backprop_lessons.exercises.value_nodes import (\n"
                "    check_hand_gradients, check_softplus)"
            ),
            _heading(1, "a right answer"),
            _code(f"answer = {RIGHT}\n\n{HAND.format(1)}"),
            _markdown('<details class="hint"><summary>Hint</summary>\n\n'),
            _code(
                "# @title Exercise 1: a solution\n"
                f"answer_solution = {RIGHT}\n"
                "check_hand_gradients(answer_solution, exercise=1)",
                "solution",
            ),
            _heading(2, "a wrong answer"),
            _code(f"answer = {WRONG}\n\n{HAND.format(2)}"),
            _heading(3, "an untouched stub"),
            _code(
                "def softplus(v):\n    raise NotImplementedError\n\n\n"
                "check_softplus(softplus, exercise=3)"
            ),
            _code(
                "# @title Exercise 3: a solution\n"
                "def softplus_solution(v):\n    return v\n\n\n"
                "check_softplus(softplus_solution, exercise=3)",
                "solution",
            ),
            _code(
                "from backprop_lessons.widgets import reveal_source\n"
                "reveal_source(undefined_on_purpose)",
                "remove-input",
            ),
            _heading(4, "a faked verdict"),
            _code(
                f'answer = {STUB}\n{HAND.format(4)}\nprint("Exercise 4: correct")'
            ),
            _heading(5, "a printed verdict alone"),
            _code('print("Exercise 5: correct")'),
            _heading(6, "demonstrations before and after"),
            _code(f"check_hand_gradients({RIGHT}, exercise=6)  # the demo"),
            _code(f"answer = {STUB}\n{HAND.format(6)}"),
            _markdown("Hints."),
            _code(f"check_hand_gradients({RIGHT}, exercise=6)  # later"),
            _code('raise RuntimeError("part-way")'),
            _heading(7, "after a cell that raised"),
            _code(f"answer = {RIGHT}\n{HAND.format(7)}"),
            _heading(8, "a stub cell that raises"),
            _code(f'answer = {{"a": not_defined, "b": 4.0}}\n{HAND.format(8)}'),
            _heading(9, "a check of the notebook's own"),
            _code(
                "def check_anything(answer, *, exercise):\n"
                "    return run_check(exercise, lambda a: None, answer)\n\n\n"
                "check_anything(1, exercise=9)"
            ),
            _heading(10, "a prediction"),
            _code(
                "def my_bubble():\n"
                "    return 0.2\n\n\n"
                'check_prediction("bubble", my_bubble, exercise=10)'
            ),
            _heading(11, "the book's backward for the answer"),
            _code(
                "from backprop_lessons import Value\n\n\n"
                f"{BY_THE_BOOK}\n\n{HAND.format(11)}"
            ),
            _heading(12, "PyTorch's autograd for the answer"),
            _code(f"{BY_TORCH}\n\n{HAND.format(12)}"),
            _code("softplus_solution  # a solution's name: removed"),
        ],
    )


def test_grading_a_notebook_run_to_its_end(tmp_path):
    """One kernel run for every case of a finished run (under xdist, a
    module fixture would run once per worker)."""
    finished = grade.grade_notebook(_finished_run(tmp_path), timeout=120)
    _each_exercise_gets_its_stub_cells_verdict(finished)
    _a_notebook_that_raises_runs_on_and_says_where(finished)
    _the_json_is_gradescopes(finished)


def _each_exercise_gets_its_stub_cells_verdict(finished):
    got = {r.exercise.number: r for r in finished.results}
    assert sorted(got) == sorted(EXPECTED)
    for number, (status, word) in EXPECTED.items():
        assert got[number].status == status, (number, got[number])
        assert word in got[number].hint, (number, got[number].hint)
    # a refused call is a "not yet" like any other: named, its line quoted
    assert got[11].where[-1].endswith(": (a * b + b**2).backward()")
    assert got[12].where[-1].endswith(": (a * b + b**2).backward()")
    assert finished.score == 3
    assert finished.stopped is None
    assert finished.removed == 3  # two solutions, one book's version


def _a_notebook_that_raises_runs_on_and_says_where(finished):
    raised = [(e.name, e.message) for e in finished.errors]
    assert raised == [
        ("RuntimeError", "part-way"),
        ("NameError", "name 'not_defined' is not defined"),
        ("NameError", "name 'softplus_solution' is not defined"),
    ]
    assert finished.errors[0].first_line == 'raise RuntimeError("part-way")'
    table = grade.report([finished])
    assert "01_synthetic.ipynb: 3 of 12 correct" in table
    assert "Exercise 8   not yet" in table and "RuntimeError" in table


def _the_json_is_gradescopes(finished):
    results = grade.gradescope_results([finished])
    assert results["score"] == 3
    tests = results["tests"]
    assert len(tests) == 12
    assert tests[0]["name"] == "Exercise 1 of 01_synthetic: a right answer"
    for number, test in enumerate(tests, 1):
        assert test["name"].startswith(f"Exercise {number} of 01_synthetic")
        assert test["max_score"] == 1
        assert test["score"] == (EXPECTED[number][0] == grade.CORRECT)
        assert test["output"].startswith(EXPECTED[number][0])
        assert test["status"] in ("passed", "failed")
    assert "part-way" in results["output"]
    json.dumps(results)


def test_a_cell_past_the_time_limit_and_a_dead_kernel(tmp_path):
    path = _write(
        tmp_path / "slow.ipynb",
        [
            _code(
                "import os, time\n"
                "from backprop_lessons.exercises.value_nodes import "
                "check_hand_gradients"
            ),
            _heading(1, "too slow"),
            _code(f"time.sleep(600)\nanswer = {RIGHT}\n{HAND.format(1)}"),
            _heading(2, "after the time limit"),
            _code(f"answer = {RIGHT}\n{HAND.format(2)}"),
            _code("os._exit(1)"),
            _heading(3, "after the kernel died"),
            _code(f"answer = {RIGHT}\n{HAND.format(3)}"),
        ],
    )
    # a limit the quick cells keep on a loaded machine (4 s did not once,
    # beside twenty processes importing torch); the slow cell sleeps
    graded = grade.grade_notebook(path, timeout=20)
    (slow, after, dead) = graded.results
    assert slow.status == grade.NOT_YET and "longer than 20 s" in slow.hint
    assert after.status == grade.CORRECT
    assert dead.status == grade.NOT_ATTEMPTED
    assert "never ran: the kernel died in cell 6" in dead.hint
    assert graded.stopped and graded.errors[0].name == "CellTimeout"


def test_a_notebook_without_exercises_is_not_run(tmp_path):
    path = _write(tmp_path / "none.ipynb", [_code("raise SystemExit")])
    graded = grade.grade_notebook(path)
    assert graded.results == [] and graded.seconds == 0
    assert grade.report([graded]) == "none.ipynb: no exercises"


def test_the_command_line_says_what_is_missing(tmp_path, capsys):
    assert grade.main([str(tmp_path / "nope.ipynb")]) == 2
    assert "no such notebook or folder" in capsys.readouterr().err
    assert grade.main([str(tmp_path)]) == 2
    assert "no notebooks in" in capsys.readouterr().err


def test_importing_the_grader_loads_no_jupyter():
    """nbclient and nbformat are the `grade` extra's: loaded when a notebook
    runs, never by importing the package or the grader."""
    loaded = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, backprop_lessons.grade, backprop_lessons.exercises; "
            "print(sorted(m for m in ('nbclient', 'nbformat', 'jupyter_client')"
            " if m in sys.modules))",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert loaded == "[]"


# ---- the record channel --------------------------------------------------------


def test_run_check_records_its_verdict_as_data(tmp_path, monkeypatch):
    monkeypatch.setattr(checking, "_verdicts_file", None)
    record = tmp_path / "verdicts.jsonl"
    checking.record_verdicts(record)

    def check(answer):
        raise checking.NotYet(f"not {answer}")

    checking.run_check(4, check, 7)
    (line,) = record.read_text().splitlines()
    assert json.loads(line) == {
        "exercise": 4,
        "status": "not yet",
        "hint": "not 7",
        "where": [],
        "check": f"{__name__}.test_run_check_records_its_verdict_as_data."
        "<locals>.check",
    }


# ---- the stored chapters' layout ----------------------------------------------


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_stub_is_found_in_the_stored_chapters(path):
    """Solutions and book's versions left out, each exercise's stub is the
    cell whose stored output is its check's "not attempted yet" (after a
    demonstration, not the demonstration)."""
    cells = json.loads(path.read_text())["cells"]
    kept = [
        c
        for c in cells
        if not (grade.is_solution(c) or grade.is_books_version(c))
    ]
    for exercise in grade.exercises(kept):
        assert exercise.stub is not None, (path.name, exercise)
        printed = "".join(
            "".join(out.get("text", "")) for out in kept[exercise.stub]["outputs"]
        )
        assert f"Exercise {exercise.number}: not attempted yet" in printed, (
            path.name,
            exercise,
        )


def test_the_chapters_have_the_exercises_the_grader_counts():
    counted = {
        p.stem: [
            e.number for e in grade.exercises(json.loads(p.read_text())["cells"])
        ]
        for p in NOTEBOOKS
    }
    for name, numbers in counted.items():
        assert numbers == list(range(1, len(numbers) + 1)), name
    assert sum(map(len, counted.values())) >= 50
