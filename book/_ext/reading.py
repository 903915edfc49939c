"""Sphinx extension: what the reader of the rendered book sees.

Exercise solutions stay hidden until the reader asks for them
    A notebook code cell tagged `solution` is collapsed in the page: its
    source and output sit in a closed <details> element whose summary reads
    "Show the solution" (myst-nb's `hide-cell` mechanism; the tag alone is
    enough, and nothing else a chapter does can show it).  Closed <details>
    content is not rendered, so neither the code nor its "correct" verdict
    is visible, selectable or read aloud before the click.

Detour code sits in its Deeper box
    A notebook code cell tagged `deeper` belongs to the detour described by
    the markdown Deeper box just above it (`<details class="deeper">` ...
    `</details>` at the end of the markdown cell before it; several tagged
    cells in a row follow the same box).  In the page the cells move inside
    that box, after its text, so a detour with code is one closed box with
    one look and one name (its summary, "Deeper: ..."), exactly like a
    detour without code.  JupyterLab and Colab cannot put a cell inside a
    markdown box: there the box closes over its text and the cells follow
    it, so the box's text says what the cells below do.  A `deeper` cell
    with no box above it, or one also tagged to be hidden another way,
    fails the build (a warning under -W).

A solution's Colab title line is left out
    A solution cell starts with `# @title Exercise N: a solution`, the line
    that makes it a form cell in Colab (shown there as its title, with the
    code hidden).  In the book the cell is already behind "Show the
    solution", so the line is dropped from the code shown.

Links to the published book stay in this book
    Notebook markdown links to the book's own pages (glossary, notation,
    ...) by their published address, `html_baseurl` + `book/glossary.html`,
    the one link that opens a readable page in JupyterLab and Colab too.
    Here each such link becomes a relative link to the local page, so the
    built book never leaves itself (offline, or on another host); a link to
    a page the book does not have fails the build.

Hidden cells are named by their visible text
    myst-nb gives every hidden cell's summary the accessible name "Toggle
    hidden content"; here the summary's own text ("Show the solution",
    "Show code cell source") is its name, so a screen reader says what the
    button reveals.

`show_source` blocks use the book's own code colours
    `backprop_lessons.show` emits Pygments classes *and* inline light-theme
    styles (for Jupyter and Colab).  In the book the inline styles are
    removed, so the theme's light and dark code styles apply, exactly as
    for code cells.
"""

from __future__ import annotations

import re
from html import escape

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.transforms.post_transforms import SphinxPostTransform
from sphinx.util import logging

logger = logging.getLogger(__name__)

SOLUTION_TAG = "solution"
PROMPT_SHOW = "Show the solution"
PROMPT_HIDE = "Hide the solution"


class HideSolutionCells(SphinxPostTransform):
    """Mark every `solution`-tagged code cell to be hidden whole (input and
    output).

    Runs just before myst-nb's HideInputCells (priority 199), which wraps
    the marked cells in <details>.
    """

    default_priority = 198
    formats = ("html",)

    def run(self, **kwargs) -> None:
        for node in self.document.findall(nodes.container):
            if (
                node.get("nb_element") == "cell_code"
                and f"tag_{SOLUTION_TAG}" in node["classes"]
            ):
                node["hide_mode"] = "all"
                node["prompt_show"] = PROMPT_SHOW
                node["prompt_hide"] = PROMPT_HIDE


COLAB_TITLE = re.compile(r"\A# @title [^\n]*\n")


class DropColabTitles(SphinxPostTransform):
    """Remove the `# @title ...` first line of every `solution` cell's code."""

    default_priority = 198
    formats = ("html",)

    def run(self, **kwargs) -> None:
        for cell in self.document.findall(nodes.container):
            if cell.get("nb_element") != "cell_code" or (
                f"tag_{SOLUTION_TAG}" not in cell["classes"]
            ):
                continue
            for block in cell.findall(nodes.literal_block):
                text = block.astext()
                if COLAB_TITLE.match(text):
                    kept = COLAB_TITLE.sub("", text, count=1).lstrip("\n")
                    block.children = [nodes.Text(kept)]
                    block.rawsource = kept
                break  # the first literal block is the cell's source


class PublishedLinksAreLocal(SphinxPostTransform):
    """Turn every link to `html_baseurl` + a page of this book into a relative
    link to that page; warn (an error under -W) when the page is missing."""

    default_priority = 199
    formats = ("html",)

    def run(self, **kwargs) -> None:
        base = self.config.html_baseurl
        if not base:
            return
        base = base.rstrip("/") + "/"
        for ref in self.document.findall(nodes.reference):
            uri = ref.get("refuri", "")
            if not uri.startswith(base):
                continue
            path, _, anchor = uri[len(base) :].partition("#")
            docname = path.removesuffix(".html")
            if docname not in self.env.found_docs:
                logger.warning(
                    f"a link to the published book names a page it does not "
                    f"have: {uri}",
                    location=ref,
                    type="reading",
                    subtype="published-link",
                )
                continue
            local = self.app.builder.get_relative_uri(self.env.docname, docname)
            ref["refuri"] = local + (f"#{anchor}" if anchor else "")
            ref["classes"] = [c for c in ref["classes"] if c != "external"]
            ref["internal"] = True


