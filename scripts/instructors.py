"""The parts of the instructors' page (book/instructors.md) that come from
the chapters: hours per chapter, the course plans' hours per week, and every
chapter's learning objectives.

    python scripts/instructors.py            print them
    python scripts/instructors.py --write    write them into the page
    python scripts/instructors.py --check    exit 1 if the page differs

Each part sits in the page between two MyST comment lines,
`% instructors.py: NAME` and `% instructors.py: end`, and is rewritten
whole.  `tests/conventions/test_instructors.py` runs the check, so that a
chapter edit that moves an estimate, or an Overview that changes its list,
fails until the page is written again.

The hours are estimates, computed from what each notebook holds, at rates
stated once (READING, below) for the whole book, never tuned per chapter:

- reading: the words of the prose on the main path (outside the collapsed
  boxes), each display formula, the lines of code in the code cells and
  in the sources the chapter shows (`show_source`), each self-check;
- Deeper boxes: the same rates over the words, code cells and shown
  sources inside the closed "Deeper" boxes, given apart (optional);
- exercises: per exercise by its kind, from the book's own solution: a
  prediction (a number predicted before a counter measures it), a
  backward derived on paper first (its hints climb a ladder to "Hint 3: the
  formula"), or other code; plus minutes per line of the solution.

The learning objectives are the list under "By the end you will be able
to:" in each notebook's first cell (its Overview), copied as written.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import functools
import json
import math
import re
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

from backprop_lessons.grade import (
    cell_source,
    exercises,
    is_books_version,
    is_self_check,
    is_solution,
)

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "book" / "instructors.md"
NOTEBOOKS = ROOT / "notebooks"

#: The rates behind every estimate (minutes; words and lines per minute).
READING = {
    "words_per_minute": 100,  # prose that carries formulas and code names
    "minutes_per_formula": 1,  # a display formula, followed line by line
    "code_lines_per_minute": 10,  # read, run, and its output looked at
    "minutes_per_self_check": 2,
}
EXERCISE = {
    # minutes for an exercise of each kind, before its solution's lines
    "prediction": 10,
    "backward": 20,  # derived on paper first: a hint ladder to "Hint 3"
    "code": 10,
    "minutes_per_solution_line": 3,  # written, run, checked, fixed
}
#: Estimates are rounded to this many hours.
STEP = 0.25

#: The book's pages that the plans assign besides the chapters.
STORY = ("two_am", "The 2 AM bug (a story)")

_DETAILS = re.compile(r'<details class="(\w+)">.*?</details>', re.S)
_DISPLAY = re.compile(r"\$\$.*?\$\$", re.S)
_OBJECTIVES = re.compile(r"By\s+the\s+end\s+you\s+will\s+be\s+able\s+to:[ \t]*\n")
_WORD = re.compile(r"[A-Za-z0-9][\w'’.-]*")


# ---- what a notebook holds ----------------------------------------------------


def _words(markdown: str) -> int:
    """Words of prose: inline math counts as one word, display math, HTML
    tags and link targets as none."""
    text = _DISPLAY.sub(" ", markdown)
    text = re.sub(r"\$[^$\n]+\$", " x ", text)
    text = re.sub(r"<[^>]+>", " ", text)
    text = re.sub(r"\]\([^)]*\)", "]", text)
    return len(_WORD.findall(text))


def _code_lines(text: str) -> int:
    """Lines that are neither blank nor comments."""
    return sum(
        1
        for line in text.splitlines()
        if line.strip() and not line.strip().startswith("#")
    )


def _shown_lines(cell) -> int:
    """Lines of the sources a `show_source` cell shows (its plain text)."""
    if "show_source" not in cell_source(cell):
        return 0
    lines = 0
    for output in cell.get("outputs", []):
        text = output.get("data", {}).get("text/plain", output.get("text", ""))
        lines += _code_lines("".join(text) if isinstance(text, list) else text)
    return lines


@dataclass
class Part:
    """What one part of a chapter (its main path, or its Deeper boxes)
    asks a reader to read."""

    words: int = 0
    formulas: int = 0
    code_lines: int = 0
    self_checks: int = 0

    def minutes(self) -> float:
        return (
            self.words / READING["words_per_minute"]
            + self.formulas * READING["minutes_per_formula"]
            + self.code_lines / READING["code_lines_per_minute"]
            + self.self_checks * READING["minutes_per_self_check"]
        )


@dataclass(frozen=True)
class Task:
    """An exercise: its number, kind and the lines of the book's solution."""

    number: int
    kind: str
    solution_lines: int

    def minutes(self) -> float:
        return (
            EXERCISE[self.kind]
            + self.solution_lines * EXERCISE["minutes_per_solution_line"]
        )


