"""A phone shows everything (issue 29): at 390 x 844, with every stepper
stepped through to its last frame, nothing in a chapter's main column is
cut off.

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
  const mark = graph.querySelector('svg polygon[fill="#ffd54f"]');
  if (!mark || graph.scrollWidth <= graph.clientWidth + 1) return true;
  const box = mark.getBoundingClientRect();
  const outer = graph.getBoundingClientRect();
  return box.right > outer.left && box.left < outer.right;
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
    p.assert_clean(since)
