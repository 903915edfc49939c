"""The steppers, driven from Python as a live kernel would drive them.

The browser side (the same frames stepping on the rendered page with no
kernel) is tests/browser/test_chapter2_widgets.py.
"""

import json

import pytest
import traitlets

from backprop_lessons import Value, topological_order, zero_grad
from backprop_lessons.scalar_nn import MLP
from backprop_lessons.widgets import BackwardStepper, TopoSortStepper, backward_frames, toposort_frames
from backprop_lessons.widgets.stepper import MAX_VALUES


def relu_example():
    a, b, d = Value(2.0, label="a"), Value(-3.0, label="b"), Value(10.0, label="d")
    c = a * b; c.label = "c"
    e = c + d; e.label = "e"
    f = e.relu(); f.label = "f"
    return f


def neuron_example():
    x1, x2 = Value(2.0, label="x1"), Value(0.0, label="x2")
    w1, w2, b = Value(-3.0, label="w1"), Value(1.0, label="w2"), Value(6.8813735870195432, label="b")
    o = ((x1 * w1 + x2 * w2) + b).tanh()
    o.label = "o"
    return o


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
    assert [fr["node"] for fr in stepper.frames[2:]] == [v.label for v in reversed(order)]
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
    assert stepper.frames[-1]["grads"] == dict(zip(names, (v.grad for v in order)))


def test_relu_example_frames_show_the_hand_traced_gradients():
    frames = backward_frames(relu_example())
    assert frames[0]["grads"] == dict.fromkeys("abcdef", 0.0)
    assert frames[1]["grads"]["f"] == 1.0  # the seed
    assert frames[-1]["grads"] == {"a": -3.0, "b": 2.0, "c": 1.0, "d": 1.0, "e": 1.0, "f": 1.0}


def test_stepping_index_changes_the_current_node_and_gradients():
    stepper = BackwardStepper(relu_example())
    seen = []
    stepper.observe(lambda change: seen.append(change["new"]), names="index")
    assert stepper.index == 0 and stepper.current["node"] is None
    stepper.next(); stepper.next()
    assert stepper.index == 2 and stepper.current["node"] == "f"
    before = stepper.current["grads"]
    stepper.index = 5
    assert stepper.current["node"] == "c"
    assert stepper.current["grads"] != before
    assert stepper.current["grads"]["a"] == -3.0
    stepper.previous()
    assert stepper.index == 4 and stepper.current["node"] == "d"
    assert stepper.get_state()["index"] == 4  # the synced value the front end receives
    stepper.reset()
    assert stepper.index == 0
    assert seen == [1, 2, 5, 4, 0]


def test_index_out_of_range_is_a_clear_error_and_buttons_clamp():
    stepper = BackwardStepper(relu_example())
    with pytest.raises(traitlets.TraitError, match="out of range; frames are numbered 0 to 7"):
        stepper.index = 8
    stepper.previous()
    assert stepper.index == 0
    stepper.index = 7
    stepper.next()
    assert stepper.index == 7


@pytest.mark.parametrize("stepper_class", [BackwardStepper, TopoSortStepper])
def test_the_users_graph_is_untouched(stepper_class):
    f = relu_example()
    f.backward(); f.backward()  # leaves accumulated: a.grad = -6
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
    for fr in backward_frames(neuron_example()) + toposort_frames(neuron_example()):
        assert fr["svg"].startswith("<svg") and fr["svg"].endswith("</svg>")
        assert "<!--" not in fr["svg"] and "<?xml" not in fr["svg"]
        assert len(fr["svg"]) < 12_000


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
    assert repr(stepper) == f"TopoSortStepper({stepper.steps} steps on a graph of {len(order)} values)"


def test_toposort_skips_a_value_reached_twice():
    x = Value(1.0, label="x")
    y = x * 2.0; y.label = "y"
    z = (y + x) * y; z.label = "z"
    actions = [fr["action"] for fr in toposort_frames(z)]
    assert "skip" in actions


def test_steppers_refuse_big_graphs_and_non_values():
    loss = MLP(2, [8, 1], seed=0)([1.0, 2.0])
    assert len(topological_order(loss)) > MAX_VALUES
    with pytest.raises(ValueError, match="BackwardStepper: the graph has .* values"):
        BackwardStepper(loss)
    with pytest.raises(TypeError, match="TopoSortStepper: expected a Value"):
        TopoSortStepper(3.0)


def test_front_end_files_ship_with_the_widget():
    stepper = TopoSortStepper(relu_example())
    state = stepper.get_state()
    assert "export default" in state["_esm"] and "render" in state["_esm"]
    assert "import " not in state["_esm"]  # no imports: nothing fetched from a CDN
    assert ".bl-stepper" in state["_css"]
    # a bundle like the front end gets it: only JSON-serializable state
    json.dumps({k: v for k, v in state.items() if k != "layout"})