@dataclass
class Chapter:
    stem: str
    label: str  # "1", ..., "12", "Appendix", or the story's
    title: str
    link: str  # from book/
    main: Part
    deeper: Part
    tasks: list[Task]
    objectives: list[str] | None

    def hours(self) -> tuple[float, float, float]:
        """(reading, Deeper boxes, exercises), unrounded."""
        return (
            self.main.minutes() / 60,
            self.deeper.minutes() / 60,
            sum(t.minutes() for t in self.tasks) / 60,
        )


def _tasks(cells: list) -> list[Task]:
    kept = [c for c in cells if not is_solution(c)]
    solutions = [c for c in cells if is_solution(c)]
    tasks = []
    for exercise in exercises(kept):
        n = exercise.number
        (solution,) = [
            s
            for s in solutions
            if re.search(rf"\bexercise\s*=\s*{n}\b", cell_source(s))
        ]
        source = cell_source(solution)
        following = kept[exercise.heading : _next_heading(kept, exercise)]
        markdown = "".join(
            cell_source(c) for c in following if c["cell_type"] == "markdown"
        )
        if "check_prediction" in source:
            kind = "prediction"
        elif "<summary>Hint 3" in markdown:
            kind = "backward"
        else:
            kind = "code"
        tasks.append(Task(n, kind, _solution_lines(source)))
    return tasks


def _solution_lines(source: str) -> int:
    """The code lines of a solution cell that answer the exercise: not its
    title, its imports or its closing `assert_correct(...)`."""
    tree = ast.parse(source)
    lines = source.splitlines()
    counted = set()
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)) or (
            isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Call)
            and getattr(node.value.func, "id", "") == "assert_correct"
        ):
            continue
        counted |= set(range(node.lineno, node.end_lineno + 1))
    return max(1, _code_lines("\n".join(lines[i - 1] for i in sorted(counted))))


def _next_heading(cells: list, exercise) -> int:
    later = [e.heading for e in exercises(cells) if e.heading > exercise.heading]
    return min(later, default=len(cells))


def objectives(first_cell: str) -> list[str] | None:
    """The items of the list under "By the end you will be able to:" in a
    chapter's first cell (continuation lines joined), or None."""
    found = _OBJECTIVES.search(first_cell)
    if not found:
        return None
    items: list[str] = []
    for line in first_cell[found.end() :].splitlines():
        if line.startswith(("- ", "* ")):
            items.append(line[2:].strip())
        elif line.startswith("  ") and items and line.strip():
            items[-1] += " " + line.strip()
        elif line.strip() or items:
            break
    return items or None


