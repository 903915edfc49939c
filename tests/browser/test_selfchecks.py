"""Kernel-free self-checks (NumberCheck, ChoiceCheck) on the rendered page.

Every self-check a page holds is driven from what its own state says: a
wrong answer must produce a "Not right yet" verdict, the right answer a
"Correct" one, announced in a live region, with no kernel and no network.
The demo book proves the mechanism; each chapter must hold at least two
(chapters still without them are pending in pages.py).
"""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from backprop_lessons.widgets import ChoiceCheck, NumberCheck
from backprop_lessons.widgets.selfcheck import SelfCheck

from .conftest import DEMO, VIEW
from .pages import chapter_params

pytestmark = pytest.mark.browser

MIN_PER_CHAPTER = 2

# The state of every self-check view on the page, in document order (the
# widget manager renders each view right after its script tag, so the i-th
# entry belongs to the i-th `.bl-check` element).
_STATES = f"""() => {{
  const tag = document.querySelector(
    'script[type="application/vnd.jupyter.widget-state+json"]');
  if (!tag) return [];
  const models = JSON.parse(tag.textContent).state;
  return Array.from(document.querySelectorAll('{VIEW}'))
    .map((s) => models[JSON.parse(s.textContent).model_id])
    .filter((m) => m && typeof m.state._esm === 'string'
                   && m.state._esm.includes('bl-check'))
    .map((m) => m.state);
}}"""


def _wrong_number(state: dict) -> float:
    """A number the check must reject: far from the answer and from its
    negative."""
    a = state["answer"]
    allowed = max(state["tolerance"], state["rel_tolerance"] * abs(a))
    return a + 10 * allowed + 1 + 2 * abs(a)


def _drive(check, state: dict) -> None:
    """Answer wrong, then right, as a reader would; check each verdict."""
    verdict = check.locator(".bl-check-verdict")
    assert verdict.get_attribute("aria-live") == "polite"
    expect(verdict).to_have_text("")  # nothing is said before an answer
    if state["kind"] == "number":
        field = check.locator("input.bl-check-input")
        assert (
            check.evaluate("el => el.querySelector('input').labels.length") == 1
        ), "the answer box has no label"
        field.fill(repr(_wrong_number(state)))
        field.press("Enter")  # the keyboard submits
        expect(verdict).to_contain_text("Not right yet")
        expect(check.locator(".bl-check-reveal")).to_be_visible()
        field.fill(repr(state["answer"]))
        field.press("Enter")
    else:
        wrong = 0 if state["answer"] != 0 else 1
        check.locator("input[type=radio]").nth(wrong).check()
        check.locator("button.bl-check-submit").click()
        expect(verdict).to_contain_text("Not right yet")
        check.locator("input[type=radio]").nth(state["answer"]).check()
        check.locator("button.bl-check-submit").click()
    expect(verdict).to_contain_text("Correct")


def _selfchecks(p) -> tuple[list[dict], object]:
    p.wait_for_widgets()
    states = p.page.evaluate(_STATES)
    checks = p.page.locator(".bl-check")
    # one rendered check per view: none missing, none rendered twice
    expect(checks).to_have_count(len(states))
    return states, checks


def test_demo_selfchecks_respond_without_a_kernel(demo_page):
    p = demo_page(DEMO)
    states, checks = _selfchecks(p)
    assert [s["kind"] for s in states] == ["number", "choice"]
    for k, state in enumerate(states):
        _drive(checks.nth(k), state)
    checks.first.screenshot(
        path=str(
            p.screenshot("demo_selfchecks", full_page=False).parent
            / "demo_selfcheck_number.png"
        )
    )
    p.assert_clean()


def test_demo_selfcheck_sign_hint_and_reveal(demo_page):
    """A right size with the wrong sign gets its own verdict; the answer can be
    shown."""
    p = demo_page(DEMO)
    states, checks = _selfchecks(p)
    number = checks.nth(0)
    field = number.locator("input.bl-check-input")
    field.fill(str(-states[0]["answer"]))
    number.locator("button.bl-check-submit").click()
    expect(number.locator(".bl-check-verdict")).to_contain_text("the sign is not")
    field.fill("three")
    field.press("Enter")
    expect(number.locator(".bl-check-verdict")).to_contain_text("not a number")
    field.fill("")  # editing clears the old verdict
    expect(number.locator(".bl-check-verdict")).to_have_text("")
    reveal = number.locator(".bl-check-reveal")
    expect(reveal).to_be_visible()  # offered after the first wrong answer
    reveal.click()
    expect(number.locator(".bl-check-answer")).to_contain_text("Answer: -3")


def test_demo_selfcheck_explains_once(demo_page):
    """After "Show the answer" the explanation is in view; a right answer
    then gets its verdict without the explanation a second time."""
    p = demo_page(DEMO)
    states, checks = _selfchecks(p)
    number, state = checks.nth(0), states[0]
    field = number.locator("input.bl-check-input")
    field.fill(repr(_wrong_number(state)))
    field.press("Enter")
    number.locator(".bl-check-reveal").click()
    answer = number.locator(".bl-check-answer")
    expect(answer).to_contain_text(state["explanation"][:40])
    field.fill(repr(state["answer"]))
    field.press("Enter")
    verdict = number.locator(".bl-check-verdict")
    expect(verdict).to_have_text("Correct.")
    text = number.inner_text()
    assert text.count(state["explanation"][:40]) == 1, text
    # without the answer shown, a right answer explains itself
    choice, state = checks.nth(1), states[1]
    choice.locator("input[type=radio]").nth(state["answer"]).check()
    choice.locator("button.bl-check-submit").click()
    expect(choice.locator(".bl-check-verdict")).to_contain_text(
        state["explanation"][:40]
    )


