"""Collapsed explanations, hints and detours in the rendered book.

The notebooks write them as plain HTML, `<details class="why|hint|deeper">
<summary>...</summary>` (what JupyterLab and Colab render too);
book/_static/book.css draws them as the theme's dropdown admonitions: the
admonition box and title bar in the theme's info colours, closed until the
summary is clicked, "Click to show" / "Click to hide" beside a chevron.
Math inside is typeset by MathJax like any other.  A detour with code is
the same box: its code cells, tagged `deeper`, sit inside the markdown box
above them (book/_ext/reading.py), with no toggle of their own.  The demo
book holds one of each kind, and a Deeper box with a code cell; chapter 1
shows an exercise's "Why" with its formulas.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from .conftest import DEMO

pytestmark = pytest.mark.browser

KINDS = {
    "why": "Why",
    "hint": "Hint",
    "deeper": "Deeper: checking without a kernel",
}
WITH_CODE = "Deeper: a detour with code"  # the demo's Deeper box with a cell
BLOCKS = "article details:is(.why, .hint, .deeper)"
#: what makes a closed box look as it does: the same for every Deeper box
LOOK = (
    [
        (None, p, None)
        for p in (
            "border-left-color",
            "border-left-width",
            "border-radius",
            "background-color",
            "box-shadow",
            "padding-left",
            "margin-top",
            "margin-bottom",
            "width",
        )
    ]
    + [
        ("> summary", p, pseudo)
        for p, pseudo in (
            ("background-color", None),
            ("color", None),
            ("font-weight", None),
            ("font-size", None),
            ("padding-left", None),
            ("padding-top", None),
            ("height", None),
            ("cursor", None),
            ("font-family", "::before"),
            ("content", "::before"),
            ("mask-image", "::after"),
        )
    ]
    + [(None, "content", "::before")]
)  # "Click to show"


def _style(locator, prop: str, pseudo: str | None = None) -> str:
    return locator.evaluate(
        "(el, [prop, pseudo]) => getComputedStyle(el, pseudo)"
        ".getPropertyValue(prop)",
        [prop, pseudo],
    )


def _box(page, cls: str, title: str):
    """The collapsed block of class `cls` whose summary reads `title`."""
    return page.locator(f"article details.{cls}").filter(
        has=page.locator("> summary", has_text=title)
    )


def _look(block) -> dict:
    return {
        (part, prop, pseudo): _style(
            block.locator(part) if part else block, prop, pseudo
        )
        for part, prop, pseudo in LOOK
    }


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
def test_demo_blocks_are_closed_dropdowns_that_open_on_a_click(demo_page, mode):
    p = demo_page(DEMO, mode=mode)
    page = p.page
    p.wait_for_math()
    for cls, title in KINDS.items():
        block = _box(page, cls, title)
        expect(block).to_have_count(1)
        summary = block.locator("> summary")
        body = block.locator("> :not(summary)").first
        expect(summary).to_have_text(title)
        expect(summary).to_have_accessible_name(title)  # decorations are silent
        expect(body).to_be_hidden()
        assert "Click to show" in _style(block, "content", "::before")
        # the theme's admonition: info-coloured edge, title bar and bell
        assert _style(block, "border-left-color") == _theme(
            page, "--pst-color-info"
        )
        assert _style(summary, "background-color") == _theme(
            page, "--pst-color-info-bg"
        )
        assert _style(summary, "font-family", "::before").startswith(
            '"Font Awesome'
        )
        summary.click()
        expect(body).to_be_visible()
        expect(block).to_have_attribute("open", "")
        assert "Click to hide" in _style(block, "content", "::before")
        assert _math_typeset(block), f"{cls}: math in the block is not typeset"
    page.mouse.move(0, 0)  # no hover tint in the picture
    # the exercise: its hint, stub and "Why", open, below the sticky header
    page.locator(f"{BLOCKS}.hint").evaluate(
        "el => window.scrollTo(0, el.getBoundingClientRect().top + scrollY - 140)"
    )
    p.screenshot(f"demo_collapsed_{mode}", full_page=False)
    page.locator(f"{BLOCKS}.why > summary").click()  # closes again
    expect(page.locator(f"{BLOCKS}.why > p").first).to_be_hidden()
    p.assert_clean()


@pytest.mark.parametrize("mode", ["light", "dark"])
def test_deeper_code_cell_is_closed_in_a_deeper_box(demo_page, mode):
    """A detour's code cell (tagged `deeper`) is inside the markdown Deeper
    box above it: closed on arrival, with no toggle of its own, the box
    looking and named like a Deeper box without code."""
    p = demo_page(DEMO, mode=mode)
    page = p.page
    p.wait_for_math()
    box = _box(page, "deeper", WITH_CODE)
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
    plain = _box(page, "deeper", KINDS["deeper"])
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
    assert "Click to hide" in _style(box, "content", "::before")
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
    box = _box(p.page, "deeper", WITH_CODE)
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