def read_chapter(path: Path) -> Chapter:
    nb = json.loads(path.read_text(encoding="utf-8"))
    cells = nb["cells"]
    first = cell_source(cells[0])
    title = re.match(r"#\s+(.+)", first).group(1).strip()
    stem = path.stem
    if stem.startswith("appendix"):
        label, title = "Appendix", title.removeprefix("Appendix:").strip()
    else:
        label = str(int(stem.split("_")[0]))
    main, deeper = Part(), Part()
    for cell in cells:
        source = cell_source(cell)
        tags = set(cell.get("metadata", {}).get("tags", []))
        if cell["cell_type"] == "markdown":
            for box in _DETAILS.finditer(source):
                if box.group(1) == "deeper":
                    deeper.words += _words(box.group(0))
                    deeper.formulas += len(_DISPLAY.findall(box.group(0)))
            rest = _DETAILS.sub(" ", source)
            main.words += _words(rest)
            main.formulas += len(_DISPLAY.findall(rest))
        elif is_self_check(cell):
            main.self_checks += 1
        elif cell["cell_type"] == "code" and not (
            is_solution(cell) or is_books_version(cell) or "remove-input" in tags
        ):
            part = deeper if "deeper" in tags else main
            part.code_lines += _code_lines(source) + _shown_lines(cell)
    return Chapter(
        stem,
        label,
        title,
        f"../notebooks/{path.name}",
        main,
        deeper,
        _tasks(cells),
        objectives(first),
    )


def read_story() -> Chapter:
    stem, title = STORY
    text = (ROOT / "book" / f"{stem}.md").read_text(encoding="utf-8")
    text = re.sub(r"^\s*%.*$", "", text, flags=re.M)  # MyST comments
    part = Part(words=_words(text), formulas=len(_DISPLAY.findall(text)))
    return Chapter(stem, "", title, f"{stem}.md", part, Part(), [], None)


@functools.cache
def chapters() -> list[Chapter]:
    """Every chapter notebook, in the book's order (the appendix last)."""
    paths = sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    paths += sorted(NOTEBOOKS.glob("appendix_*.ipynb"))
    return [read_chapter(p) for p in paths]


# ---- the course plans ---------------------------------------------------------

#: The plans' weeks: the core (chapters 1-7, weeks 1-4 of every plan), then
#: the weeks a 5-week and a 6-week plan add.  A week assigns items: a
#: chapter's number, with the exercises graded that week where a chapter
#: spans two weeks ("02:1-2": the chapter's reading and exercises 1-2;
#: "02:3-5": exercises 3-5, the reading done the week before), "story" (the
#: 2 AM bug), a choice ("09|10|11|12": one of them, its hours from the
#: least to the most) or a project (its hours not estimated).
PLANS = {
    "core": [
        ["01", "02:1-2"],
        ["02:3-5", "03", "04", "story"],
        ["05", "06:1-4"],
        ["06:5-8", "07"],
    ],
    "5 weeks": [["08|11", "Project A"]],
    "6 weeks": [["08", "Project A"], ["09|10|11|12", "Project B"]],
}


def _round(hours: float) -> float:
    return math.floor(hours / STEP + 0.5) * STEP


def _hours(hours: float) -> str:
    return f"{_round(hours):g}"


def _item(item: str, by_number: dict[str, Chapter]) -> tuple[str, float, float]:
    """(what the plan's table says, least hours, most hours) of an item."""
    if item.startswith("Project"):
        return f"{item} (below)", 0.0, 0.0
    if item == "story":
        story = read_story()
        return (
            f"[{story.title}]({story.link})",
            story.hours()[0],
            story.hours()[0],
        )
    if "|" in item:
        options = [by_number[n] for n in item.split("|")]
        totals = [c.hours()[0] + c.hours()[2] for c in options]
        links = ", ".join(f"[chapter {c.label}]({c.link})" for c in options)
        return f"one of {links}", min(totals), max(totals)
    number, _, span = item.partition(":")
    chapter = by_number[number]
    reading, _, _ = chapter.hours()
    if not span:
        hours = reading + chapter.hours()[2]
        return f"[chapter {chapter.label}]({chapter.link})", hours, hours
    first, last = (int(n) for n in span.split("-"))
    tasks = [t for t in chapter.tasks if first <= t.number <= last]
    hours = sum(t.minutes() for t in tasks) / 60 + (reading if first == 1 else 0)
    what = "reading, exercises" if first == 1 else "exercises"
    link = f"[chapter {chapter.label}]({chapter.link})"
    return f"{link} ({what} {first}-{last})", hours, hours


