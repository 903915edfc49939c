"""Collapsed blocks in the rendered book: one look for all of them.

The notebooks write explanations, hints and detours as plain HTML,
`<details class="why|hint|deeper"><summary>...</summary>` (what JupyterLab
and Colab render too); myst-nb hides an exercise's solution and a long
output behind its own toggles (book/_ext/reading.py writes them as
`<details class="hide ...">` with the same structure); a "Show the book's
version" box is a widget (widgets/reveal.py).  book/_static/book.css gives
all of them one look: a box with the theme's info-coloured edge and title
bar, closed until the summary is clicked, a chevron before the title that
turns from right to down.  Math inside is typeset by MathJax like any
other.  A detour with code is the same box: its code cells, tagged
`deeper`, sit inside the markdown box above them, with no toggle of their
own.  The demo book holds one block of each kind; chapter 1 shows an
exercise's "Why" with its formulas.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from .conftest import DEMO
from .test_fit import BLOCKS, LOOK

pytestmark = pytest.mark.browser

#: the demo's collapsed blocks: (selector, title when closed, when open)
KINDS = [
    ("details.why", "Why", "Why"),
    ("details.hint", "Hint", "Hint"),
    ("details.deeper", "Deeper: checking without a kernel", None),
    ("div.cell details.hide", "Show the solution", "Hide the solution"),
    ("div.cell details.hide", "Show code cell output", "Hide code cell output"),
    ("details.bl-reveal", "Show the book's version: tanh", None),
]
WITH_CODE = "Deeper: a detour with code"  # the demo's Deeper box with a cell


def _style(locator, prop: str, pseudo: str | None = None) -> str:
    return locator.evaluate(
        "(el, [prop, pseudo]) => getComputedStyle(el, pseudo)"
        ".getPropertyValue(prop)",
        [prop, pseudo],
    )


def _box(page, selector: str, title: str):
    """The collapsed block matching `selector` whose summary reads `title`."""
    return page.locator(f"article {selector}").filter(
        has=page.locator("> summary", has_text=title)
    )


def _look(block) -> dict:
    return block.evaluate(LOOK)


def _theme(page, var: str) -> str:
    """A theme colour variable as the browser resolves it (rgb(...))."""
    return page.evaluate(
        """v => { const e = document.createElement('span');
            e.style.color = `var(${v})`; document.body.append(e);
            const c = getComputedStyle(e).color; e.remove(); return c; }""",
        var,
    )


def _math_typeset(locator) -> bool:
    """Every formula in the element is an SVG MathJax drew, with a size."""
    return locator.evaluate(
        """el => { const m = el.querySelectorAll('.math');
            return m.length > 0 && Array.from(m).every(x => {
                const s = x.querySelector('mjx-container svg');
                return s && s.getBoundingClientRect().width > 0; }); }"""
    )


@pytest.mark.parametrize("mode", ["light", "dark"])
def test_demo_blocks_look_alike_and_open_on_a_click(demo_page, mode):
    p = demo_page(DEMO, mode=mode)
    page = p.page
    p.wait_for_math()
    p.wait_for_widgets()
    first = None
    for selector, closed, opened in KINDS:
        block = _box(page, selector, closed)
        expect(block).to_have_count(1)
        summary = block.locator("> summary")
        body = block.locator("> :not(summary)").first
        expect(summary).to_have_text(closed, use_inner_text=True)
        expect(summary).to_have_accessible_name(closed)  # the chevron is silent
        expect(body).to_be_hidden()
        look = _look(block)
        if first is None:
            first = look
        assert look == first, f"{closed!r} looks different: {look} vs {first}"
        # the theme's info colours; a chevron, pointing right
        assert _style(block, "border-left-color") == _theme(
            page, "--pst-color-info"
        )
        assert _style(summary, "background-color") == _theme(
            page, "--pst-color-info-bg"
        )
        assert "svg" in _style(summary, "mask-image", "::before")
        assert _style(summary, "transform", "::before") == "none"
        summary.click()
        expect(body).to_be_visible()
        expect(block).to_have_attribute("open", "")
        expect(summary).to_have_accessible_name(opened or closed)
        # the chevron turns down (a quarter turn), once its transition ends
        page.wait_for_function(
            "el => getComputedStyle(el, '::before').transform.startsWith("
            "'matrix(0, 1')",
            arg=summary.element_handle(),
        )
    math_boxes = [
        page.locator(f"article {s}").first
        for s in ("details.why", "details.hint", "details.deeper")
    ]
    for box in math_boxes:
        assert _math_typeset(box), "math in a collapsed block is not typeset"
    page.mouse.move(0, 0)  # no hover tint in the picture
    # the exercise: its hint, stub, "Why", solution and reveal, open
    page.locator("article details.hint").evaluate(
        "el => window.scrollTo(0, el.getBoundingClientRect().top + scrollY - 90)"
    )
    p.screenshot(f"demo_collapsed_{mode}", full_page=False)
    page.locator("article details.why > summary").click()  # closes again
    expect(page.locator("article details.why > p").first).to_be_hidden()
    p.assert_clean()


@pytest.mark.parametrize("mode", ["light", "dark"])
def test_deeper_code_cell_is_closed_in_a_deeper_box(demo_page, mode):
    """A detour's code cell (tagged `deeper`) is inside the markdown Deeper
    box above it: closed on arrival, with no toggle of its own, the box
    looking and named like a Deeper box without code."""
    p = demo_page(DEMO, mode=mode)
    page = p.page
    p.wait_for_math()
    box = _box(page, "details.deeper", WITH_CODE)
    expect(box).to_have_count(1)
    cell = box.locator("> div.cell.tag_deeper")
    expect(cell).to_have_count(1)
    expect(box).not_to_have_attribute("open", "")
    expect(cell).to_be_hidden()
    # no toggle of myst-nb's ("Show code cell source"), inside or outside
    expect(page.locator("article div.cell.tag_deeper")).to_have_count(1)
    expect(cell.locator("details, summary")).to_have_count(0)
    summary = box.locator("> summary")
    expect(summary).to_have_text(WITH_CODE)
    expect(summary).to_have_accessible_name(WITH_CODE)
    plain = _box(page, "details.deeper", "Deeper: checking without a kernel")
    assert _look(box) == _look(plain), "the two Deeper boxes look different"
    summary.click()
    expect(box).to_have_attribute("open", "")
    expect(cell.locator(".cell_input")).to_be_visible()
    expect(cell.locator(".cell_output")).to_contain_text(
        "1 + 2 + ... + 100 = 5050"
    )
    # an 82-character line, the longest a notebook holds, needs no scrolling
    source = cell.locator(".cell_input pre")
    assert source.evaluate("pre => pre.scrollWidth <= pre.clientWidth")
    # the cell inside the box is drawn within the box's edges
    inner, outer = cell.bounding_box(), box.bounding_box()
    assert outer["x"] < inner["x"]
    assert inner["x"] + inner["width"] < outer["x"] + outer["width"]
    page.mouse.move(0, 0)
    box.scroll_into_view_if_needed()
    box.screenshot(path=str(p.screenshot(f"demo_deeper_code_{mode}", False)))
    summary.click()
    expect(cell).to_be_hidden()
    p.assert_clean()


def test_summary_is_a_keyboard_control(demo_page):
    p = demo_page(DEMO)
    summary = p.page.locator(f"{BLOCKS}.hint > summary")
    summary.focus()
    p.page.keyboard.press("Enter")
    expect(p.page.locator(f"{BLOCKS}.hint > p").first).to_be_visible()
    # the focus ring is the theme's accent outline, not clipped by the box
    assert _style(summary, "outline-style") == "solid"
    p.page.keyboard.press("Space")
    expect(p.page.locator(f"{BLOCKS}.hint > p").first).to_be_hidden()
    # a Deeper box with code opens from the keyboard too
    box = _box(p.page, "details.deeper", WITH_CODE)
    box.locator("> summary").focus()
    p.page.keyboard.press("Enter")
    expect(box.locator("> div.cell .cell_input")).to_be_visible()


def test_chapter_why_opens_with_its_formulas(book_page):
    p = book_page("notebooks/01_value_nodes.html")
    p.wait_for_math()
    whys = p.page.locator(f"{BLOCKS}.why")
    assert whys.count() >= 3
    first = whys.first
    expect(first.locator("> p").first).to_be_hidden()
    first.locator("> summary").click()
    expect(first.locator("> p").first).to_be_visible()
    assert _math_typeset(first)
    p.page.mouse.move(0, 0)
    first.scroll_into_view_if_needed()
    first.screenshot(path=str(p.screenshot("chapter1_why_open", full_page=False)))
    p.assert_clean()
