"""WCAG 2 A/AA on every page, in light and in dark mode (axe-core).

axe-core comes bundled in the `axe-playwright-python` package and is
injected into the page by Playwright (no network).  A page passes when axe
reports no *serious* or *critical* violation of the WCAG 2.0/2.1 A and AA
rules, after MathJax and every widget have rendered.  The colour scheme is
set both ways a reader sets it: the system preference and the theme's
stored switch.

axe's colour-contrast rule spends most of its time on the thousands of
highlighted tokens in the code cells, which all take their colours from one
Pygments style per mode.  So every token colour of both styles is checked
against its background once, from the built `pygments.css`
(`test_every_code_token_has_aa_contrast`), axe checks the code cells as
rendered on one chapter in both modes (FULL_PAGE), and on the other pages it
checks everything except the highlighted code blocks.

Only colours change between the modes (the theme switches CSS variables on
<html>), and a colour belongs to a component (prose, formulas, tables,
figures, printed output, the collapsed boxes, exercises, steppers and
self-checks), never to a chapter: every chapter is built from the same
components, and the demo page holds one of each.  So the rules that read
colours (COLOUR_RULES, most of axe's time on a long page) run on the demo
page and on FULL_PAGE (a whole chapter, its code and tables too) in both
modes, and on the book's other pages (the introduction, the references,
the instructors' page: components of their own) in both modes; the other
chapters get every other rule in light mode.  That a chapter has no colour
of its own is checked, not assumed: a chapter whose HTML declares a colour
that neither the demo page nor FULL_PAGE declares (`own_colours`: inline
styles, a widget's CSS) gets the colour rules in both modes as well.
Checking every chapter's colours in light mode too cost about 20
CPU-seconds more of axe in every make test (this file alone: 209 against
190 CPU-seconds), and in dark mode more again, for no colour it does not
already see.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

import pytest
from axe_playwright_python.sync_playwright import Axe

from .conftest import DEMO, HTML, SERVED
from .pages import CHAPTERS, PAGES

pytestmark = pytest.mark.browser

AXE = Axe()
OPTIONS = {
    "runOnly": {
        "type": "tag",
        "values": ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"],
    },
    "resultTypes": ["violations"],
}
#: The WCAG A/AA rules whose outcome depends on the colours.
COLOUR_RULES = {
    "runOnly": {
        "type": "rule",
        "values": ["color-contrast", "link-in-text-block"],
    },
    "resultTypes": ["violations"],
}
#: OPTIONS' rules but COLOUR_RULES'
NO_COLOUR = {
    **OPTIONS,
    "rules": {
        rule: {"enabled": False} for rule in COLOUR_RULES["runOnly"]["values"]
    },
}
BLOCKING = {"serious", "critical"}
FULL_PAGE = "notebooks/01_value_nodes"  # axe on its code blocks too
CODE = ".highlight"  # Pygments' blocks; their colours: the static test below
AA_TEXT = 4.5  # WCAG 2 AA contrast for normal text


def _violations(p, exclude_code: bool = False, options=OPTIONS) -> list[dict]:
    p.wait_for_math()
    p.wait_for_widgets()
    context = {"exclude": [[CODE]]} if exclude_code else None
    results = AXE.run(p.page, context=context, options=options).response
    return [v for v in results["violations"] if v["impact"] in BLOCKING]


def _describe(violations: list[dict]) -> str:
    lines = []
    for v in violations:
        lines.append(
            f"{v['id']} ({v['impact']}): {len(v['nodes'])} elements - {v['help']}"
        )
        for node in v["nodes"][:4]:
            detail = ""
            data = (node.get("any") or [{}])[0].get("data") or {}
            if isinstance(data, dict) and "contrastRatio" in data:
                detail = (
                    f" [{data['fgColor']} on {data['bgColor']}: "
                    f"{data['contrastRatio']}:1]"
                )
            lines.append(f"    {' '.join(node['target'])}{detail}")
    return "\n".join(lines)


#: (page, mode) pairs: every page in light mode; in dark mode FULL_PAGE and
#: the pages that are not chapters (see the module docstring)
CHECKED = [(page, "light") for page in PAGES] + [
    (page, "dark") for page in PAGES if page == FULL_PAGE or page not in CHAPTERS
]
#: A colour declaration in a page's HTML: an inline style, a widget's CSS
#: or SVG (property, value)
DECLARED = re.compile(
    r"(?<![\w-])(color|background(?:-color)?|border(?:-\w+)?-color|fill|stroke)"
    r"\s*:\s*([^;\"\\}<>]+)",
    re.IGNORECASE,
)


@functools.cache
def colours(html: Path) -> frozenset[tuple[str, str]]:
    """The colour declarations in a built page's HTML."""
    return frozenset(
        (name.lower(), value.strip().lower())
        for name, value in DECLARED.findall(html.read_text(encoding="utf-8"))
    )


