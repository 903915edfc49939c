"""Every chapter notebook follows the book's conventions (ARCHITECTURE.md)."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())
TOC = (ROOT / "_toc.yml").read_text()
REPO_URL = CONFIG["repository"]["url"]
BRANCH = CONFIG["repository"]["branch"]

_SETUP_TITLE = (
    "# Setup: the book's package, installed first where it is missing (Colab)."
)
SETUP_CELL = (
    _SETUP_TITLE
    + "\n"
    + f"""import importlib.util, os
if importlib.util.find_spec("backprop_lessons") is None:
    _source = os.environ.get(
        "BACKPROP_LESSONS_SOURCE",
        "git+{REPO_URL}@{BRANCH}")
    %pip install --quiet {{_source}}
import backprop_lessons"""
)


def _code_cells(path: Path) -> list[dict]:
    nb = json.loads(path.read_text())
    return [c for c in nb["cells"] if c["cell_type"] == "code"]


def test_there_are_notebooks():
    assert NOTEBOOKS, "no notebooks in notebooks/"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_first_cell_is_the_setup_cell(path):
    """The default source is the repository named in _config.yml."""
    assert "".join(_code_cells(path)[0]["source"]).strip() == SETUP_CELL


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_stored_top_to_bottom_without_errors(path):
    cells = _code_cells(path)
    assert [c["execution_count"] for c in cells] == list(
        range(1, len(cells) + 1)
    ), f"{path.name}: re-run it top to bottom in a fresh kernel (make notebooks)"
    for i, c in enumerate(cells, 1):
        assert "execution" not in c["metadata"], (
            f"{path.name}: cell {i} stores execution timestamps (make notebooks "
            "does not record them)"
        )
        for out in c["outputs"]:
            assert out["output_type"] != "error", (
                f"{path.name}: cell {i} stored an error"
            )
            text = json.dumps(
                out.get("data", {}).get("text/plain", "")
            ) + json.dumps(out.get("text", ""))
            assert not re.search(r"0x[0-9a-f]{6,}", text), (
                f"{path.name}: cell {i} shows a memory address"
            )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_in_table_of_contents(path):
    assert f"notebooks/{path.stem}" in TOC, f"{path.name} is not in _toc.yml"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_one_title_and_an_exercises_section(path):
    nb = json.loads(path.read_text())
    md = "\n".join(
        "".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown"
    )
    titles = re.findall(r"^# \S", md, flags=re.M)
    assert len(titles) == 1, (
        f"{path.name}: expected exactly one H1 title, found {len(titles)}"
    )
    assert re.search(r"^## .*Exercises", md, flags=re.M), (
        f"{path.name}: no '## ...Exercises' section"
    )
    assert re.search(r"^## .*Summary", md, flags=re.M), (
        f"{path.name}: no '## ...Summary' section"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_figure_has_alt_text(path):
    """A cell that outputs an image describes it for readers who cannot see it.

    The rendered page takes the text from the cell metadata
    `{"mystnb": {"image": {"alt": ...}}}`; without it the alt attribute is
    the image's file path.
    """
    for i, c in enumerate(_code_cells(path), 1):
        images = [
            k
            for out in c["outputs"]
            for k in out.get("data", {})
            if k.startswith("image/")
        ]
        if images:
            alt = c["metadata"].get("mystnb", {}).get("image", {}).get("alt", "")
            assert len(alt.split()) >= 8, (
                f"{path.name}: code cell {i} shows {images[0]} without a "
                "description (mystnb.image.alt)"
            )


MAX_CODE_LINE = 82  # what fits the rendered text column at 1280 pixels (book.css)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_code_fits_the_page(path):
    """Code cells read without sideways scrolling in the rendered book."""
    long = [
        (i, len(line))
        for i, c in enumerate(_code_cells(path), 1)
        for line in "".join(c["source"]).splitlines()
        if len(line) > MAX_CODE_LINE
    ]
    assert not long, (
        f"{path.name}: lines over {MAX_CODE_LINE} characters (code cell, "
        f"length): {long}"
    )


MAX_CELL_LINES = 40  # a cell a reader takes in at once; longer code goes
# into the package (with explicit arguments) or splits at a natural boundary


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_code_cells_are_short(path):
    """No code cell over MAX_CELL_LINES lines (issue 15)."""
    long = [
        (i, len("".join(c["source"]).splitlines()))
        for i, c in enumerate(_code_cells(path), 1)
        if len("".join(c["source"]).splitlines()) > MAX_CELL_LINES
    ]
    assert not long, (
        f"{path.name}: code cells over {MAX_CELL_LINES} lines (code cell, "
        f"lines): {long}"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_shown_package_source_fits_the_page(path):
    """Package functions displayed with show_source keep the same width as the
    cells."""
    long = []
    for i, c in enumerate(_code_cells(path), 1):
        if "show_source(" not in "".join(c["source"]):
            continue
        for out in c["outputs"]:
            text = "".join(out.get("data", {}).get("text/plain", ""))
            long += [
                (i, len(line))
                for line in text.splitlines()
                if len(line) > MAX_CODE_LINE
            ]
    assert not long, (
        f"{path.name}: shown source lines over {MAX_CODE_LINE} characters "
        f"(code cell, length): {long}; rewrap them in src/ and re-execute"
    )


# ---- outputs that travel (ARCHITECTURE.md: "Round-off is printed against its
# tolerance") ----

CHECK_PRINTOUT = re.compile(r":\s*(True|False)\s*$", flags=re.M)


def _stream_text(cell: dict) -> str:
    return "".join(
        "".join(out.get("text", ""))
        for out in cell["outputs"]
        if out["output_type"] == "stream"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_test_markers_in_the_reading(path):
    """nbval is steered by cell tags (nbval-ignore-output, ...), never by
    comment lines that the reader sees."""
    marked = [
        i
        for i, c in enumerate(_code_cells(path))
        if re.search(r"^\s*#\s*NBVAL_", "".join(c["source"]), flags=re.M)
    ]
    assert not marked, (
        f"{path.name}: code cells {marked} carry '# NBVAL_...' "
        "lines; use the cell tags instead"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_checks_are_tables_or_asserts_not_true_printouts(path):
    """A check prints a table or a sentence a reader learns from, or is a
    silent assert; never 'something: True'."""
    found = [
        (i, m.group(0).strip())
        for i, c in enumerate(_code_cells(path))
        for m in CHECK_PRINTOUT.finditer(_stream_text(c))
    ]
    assert not found, (
        f"{path.name}: '...: True/False' printouts (code cell, text): {found}"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_unchecked_outputs_say_why(path):
    """A cell whose output nbval does not compare (a measurement, or round-off
    that differs between machines) opens with a comment saying so."""
    silent = [
        i
        for i, c in enumerate(_code_cells(path))
        if "nbval-ignore-output" in c["metadata"].get("tags", [])
        and not "".join(c["source"]).lstrip().startswith("#")
    ]
    assert not silent, (
        f"{path.name}: code cells {silent} are not compared by nbval "
        "but do not start with a comment that says why"
    )


# ---- one markdown for three renderers (CONTRIBUTING.md) ----
# JupyterLab and Colab render notebook markdown as CommonMark plus HTML: MyST
# syntax shows there as raw text (a dropdown's explanation in the open).
# scripts/commonmark_notebooks.py rewrites the old markup; the book's
# front-matter pages (book/*.md) may keep MyST.

MYST_ONLY = {
    "a MyST directive (use <details class=...><summary>...)": re.compile(
        r"^ {0,3}(`{3,}|~{3,}|:{3,})\{[\w-]+\}.*$", re.M
    ),
    "a MyST role (link to the file: [text](04_matmul_vjp.ipynb))": re.compile(
        r"(?<!`)\{[a-z][\w:.-]*\}`[^`]+`"
    ),
    "a MyST target": re.compile(r"^\([\w.:-]+\)=\s*$", re.M),
}
DETAILS_OPEN = re.compile(r"<details\b[^>]*>")
DETAILS_CLASSES = {"why", "hint", "deeper"}


def _markdown_cells(path: Path) -> list[tuple[int, str]]:
    nb = json.loads(path.read_text())
    return [
        (i, "".join(c["source"]))
        for i, c in enumerate(nb["cells"])
        if c["cell_type"] == "markdown"
    ]


DEMO_NOTEBOOKS = sorted(
    (ROOT / "tests" / "browser" / "demo_book").glob("*.ipynb")
)


@pytest.mark.parametrize("path", NOTEBOOKS + DEMO_NOTEBOOKS, ids=lambda p: p.stem)
def test_markdown_is_commonmark_not_myst(path):
    found = [
        (i, what, m.group(0).strip()[:50])
        for i, text in _markdown_cells(path)
        for what, pattern in MYST_ONLY.items()
        for m in pattern.finditer(text)
    ]
    assert not found, (
        f"{path.name}: MyST-only markup in markdown cells (cell, what, text): "
        f"{found}; run scripts/commonmark_notebooks.py"
    )


@pytest.mark.parametrize("path", NOTEBOOKS + DEMO_NOTEBOOKS, ids=lambda p: p.stem)
def test_collapsed_blocks_follow_the_convention(path):
    """`<details class="why|hint|deeper"><summary>...</summary>`, a blank
    line, the markdown body, a blank line, `</details>` (CommonMark ends an
    HTML block at a blank line: without them the body is not markdown)."""
    bad = []
    for i, text in _markdown_cells(path):
        for m in DETAILS_OPEN.finditer(text):
            tag = m.group(0)
            classes = re.search(r'class="([^"]*)"', tag)
            after = text[m.end() :]
            if not classes or not DETAILS_CLASSES & set(classes[1].split()):
                bad.append((i, f"{tag}: class why, hint or deeper"))
            elif " open" in tag:
                bad.append((i, f"{tag}: starts collapsed (no `open`)"))
            elif not re.match(r"<summary>[^\n]+</summary>\n\n", after):
                bad.append((i, "<summary>...</summary> then a blank line"))
        for m in re.finditer(r"</details>", text):
            before, rest = text[: m.start()], text[m.end() :]
            alone = before.endswith("\n\n") and (
                rest in ("", "\n") or rest.startswith("\n\n")
            )
            if not alone:
                bad.append((i, "</details> alone, between blank lines"))
    assert not bad, f"{path.name}: (cell, expected): {bad}"


DEEPER_BOX_AT_END = re.compile(
    r'<details class="deeper"><summary>[^\n]+</summary>\n\n'
    r"(?:(?!<details\b)[\s\S])*</details>\s*$"
)
#: tags that hide a cell behind myst-nb's own toggle (a look of its own)
OTHER_HIDING = {"hide-cell", "hide-input", "hide-output", "solution"}


@pytest.mark.parametrize("path", NOTEBOOKS + DEMO_NOTEBOOKS, ids=lambda p: p.stem)
def test_deeper_cells_follow_their_box(path):
    """A code cell tagged `deeper` belongs to the detour of the markdown
    Deeper box just above it: the markdown cell before it (or before the run
    of `deeper` cells it is part of) ends with that box, and the book puts
    the cells inside it (book/_ext/reading.py).  Such a cell has no other
    hiding tag: the box hides it."""
    cells = json.loads(path.read_text())["cells"]
    bad = []
    for i, c in enumerate(cells):
        tags = set(c["metadata"].get("tags", []))
        if c["cell_type"] != "code" or "deeper" not in tags:
            continue
        if tags & OTHER_HIDING:
            bad.append((i, f"also tagged {sorted(tags & OTHER_HIDING)}"))
        j = i - 1
        while (
            j >= 0
            and cells[j]["cell_type"] == "code"
            and "deeper" in set(cells[j]["metadata"].get("tags", []))
        ):
            j -= 1
        before = cells[j] if j >= 0 else {"cell_type": None, "source": []}
        if before["cell_type"] != "markdown" or not DEEPER_BOX_AT_END.search(
            "".join(before["source"])
        ):
            bad.append((i, f"cell {j} does not end with a Deeper box"))
    assert not bad, f"{path.name}: `deeper` cells (cell, problem): {bad}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_detour_code_is_tagged_deeper(path):
    """Detour code is tagged `deeper` (inside its Deeper box in the book),
    not `hide-cell` or `hide-input`, whose toggles look different."""
    found = [
        (i, t)
        for i, c in enumerate(_code_cells(path))
        for t in c["metadata"].get("tags", [])
        if t in ("hide-cell", "hide-input")
    ]
    assert not found, (
        f"{path.name}: (code cell, tag) {found}: tag detour code `deeper`, "
        "after a markdown Deeper box"
    )


# ---- the form JupyterLab saves (scripts/lab_form.py) ----

_spec = importlib.util.spec_from_file_location(
    "lab_form", ROOT / "scripts" / "lab_form.py"
)
lab_form = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(lab_form)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_stored_as_jupyterlab_saves_it(path):
    """Opening and saving a chapter in JupyterLab changes no byte of it (a
    reader's clone shows no modified notebook before they typed anything):
    `make notebooks` stores the form JupyterLab writes."""
    text = path.read_text(encoding="utf-8")
    assert lab_form.dumps(lab_form.lab_form(json.loads(text))) == text, (
        f"{path.name}: not in JupyterLab's form; run "
        "`python scripts/lab_form.py notebooks/*.ipynb` (make notebooks does)"
    )


def test_lab_form_writes_what_jupyterlab_writes():
    """The three differences measured by saving chapters in JupyterLab 4.6."""
    nb = {
        "cells": [
            {
                "cell_type": "code",
                "metadata": {"jupyter": {"outputs_hidden": True}},
                "source": [],
                "outputs": [],
            },
            {"cell_type": "code", "metadata": {}, "source": [], "outputs": []},
        ],
        "metadata": {
            "kernelspec": {"display_name": "Python 3", "name": "python3"},
            "widgets": {"state": {"a": {"x": 0.0, "y": [150.0, 0.5], "z": 2}}},
        },
    }
    out = lab_form.lab_form(nb)
    assert out["cells"][0]["metadata"]["collapsed"] is True
    assert "collapsed" not in out["cells"][1]["metadata"]
    assert out["metadata"]["kernelspec"]["display_name"] == "Python 3 (ipykernel)"
    state = out["metadata"]["widgets"]["state"]["a"]
    assert (
        lab_form.dumps(state)
        == '{\n "x": 0,\n "y": [\n  150,\n  0.5\n ],\n "z": 2\n}\n'
    )


def _view(model_id: str) -> dict:
    return {
        "output_type": "display_data",
        "data": {lab_form.WIDGET_VIEW: {"model_id": model_id}},
    }


def _notebook(state: dict, *views: str) -> dict:
    return {
        "cells": [{"cell_type": "code", "outputs": [_view(v) for v in views]}],
        "metadata": {
            "widgets": {
                lab_form.WIDGET_STATE: {
                    "state": state,
                    "version_major": 2,
                    "version_minor": 0,
                }
            }
        },
    }


def test_saving_keeps_the_widget_state_the_outputs_show():
    """make lab's save hook: a run's new widgets are saved, stored ones still
    shown are kept (JupyterLab sends none at open), the others go."""
    stored = _notebook(
        {"a": {"state": {"layout": "IPY_MODEL_b"}}, "b": {}, "c": {}}, "a", "c"
    )
    at_open = _notebook({}, "a", "c")  # saved unchanged, nothing live
    kept = lab_form.keep_widget_state(at_open, stored)
    assert kept == stored
    after_run = _notebook({"d": {}, "e": {}}, "a", "d")  # cell 2 ran again
    kept = lab_form.keep_widget_state(after_run, stored)
    state = kept["metadata"]["widgets"][lab_form.WIDGET_STATE]["state"]
    assert sorted(state) == ["a", "b", "d"]  # c and e are shown by nothing


def test_saving_hides_the_solutions_again():
    """make lab's save hook: after Run All, JupyterLab has dropped
    outputs_hidden and collapsed from the solution cells it ran."""
    ran = {
        "cell_type": "code",
        "metadata": {"tags": ["solution"], "jupyter": {"source_hidden": True}},
    }
    other = {"cell_type": "code", "metadata": {"tags": ["graded"]}}
    nb = lab_form.keep_solutions_hidden({"cells": [ran, other]})
    assert nb["cells"][0]["metadata"] == {
        "tags": ["solution"],
        "jupyter": {"source_hidden": True, "outputs_hidden": True},
        "collapsed": True,
    }
    assert nb["cells"][1]["metadata"] == {"tags": ["graded"]}
