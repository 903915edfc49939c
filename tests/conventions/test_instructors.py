"""The instructors' page (book/instructors.md) against the chapters it is
read from (scripts/instructors.py): its tables of plans and hours, its
method and its learning objectives are what the script computes from the
notebooks now, and every chapter's Overview lists what the reader will be
able to do.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))

_spec = importlib.util.spec_from_file_location(
    "instructors", ROOT / "scripts" / "instructors.py"
)
instructors = importlib.util.module_from_spec(_spec)
sys.modules["instructors"] = instructors  # its dataclasses look it up there
_spec.loader.exec_module(instructors)

#: Chapters whose Overview does not list its objectives yet, and why.  A
#: chapter here is checked like the others once its list is there; remove
#: it then.
PENDING: dict[str, str] = {}


def test_the_page_is_what_the_script_writes():
    page = instructors.PAGE.read_text(encoding="utf-8")
    assert instructors.rewrite(page, instructors.parts()) == page, (
        "book/instructors.md is out of date with the chapters: run "
        "`python scripts/instructors.py --write` (--check shows the diff)"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_overview_says_what_the_reader_will_be_able_to_do(path):
    first = "".join(json.loads(path.read_text())["cells"][0]["source"])
    found = instructors.objectives(first)
    if found is None and path.stem in PENDING:
        pytest.xfail(PENDING[path.stem])
    assert "## Overview" in first
    assert found, (
        f'{path.name}: its Overview has no list under "By the end you will be '
        'able to:" (CONTRIBUTING.md, "Each chapter\'s shape")'
    )
    assert len(found) >= 3, found
    where = instructors._OBJECTIVES.search(first).start()
    assert where < first.index("## Prerequisites"), "the list is the Overview's"


def test_objectives_are_read_as_the_chapters_write_them():
    text = (
        "# T\n\n## Overview\n\nIt builds things. By the end\nyou will be "
        "able to:\n\n- derive one thing, as\n  [chapter 4](04_matmul_vjp.ipynb)"
        " does;\n- check it.\n\nEvery number is printed.\n"
    )
    items = instructors.objectives(text)
    assert items == [
        "derive one thing, as [chapter 4](04_matmul_vjp.ipynb) does;",
        "check it.",
    ]
    assert instructors._book_links(items[0]) == (
        "derive one thing, as [chapter 4](../notebooks/04_matmul_vjp.ipynb) does;"
    )
    assert instructors.objectives("# T\n\n## Overview\n\nNo list.\n") is None


def test_the_estimates_follow_the_stated_rates():
    """An exercise's minutes and a part's reading time are the rates of the
    page's method, nothing else."""
    rates, tasks = instructors.READING, instructors.EXERCISE
    part = instructors.Part(words=300, formulas=2, code_lines=40, self_checks=1)
    assert part.minutes() == pytest.approx(
        300 / rates["words_per_minute"]
        + 2 * rates["minutes_per_formula"]
        + 40 / rates["code_lines_per_minute"]
        + rates["minutes_per_self_check"]
    )
    task = instructors.Task(1, "backward", 10)
    assert (
        task.minutes()
        == tasks["backward"] + 10 * tasks["minutes_per_solution_line"]
    )
    method = instructors.method()
    assert all(str(v) in method for v in (*rates.values(), *tasks.values()))


def test_a_plan_grades_each_exercise_of_a_split_chapter_once(monkeypatch):
    book = {c.stem.split("_")[0]: c for c in instructors.chapters()}
    instructors._check_spans(instructors.PLANS["core"], book)
    with pytest.raises(SystemExit, match="chapter 6"):
        instructors._check_spans([["06:1-4"], ["06:6-8"]], book)


def test_every_exercise_has_a_kind_and_a_solution():
    for chapter in instructors.chapters():
        for task in chapter.tasks:
            assert task.kind in instructors.EXERCISE_KINDS
            assert task.solution_lines >= 1
