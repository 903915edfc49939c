"""Exercises a reader can attempt before seeing the answer (CONTRIBUTING.md).

On a page as it loads, no solution code and no "Exercise N: correct"
verdict may be visible: each exercise's stub prints "not attempted yet",
and its solution sits in a cell tagged `solution`, collapsed until the
reader clicks "Show the solution" (book/_ext/reading.py).  After the click
the solution's code is there, ending in the `assert_correct` that proves it
quietly (no verdict printed).  The demo book proves the
mechanism; chapters not yet converted are pending in pages.py.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from .conftest import DEMO
from .pages import chapter_params

pytestmark = pytest.mark.browser

VERDICT = re.compile(r"Exercise\s+\d+\s*:\s*correct", re.IGNORECASE)
NOT_ATTEMPTED = re.compile(r"not attempted yet", re.IGNORECASE)
SOLUTION_CELLS = "article div.cell.tag_solution"
# Collapsible prose: the notebooks' <details class="why|hint|deeper"> (and, on
# MyST pages, a dropdown admonition or a `{dropdown}`).
DROPDOWN_BODIES = (
    "article details:is(.why, .hint, .deeper) > :not(summary), "
    "article .admonition.dropdown > :not(.admonition-title), "
    "article details.sd-dropdown > :not(summary)"
)


def _visible_outputs(page) -> str:
    """The text of every cell output and widget the reader can see now.

    (Code is left out: a check's source may spell its verdicts.  An element
    inside a closed <details> is not rendered, so it is skipped here; its
    innerText alone would be its full text.)"""
    return page.evaluate("""() => Array.from(
            document.querySelectorAll('article .cell_output'))
        .filter((el) => el.checkVisibility())
        .map((el) => el.innerText).join('\\n')""")


def _exercise_count(page) -> int:
    titles = page.locator("article h3").all_inner_texts()
    return sum(bool(re.match(r"\s*Exercise\s+\d+", t)) for t in titles)


def _check_page(p, name: str) -> None:
    page = p.page
    exercises = _exercise_count(page)
    assert exercises >= 1, f"{name}: no '### Exercise N' headings"
    text = _visible_outputs(page)
    shown = VERDICT.findall(text)
    assert not shown, f"{name}: a verdict is visible before any click: {shown}"
    stubs = len(NOT_ATTEMPTED.findall(text))
    assert stubs >= exercises, (
        f"{name}: {exercises} exercises but {stubs} 'not attempted yet' outputs "
        "from their stubs"
    )
    solutions = page.locator(SOLUTION_CELLS)
    assert solutions.count() >= exercises, (
        f"{name}: {exercises} exercises but {solutions.count()} cells tagged "
        "'solution'"
    )

    # Visible as Playwright's expect() means it (a box with a size, not
    # visibility: hidden), in one query: a locator per body re-ran its
    # selector over the whole page, tens of thousands of MathJax nodes, and
    # took 4 CPU-seconds on chapter 4.
    open_bodies = page.evaluate(
        """(selector) => Array.from(document.querySelectorAll(selector))
            .filter((el) => {
              const box = el.getBoundingClientRect();
              return box.width > 0 && box.height > 0 &&
                el.checkVisibility({checkVisibilityCSS: true});
            })
            .map((el) => el.innerText.slice(0, 60))""",
        DROPDOWN_BODIES,
    )
    assert not open_bodies, f"{name}: collapsed text in view: {open_bodies}"
    for k in range(solutions.count()):
        cell = solutions.nth(k)
        code = cell.locator(".cell_input")
        expect(code).to_be_hidden()
        expect(cell.locator(".cell_output")).to_be_hidden()
        summary = cell.locator("details > summary")
        expect(summary).to_have_text(re.compile(r"Show the solution"))
        summary.click()
        expect(code).to_be_visible()
        # the Colab form title is Colab's: the book drops it
        assert "@title" not in code.inner_text(), f"{name}: solution {k}"
        # it proves itself quietly (assert_correct): no verdict under it
        assert "assert_correct(" in code.inner_text(), f"{name}: solution {k}"
        assert not VERDICT.findall(cell.inner_text()), f"{name}: solution {k}"
    _check_reveal_boxes(p, name)


def _check_reveal_boxes(p, name: str) -> None:
    """Each "Show the book's version" box is closed, its code out of view,
    until it is clicked; then the code is there."""
    p.wait_for_widgets()
    boxes = p.page.locator("article details.bl-reveal")
    for k in range(boxes.count()):
        box = boxes.nth(k)
        body = box.locator(".bl-reveal-body")
        expect(body).to_be_hidden()
        summary = box.locator("> summary")
        expect(summary).to_have_text(re.compile(r"^Show the book's version: \w+"))
        summary.click()
        expect(body).to_be_visible()
        expect(body).to_contain_text(re.compile(r"(def|class) \w+[(:]"))


def test_demo_exercise_is_hidden_until_clicked(demo_page):
    p = demo_page(DEMO)
    _check_page(p, "demo")
    expect(p.page.locator("article details.bl-reveal")).to_have_count(1)
    p.page.locator(SOLUTION_CELLS).first.screenshot(
        path=str(p.screenshot("demo_exercise_open", full_page=False))
    )
    p.assert_clean()


def test_demo_solution_summary_is_a_keyboard_control(demo_page):
    p = demo_page(DEMO)
    summary = p.page.locator(f"{SOLUTION_CELLS} details > summary").first
    summary.focus()
    p.page.keyboard.press("Enter")
    expect(p.page.locator(f"{SOLUTION_CELLS} .cell_input").first).to_be_visible()
    name = summary.evaluate("el => el.getAttribute('aria-label') || el.innerText")
    assert "Hide the solution" in name  # its name is what it does


@pytest.mark.clicks
@pytest.mark.parametrize("page", chapter_params("exercises"))
def test_chapter_exercises_hidden_until_clicked(shared_page, page):
    _check_page(shared_page(page + ".html"), page)
