"""The steppers and self-checks, driven from Python as a live kernel would drive
them.

The browser side (the same frames stepping, the same answers checked, on the
rendered page with no kernel) is tests/browser/test_chapter2_widgets.py and
tests/browser/test_selfchecks.py.
"""

import json
import math
import re

import pytest
import traitlets

from backprop_lessons import Value, topological_order, zero_grad
from backprop_lessons.example_graphs import (
    neuron_example,
    relu_example,
    used_twice,
)
from backprop_lessons.scalar_nn import MLP
from backprop_lessons.viz.plots import MIN_TEXT_PX
from backprop_lessons.widgets import (
    BackwardStepper,
    ChoiceCheck,
    NumberCheck,
    TopoSortStepper,
    Verdict,
    backward_frames,
    reveal_source,
    self_check,
    toposort_frames,
)
from backprop_lessons.widgets.selfcheck import SelfCheck, parse_number
from backprop_lessons.widgets.stepper import MAX_VALUES, legible_svg


def doubled_twice():
    a = Value(3.0, label="a")
    b = a + a
    return b + b


def test_backward_frame_count_equals_backward_steps():
    f = relu_example()
    order = topological_order(f)
    stepper = BackwardStepper(f)
    # frame 0 (zeroed), the seed, then one step per value of the reverse walk
    assert len(stepper.frames) == 2 + len(order)
    assert stepper.steps == 1 + len(order)
    assert [fr["node"] for fr in stepper.frames[2:]] == [
        v.label for v in reversed(order)
    ]
    assert repr(stepper) == "BackwardStepper(7 steps on a graph of 6 values)"


def test_backward_updates_are_the_chain_rule_applications_of_backward():
    f = relu_example()
    frames = backward_frames(f)
    updates = [u for fr in frames for u in fr["updates"]]
    assert len(updates) == sum(len(v._children) for v in topological_order(f))
    for u in updates:
        assert u["contribution"] == u["local"] * u["upstream"]
        assert u["after"] == u["before"] + u["contribution"]


@pytest.mark.parametrize("build", [relu_example, neuron_example, doubled_twice])
def test_last_frame_has_the_gradients_of_a_fresh_backward(build):
    root = build()
    stepper = BackwardStepper(root)
    order = topological_order(root)
    zero_grad(order)
    root.backward()
    names = list(stepper.frames[-1]["grads"])
    assert stepper.frames[-1]["grads"] == dict(
        zip(names, (v.grad for v in order))
    )


def test_relu_example_frames_show_the_hand_traced_gradients():
    frames = backward_frames(relu_example())
    assert frames[0]["grads"] == dict.fromkeys("abcdef", 0.0)
    assert frames[1]["grads"]["f"] == 1.0  # the seed
    assert frames[-1]["grads"] == {
        "a": -3.0,
        "b": 2.0,
        "c": 1.0,
        "d": 1.0,
        "e": 1.0,
        "f": 1.0,
    }


def test_stepping_index_changes_the_current_node_and_gradients():
    stepper = BackwardStepper(relu_example())
    seen = []
    stepper.observe(lambda change: seen.append(change["new"]), names="index")
    assert stepper.index == 0 and stepper.current["node"] is None
    stepper.next()
    stepper.next()
    assert stepper.index == 2 and stepper.current["node"] == "f"
    before = stepper.current["grads"]
    stepper.index = 5
    assert stepper.current["node"] == "c"
    assert stepper.current["grads"] != before
    assert stepper.current["grads"]["a"] == -3.0
    stepper.previous()
    assert stepper.index == 4 and stepper.current["node"] == "d"
    assert (
        stepper.get_state()["index"] == 4
    )  # the synced value the front end receives
    stepper.reset()
    assert stepper.index == 0
    assert seen == [1, 2, 5, 4, 0]


def test_index_out_of_range_is_a_clear_error_and_buttons_clamp():
    stepper = BackwardStepper(relu_example())
    with pytest.raises(
        traitlets.TraitError, match="out of range; frames are numbered 0 to 7"
    ):
        stepper.index = 8
    stepper.previous()
    assert stepper.index == 0
    stepper.index = 7
    stepper.next()
    assert stepper.index == 7


