"""The Gradescope autograder (scripts/gradescope/, `make gradescope`): the
zip holds what Gradescope runs at its root, and run_autograder, in a folder
laid out as Gradescope's /autograder, grades a submitted notebook into
Gradescope's results.json (one kernel run, a few seconds).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from backprop_lessons import grade

ROOT = Path(__file__).resolve().parents[2]
GRADESCOPE = ROOT / "scripts" / "gradescope"

pytest.importorskip("nbclient")

_spec = importlib.util.spec_from_file_location(
    "gradescope_build", GRADESCOPE / "build.py"
)
build = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(build)


def _notebook(path: Path, answers: list[str]) -> Path:
    """A chapter-like notebook: exercise N's stub sets `answer` to
    answers[N - 1] and calls the check."""
    cells = [
        {
            "cell_type": "code",
            "execution_count": None,
            "metadata": {},
            "outputs": [],
            "source": "from backprop_lessons.exercises.value_nodes import "
            "check_hand_gradients",
        }
    ]
    for n, answer in enumerate(answers, 1):
        cells += [
            {
                "cell_type": "markdown",
                "metadata": {},
                "source": f"### Exercise {n}: the gradients\n\nThe task.",
            },
            {
                "cell_type": "code",
                "execution_count": None,
                "metadata": {},
                "outputs": [],
                "source": f"answer = {answer}\n"
                f"check_hand_gradients(answer, exercise={n})",
            },
        ]
    nb = {
        "cells": cells,
        "metadata": {
            "kernelspec": {"name": "python3", "display_name": "Python 3"}
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(nb), encoding="utf-8")
    return path


def _run_autograder(root: Path, venv: Path) -> dict:
    env = {**os.environ, "AUTOGRADER_ROOT": str(root), "GRADER_VENV": str(venv)}
    subprocess.run(
        ["bash", str(GRADESCOPE / "run_autograder")],
        env=env,
        check=True,
        timeout=300,
    )
    return json.loads((root / "results" / "results.json").read_text())


def test_run_autograder_grades_a_submission_into_gradescopes_results(tmp_path):
    root = tmp_path / "autograder"
    (root / "source").mkdir(parents=True)
    shutil.copy(GRADESCOPE / "autograde.py", root / "source")
    (root / "source" / "chapters.txt").write_text("01_mine 2\n02_missing 3\n")
    right, wrong = '{"a": 3.0, "b": 4.0}', '{"a": 3.0, "b": 6.0}'
    _notebook(root / "submission" / "work" / "01_mine.ipynb", [right, wrong])
    _notebook(root / "submission" / "scratch.ipynb", [right])  # not assigned
    checkpoint = root / "submission" / "work" / ".ipynb_checkpoints"
    _notebook(checkpoint / "01_mine.ipynb", [wrong, wrong])  # never graded

    results = _run_autograder(root, Path(sys.executable).parents[1])

    tests = {t["name"].split(":")[0]: t for t in results["tests"]}
    assert set(tests) == {
        "Exercise 1 of 01_mine",
        "Exercise 2 of 01_mine",
        "02_missing",
    }
    for test in results["tests"]:
        assert {"name", "score", "max_score", "output"} <= set(test)
    assert tests["Exercise 1 of 01_mine"]["score"] == 1
    assert tests["Exercise 2 of 01_mine"]["score"] == 0
    assert tests["Exercise 2 of 01_mine"]["output"].startswith(grade.NOT_YET)
    assert (tests["02_missing"]["score"], tests["02_missing"]["max_score"]) == (
        0,
        3,
    )
    assert results["score"] == 1


def test_run_autograder_says_when_the_grader_cannot_run(tmp_path):
    root = tmp_path / "autograder"
    (root / "source").mkdir(parents=True)
    results = _run_autograder(root, tmp_path / "no-venv")
    assert results["score"] == 0 and results["tests"] == []
    assert "failed before it could grade" in results["output"]


def test_the_zip_holds_what_gradescope_runs_at_its_root(tmp_path):
    target = build.build(tmp_path, ["04"])
    with zipfile.ZipFile(target) as archive:
        members = {info.filename: info for info in archive.infolist()}
        assert {
            "setup.sh",
            "run_autograder",
            "autograde.py",
            "chapters.txt",
        } <= set(members)
        for script in ("setup.sh", "run_autograder"):
            assert members[script].external_attr >> 16 & stat.S_IXUSR, script
        wheels = [name for name in members if name.endswith(".whl")]
        assert len(wheels) == 1 and wheels[0].startswith("backprop_lessons-")
        chapters = archive.read("chapters.txt").decode()
    stored = json.loads((ROOT / "notebooks" / "04_matmul_vjp.ipynb").read_text())
    count = len(
        grade.exercises([c for c in stored["cells"] if not grade.is_solution(c)])
    )
    assert chapters == f"04_matmul_vjp {count}\n"


def test_the_scripts_are_bash_that_parses():
    for script in ("setup.sh", "run_autograder"):
        subprocess.run(["bash", "-n", str(GRADESCOPE / script)], check=True)