def plan_table(
    weeks: list[list[str]], by_number: dict[str, Chapter], first: int = 1
) -> str:
    rows = ["| Week | Chapters | Hours |", "| --- | --- | --- |"]
    for week, items in enumerate(weeks, first):
        parts = [_item(item, by_number) for item in items]
        least = _round(sum(p[1] for p in parts))
        most = _round(sum(p[2] for p in parts))
        hours = f"{least:g}" if least == most else f"{least:g}-{most:g}"
        if any(item.startswith("Project") for item in items):
            hours += " + project"
        rows.append(f"| {week} | {'; '.join(p[0] for p in parts)} | {hours} |")
    return "\n".join(rows)


def _check_spans(weeks: list[list[str]], by_number: dict[str, Chapter]) -> None:
    """A chapter split over weeks must have each exercise graded once."""
    spans: dict[str, list[int]] = {}
    for item in (item for week in weeks for item in week):
        number, _, span = item.partition(":")
        if span:
            first, last = (int(n) for n in span.split("-"))
            spans.setdefault(number, []).extend(range(first, last + 1))
    for number, graded in spans.items():
        chapter = by_number[number]
        have = [t.number for t in chapter.tasks]
        if sorted(graded) != have:
            raise SystemExit(
                f"instructors.py: PLANS grades exercises {sorted(graded)} of "
                f"chapter {chapter.label}, which has {have}: update PLANS"
            )


# ---- the page's parts ---------------------------------------------------------


def _label(chapter: Chapter) -> str:
    name = chapter.label + ". " if chapter.label.isdigit() else "Appendix: "
    return f"[{name}{chapter.title}]({chapter.link})"


def hours_table(book: list[Chapter]) -> str:
    rows = [
        "| Chapter | Reading | Deeper boxes | Exercises "
        "| Reading and exercises |",
        "| --- | --: | --: | --: | --: |",
    ]
    for chapter in book:
        reading, deeper, tasks = chapter.hours()
        rows.append(
            f"| {_label(chapter)} | {_hours(reading)} | {_hours(deeper)} | "
            f"{_hours(tasks)} | {_hours(reading + tasks)} |"
        )
    for name, part in (
        ("Chapters 1-7 and the story", _core(book) + [read_story()]),
        ("Chapters 8-12 and the appendix", _advanced(book)),
    ):
        sums = [sum(c.hours()[i] for c in part) for i in range(3)]
        rows.append(
            f"| **{name}** | {_hours(sums[0])} | {_hours(sums[1])} | "
            f"{_hours(sums[2])} | **{_hours(sums[0] + sums[2])}** |"
        )
    return "\n".join(rows)


def _core(book: list[Chapter]) -> list[Chapter]:
    return [c for c in book if c.label.isdigit() and int(c.label) <= 7]


def _advanced(book: list[Chapter]) -> list[Chapter]:
    return [c for c in book if c not in _core(book)]


def counts_table(book: list[Chapter]) -> str:
    rows = [
        "| | Words | Formulas | Code | Self-checks | Exercises | Solutions |",
        "| --- | --: | --: | --: | --: | --: | --: |",
    ]
    for c in book:
        kinds = [sum(t.kind == k for t in c.tasks) for k in EXERCISE_KINDS]
        deeper = (
            f" (+{c.deeper.words:,})" if c.deeper.words else ""
        )  # the Deeper boxes' words
        rows.append(
            f"| {c.label or c.title} | {c.main.words:,}{deeper} | "
            f"{c.main.formulas + c.deeper.formulas} | "
            f"{c.main.code_lines}"
            + (f" (+{c.deeper.code_lines})" if c.deeper.code_lines else "")
            + f" | {c.main.self_checks} | {len(c.tasks)} "
            f"({', '.join(map(str, kinds))}) | "
            f"{sum(t.solution_lines for t in c.tasks)} |"
        )
    return "\n".join(rows)


EXERCISE_KINDS = ("backward", "code", "prediction")