@pytest.mark.parametrize("stepper_class", [BackwardStepper, TopoSortStepper])
def test_the_users_graph_is_untouched(stepper_class):
    f = relu_example()
    f.backward()
    f.backward()  # leaves accumulated: a.grad = -6
    order = topological_order(f)
    before = [(v.grad, v.label, v.data) for v in order]
    stepper_class(f)
    assert [(v.grad, v.label, v.data) for v in order] == before


def test_unlabelled_values_get_position_names_in_frames_only():
    x = Value(1.5)
    y = x * x + 2.0
    frames = backward_frames(y)
    assert set(frames[0]["grads"]) == {"v0", "v1", "v2", "v3"}
    assert all(v.label == "" for v in topological_order(y))


@pytest.mark.parametrize("stepper_class", [BackwardStepper, TopoSortStepper])
def test_frames_are_deterministic(stepper_class):
    one = json.dumps(stepper_class(neuron_example()).frames, sort_keys=True)
    two = json.dumps(stepper_class(neuron_example()).frames, sort_keys=True)
    assert one == two


def test_frames_are_small_self_contained_svg():
    for fr in backward_frames(neuron_example()) + toposort_frames(
        neuron_example()
    ):
        assert fr["svg"].startswith("<svg") and fr["svg"].endswith("</svg>")
        assert "<!--" not in fr["svg"] and "<?xml" not in fr["svg"]
        assert len(fr["svg"]) < 12_000


def test_frames_keep_their_text_legible_when_fitted_to_the_page():
    """Each frame's SVG carries the min-width at which its smallest text is
    MIN_TEXT_PX CSS px: the text column may shrink it to that, not below."""
    for fr in backward_frames(neuron_example()):
        svg = fr["svg"]
        width = float(re.search(r'style="min-width:(\d+)px"', svg).group(1))
        box = float(re.search(r'viewBox="[-\d.]+ [-\d.]+ ([\d.]+)', svg).group(1))
        smallest = min(map(float, re.findall(r'font-size="([\d.]+)"', svg)))
        assert smallest * width / box == pytest.approx(MIN_TEXT_PX, abs=0.1)


@pytest.mark.parametrize("stepper_class", [BackwardStepper, TopoSortStepper])
@pytest.mark.parametrize("digits", [-1, 9, 2.5, True, "3"])
def test_digits_out_of_range_is_a_clear_error(stepper_class, digits):
    with pytest.raises(ValueError, match=f"{stepper_class.__name__}: digits"):
        stepper_class(relu_example(), digits=digits)


def test_fewer_digits_draw_a_narrower_graph():
    def width(frames):
        return float(re.search(r"min-width:(\d+)px", frames[0]["svg"]).group(1))

    for make in (backward_frames, toposort_frames):
        assert width(make(neuron_example(), 3)) < width(make(neuron_example(), 4))


def test_legible_svg_names_what_it_expected():
    with pytest.raises(ValueError, match="legible_svg: expected graphviz SVG"):
        legible_svg("<div>not a drawing</div>")


def test_toposort_frames_replay_topological_order():
    root = neuron_example()
    stepper = TopoSortStepper(root)
    order = [v.label or f"v{i}" for i, v in enumerate(topological_order(root))]
    assert stepper.frames[0]["stack"] == ["visit o"]
    assert stepper.frames[-1]["order"] == order
    assert stepper.frames[-1]["stack"] == []
    # every value is visited once and emitted once; the order only grows
    actions = [fr["action"] for fr in stepper.frames[1:]]
    assert actions.count("emit") == len(order)
    assert actions.count("visit") == len(order)
    lengths = [len(fr["order"]) for fr in stepper.frames]
    assert lengths == sorted(lengths)
    expected = f"{stepper.steps} steps on a graph of {len(order)} values"
    assert repr(stepper) == f"TopoSortStepper({expected})"


def test_toposort_skips_a_value_reached_twice():
    x = Value(1.0, label="x")
    y = x * 2.0
    y.label = "y"
    z = (y + x) * y
    z.label = "z"
    actions = [fr["action"] for fr in toposort_frames(z)]
    assert "skip" in actions


