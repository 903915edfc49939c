"""The plain text that stands in for a widget where it cannot be drawn.

Jupyter stores a `text/plain` next to every widget view (what an untrusted
notebook shows, and what nbval compares).  Colab's ipywidgets 7.7 cuts that
text at 110 characters and adds "…"; ipywidgets 8 keeps it whole.  The
widgets cut their own text the same way, so that it reads alike in every
runtime: 7.7 then finds nothing left to cut.
"""

from __future__ import annotations

__all__ = ["plain_text"]

#: ipywidgets 7's limit (Widget._ipython_display_)
LIMIT = 110


def plain_text(text: str) -> str:
    """`text`, cut as ipywidgets 7 cuts a widget's text: its first 110
    characters and "…" when it is longer."""
    return text if len(text) <= LIMIT else text[:LIMIT] + "…"
