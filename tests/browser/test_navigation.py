"""Navigation with the theme's sidebar buttons, on a phone and on a desktop.

The pinned themes attach their handlers to a hidden duplicate of each
toggle (pydata-sphinx-theme #2451, sphinx-book-theme #988); book.js
forwards clicks from the visible buttons.  These tests use the buttons as
a reader does.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from .conftest import PHONE
from .pages import PAGES

pytestmark = pytest.mark.browser

# The sidebars and drawers are the theme's, the same on every page: these
# tests start on the landing page, which has little to typeset (a chapter
# costs Chromium seconds of CPU per load), and follow a link to the
# references.  Every page's width on a phone is checked below.
START = "book/intro.html"
TARGET = "book/references"


@pytest.mark.parametrize("mode", ["light", "dark"])
def test_phone_opens_the_table_of_contents_and_follows_a_link(book_page, mode):
    p = book_page(START, mode=mode, **PHONE)
    page = p.page
    toggle = page.locator(".primary-toggle:visible")
    expect(toggle).to_have_count(1)
    drawer = page.locator("#pst-primary-sidebar-modal")
    expect(drawer).to_be_hidden()
    toggle.click()
    expect(drawer).to_be_visible()
    link = drawer.locator(f"a[href$='{TARGET.split('/')[-1]}.html']")
    expect(link).to_be_visible()
    p.screenshot(f"phone_toc_open_{mode}", full_page=False)
    link.click()
    expect(page).to_have_url(re.compile(rf"{TARGET}\.html$"))
    expect(page.locator("article h1")).to_contain_text("References")
    p.assert_clean()


def test_phone_toc_closes_with_escape_and_returns_focus(book_page):
    p = book_page(START, **PHONE)
    page = p.page
    toggle = page.locator(".primary-toggle:visible")
    toggle.click()
    drawer = page.locator("#pst-primary-sidebar-modal")
    expect(drawer).to_be_visible()
    page.keyboard.press("Escape")
    expect(drawer).to_be_hidden()
    expect(toggle).to_be_focused()


def test_phone_opens_the_page_contents(book_page):
    p = book_page(START, **PHONE)
    toggle = p.page.locator(".secondary-toggle:visible")
    expect(toggle).to_have_count(1)
    toggle.click()
    drawer = p.page.locator("#pst-secondary-sidebar-modal")
    expect(drawer).to_be_visible()
    expect(drawer.locator("a").first).to_be_visible()


def test_desktop_toggle_collapses_and_restores_the_sidebar(book_page):
    p = book_page(START)
    sidebar = p.page.locator("#pst-primary-sidebar")
    toggle = p.page.locator(".primary-toggle:visible")
    expect(sidebar).to_be_visible()
    toggle.click()
    expect(sidebar).to_be_hidden()
    toggle.click()
    expect(sidebar).to_be_visible()


# After two animation frames the browser has laid the page out again.
_LAID_OUT_WIDTH = """() => new Promise(done => requestAnimationFrame(() =>
    requestAnimationFrame(() => done(document.documentElement.scrollWidth))))"""


@pytest.mark.parametrize("page", PAGES)
def test_no_page_is_wider_than_a_phone(shared_page, page):
    """Nothing (a long inline code name, a table, a formula) widens the page
    past a phone's screen: wide drawings and tables scroll in their own boxes.
    The shared page is narrowed to a phone's width for good: the test runs
    after every other test on it but test_phone (conftest.py), which reads
    it at that width too."""
    p = shared_page(page + ".html")
    p.resize(PHONE)  # book.js marks wide formulas as scrolling boxes
    width = p.page.evaluate(_LAID_OUT_WIDTH)
    assert width <= PHONE["width"], (
        f"{page}: {width} px wide at a phone's {PHONE['width']} px"
    )


#: Where the sidebar stands: the book's title and the current page's link,
#: relative to the sidebar's visible box.
_SIDEBAR = """() => {
  const bar = document.querySelector('div.bd-sidebar');
  const box = bar.getBoundingClientRect();
  const links = bar.querySelectorAll('.bd-docs-nav a.current');
  const link = links[links.length - 1].getBoundingClientRect();
  const title = bar.querySelector('.navbar-brand').getBoundingClientRect();
  return {scrollTop: bar.scrollTop, height: bar.clientHeight,
          linkTop: link.top - box.top, linkBottom: link.bottom - box.top,
          titleTop: title.top - box.top};
}"""


@pytest.mark.parametrize(
    "page", ["notebooks/07_debugging_backward", "notebooks/12_model_parallel"]
)
def test_sidebar_shows_the_title_and_the_current_page(shared_page, page):
    """The sidebar scrolls only as far as it takes to show the current
    page's link: on a page whose link is in view from the top, the book's
    title stays in view too.  The theme's "Back to top" button, which
    floated over the text, is not there."""
    p = shared_page(page + ".html")
    bar = p.page.evaluate(_SIDEBAR)
    assert bar["linkTop"] >= 0 and bar["linkBottom"] <= bar["height"], bar
    unscrolled_bottom = bar["linkBottom"] + bar["scrollTop"]
    if unscrolled_bottom + 48 <= bar["height"]:
        assert bar["scrollTop"] == 0 and bar["titleTop"] >= 0, (
            f"{page}: the sidebar is scrolled past the book's title: {bar}"
        )
    else:  # as little as it takes
        assert bar["linkBottom"] >= bar["height"] - 60, bar
    expect(p.page.locator("#pst-back-to-top")).to_have_count(0)