def own_colours(html: Path, demo_html: Path) -> set[tuple[str, str]]:
    """The colours the page `html` declares that neither the demo page nor
    FULL_PAGE declares: a component the colour checks elsewhere miss."""
    return set(
        colours(html) - colours(demo_html) - colours(HTML / f"{FULL_PAGE}.html")
    )


def test_own_colours_finds_a_colour_no_component_has(tmp_path, demo_book):
    full_page = HTML / f"{FULL_PAGE}.html"
    demo_html = SERVED[demo_book] / DEMO
    assert colours(full_page) and colours(demo_html)
    assert not own_colours(full_page, demo_html)
    odd = tmp_path / "odd.html"
    odd.write_text(
        full_page.read_text(encoding="utf-8")
        + '<span style="color: #abcdef; background:#123456">x</span>'
    )
    assert own_colours(odd, demo_html) == {
        ("color", "#abcdef"),
        ("background", "#123456"),
    }


@pytest.mark.parametrize(("page", "mode"), CHECKED)
def test_page_has_no_serious_accessibility_violations(
    shared_page, demo_book, page, mode
):
    p = shared_page(page + ".html", mode=mode)
    assert p.page.evaluate("document.documentElement.dataset.theme") == mode
    if page not in CHAPTERS or page == FULL_PAGE:
        every_rule = mode == "light" or page == FULL_PAGE
        found = _violations(
            p,
            exclude_code=page != FULL_PAGE,
            options=OPTIONS if every_rule else COLOUR_RULES,
        )
    else:  # light mode; its colours are checked on the demo page and FULL_PAGE
        found = _violations(p, exclude_code=True, options=NO_COLOUR)
        if own_colours(HTML / f"{page}.html", SERVED[demo_book] / DEMO):
            # a colour no component elsewhere has: checked here, both modes
            for colours_mode in ("light", "dark"):
                p = shared_page(page + ".html", mode=colours_mode)
                found += _violations(p, exclude_code=True, options=COLOUR_RULES)
            shared_page(page + ".html", mode="light")  # as it was given
    assert not found, f"{page} ({mode} mode):\n{_describe(found)}"


@pytest.mark.parametrize("mode", ["light", "dark"])
def test_demo_page_has_no_serious_accessibility_violations(demo_page, mode):
    """Self-checks (with a verdict showing), a hidden solution and the
    collapsed blocks (one open), both modes."""
    p = demo_page(DEMO, mode=mode)
    p.wait_for_widgets()
    number = p.page.locator(".bl-check").first
    number.locator("input").fill("5")
    number.locator("input").press("Enter")
    choice = p.page.locator(".bl-check").nth(1)
    choice.locator("input[type=radio]").nth(1).check()
    choice.locator("button.bl-check-submit").click()
    p.page.wait_for_function(
        "document.querySelectorAll('.bl-check[data-status]').length === 2"
    )
    # one collapsed block (a hint) open, the others closed: both states
    p.page.locator("article details.hint > summary").click()
    found = _violations(p)
    assert not found, f"demo ({mode} mode):\n{_describe(found)}"


def test_default_mode_follows_the_system_colour_scheme(book_page):
    """With no stored choice, the book follows the reader's system setting."""
    for scheme in ("light", "dark"):
        page = book_page("book/intro.html", system=scheme).page
        assert page.evaluate("document.documentElement.dataset.mode") == "auto"
        assert page.evaluate("document.documentElement.dataset.theme") == scheme


def _luminance(hex_colour: str) -> float:
    """WCAG 2 relative luminance of a #rrggbb colour."""
    channels = [int(hex_colour[i : i + 2], 16) / 255 for i in (1, 3, 5)]
    linear = [
        c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4
        for c in channels
    ]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast(a: str, b: str) -> float:
    hi, lo = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


@pytest.mark.parametrize("mode", ["light", "dark"])
def test_every_code_token_has_aa_contrast(mode):
    """Every token colour of the mode's Pygments style against its
    background, as the built pygments.css sets them."""
    css = (HTML / "_static" / "pygments.css").read_text()
    scope = re.escape(f'html[data-theme="{mode}"] .highlight')
    background = re.search(
        scope + r" \{ background: (#[0-9a-fA-F]{6})", css
    ).group(1)
    tokens = re.findall(scope + r" (\.[\w]+) \{ color: (#[0-9a-fA-F]{6})", css)
    assert len(tokens) > 50, "pygments.css has fewer token rules than a style"
    low = [
        f"{name} {colour}: {contrast(colour, background):.2f}:1"
        for name, colour in tokens
        if contrast(colour, background) < AA_TEXT
    ]
    assert not low, f"{mode} code tokens under {AA_TEXT}:1 on {background}: {low}"