def test_steppers_refuse_big_graphs_and_non_values():
    loss = MLP(2, [8, 1], seed=0)([1.0, 2.0])
    assert len(topological_order(loss)) > MAX_VALUES
    with pytest.raises(
        ValueError, match="BackwardStepper: the graph has .* values"
    ):
        BackwardStepper(loss)
    with pytest.raises(TypeError, match="TopoSortStepper: expected a Value"):
        TopoSortStepper(3.0)


def test_front_end_files_ship_with_the_widget():
    stepper = TopoSortStepper(relu_example())
    state = stepper.get_state()
    assert "export default" in state["_esm"] and "render" in state["_esm"]
    assert (
        "import " not in state["_esm"]
    )  # no imports: nothing fetched from a CDN
    assert ".bl-stepper" in state["_css"]
    # a bundle like the front end gets it: only JSON-serializable state
    json.dumps({k: v for k, v in state.items() if k != "layout"})


# ---- self-checks ---------------------------------------------------------------
# The browser applies the same rule (selfcheck.js's `judge`); the browser test
# tests/browser/test_selfchecks.py compares the two on a table of answers.


@pytest.mark.parametrize(
    "text, value",
    [
        ("-3", -3.0),
        ("\u22123", -3.0),
        ("+2.5", 2.5),
        (".5", 0.5),
        ("5.", 5.0),
        ("2e-3", 0.002),
        ("1E3", 1000.0),
        ("1/4", 0.25),
        ("-3/2", -1.5),
        ("6/-2", -3.0),
        (" 1 000 ", 1000.0),
        ("1,000", 1000.0),
        ("1,234,567.5", 1234567.5),
        ("1\u2009000", 1000.0),
    ],
)
def test_parse_number_reads_what_readers_type(text, value):
    assert parse_number(text) == value


@pytest.mark.parametrize(
    "text",
    [
        "",
        "abc",
        "1/0",
        "0/0",
        "1e400",
        "1/2/3",
        "--3",
        "0,5",
        "15,00,000",
        "3-2",
        "0x10",
        "nan",
        "inf",
        "1_000",
        "25%",
        "\u0663",
    ],
)
def test_parse_number_rejects_what_it_cannot_read(text):
    assert parse_number(text) is None


def test_number_check_verdicts():
    q = NumberCheck(
        "What is `a.grad`?",
        -3,
        hint="Use the chain rule.",
        explanation="b = -3 flows to a.",
    )
    assert q.check("-3") == Verdict("correct", "Correct.", "b = -3 flows to a.")
    assert q.check("-6/2").status == "correct"
    assert q.check("-3.0000001") == Verdict(
        "wrong", "Not right yet.", "Use the chain rule."
    )
    assert (
        q.check("3").message
        == "Not right yet: the size is right, the sign is not."
    )
    assert q.check("three").status == "invalid"
    assert q.check("  ").status == "empty"


def test_number_check_tolerances():
    rounded = NumberCheck("o to 4 decimals?", 0.70710678, tolerance=5e-5)
    assert [
        rounded.check(x).status for x in ("0.7071", "0.70715", "0.7072", "0.707")
    ] == ["correct", "correct", "wrong", "wrong"]
    relative = NumberCheck("bytes?", 2_400_000, rel_tolerance=0.01)
    assert [
        relative.check(x).status for x in ("2.4e6", "2,420,000", "2,500,000")
    ] == ["correct", "correct", "wrong"]
    zero = NumberCheck("zero?", 0)
    assert zero.check("-0").status == "correct"
    assert zero.check("1e-6").message == "Not right yet."  # no sign hint for 0


