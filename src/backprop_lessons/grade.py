"""Grade filled-in chapter notebooks, exercise by exercise.

    python -m backprop_lessons.grade NOTEBOOK_OR_FOLDER... [--json results.json]
                                     [--timeout SECONDS] [--kernel NAME]

Each notebook runs headless, top to bottom, in a fresh kernel, without its
solution cells (tagged `solution`) and the book's version of what the reader
writes (the `remove-input` cells that call `reveal_source`).  Exercise N's
verdict is the one its own stub cell's check gives in that run: the stub
cell is the code cell after the `### Exercise N` heading that calls a check
with `exercise=N` (where a demonstration cell runs the check on a buggy
version first, the last such cell of that run of code cells; see
`exercises`).  The check reports the verdict through
`exercises.checking.record_verdicts`, to a file in a folder the grader
made, never through the printed text: a printed "Exercise 6: correct"
counts for nothing, nor does a check run in any other cell, nor a check
that is not the package's.

A cell that raises does not stop the run: the later cells run too, and
their exercises get their verdicts.  A cell that runs longer than the time
limit (`--timeout`, 300 s by default) is interrupted, as Jupyter's stop
button does, and the run goes on; an exercise whose stub cell was stopped
so, or raised before its check gave a verdict, is "not yet".  If the
kernel dies (out of memory, say), the exercises after it are "not
attempted", with a note saying so.

It prints a table per notebook (correct / not yet / not attempted, with the
check's hint) and, for several notebooks (a folder, such as the
`notebooks/` of a reader's clone), the progress through the book; `--json`
writes Gradescope's autograder results (`results.json`: a `tests` list of
`name`, `score`, `max_score`, `status` and `output`, and the total `score`).

It needs nbclient, nbformat and ipykernel (`pip install
'backprop-lessons[grade]'`), imported only when a notebook runs: importing
this module loads none of them.  The functions that read a chapter's layout
(`exercises`, `is_solution`, `is_books_version`, `is_self_check`,
`bound_names`, `loaded_names`) need nothing but the standard library;
scripts/student_edition.py (`make student`) uses them too.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import json
import os
import re
import sys
import tempfile
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "CORRECT",
    "NOT_YET",
    "NOT_ATTEMPTED",
    "Exercise",
    "Result",
    "NotebookGrade",
    "exercises",
    "grade_notebook",
    "grade_paths",
    "gradescope_results",
    "report",
    "is_solution",
    "is_books_version",
    "is_self_check",
    "bound_names",
    "loaded_names",
    "main",
]

CORRECT, NOT_YET, NOT_ATTEMPTED = "correct", "not yet", "not attempted"
#: A check's Verdict.status -> the grader's
_STATUS = {
    "correct": CORRECT,
    "not yet": NOT_YET,
    "not attempted yet": NOT_ATTEMPTED,
}
#: Only the verdicts of the package's own checks count.
CHECKS = "backprop_lessons.exercises."
DEFAULT_TIMEOUT = 300
EXERCISE_HEADING = re.compile(
    r"^###[ \t]+Exercise[ \t]+(\d+)\b[ \t:.,]*(.*)$", re.M
)
#: what a timed-out cell's reply says (nbclient's error_on_timeout)
_TIMEOUT = "CellTimeout"


# ---- a chapter's layout (standard library only) -------------------------------


def cell_source(cell) -> str:
    source = cell.get("source", "")
    return source if isinstance(source, str) else "".join(source)


def _tags(cell) -> set[str]:
    return set(cell.get("metadata", {}).get("tags", []))


def _python(source: str) -> str:
    """`source` with IPython's magics and shell lines (`%pip ...`, `!ls`) as
    `pass`, so that `ast` can read the rest."""
    return "\n".join(
        line[: len(line) - len(line.lstrip())] + "pass"
        if line.lstrip().startswith(("%", "!"))
        else line
        for line in source.splitlines()
    )


def _tree(source: str) -> ast.Module | None:
    """The syntax tree of a cell's source, or None where it is not Python (a
    markdown cell, a reader's half-written line).  Reading is quiet: text
    such as a formula's `\\sqrt` warns of an invalid escape on its way to
    the SyntaxError."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", (SyntaxWarning, DeprecationWarning))
            return ast.parse(_python(source))
    except SyntaxError:
        return None


def _called(source: str) -> set[str]:
    """The names of the functions a cell calls (`f(...)`, `mod.f(...)`)."""
    tree = _tree(source)
    if tree is None:
        return set(re.findall(r"\b(\w+)\s*\(", source))
    return {
        node.func.id if isinstance(node.func, ast.Name) else node.func.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, (ast.Name, ast.Attribute))
    }


