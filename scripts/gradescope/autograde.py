"""What run_autograder runs on Gradescope: grade the submitted notebooks
and write Gradescope's results.

Every `.ipynb` under /autograder/submission (checkpoints left out) is graded
with `backprop_lessons.grade`, each cell within GRADER_TIMEOUT seconds
(600 by default).  When the autograder was built for some chapters
(`make gradescope CHAPTERS="04 06"`), chapters.txt beside this file lists
them with their number of exercises: only those notebooks are graded (by
file name, wherever they sit in the submission), and a chapter that was not
submitted scores 0 of its exercises, so that every student's total is out of
the same number.  The results go to /autograder/results/results.json.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from pathlib import Path

ROOT = Path(os.environ.get("AUTOGRADER_ROOT", "/autograder"))
HERE = Path(__file__).resolve().parent
TIMEOUT = int(os.environ.get("GRADER_TIMEOUT", "600"))


def expected_chapters(path: Path = HERE / "chapters.txt") -> dict[str, int]:
    """{notebook stem: number of exercises} that the assignment grades, or
    {} (grade whatever was submitted)."""
    if not path.exists():
        return {}
    chapters = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            stem, count = line.split()
            chapters[stem] = int(count)
    return chapters


def submitted(folder: Path, expected: dict[str, int]) -> list[Path]:
    """The notebooks to grade: one per name (the one nearest the top)."""
    found: dict[str, Path] = {}
    notebooks = sorted(
        folder.rglob("*.ipynb"), key=lambda p: (len(p.parts), str(p))
    )
    for path in notebooks:
        if ".ipynb_checkpoints" in path.parts:
            continue
        if (not expected or path.stem in expected) and path.stem not in found:
            found[path.stem] = path
    return sorted(found.values(), key=lambda p: p.name)


def results(expected: dict[str, int]) -> dict:
    from backprop_lessons import grade

    notebooks = submitted(ROOT / "submission", expected)
    if not notebooks and not expected:
        return {
            "score": 0,
            "output": "No notebook (.ipynb) was submitted.",
            "tests": [],
        }
    grades = grade.grade_paths(notebooks, timeout=TIMEOUT, out=sys.stdout)
    found = grade.gradescope_results(grades)
    for stem, count in expected.items():
        if stem not in {p.stem for p in notebooks}:
            found["tests"].append(
                {
                    "name": f"{stem}: not submitted",
                    "score": 0,
                    "max_score": count,
                    "status": "failed",
                    "output": f"No notebook named {stem}.ipynb was submitted "
                    f"(its {count} exercises count as not attempted).",
                }
            )
    return found


def main() -> int:
    out = ROOT / "results" / "results.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        found = results(expected_chapters())
    except Exception:  # say why in the results, where the student looks
        traceback.print_exc()
        found = {
            "score": 0,
            "output": "The grader could not run:\n"
            + traceback.format_exc(limit=2),
            "tests": [],
        }
    out.write_text(json.dumps(found, indent=1) + "\n", encoding="utf-8")
    print(f"autograde.py: {found['score']} points, results in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
