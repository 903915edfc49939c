"""Chapter 2's steppers on the rendered page: no kernel, no network.

Every frame is in the widget state stored in the notebook; the page's widget
manager and anywidget's front end (vendored) must render each stepper once
and step through the frames on clicks alone.  Every wait is on a state
(Playwright's `expect` retries until it holds or times out), never a fixed
time.
"""

import re

import pytest
from playwright.sync_api import expect

from backprop_lessons.viz.plots import MIN_TEXT_PX

pytestmark = pytest.mark.browser

PAGE = "notebooks/02_topological_sort.html"
# topo sort, backward (relu example), backward + topo sort (neuron), and
# backward one += at a time (a value used twice)
EXPECTED_STEPPERS = 5


def _state(stepper):
    """What the reader sees: step index, highlighted (yellow) node, shown
    gradients."""
    return {
        "index": stepper.get_attribute("data-index"),
        "caption": stepper.locator(".bl-stepper-caption").inner_text(),
        "graph": stepper.locator(".bl-stepper-graph svg").inner_html(),
        "info": stepper.locator(".bl-stepper-info").inner_text(),
    }


def _highlighted(stepper):
    """Text of the value boxes drawn in the highlight colour."""
    return stepper.evaluate(
        """el => Array.from(el.querySelectorAll(
            '.bl-stepper-graph svg polygon[fill="#ffd54f"]'))
        .map(p => Array.from(p.parentNode.querySelectorAll('text'))
            .map(t => t.textContent).join(' '))"""
    )


def test_steppers_render_once_and_step_without_a_kernel(book_page):
    bp = book_page(PAGE)
    page = bp.page
    bp.wait_for_widgets()  # every view on the page has rendered
    steppers = page.locator(".bl-stepper")
    expect(steppers).to_have_count(EXPECTED_STEPPERS)
    # exactly one stepper per widget output: no view rendered twice
    outputs = page.locator(".cell_output:has(.bl-stepper)")
    assert outputs.count() == EXPECTED_STEPPERS
    for k in range(outputs.count()):
        assert outputs.nth(k).locator(".bl-stepper").count() == 1

    backward = page.locator(".bl-stepper").nth(
        1
    )  # BackwardStepper on relu(a*b + d)
    backward.scroll_into_view_if_needed()
    assert "Backward pass" in backward.locator(".bl-stepper-title").inner_text()
    start = _state(backward)
    assert start["index"] == "0"
    next_button = backward.locator("button[data-action=next]")
    prev_button = backward.locator("button[data-action=prev]")
    for _ in range(3):
        next_button.click()
    expect(backward).to_have_attribute("data-index", "3")
    assert _highlighted(backward) and "e" in _highlighted(backward)[0]
    next_button.click()
    expect(backward).to_have_attribute("data-index", "4")
    at4 = _state(backward)
    assert (
        _highlighted(backward) != [] and _highlighted(backward)[0] != "e"
    )  # moved to d
    next_button.click()  # c = a * b pushes -3 and 2
    expect(backward).to_have_attribute("data-index", "5")
    at5 = _state(backward)
    assert _highlighted(backward)[0].startswith("c")
    assert "grad -3.0000" in at5["graph"] and "grad -3.0000" not in at4["graph"]
    assert at5["info"] != at4["info"]
    bp.screenshot("chapter2_backward_step5", full_page=False)
    backward.screenshot(
        path=str(
            bp.screenshot("chapter2_page", full_page=False).parent
            / "chapter2_backward_stepper.png"
        )
    )

    prev_button.click()  # previous undoes the step
    expect(backward).to_have_attribute("data-index", "4")
    assert _state(backward) == at4

    slider = backward.locator("input[type=range]")
    slider.focus()
    page.keyboard.press("End")  # the slider jumps to the last step
    expect(backward).to_have_attribute("data-index", "7")
    assert "complete" in _state(backward)["caption"]
    assert backward.locator("button[data-action=next]").is_disabled()
    box = (
        slider.bounding_box()
    )  # a click at the slider's middle jumps to a middle step
    page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    expect(backward).to_have_attribute("data-index", re.compile(r"^[2-5]$"))
    backward.locator("button[data-action=reset]").click()
    expect(backward).to_have_attribute("data-index", "0")

    # Play advances on its own (one frame per 1200 ms interval): wait for the
    # state, with room for a slow machine, not for a fixed time.
    play = backward.locator("button[data-action=play]")
    play.click()
    expect(play).to_have_attribute("aria-pressed", "true")
    expect(backward).to_have_attribute("data-index", re.compile(r"^[1-7]$"))
    play.click()  # pause
    expect(play).to_have_attribute("aria-pressed", "false")
    expect(play).to_have_text("Play")

    # a value used twice: its gradient grows in two += steps, 0 -> 1 -> 7,
    # and it waits (not complete) in between
    twice = page.locator(".bl-stepper").nth(4)
    twice.scroll_into_view_if_needed()
    expect(twice.locator(".bl-stepper-title")).to_have_text(
        "Backward pass, one += at a time"
    )
    twice_next = twice.locator("button[data-action=next]")
    for _ in range(2):
        twice_next.click()
    expect(twice).to_have_attribute("data-index", "2")
    expect(twice.locator(".bl-stepper-caption")).to_contain_text(
        "a has 1 of its 2 contributions: not complete"
    )
    expect(twice.locator(".bl-table")).to_contain_text("0 → 1")
    twice_next.click()
    twice_next.click()
    expect(twice).to_have_attribute("data-index", "4")
    expect(twice.locator(".bl-table")).to_contain_text("1 → 7")
    expect(twice.locator(".bl-stepper-caption")).to_contain_text(
        "a has both of its contributions: complete"
    )
    twice.screenshot(
        path=str(
            bp.screenshot("chapter2_page", full_page=False).parent
            / "chapter2_used_twice_stepper.png"
        )
    )

    topo = page.locator(".bl-stepper").first
    topo.scroll_into_view_if_needed()
    topo.locator("button[data-action=next]").click()
    topo.locator("button[data-action=next]").click()
    expect(topo).to_have_attribute("data-index", "2")
    expect(topo.locator(".bl-stepper-caption")).to_contain_text("visit e")
    expect(topo.locator(".bl-stepper-info")).to_contain_text(
        "emit e"
    )  # the stack grew
    topo.screenshot(
        path=str(
            bp.screenshot("chapter2_page", full_page=False).parent
            / "chapter2_toposort_stepper.png"
        )
    )
    bp.assert_clean()


def test_stepper_text_is_at_least_11_px_at_1280(book_page):
    """The page fits each stepper's drawing to the text column only down to
    the width at which its smallest text is 11 CSS px; wider graphs scroll."""
    bp = book_page(PAGE)
    bp.wait_for_widgets()
    smallest = bp.page.evaluate(
        """() => Array.from(document.querySelectorAll('.bl-stepper-graph svg'))
        .map(svg => {
            const scale = svg.getBoundingClientRect().width
                / svg.viewBox.baseVal.width;
            return Math.min(...Array.from(svg.querySelectorAll('text[font-size]'))
                .map(t => parseFloat(t.getAttribute('font-size')) * scale));
        })"""
    )
    assert len(smallest) == EXPECTED_STEPPERS
    assert min(smallest) >= MIN_TEXT_PX - 0.05, smallest