def is_solution(cell) -> bool:
    """A solution: a code cell tagged `solution`."""
    return cell.get("cell_type") == "code" and "solution" in _tags(cell)


def is_books_version(cell) -> bool:
    """The book's version of what the reader writes: a `remove-input` code
    cell that calls `reveal_source`."""
    return (
        cell.get("cell_type") == "code"
        and "remove-input" in _tags(cell)
        and "reveal_source" in _called(cell_source(cell))
    )


def is_self_check(cell) -> bool:
    """A self-check: a `remove-input` code cell that calls `self_check`."""
    return (
        cell.get("cell_type") == "code"
        and "remove-input" in _tags(cell)
        and "self_check" in _called(cell_source(cell))
    )


def bound_names(source: str) -> set[str]:
    """The names a cell binds at its top level: def, class, import, and the
    targets of =, +=, for and with."""
    tree = _tree(source)
    if tree is None:
        return set()
    names = set()
    for node in tree.body:
        if isinstance(
            node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
        ):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        else:
            targets = []
            if isinstance(node, ast.Assign):
                targets = node.targets
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For)):
                targets = [node.target]
            elif isinstance(node, ast.With):
                targets = [i.optional_vars for i in node.items if i.optional_vars]
            for target in targets:
                names |= {
                    n.id for n in ast.walk(target) if isinstance(n, ast.Name)
                }
    return names


def loaded_names(source: str) -> set[str]:
    """Every name a cell reads, inside its functions too."""
    tree = _tree(source)
    if tree is None:
        return set()
    return {
        node.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)
    }


def _checks_exercise(source: str, number: int) -> bool:
    """Does the cell call a check with `exercise=number`?  (Not
    `yours_or_the_solution`, which the cells after an exercise call.)"""
    tree = _tree(source)
    if tree is None:  # the reader's syntax error: read the text
        return bool(
            re.search(rf"\bexercise\s*=\s*{number}\b", source)
            and "yours_or_the_solution" not in source
        )
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = getattr(node.func, "id", getattr(node.func, "attr", None))
        if name == "yours_or_the_solution":
            continue
        for keyword in node.keywords:
            value = keyword.value
            if (
                keyword.arg == "exercise"
                and isinstance(value, ast.Constant)
                and value.value == number
                and type(value.value) is int
            ):
                return True
    return False


@dataclass(frozen=True)
class Exercise:
    """An exercise of a notebook: its number and title (from its `###
    Exercise N: title` heading), the index of the heading's cell and of its
    stub cell (None when no cell after the heading calls a check with
    `exercise=N`)."""

    number: int
    title: str
    heading: int
    stub: int | None


def exercises(cells: Sequence) -> list[Exercise]:
    """The exercises of a notebook's cells (solution cells left out).

    Exercise N's stub is found after its `### Exercise N` heading, before
    the next exercise's: in the first run of consecutive code cells that
    holds a call with `exercise=N`, the last cell that makes one.  A
    demonstration right before the stub (a check run on a buggy version,
    chapter 1's exercise 2) is so not the stub, and neither is a cell after
    the hints that follow it (chapter 4's cell that runs the reader's VJP
    through `yours_or_the_solution`)."""
    headings = [
        (i, int(number), title.strip())
        for i, cell in enumerate(cells)
        if cell.get("cell_type") == "markdown"
        for number, title in EXERCISE_HEADING.findall(cell_source(cell))
    ]
    found = []
    for k, (heading, number, title) in enumerate(headings):
        end = headings[k + 1][0] if k + 1 < len(headings) else len(cells)
        stub = None
        for i in range(heading + 1, end):
            cell = cells[i]
            if cell.get("cell_type") != "code":
                if stub is not None:
                    break
            elif _checks_exercise(cell_source(cell), number):
                stub = i
        found.append(Exercise(number, title, heading, stub))
    return found


# ---- running a notebook -------------------------------------------------------


@dataclass(frozen=True)
class Result:
    """Exercise `exercise`'s verdict in one run: `status` is CORRECT,
    NOT_YET or NOT_ATTEMPTED; `hint` the check's hint or the grader's note;
    `where` the reader's lines the check quoted."""

    exercise: Exercise
    status: str
    hint: str = ""
    where: tuple[str, ...] = ()

    @property
    def score(self) -> int:
        return int(self.status == CORRECT)


@dataclass(frozen=True)
class CellError:
    """A cell that raised (or ran past the time limit): its index in the
    notebook's file, its first line, the exception's name and message."""

    cell: int
    first_line: str
    name: str
    message: str

    def __str__(self) -> str:
        return (
            f"cell {self.cell + 1} ({self.first_line!r}): {self.name}: "
            f"{self.message}"
        )


