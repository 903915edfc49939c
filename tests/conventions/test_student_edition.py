"""The student edition (`make student`, scripts/student_edition.py) of all
13 stored chapters, built here without running anything: no solution's
code, no self-check's answer or explanation, no book's version of what the
reader writes survives in a cell, an output or the widget state.
"""

from __future__ import annotations

import ast
import html
import importlib
import importlib.util
import inspect
import json
import pkgutil
import re
import sys
from pathlib import Path

import pytest

import backprop_lessons.exercises as exercises
from backprop_lessons import grade

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
TAG = re.compile(r"<[^>]*>")

_spec = importlib.util.spec_from_file_location(
    "student_edition", ROOT / "scripts" / "student_edition.py"
)
student = importlib.util.module_from_spec(_spec)
sys.modules["student_edition"] = student  # its dataclass looks itself up there
_spec.loader.exec_module(student)

#: Kept cells (notebook, index from 0) that use a removed cell's name (the
#: solution, through yours_or_the_solution): Run All of the student edition
#: stops there, so `make student` refuses to write it.  When a chapter's
#: cell is changed to fall back on something the student edition keeps,
#: remove it from here.
PENDING: set[tuple[str, int]] = set()


def _load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


EDITIONS = {p.name: student.student_edition(_load(p), p.name) for p in NOTEBOOKS}


def _strings(value) -> list[str]:
    """Every string (and number, as text) inside a parsed JSON value."""
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return [value] if isinstance(value, str) else [repr(value)]


def _everything(nb: dict) -> str:
    """Every text of the notebook, and of its HTML (highlighted code: a
    reveal_source widget's state) the text a reader sees."""
    texts = _strings(nb)
    return "\n".join(
        [*texts, *(html.unescape(TAG.sub("", t)) for t in texts if "<" in t)]
    )


def _outputs_and_state(nb: dict) -> str:
    outputs = [c.get("outputs", []) for c in nb["cells"]]
    return "\n".join(
        _strings(outputs) + _strings(nb["metadata"].get("widgets", {}))
    )


def test_there_are_13_chapters_and_only_the_known_cells_use_a_solution():
    assert len(EDITIONS) == 13
    dangling = {
        (d.notebook, d.index) for _, found in EDITIONS.values() for d in found
    }
    assert dangling == PENDING, (
        "cells that use a removed cell's name (left) and the list PENDING "
        "(right) differ: a fixed cell leaves PENDING, a new one is fixed"
    )


def test_a_cell_after_a_removed_one_that_uses_its_name_is_reported():
    cells = [
        {
            "cell_type": "code",
            "metadata": {},
            "outputs": [],
            "source": "import math",
        },
        {
            "cell_type": "code",
            "metadata": {"tags": ["solution"]},
            "outputs": [],
            "source": "def f_solution(x):\n    return math.sqrt(x)",
        },
        {
            "cell_type": "code",
            "metadata": {},
            "outputs": [],
            "source": "def g():\n    return f_solution(4) + math.pi",
        },
    ]
    nb = {"cells": cells, "metadata": {}}
    edition, (found,) = student.student_edition(nb, "x.ipynb")
    assert (found.index, found.names) == (2, ("f_solution",))
    assert "x.ipynb, cell 3 ('def g():'): uses f_solution" in str(found)
    assert len(edition["cells"]) == 2 and len(nb["cells"]) == 3


def _lines(source: str) -> set[str]:
    """The lines of `source` over 25 characters, stripped."""
    return {
        line.strip() for line in source.splitlines() if len(line.strip()) > 25
    }


def _kept(path: Path) -> list[dict]:
    return [
        c
        for c in _load(path)["cells"]
        if not (grade.is_solution(c) or grade.is_books_version(c))
    ]


