"""Build the autograder zip Gradescope takes (`make gradescope`).

    python scripts/gradescope/build.py [--out FOLDER] [CHAPTER...]

FOLDER/autograder.zip (default _build/gradescope) holds at its root what
Gradescope runs: setup.sh, run_autograder and autograde.py (beside this
script), and the wheel of this checkout's package, so that the grader is
the version of the book the students' notebooks come from.  CHAPTERS (the
start of a notebook's name: "04", "06_gpt", "appendix") limits the grading
to those chapters: chapters.txt lists each with its number of exercises,
read from the stored notebook as the grader counts them.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from backprop_lessons.grade import exercises, is_solution

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
FILES = ("setup.sh", "run_autograder", "autograde.py")


def chapter(name: str) -> Path:
    prefix = name.zfill(2) if name.isdigit() else name
    found = sorted((ROOT / "notebooks").glob(f"{prefix}*.ipynb"))
    if len(found) != 1:
        raise SystemExit(f"build.py: {name!r} names {len(found)} notebooks")
    return found[0]


def exercise_count(path: Path) -> int:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return len(exercises([c for c in cells if not is_solution(c)]))


def wheel(folder: Path) -> Path:
    """The package's wheel, built from this checkout into `folder`."""
    command = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps"]
    if importlib.util.find_spec("setuptools"):
        command.append("--no-build-isolation")  # offline, with .venv's own
    subprocess.run([*command, "-w", str(folder), str(ROOT)], check=True)
    (found,) = folder.glob("backprop_lessons-*.whl")
    return found


def build(out: Path, chapters: list[str]) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    target = out / "autograder.zip"
    with tempfile.TemporaryDirectory() as tmp:
        built = wheel(Path(tmp))
        with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
            for name in FILES:  # ZipFile.write keeps each file's mode
                archive.write(HERE / name, name)
            archive.write(built, built.name)
            if chapters:
                lines = [
                    f"{path.stem} {exercise_count(path)}"
                    for path in map(chapter, chapters)
                ]
                archive.writestr("chapters.txt", "\n".join(lines) + "\n")
    return target


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out", type=Path, default=ROOT / "_build" / "gradescope"
    )
    parser.add_argument("chapters", nargs="*", metavar="CHAPTER")
    args = parser.parse_args(argv)
    target = build(args.out, args.chapters)
    print(
        f"{target}: upload it as the assignment's autograder "
        "(Gradescope: Configure Autograder)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