DEEPER_TAG = "deeper"
#: tags that hide a cell behind myst-nb's own toggle: not inside a Deeper box
_OTHER_HIDING = {"hide-cell", "hide-input", "hide-output", SOLUTION_TAG}
_DETAILS_OPEN = re.compile(r"<details\b")
_DETAILS_CLOSE = re.compile(r"</details\s*>")
_DEEPER_OPEN = re.compile(r'<details\s[^>]*class="[^"]*\bdeeper\b[^"]*"')


def _raw_html(node) -> str | None:
    """The text of a raw HTML node (a markdown HTML block), else None."""
    if isinstance(node, nodes.raw) and "html" in node.get("format", "").split():
        return node.astext()
    return None


def _closing_deeper_box(cell) -> nodes.raw | None:
    """The `</details>` that ends the Deeper box right before `cell`, or None
    when the cell does not follow one."""
    parent = cell.parent
    at = parent.index(cell)
    close = parent[at - 1] if at > 0 else None
    if close is None or (_raw_html(close) or "").strip() != "</details>":
        return None
    depth = 0
    for node in reversed(parent.children[:at]):
        text = _raw_html(node)
        if text is None:
            continue
        depth += len(_DETAILS_CLOSE.findall(text))
        depth -= len(_DETAILS_OPEN.findall(text))
        if depth <= 0:  # the <details> that this </details> closes
            return close if _DEEPER_OPEN.search(text) else None
    return None


class DeeperCellsInTheirBox(SphinxPostTransform):
    """Move every `deeper`-tagged code cell into the markdown Deeper box
    above it (before the box's closing `</details>`)."""

    default_priority = 197
    formats = ("html",)

    def run(self, **kwargs) -> None:
        for cell in list(self.document.findall(nodes.container)):
            if cell.get("nb_element") != "cell_code" or (
                f"tag_{DEEPER_TAG}" not in cell["classes"]
            ):
                continue
            tags = set(cell.get("cell_metadata", {}).get("tags", []))
            close = _closing_deeper_box(cell)
            if tags & _OTHER_HIDING:
                problem = (
                    f"is also tagged {sorted(tags & _OTHER_HIDING)}: the box "
                    "already hides it"
                )
            elif close is None:
                problem = (
                    "does not follow a Deeper box (end the markdown cell "
                    'before it with <details class="deeper"><summary>Deeper: '
                    "...</summary> ... </details>)"
                )
            else:
                cell.parent.remove(cell)
                close.parent.insert(close.parent.index(close), cell)
                continue
            logger.warning(
                f"a code cell tagged `{DEEPER_TAG}` {problem}",
                location=cell,
                type="reading",
                subtype="deeper",
            )


def _visit_hidden_cell(self, node) -> None:
    classes = " ".join(node["classes"])
    self.body.append(f'<details class="admonition hide {classes}">\n<summary>\n')
    for state, prompt in (
        ("collapsed", "prompt_show"),
        ("expanded", "prompt_hide"),
    ):
        title = escape(node[prompt])
        self.body.append(f'<p class="{state} admonition-title">{title}</p>\n')
    self.body.append("</summary>\n")


def _depart_hidden_cell(self, node) -> None:
    self.body.append("</details>\n")


_SOURCE_BLOCK = re.compile(r'<div class="bl-source">.*?</pre>', re.DOTALL)
_STYLE_ATTR = re.compile(r' style="[^"]*"')


def _theme_colours_for_source_blocks(
    app, pagename, templatename, context, doctree
) -> None:
    body = context.get("body")
    if body and 'class="bl-source"' in body:
        context["body"] = _SOURCE_BLOCK.sub(
            lambda m: _STYLE_ATTR.sub("", m.group(0)), body
        )


def setup(app: Sphinx) -> dict:
    app.setup_extension("myst_nb")
    from myst_nb.sphinx_ import HideCodeCellNode

    app.add_node(
        HideCodeCellNode,
        override=True,
        html=(_visit_hidden_cell, _depart_hidden_cell),
    )
    app.add_post_transform(HideSolutionCells)
    app.add_post_transform(DropColabTitles)
    app.add_post_transform(PublishedLinksAreLocal)
    app.add_post_transform(DeeperCellsInTheirBox)
    app.connect("html-page-context", _theme_colours_for_source_blocks)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