def _searched(lines: set[str], path: Path) -> set[str]:
    """`lines` but those the chapter shows anyway: in its kept cells (a
    stub's docstring or unpacking of the cache, a demonstration's buggy
    version, a check's arguments, the hints' text) or in the package's code
    of another function it shows (`show_source` of a forward that splits
    heads as its backward does: tests/test_live_workbench.py sees to it that
    no function the reader writes is shown so)."""
    kept = _kept(path)
    shown = [
        "\n".join(_strings(c.get("outputs", [])))
        for c in kept
        if "show_source" in grade._called(grade.cell_source(c))
    ]
    text = "\n".join([*(grade.cell_source(c) for c in kept), *shown])
    return {line for line in lines if line not in text}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_solution_line_survives(path):
    edition, _ = EDITIONS[path.name]
    text = _everything(edition)
    solutions = [c for c in _load(path)["cells"] if grade.is_solution(c)]
    lines = set().union(*(_lines(grade.cell_source(c)) for c in solutions))
    assert len(lines) >= 3 * len(solutions)
    assert not [line for line in _searched(lines, path) if line in text]
    assert not [c for c in edition["cells"] if grade.is_solution(c)]
    # the grader finds every exercise's stub in it
    assert grade.exercises(edition["cells"]) == grade.exercises(_kept(path))


def _questions():
    for info in pkgutil.iter_modules(exercises.__path__):
        module = importlib.import_module(f"{exercises.__name__}.{info.name}")
        yield from getattr(module, "SELF_CHECKS", {}).values()


def _answer_text(question) -> str | None:
    """A choice's right answer as text (a number's is in its widget only)."""
    answer = question.kwargs["answer"]
    if question.kind != "choice":
        return None
    choices = question.kwargs.get("choices") or question.args[1]
    return choices[answer] if isinstance(answer, int) else answer


def test_no_self_check_answer_or_explanation_survives():
    questions = list(_questions())
    assert len(questions) >= 26
    leaks = []
    for name, (edition, _) in EDITIONS.items():
        everything, shown = _everything(edition), _outputs_and_state(edition)
        for q in questions:
            if q.kwargs["explanation"] in everything:
                leaks.append((name, "explanation", q.args[0]))
            for text in (q.args[0], _answer_text(q)):
                if text and text in shown:
                    leaks.append((name, "answer or question in view", text))
        state = edition["metadata"].get("widgets", {}).get(WIDGET_STATE, {})
        for model in state.get("state", {}).values():
            if {"answer", "explanation"} & set(model.get("state", {})):
                leaks.append((name, "a self-check's widget state", model))
        checks = [c for c in edition["cells"] if grade.is_self_check(c)]
        assert len(checks) >= 2 and not any(c["outputs"] for c in checks), name
    assert not leaks


def _revealed(path: Path) -> list:
    """The reveal_source targets of a chapter, evaluated after the imports
    that bind their first name (as tests/test_show_targets.py does)."""
    imports, targets = {}, []
    for cell in _load(path)["cells"]:
        if cell["cell_type"] != "code":
            continue
        for node in ast.walk(ast.parse(grade._python(grade.cell_source(cell)))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for name in grade.bound_names(ast.unparse(node)):
                    imports[name] = ast.unparse(node)
            elif (
                grade.is_books_version(cell)
                and isinstance(node, ast.Call)
                and getattr(node.func, "id", "") == "reveal_source"
            ):
                targets.append(ast.unparse(node.args[0]))
    found = []
    for target in targets:
        namespace: dict = {}
        exec(imports[target.split(".")[0]], namespace)
        found.append(eval(target, namespace))
    return found


def test_no_revealed_source_survives():
    revealed = {p.name: _revealed(p) for p in NOTEBOOKS}
    assert sum(map(len, revealed.values())) >= 12
    leaks = []
    for path in NOTEBOOKS:
        edition = EDITIONS[path.name][0]
        text = _everything(edition)
        for target in revealed[path.name]:
            for line in _searched(_lines(inspect.getsource(target)), path):
                if not line.startswith("#") and line in text:
                    leaks.append((path.name, target.__qualname__, line))
        assert not [c for c in edition["cells"] if grade.is_books_version(c)]
    assert not leaks
