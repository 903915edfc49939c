"""Build the student edition: every chapter notebook without its answers.

    python scripts/student_edition.py --out FOLDER notebooks/*.ipynb

(`make student` writes _build/student/notebooks.)  From each notebook it
removes

- the solution cells (tagged `solution`);
- the book's version of what the reader writes: the `remove-input` cells
  that call `reveal_source`, and with them the widget state that holds the
  code;
- the stored outputs of the self-check cells (`remove-input` cells that
  call `self_check`), whose widget state holds the answer and the
  explanation: the cells stay, and show their questions when run;

and keeps every other cell, output and the widget state the kept outputs
show (`lab_form.keep_widget_state`), in the form JupyterLab saves.  The
cells are those `python -m backprop_lessons.grade` leaves out or runs, told
apart by the same functions, so a filled-in student notebook grades like a
filled-in chapter.

A kept cell that uses a name only a removed cell defines (the cells after
an exercise that take its solution through `yours_or_the_solution`) would
stop Run All: then nothing is written, and the script lists each such
cell (notebook, cell number counting every cell from 1, as the grader
does, its first line, the names) and exits with status 1.
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import json
import sys
from dataclasses import dataclass
from pathlib import Path

from backprop_lessons.grade import (
    bound_names,
    cell_source,
    is_books_version,
    is_self_check,
    is_solution,
    loaded_names,
)

_spec = importlib.util.spec_from_file_location(
    "lab_form", Path(__file__).with_name("lab_form.py")
)
lab_form = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(lab_form)


@dataclass(frozen=True)
class Dangling:
    """A kept cell that reads names only removed cells define."""

    notebook: str
    index: int  # its index in the stored notebook (from 0)
    first_line: str
    names: tuple[str, ...]

    def __str__(self) -> str:
        return (
            f"{self.notebook}, cell {self.index + 1} ({self.first_line!r}): uses "
            f"{', '.join(self.names)}, which only removed cells define"
        )


def student_edition(nb: dict, name: str = "") -> tuple[dict, list[Dangling]]:
    """The student edition of the notebook `nb` (parsed JSON; not changed),
    and the kept cells that use a removed cell's names."""
    nb = copy.deepcopy(nb)
    cells, dangling = [], []
    kept_names: set[str] = set()
    removed_names: set[str] = set()
    for index, cell in enumerate(nb["cells"]):
        source = cell_source(cell) if cell["cell_type"] == "code" else ""
        if is_solution(cell) or is_books_version(cell):
            removed_names |= bound_names(source)
            continue
        if is_self_check(cell):
            cell["outputs"], cell["execution_count"] = [], None
        own = bound_names(source)
        missing = (loaded_names(source) & removed_names) - kept_names - own
        if missing:
            lines = source.strip().splitlines()
            dangling.append(
                Dangling(
                    name, index, lines[0] if lines else "", tuple(sorted(missing))
                )
            )
        kept_names |= own
        cells.append(cell)
    nb["cells"] = cells
    return lab_form.lab_form(nb), dangling


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="+", type=Path)
    parser.add_argument(
        "--out",
        type=Path,
        required=True,
        help="the folder to write the student notebooks to",
    )
    args = parser.parse_args(argv)
    editions, dangling = {}, []
    for path in args.notebooks:
        nb = json.loads(path.read_text(encoding="utf-8"))
        editions[path.name], found = student_edition(nb, path.name)
        dangling += found
    if dangling:
        print(
            f"student edition: not written. {len(dangling)} cell(s) would stop "
            "Run All, using a name that only a removed (solution or book's "
            "version) cell defines; change them to fall back on something "
            "the student notebook keeps:",
            file=sys.stderr,
        )
        for d in dangling:
            print(f"  {d}", file=sys.stderr)
        return 1
    args.out.mkdir(parents=True, exist_ok=True)
    for name, nb in editions.items():
        (args.out / name).write_text(lab_form.dumps(nb), encoding="utf-8")
    print(f"student edition: {len(editions)} notebooks in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