@dataclass
class NotebookGrade:
    """One notebook graded: a Result per exercise, the cells that raised,
    the wall time, and why the run stopped early (None when every cell ran)."""

    path: Path
    results: list[Result]
    errors: list[CellError] = field(default_factory=list)
    seconds: float = 0.0
    stopped: str | None = None
    removed: int = 0  # solution and book's-version cells left out

    @property
    def score(self) -> int:
        return sum(r.score for r in self.results)


class GradingError(RuntimeError):
    """The grader cannot run at all (no nbclient, a kernel without the
    package)."""


def _jupyter():
    try:
        import nbformat
        from nbclient import NotebookClient
        from nbclient.exceptions import DeadKernelError
    except ImportError as error:
        raise GradingError(
            f"the grader needs nbclient, nbformat and ipykernel ({error}); "
            "install them with: pip install 'backprop-lessons[grade]'"
        ) from None
    return nbformat, NotebookClient, DeadKernelError


_HOOK = """\
import backprop_lessons.exercises.checking
backprop_lessons.exercises.checking.record_verdicts({path!r})
"""


def _first_line(cell) -> str:
    lines = cell_source(cell).strip().splitlines()
    line = lines[0] if lines else ""
    return line if len(line) <= 60 else line[:57] + "..."


def _kernel_config(folder: Path):
    """The kernel talks over Unix sockets in `folder` (not Windows: TCP).
    Over TCP, jupyter_client picks a free port and the kernel binds it
    later; a process started in between (a chapter's torch.distributed
    worker, another suite's) can take it, and the kernel dies at start."""
    from traitlets.config import Config

    if os.name == "nt":
        return Config()
    return Config(
        {"KernelManager": {"transport": "ipc", "ip": str(folder / "k")}}
    )


@dataclass
class _Run:
    """What one headless run did: the cells (indices in the notebook run)
    that ran, each erring cell's execute reply, the verdicts each cell's
    checks recorded, and the cell the kernel died in or why it broke."""

    ran: set[int] = field(default_factory=set)
    errors: dict[int, dict] = field(default_factory=dict)
    verdicts: dict[int, list[dict]] = field(default_factory=dict)
    died_in: int | None = None
    broke: str | None = None


def _read_new(file, offset: int) -> tuple[list[dict], int]:
    """The verdicts appended to the record since `offset`, and the new
    offset (a line that is not JSON is skipped)."""
    file.seek(offset)
    found = []
    for line in file.read().splitlines():
        with contextlib.suppress(ValueError):
            found.append(json.loads(line))
    return found, file.tell()


def _run(cells: list, metadata, folder: Path, timeout: int, kernel_name: str):
    """Run `cells` in a fresh kernel started in `folder`, after a first cell
    that installs the verdict record (`checking.record_verdicts`)."""
    nbformat, NotebookClient, DeadKernelError = _jupyter()
    run = _Run()
    with tempfile.TemporaryDirectory(prefix="backprop-grade-") as ours:
        record = Path(ours) / "verdicts.jsonl"
        record.touch()
        hook = nbformat.v4.new_code_cell(_HOOK.format(path=str(record)))
        nb = nbformat.v4.new_notebook(metadata=metadata, cells=[hook, *cells])
        client = NotebookClient(
            nb,
            timeout=timeout,
            kernel_name=kernel_name,
            allow_errors=True,
            interrupt_on_timeout=True,
            error_on_timeout={
                "ename": _TIMEOUT,
                "evalue": f"the cell ran longer than {timeout} s and was "
                "interrupted",
                "traceback": [],
            },
            record_timing=False,
            resources={"metadata": {"path": str(folder)}},
            config=_kernel_config(Path(ours)),
        )
        client.on_cell_error = lambda cell, cell_index, execute_reply: (
            run.errors.__setitem__(cell_index, execute_reply["content"])
        )
        try:
            with client.setup_kernel(), record.open(encoding="utf-8") as file:
                offset = 0
                for k, cell in enumerate(nb.cells):
                    if cell.cell_type != "code":
                        continue
                    try:
                        client.execute_cell(cell, k)
                    except DeadKernelError:
                        run.died_in = k
                        break
                    run.ran.add(k)
                    run.verdicts[k], offset = _read_new(file, offset)
                    if k == 0 and 0 in run.errors:
                        error = run.errors[0]
                        raise GradingError(
                            f"the kernel {kernel_name!r} cannot record "
                            f"verdicts: {error.get('ename')}: "
                            f"{error.get('evalue')} (is backprop_lessons "
                            "installed where it runs?)"
                        )
        except GradingError:
            raise
        except Exception as error:  # the kernel did not start, or broke
            run.broke = f"the kernel failed: {type(error).__name__}: {error}"
    return run