def test_number_check_state_is_what_the_page_needs():
    q = NumberCheck("Is `x < y`?", 0.25, answer_text="1/4", unit="bytes")
    state = q.get_state()
    assert state["kind"] == "number" and state["answer"] == 0.25
    assert (
        state["question"] == "Is <code>x &lt; y</code>?"
    )  # escaped, code spans kept
    assert state["answer_text"] == "1/4" and state["unit"] == "bytes"
    assert NumberCheck("q", -3).answer_text == "-3"
    assert NumberCheck("q", 1 / 3).answer_text == "0.333333333333"
    assert repr(q) == "NumberCheck('Is x < y?')"


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        (
            {"answer": True},
            TypeError,
            "NumberCheck: answer must be a number, got bool",
        ),
        (
            {"answer": "3"},
            TypeError,
            "NumberCheck: answer must be a number, got str",
        ),
        ({"answer": math.nan}, ValueError, "NumberCheck: answer must be finite"),
        (
            {"answer": 1, "tolerance": -1},
            ValueError,
            "NumberCheck: tolerance must be a finite number >= 0",
        ),
        (
            {"answer": 1, "rel_tolerance": math.inf},
            ValueError,
            "NumberCheck: rel_tolerance",
        ),
        (
            {"answer": 1, "hint": 3},
            TypeError,
            "NumberCheck: hint must be a string, got int",
        ),
    ],
)
def test_number_check_rejects_bad_arguments(kwargs, error, message):
    with pytest.raises(error, match=re.escape(message)):
        NumberCheck("q", **kwargs)


def test_number_check_accepts_numpy_numbers():
    import numpy as np

    assert NumberCheck("q", np.float64(2.5)).answer == 2.5
    assert NumberCheck("q", np.int64(-3)).check("-3").status == "correct"


def test_choice_check_verdicts_and_hints():
    c = ChoiceCheck(
        "Order?",
        ["creation", "reverse topological", "any"],
        answer="reverse topological",
        hints={
            0: "Which gradient is complete first?",
            "any": "Try a node used twice.",
        },
        hint="generic",
        explanation="Each gradient is complete before it moves on.",
    )
    assert c.answer == 1
    assert c.check("1") == Verdict(
        "correct", "Correct.", "Each gradient is complete before it moves on."
    )
    assert c.check("0") == Verdict(
        "wrong", "Not right yet.", "Which gradient is complete first?"
    )
    assert c.check("2").detail == "Try a node used twice."
    assert c.check("7").detail == "generic"
    assert c.check("").status == "empty"
    listed = ChoiceCheck(
        "q", ["a", "b"], answer=0, hints=["", "b is wrong"], hint="generic"
    )
    assert listed.check("1").detail == "b is wrong"
    assert repr(listed) == "ChoiceCheck('q')"