@pytest.mark.parametrize("mode", ["light", "dark"])
def test_demo_selfchecks_in_both_colour_modes(demo_page, mode):
    """The card follows the page: dark text on light, light text on dark."""
    p = demo_page(DEMO, mode=mode)
    _selfchecks(p)
    colours = p.page.evaluate("""() => {
        const card = getComputedStyle(document.querySelector('.bl-check'));
        return [card.color, card.backgroundColor]; }""")
    ink, paper = (_luminance(c) for c in colours)
    assert (ink < paper) == (mode == "light"), (
        f"{mode} mode: text {colours[0]} on {colours[1]}"
    )
    p.page.locator(".bl-check").first.screenshot(
        path=str(
            p.screenshot(f"demo_{mode}", full_page=False).parent
            / f"demo_selfcheck_{mode}.png"
        )
    )


def _luminance(css_rgb: str) -> float:
    r, g, b = (
        int(v)
        for v in css_rgb[css_rgb.index("(") + 1 : css_rgb.index(")")].split(",")[
            :3
        ]
    )
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


@pytest.mark.clicks
@pytest.mark.parametrize("page", chapter_params("selfchecks"))
def test_chapter_selfchecks(shared_page, page):
    """At least two self-checks per chapter, each answering wrong and right
    answers."""
    p = shared_page(page + ".html")
    states, checks = _selfchecks(p)
    assert len(states) >= MIN_PER_CHAPTER, (
        f"{page}: {len(states)} self-checks, expected at least {MIN_PER_CHAPTER}"
    )
    for k, state in enumerate(states):
        checks.nth(k).scroll_into_view_if_needed()
        _drive(checks.nth(k), state)
    p.assert_clean()


# ---- the browser's rule is the Python rule -------------------------------------

NUMBER_CASES = [
    (
        NumberCheck("q", -3, hint="h", explanation="e"),
        [
            "-3",
            "\u22123",
            "3",
            "-3.0",
            "-3.0000000001",
            " - 3 ",
            "-6/2",
            "6/-2",
            "-3e0",
            "",
            "   ",
            "abc",
            "1/0",
            "0/0",
            "1e400",
            "--3",
            "-3.",
            "-.3e1",
            "3 0",
            "1,000",
        ],
    ),
    (
        NumberCheck("q", 0.7071, tolerance=5e-5),
        [
            "0.7071",
            ".70712",
            "0.70716",
            "0.7070",
            "7071e-4",
            "0,7071",
            "-0.7071",
            "1/1.41421356",
        ],
    ),
    (
        NumberCheck("q", 0, tolerance=1e-9),
        ["0", "-0", "1e-10", "1e-8", "0.0", "+0"],
    ),
    (
        NumberCheck("q", 1_500_000, rel_tolerance=1e-3),
        [
            "1500000",
            "1,500,000",
            "1.5e6",
            "1,501,000",
            "1,502,000",
            "15,00,000",
            "1 500 000",
        ],
    ),
    (
        NumberCheck("q", 0.25),
        ["1/4", "2/8", "0.25", ".25", "1/4/1", "1//4", "/4", "25%"],
    ),
]
CHOICE_CASES = [
    (
        ChoiceCheck(
            "q", ["a", "b", "c"], answer=1, hints={0: "not a"}, hint="generic"
        ),
        ["0", "1", "2", "", "1.0", " 2 ", "x", "-1", "3"],
    ),
    (
        ChoiceCheck("q", ["a", "b"], answer=0, explanation="because"),
        ["0", "1", "-0", "0.5"],
    ),
]


def test_browser_judge_agrees_with_python_check(demo_page):
    """selfcheck.js's `judge` and SelfCheck.check give the same verdict to every
    answer."""
    p = demo_page(DEMO)
    cases = [
        (w.get_state(), inputs, [tuple(w.check(x)) for x in inputs])
        for w, inputs in NUMBER_CASES + CHOICE_CASES
    ]
    browser_verdicts = p.page.evaluate(
        """async ([esm, cases]) => {
            const url = URL.createObjectURL(
                new Blob([esm], {type: 'text/javascript'}));
            const mod = await import(url);
            return cases.map(([state, inputs]) => inputs.map((x) => {
                const v = mod.judge(state, x);
                return [v.status, v.message, v.detail];
            }));
        }""",
        [
            SelfCheck._esm,
            [[_jsonable(state), inputs] for state, inputs, _ in cases],
        ],
    )
    for (state, inputs, python), browser in zip(
        cases, browser_verdicts, strict=True
    ):
        for x, want, got in zip(inputs, python, browser, strict=True):
            assert tuple(got) == want, (
                f"answer {x!r} to {state['kind']} check: "
                f"browser says {got}, Python says {want}"
            )


def _jsonable(state: dict) -> dict:
    return {k: v for k, v in state.items() if k != "layout" and _is_json(v)}


def _is_json(value) -> bool:
    try:
        json.dumps(value)
    except TypeError:
        return False
    return True