def grade_notebook(
    path, *, timeout: int = DEFAULT_TIMEOUT, kernel_name: str = "python3"
) -> NotebookGrade:
    """Run the notebook at `path` headless without its solution and book's
    version cells, each cell within `timeout` seconds, in a fresh kernel
    `kernel_name` started in the notebook's folder, and give each exercise
    its stub cell's verdict.  A notebook without exercises is not run."""
    nbformat, _, _ = _jupyter()
    path = Path(path)
    with warnings.catch_warnings():  # cells without ids (older Jupyters)
        warnings.simplefilter("ignore")
        original = nbformat.read(path, as_version=4)
    kept = [
        i
        for i, cell in enumerate(original.cells)
        if not (is_solution(cell) or is_books_version(cell))
    ]
    cells = [original.cells[i] for i in kept]
    found = exercises(cells)
    grade = NotebookGrade(path, [], removed=len(original.cells) - len(kept))
    if not found:
        return grade
    start = time.monotonic()
    run = _run(
        cells, original.metadata, path.parent.resolve(), timeout, kernel_name
    )
    grade.seconds = time.monotonic() - start
    # the run's cell k is cells[k - 1]: its first cell installed the record
    if run.died_in is not None:
        cell = cells[run.died_in - 1]
        grade.stopped = (
            f"the kernel died in cell {kept[run.died_in - 1] + 1} "
            f"({_first_line(cell)!r}; out of memory?)"
        )
    else:
        grade.stopped = run.broke
    grade.errors = [
        CellError(
            kept[k - 1],
            _first_line(cells[k - 1]),
            e.get("ename", "?"),
            e.get("evalue", ""),
        )
        for k, e in sorted(run.errors.items())
        if k > 0
    ]
    for exercise in found:
        k = None if exercise.stub is None else exercise.stub + 1
        grade.results.append(_verdict(exercise, k, run, grade.stopped))
    return grade


def _verdict(exercise: Exercise, k: int | None, run: _Run, stopped) -> Result:
    """Exercise `exercise`'s Result from what its stub cell, the run's cell
    `k`, did."""
    ran, errors, verdicts = run.ran, run.errors, run.verdicts
    n = exercise.number
    if k is None:
        return Result(
            exercise,
            NOT_ATTEMPTED,
            f"no code cell after its heading calls a check with exercise={n}",
        )
    if k not in ran:
        why = stopped or "the run stopped before it"
        return Result(exercise, NOT_ATTEMPTED, f"its cell never ran: {why}")
    reported = [v for v in verdicts.get(k, []) if v.get("exercise") == n]
    ours = [v for v in reported if str(v.get("check", "")).startswith(CHECKS)]
    if ours:
        v = ours[-1]
        return Result(
            exercise,
            _STATUS.get(v.get("status"), NOT_YET),
            v.get("hint", ""),
            tuple(v.get("where", ())),
        )
    if k in errors:
        error = errors[k]
        if error.get("ename") == _TIMEOUT:
            what = error.get("evalue", "the cell ran past the time limit")
        else:
            what = f"the cell raised {error.get('ename')}: {error.get('evalue')}"
        return Result(
            exercise, NOT_YET, f"{what}, before its check gave a verdict"
        )
    if reported:
        return Result(
            exercise,
            NOT_YET,
            f"its verdict came from {reported[-1].get('check')}, which is not "
            "a check of backprop_lessons.exercises",
        )
    return Result(
        exercise,
        NOT_ATTEMPTED,
        f"its cell ran, but no check gave a verdict for exercise {n}",
    )


def _notebooks(paths: Sequence) -> list[Path]:
    """The notebooks named, a folder standing for the notebooks in it."""
    found = []
    for path in map(Path, paths):
        if path.is_dir():
            found += sorted(path.glob("*.ipynb"))
        elif path.is_file():
            found.append(path)
        else:
            raise GradingError(f"no such notebook or folder: {path}")
    if not found:
        raise GradingError(f"no notebooks in {', '.join(map(str, paths))}")
    return found


def grade_paths(
    paths: Sequence,
    *,
    timeout: int = DEFAULT_TIMEOUT,
    kernel_name: str = "python3",
    out=None,
) -> list[NotebookGrade]:
    """Grade every notebook of `paths` (a folder: the notebooks in it, in
    name order), printing each one's table to `out` as it finishes."""
    grades = []
    for path in _notebooks(paths):
        grade = grade_notebook(path, timeout=timeout, kernel_name=kernel_name)
        grades.append(grade)
        if out is not None:
            print(_table(grade) + "\n", file=out, flush=True)
    return grades


