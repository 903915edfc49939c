"""A phone shows everything (issue 29): at 390 x 844, with every stepper
stepped through to its last frame, nothing in a chapter's main column is
cut off.

On the same page, at the phone's width: every printed sentence (a
verdict, a check's line, an error) wraps inside its box; every figure and
graph drawing fits the column and links to its image file; a source box's
title wraps; short inline code and the punctuation after a formula stay on
their line; the title fits the screen; and each stepper step keeps its
highlighted node (on the seed step, the seeded output) in the graph's view.

Cut off means an element whose content is wider than its box while the box
hides what overflows (overflow-x hidden or clip): the reader cannot reach
the rest.  A box that scrolls is fine (book.js makes it focusable), and so
is a text field: what a reader types in a self-check scrolls with the
caret.  Elements that are not rendered (inside a closed <details>, hidden)
or are visually hidden on purpose (MathJax's assistive MathML, 1-px boxes)
are not seen and are skipped.  Each chapter leaves a screenshot of its last
stepper (if any) in _build/screenshots/.

The page is the one the other tests share (conftest.py), narrowed to the
phone's width as a phone turned upright does it, after every other test on
it: the theme, book.js and the steppers lay the page out again on a resize
(test_navigation's phone-width check relies on the same), so this reads
what a phone that loaded the page shows, without a second load.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from .conftest import PHONE, SCREENSHOTS
from .pages import CHAPTERS
from .test_fit import reading

pytestmark = pytest.mark.browser

CUT_OFF = """() => {
  const found = [];
  for (const el of document.querySelectorAll('article.bd-article *')) {
    const style = getComputedStyle(el);
    if (!['hidden', 'clip'].includes(style.overflowX)) continue;
    if (el.scrollWidth <= el.clientWidth + 1) continue;
    if (!el.checkVisibility({checkOpacity: true, checkVisibilityCSS: true}))
      continue;
    const box = el.getBoundingClientRect();
    if (box.width <= 2 || box.height <= 2) continue;       // visually hidden
    if (el.closest('mjx-assistive-mml')) continue;         // for screen readers
    if (el.matches('input, textarea')) continue;  // typed text follows the caret
    if (style.clip !== 'auto' && style.position === 'absolute') continue;
    found.push(`${el.tagName.toLowerCase()}.${[...el.classList].join('.')}` +
      ` (${el.scrollWidth} px of content in ${el.clientWidth} px): ` +
      el.innerText.replace(/\\s+/g, ' ').slice(0, 60));
  }
  return found;
}"""

HIGHLIGHT_IN_VIEW = """(stepper) => {
  const graph = stepper.querySelector('.bl-stepper-graph');
  // the node being processed, or on the seed step the output being seeded
  const mark = graph.querySelector('svg polygon[fill="#ffd54f"]') ||
    graph.querySelector('svg polygon[fill="#ffccbc"]');
  if (!mark || graph.scrollWidth <= graph.clientWidth + 1) return true;
  const box = mark.getBoundingClientRect();
  const outer = graph.getBoundingClientRect();
  return box.right > outer.left && box.left < outer.right;
}"""


#: What else a phone must show whole (see the top).
PHONE_READING = """() => {
  const article = document.querySelector('article.bd-article');
  const seen = (el) => el.checkVisibility({checkVisibilityCSS: true});
  const lines = (el) => new Set(Array.from(el.getClientRects())
    .filter((r) => r.width > 0).map((r) => Math.round(r.top))).size;
  const found = [];
  for (const t of article.querySelectorAll('.bl-source-title')) {
    if (seen(t) && t.scrollWidth > t.clientWidth + 1)
      found.push(`source title cut: ${t.textContent}`);
  }
  for (const c of article.querySelectorAll('code.bl-short')) {
    if (seen(c) && lines(c) > 1)
      found.push(`inline code broken: ${c.textContent}`);
  }
  for (const m of article.querySelectorAll('.bl-nobreak')) {
    if (seen(m) && lines(m) > 1)
      found.push(`punctuation off its formula: ${m.textContent.slice(-20)}`);
  }
  const h1 = article.querySelector('h1');
  const range = document.createRange();
  range.selectNodeContents(h1.firstChild);
  if (range.getBoundingClientRect().right > window.innerWidth - 12)
    found.push(`the title reaches the screen's edge: ${h1.textContent}`);
  return found;
}"""


@pytest.mark.parametrize("page", CHAPTERS)
def test_nothing_is_cut_off_on_a_phone(shared_page, page):
    p = shared_page(page + ".html")
    since = p.mark()
    p.resize(PHONE)
    p.wait_for_widgets()
    p.wait_for_math()
    steppers = p.page.locator(".bl-stepper")
    for k in range(steppers.count()):
        stepper = steppers.nth(k)
        stepper.scroll_into_view_if_needed()
        last = int(stepper.locator("input[type=range]").get_attribute("max"))
        next_button = stepper.locator("button[data-action=next]")
        for i in range(1, last + 1):
            next_button.click()
            expect(stepper).to_have_attribute("data-index", str(i))
            # the node being processed is in view in the graph's box
            assert stepper.evaluate(HIGHLIGHT_IN_VIEW), (
                f"{page}: stepper {k + 1}, step {i}: the highlighted node is "
                "scrolled out of the graph's box"
            )
        if k == steppers.count() - 1:
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            name = page.split("/")[-1]
            stepper.screenshot(
                path=str(SCREENSHOTS / f"phone_{name}_stepper.png")
            )
    cut = p.page.evaluate(CUT_OFF)
    assert not cut, f"{page} at 390 px: content cut off: {cut}"
    read = reading(p, page)
    assert not read["sentences"], (
        f"{page} at 390 px: printed sentences wider than their box:\n"
        + "\n".join(read["sentences"])
    )
    assert not read["images"], f"{page} at 390 px: figures cut: {read['images']}"
    assert not read["unlinked"], (
        f"{page}: figures without a link: {read['unlinked']}"
    )
    found = p.page.evaluate(PHONE_READING)
    assert not found, f"{page} at 390 px:\n" + "\n".join(found)
    p.assert_clean(since)
