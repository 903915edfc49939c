"""Every chapter page fits in 30 screens of a 1280 x 900 window as first seen.

A chapter's main path is the way to writing a backward; detours sit in
closed "Deeper" boxes, hidden cells or appendices, so that the path itself
stays short.  The height is the page's laid-out height once its formulas
are typeset and its widgets drawn, with every collapsed part closed (as a
reader first sees it); a screen is 900 CSS px.  The measured figure is
printed (`pytest -s`) and named in a failure.
"""

from __future__ import annotations

import pytest

from .conftest import DESKTOP
from .pages import CHAPTERS

pytestmark = pytest.mark.browser

MAX_SCREENS = 30

# After two animation frames the browser has laid the page out again.
_LAID_OUT_HEIGHT = """() => new Promise(done => requestAnimationFrame(() =>
    requestAnimationFrame(() => done(document.documentElement.scrollHeight))))"""


@pytest.mark.parametrize("page", CHAPTERS)
def test_chapter_is_at_most_30_screens(shared_page, page):
    p = shared_page(page + ".html")
    assert p.page.viewport_size == DESKTOP
    p.wait_for_math()
    p.wait_for_widgets()
    p.page.wait_for_function(
        "Array.from(document.querySelectorAll('article img'))"
        ".every(i => i.complete)"
    )
    opened = p.page.locator("article details[open]").count()
    assert opened == 0, f"{page}: {opened} collapsed parts open on arrival"
    height = p.page.evaluate(_LAID_OUT_HEIGHT)
    screens = height / DESKTOP["height"]
    print(f"\n{page}: {height} px = {screens:.1f} screens of 900 px")
    assert screens <= MAX_SCREENS, (
        f"{page}: {screens:.1f} screens of {DESKTOP['height']} px at "
        f"{DESKTOP['width']} px wide (at most {MAX_SCREENS})"
    )