# ---- what it says -------------------------------------------------------------


def _table(grade: NotebookGrade) -> str:
    name = grade.path.name
    if not grade.results:
        return f"{name}: no exercises"
    lines = [
        f"{name}: {grade.score} of {len(grade.results)} correct "
        f"(ran in {grade.seconds:.0f} s)"
    ]
    width = max(len(f"Exercise {r.exercise.number}") for r in grade.results)
    for r in grade.results:
        label = f"Exercise {r.exercise.number}".ljust(width)
        lines.append(f"  {label}  {r.status:<13}  {r.hint}".rstrip())
        lines += [f"  {'':{width}}  {'':13}    {w}" for w in r.where]
    if grade.stopped:
        lines.append(f"  The run stopped: {grade.stopped}.")
    if grade.errors:
        lines.append(f"  Cells that raised ({len(grade.errors)}):")
        lines += [f"    {e}" for e in grade.errors]
    return "\n".join(lines)


def _progress(grades: Sequence[NotebookGrade]) -> str:
    graded = [g for g in grades if g.results]
    correct = sum(g.score for g in graded)
    total = sum(len(g.results) for g in graded)
    width = max(len(g.path.stem) for g in graded)
    lines = [f"Progress through the book: {correct} of {total} exercises correct"]
    for g in graded:
        n = len(g.results)
        bar = "#" * g.score + "." * (n - g.score)
        lines.append(f"  {g.path.stem:<{width}}  {g.score:>2}/{n:<2}  {bar}")
    return "\n".join(lines)


def report(grades: Sequence[NotebookGrade]) -> str:
    """The tables of `grades`, then (for more than one notebook with
    exercises) the progress through the book."""
    parts = [_table(g) for g in grades]
    if sum(bool(g.results) for g in grades) > 1:
        parts.append(_progress(grades))
    return "\n\n".join(parts)


def _output(result: Result) -> str:
    line = result.status + (f" - {result.hint}" if result.hint else "")
    return "\n".join([line, *(f"    {w}" for w in result.where)])


def gradescope_results(grades: Sequence[NotebookGrade]) -> dict:
    """Gradescope's autograder results (results.json): one test per
    exercise, named "Exercise N of CHAPTER: title", scored 1 when correct."""
    tests = [
        {
            "name": f"Exercise {r.exercise.number} of {g.path.stem}: "
            f"{r.exercise.title}".rstrip(": "),
            "score": r.score,
            "max_score": 1,
            "status": "passed" if r.score else "failed",
            "output": _output(r),
        }
        for g in grades
        for r in g.results
    ]
    notes = []
    for g in grades:
        if g.stopped:
            notes.append(f"{g.path.name}: the run stopped: {g.stopped}.")
        notes += [f"{g.path.name}: {e}" for e in g.errors]
    return {
        "score": sum(t["score"] for t in tests),
        "execution_time": round(sum(g.seconds for g in grades), 1),
        "output": "\n".join(notes) or "Every cell ran without an error.",
        "tests": tests,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m backprop_lessons.grade",
        description="Run filled-in chapter notebooks headless and grade "
        "their exercises (a folder: every notebook in it).",
    )
    parser.add_argument("paths", nargs="+", metavar="NOTEBOOK_OR_FOLDER")
    parser.add_argument(
        "--json",
        type=Path,
        metavar="RESULTS",
        help="also write Gradescope's autograder results there",
    )
    parser.add_argument(
        "--timeout",
        type=int,
        default=DEFAULT_TIMEOUT,
        metavar="SECONDS",
        help="a cell running longer is interrupted and the run goes on "
        f"(default {DEFAULT_TIMEOUT})",
    )
    parser.add_argument(
        "--kernel",
        default="python3",
        metavar="NAME",
        help="the Jupyter kernel to run the notebooks in (default python3)",
    )
    args = parser.parse_args(argv)
    if args.timeout <= 0:
        parser.error("--timeout must be a positive number of seconds")
    try:
        grades = grade_paths(
            args.paths,
            timeout=args.timeout,
            kernel_name=args.kernel,
            out=sys.stdout,
        )
    except GradingError as error:
        print(f"grade: {error}", file=sys.stderr)
        return 2
    if sum(bool(g.results) for g in grades) > 1:
        print(_progress(grades))
    if args.json:
        args.json.write_text(
            json.dumps(gradescope_results(grades), indent=1) + "\n",
            encoding="utf-8",
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
