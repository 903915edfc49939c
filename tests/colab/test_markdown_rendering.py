"""Every notebook's markdown as Colab and JupyterLab show it: CommonMark plus
HTML, not MyST.

Each markdown cell is rendered with markdown-it-py's CommonMark renderer
(HTML allowed, GFM tables on: what Jupyter's renderers do) and the result
is read as a browser would: text inside a closed `<details>` is not shown
until its `<summary>` is clicked.  An exercise's explanation (the markdown
between its stub and its `solution` cell) must show nothing but the
summary; no cell may show MyST syntax as text; every collapsed block's body
must come out as markdown (paragraphs, lists, ...), not as raw text.
"""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
RENDER = MarkdownIt("commonmark").enable("table")
VOID = {"br", "hr", "img", "input", "wbr", "col", "source", "meta", "link"}
BLOCKS = {"p", "ul", "ol", "pre", "div", "table", "blockquote", "h4", "h5"}
MYST_TEXT = re.compile(r"\{(admonition|dropdown|doc|ref|eq|numref)\}|:class:")


class Rendered(HTMLParser):
    """What a reader sees of one rendered cell before any click."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[tuple[str, dict]] = []
        self.visible: list[str] = []  # text outside collapsed bodies
        self.summaries: list[str] = []
        self.details: list[dict] = []  # one per <details>: its body's blocks

    def _hidden(self) -> bool:
        """Inside a closed <details> and not in its <summary>."""
        for k, (tag, attrs) in enumerate(self.stack):
            if tag == "details" and "open" not in attrs:
                inner = [t for t, _ in self.stack[k + 1 :]]
                if not inner or inner[0] != "summary":
                    return True
        return False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "details":
            self.details.append({"attrs": attrs, "blocks": 0, "raw": ""})
        elif tag in BLOCKS and any(t == "details" for t, _ in self.stack):
            self.details[-1]["blocks"] += 1
        if tag not in VOID:
            self.stack.append((tag, attrs))

    def handle_endtag(self, tag):
        while self.stack:
            if self.stack.pop()[0] == tag:
                break

    def handle_data(self, data):
        tags = [t for t, _ in self.stack]
        if "summary" in tags:
            self.summaries.append(data)
        elif self.stack and self.stack[-1][0] == "details":
            self.details[-1]["raw"] += data  # body text not in any block
        if not self._hidden():
            self.visible.append(data)


def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text())["cells"]


def _render(source: str) -> Rendered:
    r = Rendered()
    r.feed(RENDER.render(source))
    r.close()
    return r


def _explanations(cells: list[dict]) -> list[int]:
    """Markdown cells between an exercise's stub and its solution cell.
    A cell that opens with a heading starts a section (one that introduces
    a collapsed listing, say), not an explanation."""
    found = []
    for k, cell in enumerate(cells):
        if "solution" in cell["metadata"].get("tags", []):
            j = k - 1
            while j >= 0 and cells[j]["cell_type"] == "markdown":
                if not "".join(cells[j]["source"]).lstrip().startswith("#"):
                    found.append(j)
                j -= 1
    return found


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_exercise_explanations_are_collapsed(path):
    cells = _cells(path)
    explanations = _explanations(cells)
    solutions = sum("solution" in c["metadata"].get("tags", []) for c in cells)
    # appendices (a detour moved out of a chapter) end in self-checks only
    assert solutions or path.stem.startswith("appendix_"), (
        f"{path.name}: no cell tagged `solution`"
    )
    shown = {}
    for i in explanations:
        r = _render("".join(cells[i]["source"]))
        text = " ".join("".join(r.visible).split())
        summary = " ".join(" ".join(r.summaries).split())
        if text != summary:
            shown[i] = text[:80]
    assert not shown, (
        f"{path.name}: exercise explanations visible before a click (cell: "
        f"text): {shown}"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_myst_shows_and_collapsed_bodies_are_markdown(path):
    problems = []
    for i, cell in enumerate(_cells(path)):
        if cell["cell_type"] != "markdown":
            continue
        r = _render("".join(cell["source"]))
        text = "".join(r.visible)
        problems += [(i, f"shows {m.group(0)}") for m in MYST_TEXT.finditer(text)]
        for d in r.details:
            if "open" in d["attrs"]:
                problems.append((i, "a <details> open from the start"))
            if not d["blocks"] or d["raw"].strip():
                problems.append(
                    (i, "a <details> body that is raw text (blank lines?)")
                )
    assert not problems, f"{path.name}: (cell, problem): {problems}"
