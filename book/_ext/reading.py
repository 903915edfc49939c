"""Sphinx extension: what the reader of the rendered book sees.

Exercise solutions stay hidden until the reader asks for them
    A notebook code cell tagged `solution` is collapsed in the page: its
    source and output sit in a closed <details> element whose summary reads
    "Show the solution" (myst-nb's `hide-cell` mechanism; the tag alone is
    enough, and nothing else a chapter does can show it).  Closed <details>
    content is not rendered, so neither the code nor its "correct" verdict
    is visible, selectable or read aloud before the click.

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
    app.connect("html-page-context", _theme_colours_for_source_blocks)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
