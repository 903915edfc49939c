"""The book's version of a function, revealed on a click.

Where the reader writes a backward, the book's own code for it must not be
in view before the reader has tried: not in the static book, and not in
JupyterLab or Colab, which show every stored output.  `reveal_source(fn)`
is a closed box, "Show the book's version: NAME"; a click opens it on the
function's real source (`show.show_source`), highlighted.  The source
lives in the widget's state, not in the cell's output text, and the box
opens in the browser alone (a <details> element): it works in the static
book, where no Python runs, as in a live notebook.

    SourceReveal    the widget
    reveal_source   SourceReveal of a package function, class or method
"""

from __future__ import annotations

import pathlib

import anywidget
import traitlets

from ..show import show_source
from .text import plain_text

__all__ = ["SourceReveal", "reveal_source"]

_HERE = pathlib.Path(__file__).parent


class SourceReveal(anywidget.AnyWidget):
    """A closed box whose summary names a function; opened, its source."""

    _esm = (_HERE / "reveal.js").read_text(encoding="utf-8")
    _css = (_HERE / "reveal.css").read_text(encoding="utf-8")

    summary = traitlets.Unicode("").tag(sync=True)  # plain text
    source_html = traitlets.Unicode("").tag(sync=True)  # highlighted source

    def __init__(self, title: str, source_html: str, summary: str):
        super().__init__(summary=summary, source_html=source_html)
        self._title = title

    def __repr__(self) -> str:  # the text/plain that nbval compares
        return plain_text(f"SourceReveal({self._title})")


def reveal_source(obj, summary: str = "Show the book's version") -> SourceReveal:
    """The source of a package function, class or method in a closed box:
    "Show the book's version: NAME" until the reader opens it."""
    source = show_source(obj)
    name = source.title.rsplit(".", 1)[-1]
    if not isinstance(summary, str) or not summary.strip():
        raise ValueError(
            f"reveal_source: summary must be a non-empty string, got {summary!r}"
        )
    return SourceReveal(source.title, source._repr_html_(), f"{summary}: {name}")
