"""The first names microgpt learns to continue (the appendix on microgpt).

`load_names()` reads `backprop_lessons/data/names.txt` through
importlib.resources (no repository files, no downloads): 5,163 first names,
lower case a-z, sorted.  Public domain, from the 1990 US Census lists in the
PyPI package `names` 0.3.0 (see `data/names-LICENSE.txt` and
`scripts/make_names.py`).
"""

from __future__ import annotations

from importlib import resources

__all__ = ["load_names"]

NAMES_FILE = "names.txt"


def load_names() -> list[str]:
    """The shipped names, one str each, in the file's (sorted) order."""
    text = (
        resources.files("backprop_lessons.data")
        .joinpath(NAMES_FILE)
        .read_text(encoding="ascii")
    )
    return text.split()