def method() -> str:
    r, e = READING, EXERCISE
    return textwrap.fill(
        f"Reading: {r['words_per_minute']} words of prose a minute, "
        f"{r['minutes_per_formula']} minute for each display formula, "
        f"{r['code_lines_per_minute']} lines of code a minute (the code cells "
        "and the sources a chapter shows, blank lines and comments left "
        f"out), {r['minutes_per_self_check']} minutes for each self-check. "
        f"Exercises: {e['backward']} minutes for a backward that is derived "
        'on paper first (its hints climb to "Hint 3: the formula"), '
        f"{e['code']} for other code, {e['prediction']} for a prediction, "
        f"and {e['minutes_per_solution_line']} minutes for each line of the "
        "book's solution (its imports and its closing check left out). "
        f"Each figure is rounded to the nearest {STEP:g} hour.",
        width=74,
    )


def objectives_section(book: list[Chapter]) -> str:
    parts = []
    for c in book:
        number = c.label.isdigit()
        heading = f"### {c.label + '. ' if number else 'Appendix: '}{c.title}"
        name = f"chapter {c.label}" if number else "the appendix"
        if c.objectives is None:
            body = f"The Overview of [{name}]({c.link}) does not list them yet."
        else:
            items = "\n".join(f"- {_book_links(item)}" for item in c.objectives)
            body = (
                f"After [{name}]({c.link}), a student will be able to:\n\n{items}"
            )
        parts.append(f"{heading}\n\n{body}")
    return "\n\n".join(parts)


def _book_links(markdown: str) -> str:
    """A chapter's links to other chapters (`05_x.ipynb`), from book/."""
    return re.sub(
        r"\]\(((?:\d\d|appendix)_[\w]+\.ipynb(?:#[^)]*)?)\)",
        r"](../notebooks/\1)",
        markdown,
    )


def parts() -> dict[str, str]:
    """Every generated part of the page, by name."""
    book = chapters()
    by_number = {c.stem.split("_")[0]: c for c in book}
    found = {
        "method": method(),
        "hours": hours_table(book),
        "counts": counts_table(book),
        "objectives": objectives_section(book),
    }
    core = PLANS["core"]
    _check_spans(core, by_number)
    found["plan-core"] = plan_table(core, by_number)
    for name in ("5 weeks", "6 weeks"):
        found[f"plan-{name.split()[0]}"] = plan_table(
            PLANS[name], by_number, len(core) + 1
        )
    return found


# ---- the page -----------------------------------------------------------------

_BLOCK = re.compile(
    r"^% instructors\.py: (?P<name>[\w-]+)\n"
    r"(?P<body>.*?)^% instructors\.py: end$",
    re.S | re.M,
)


def rewrite(page: str, generated: dict[str, str]) -> str:
    """`page` with each generated part between its markers replaced."""
    missing = set(generated) - {m["name"] for m in _BLOCK.finditer(page)}
    if missing:
        raise SystemExit(
            f"book/instructors.md has no place for "
            f"{', '.join(sorted(missing))}: add `% instructors.py: NAME` ... "
            "`% instructors.py: end`"
        )
    return _BLOCK.sub(
        lambda m: (
            f"% instructors.py: {m['name']}\n"
            f"{generated[m['name']]}\n% instructors.py: end"
        ),
        page,
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--write", action="store_true", help="rewrite the page")
    action.add_argument(
        "--check", action="store_true", help="exit 1 if the page differs"
    )
    args = parser.parse_args(argv)
    generated = parts()
    if not (args.write or args.check):
        for name, text in generated.items():
            print(f"% {name}\n{text}\n")
        return 0
    page = PAGE.read_text(encoding="utf-8")
    new = rewrite(page, generated)
    if args.write:
        PAGE.write_text(new, encoding="utf-8")
        return 0
    if new != page:
        sys.stdout.writelines(
            difflib.unified_diff(
                page.splitlines(True),
                new.splitlines(True),
                "book/instructors.md",
                "scripts/instructors.py",
            )
        )
        print(
            "book/instructors.md is out of date: "
            "python scripts/instructors.py --write"
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