@pytest.mark.parametrize(
    "args, kwargs, message",
    [
        (("q", ["a"], 0), {}, "ChoiceCheck: expected at least 2 choices, got 1"),
        (("q", ["a", "a"], 0), {}, "ChoiceCheck: choices must be different"),
        (
            ("q", ["a", "b"], "c"),
            {},
            "ChoiceCheck: answer 'c' is not one of the choices",
        ),
        (
            ("q", ["a", "b"], 2),
            {},
            "ChoiceCheck: answer must be a choice's text or an index 0..1, got 2",
        ),
        (
            ("q", ["a", "b"], True),
            {},
            "ChoiceCheck: answer must be a choice's text or an index",
        ),
        (
            ("q", ["a", "b"], 0),
            {"hints": ["x"]},
            "ChoiceCheck: hints must have one entry per choice (2), got 1",
        ),
        (
            ("q", ["a", "b"], 0),
            {"hints": {"z": "x"}},
            "ChoiceCheck: hints key 'z' is not one of the choices",
        ),
    ],
)
def test_choice_check_rejects_bad_arguments(args, kwargs, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        ChoiceCheck(*args, **kwargs)


def test_choice_check_rejects_a_string_of_choices():
    with pytest.raises(
        TypeError, match="ChoiceCheck: choices must be a list of strings, got str"
    ):
        ChoiceCheck("q", "ab", 0)


def test_self_check_builds_the_named_question_of_a_chapter():
    """The cell names the question; its answer stays in the package."""
    from backprop_lessons.exercises.gpt_layers import SELF_CHECKS

    widget = self_check("gpt_layers", "wte-used-twice")
    assert isinstance(widget, ChoiceCheck)
    assert widget.choices[widget.answer] == "the sum of both parts"
    assert repr(widget).startswith("ChoiceCheck('The token embedding wte")
    assert SELF_CHECKS["wte-used-twice"].kind == "choice"
    number = self_check("value_nodes", "backward-twice")
    assert isinstance(number, NumberCheck) and number.answer == 12


@pytest.mark.parametrize(
    "topic, key, message",
    [
        ("nope", "x", "self_check: no exercises module 'nope'"),
        (
            "value_nodes",
            "nope",
            "self_check: 'value_nodes' has no self-check 'nope'; its keys are "
            "['backward-twice', 'relu-blocks-gradient']",
        ),
    ],
)
def test_self_check_names_what_it_cannot_find(topic, key, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        self_check(topic, key)
    with pytest.raises(TypeError, match="self_check: topic must be a string"):
        self_check(3, "x")


def test_reveal_source_keeps_the_code_in_its_state_behind_a_click():
    from backprop_lessons.gpt import layers

    box = reveal_source(layers.gelu_backward)
    assert repr(box) == "SourceReveal(backprop_lessons.gpt.layers.gelu_backward)"
    assert box.summary == "Show the book's version: gelu_backward"
    assert "gelu_backward" in box.source_html and "bl-source" in box.source_html
    state = box.get_state()
    assert "<details" in state["_esm"] or "details" in state["_esm"]
    assert "import " not in state["_esm"]  # nothing fetched from a CDN
    assert "data-lm-suppress-shortcuts" in state["_esm"]
    assert ".bl-reveal" in state["_css"]
    other = reveal_source(layers.gelu_backward, summary="Show the code")
    assert other.summary == "Show the code: gelu_backward"
    with pytest.raises(ValueError, match="reveal_source: summary must be"):
        reveal_source(layers.gelu_backward, summary=" ")
    with pytest.raises(TypeError, match="show_source: cannot get the source"):
        reveal_source(3)


def test_jupyterlab_shortcuts_leave_the_widgets_keys_alone():
    """Enter submits a number self-check in JupyterLab too: Lumino skips its
    shortcuts inside an element with data-lm-suppress-shortcuts."""
    for widget in (NumberCheck("q", 1), ChoiceCheck("q", ["a", "b"], 0)):
        assert (
            'setAttribute("data-lm-suppress-shortcuts", "true")'
            in (widget.get_state()["_esm"])
        )


def test_selfcheck_front_end_ships_with_the_widget():
    state = NumberCheck("q", 1).get_state()
    assert (
        "export default" in state["_esm"]
        and "export function judge" in state["_esm"]
    )
    assert (
        "import " not in state["_esm"]
    )  # no imports: nothing fetched from a CDN
    assert ".bl-check" in state["_css"]
    json.dumps({k: v for k, v in state.items() if k != "layout"})
    # the reader's answer comes back to a live kernel through these traits
    assert {"response", "status"} <= set(
        NumberCheck.class_own_traits(sync=True)
    ) | set(SelfCheck.class_own_traits(sync=True))


def _luminance(hex_colour: str) -> float:
    r, g, b = (int(hex_colour[i : i + 2], 16) / 255 for i in (1, 3, 5))
    lin = [
        c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4
        for c in (r, g, b)
    ]
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2]


def _contrast(a: str, b: str) -> float:
    hi, lo = sorted((_luminance(a), _luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def test_selfcheck_colours_meet_wcag_aa_in_light_and_dark():
    """Text 4.5:1 (WCAG 1.4.3); input borders and the focus ring 3:1 (1.4.11)."""
    css = SelfCheck._css
    palettes = [
        dict(re.findall(r"--bl-check-([\w-]+):\s*(#[0-9a-fA-F]{6})", block))
        for block in re.findall(r"\{([^}]*--bl-check-bg:[^}]*)\}", css)
    ]
    assert len(palettes) == 2  # light (default) and dark
    text_pairs = [
        ("ink", "bg"),
        ("muted", "bg"),
        ("ok-ink", "ok-bg"),
        ("bad-ink", "bad-bg"),
        ("button-ink", "button"),
        ("ink", "field"),
    ]
    for palette in palettes:
        for fg, bg in text_pairs:
            assert _contrast(palette[fg], palette[bg]) >= 4.5, (fg, bg, palette)
        for fg, bg in [("line", "bg"), ("line", "field"), ("accent", "bg")]:
            assert _contrast(palette[fg], palette[bg]) >= 3.0, (fg, bg, palette)


def test_per_contribution_frames_show_each_addition_into_a_shared_value():
    """f = a + a**2: a.grad grows in two `+=` steps, 0 -> 1 -> 7, and a
    pushes only after its second contribution."""
    root = used_twice()
    frames = backward_frames(root, per_contribution=True)
    into_a = [
        (i, u)
        for i, fr in enumerate(frames)
        for u in fr["updates"]
        if u["input"] == "a"
    ]
    assert [(u["before"], u["after"]) for _, u in into_a] == [
        (0.0, 1.0),
        (1.0, 7.0),
    ]
    assert [(u["received"], u["uses"]) for _, u in into_a] == [(1, 2), (2, 2)]
    # one frame per contribution, each table row showing before -> after
    assert into_a[0][0] != into_a[1][0]
    assert "0 &rarr; <b>1</b>" in frames[into_a[0][0]]["html"]
    assert "1 &rarr; <b>7</b>" in frames[into_a[1][0]]["html"]
    assert "not complete, it waits" in frames[into_a[0][0]]["caption"]
    assert (
        "both of its contributions: complete" in frames[into_a[1][0]]["caption"]
    )
    # a pushes (to x and y) only after its gradient is complete
    pushes_from_a = [i for i, fr in enumerate(frames) if fr["node"] == "a"]
    assert min(pushes_from_a) > into_a[1][0]
    assert all(frames[i]["received"]["a"] == [2, 2] for i in pushes_from_a)
    # every `+=` of backward is one frame (plus start, seed and the leaves)
    edges = sum(len(v._children) for v in topological_order(root))
    leaves = sum(not v._children for v in topological_order(root))
    assert len(frames) == 2 + edges + leaves
    # the end is a fresh backward's gradients: df/da = 2a + 1 = 7
    order = topological_order(root)
    zero_grad(order)
    root.backward()
    assert frames[-1]["grads"] == {v.label: v.grad for v in order}
    assert frames[-1]["grads"]["a"] == 7.0


def test_per_contribution_stepper_keeps_its_frames_in_its_state():
    stepper = BackwardStepper(used_twice(), per_contribution=True)
    state = stepper.get_state()
    assert len(state["frames"]) == 9 and state["frames"][0]["svg"]
    assert "one += at a time" in state["title"]
    assert "waits for more contributions" in state["legend"]
    json.dumps(state["frames"])  # the page receives them as they are
    # a waiting value is drawn in the waiting colour while it waits: f
    # pushes into a, then into s (a waits), then s pushes into a
    waiting = stepper.frames[3]
    assert waiting["updates"][0]["input"] == "s"
    assert waiting["received"]["a"] == [1, 2]
    assert "#e1bee7" in waiting["svg"].lower()
    assert "#e1bee7" not in stepper.frames[-1]["svg"].lower()
    assert repr(stepper) == "BackwardStepper(8 steps on a graph of 5 values)"


@pytest.mark.parametrize("build", [relu_example, neuron_example, doubled_twice])
def test_per_contribution_ends_where_the_node_stepper_ends(build):
    node = backward_frames(build())
    each = backward_frames(build(), per_contribution=True)
    assert each[-1]["grads"] == node[-1]["grads"]
    drop = ("received", "uses")
    assert [
        {k: v for k, v in u.items() if k not in drop}
        for fr in each
        for u in fr["updates"]
    ] == [u for fr in node for u in fr["updates"]]


def test_per_contribution_must_be_a_bool():
    with pytest.raises(TypeError, match="BackwardStepper: per_contribution"):
        BackwardStepper(relu_example(), per_contribution="yes")


def test_stepper_front_end_highlights_with_the_drawing_colour():
    """stepper.js scrolls the node drawn in viz.graph.HIGHLIGHT into view."""
    from backprop_lessons.viz.graph import HIGHLIGHT

    stepper = BackwardStepper(relu_example())
    esm = stepper.get_state()["_esm"]
    assert f'const HIGHLIGHT = "{HIGHLIGHT}";' in esm
    assert "scrollLeft" in esm
    assert f'fill="{HIGHLIGHT}"' in stepper.frames[2]["svg"]
