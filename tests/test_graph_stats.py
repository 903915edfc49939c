"""backprop_lessons.graph_stats: node, edge and path counts of Value graphs."""

from __future__ import annotations

import pytest

from backprop_lessons import Value
from backprop_lessons.graph_stats import GraphCount, count_graph, count_paths


def test_counts_of_a_small_graph():
    a, b = Value(2.0), Value(-3.0)
    out = a * b + a  # * and +: 2 operations, 4 edges
    c = count_graph(out, [a, b])
    assert c == GraphCount(
        parameters=2, constants=0, operations=2, backward_steps=4
    )
    assert c.nodes == 4 and c.created == 2


def test_constants_are_the_lifted_numbers():
    x = Value(1.0)
    out = 0.5 * x + 3  # two numbers lifted to Values
    c = count_graph(out, [x])
    assert (c.parameters, c.constants, c.operations) == (1, 2, 2)
    assert count_graph(out).constants == 3  # x too, when not named a parameter


def test_backward_steps_equal_the_chain_rule_updates():
    """Counted: a backward does one `child.grad += local * grad` per edge."""
    x = Value(3.0)
    out = (x * x).exp() * x  # x * x has the edge to x twice
    assert count_graph(out, [x]).backward_steps == 2 + 1 + 2


def test_paths():
    a = Value(3.0)
    b = a + a
    c = b + b
    assert count_paths(c, [a]) == 4  # = dc/da here: every local grad is 1
    assert count_paths(a * a, [a]) == 2
    y = Value(1.0)
    assert count_paths(c * y, [a]) == 4 and count_paths(c * y, [y]) == 1
    assert count_paths(c * y, [a, y]) == 5
    assert count_paths(c, []) == 0


def test_paths_grow_exponentially_while_edges_grow_linearly():
    x = Value(1.0)
    out = x
    for _ in range(60):
        out = out * 1.0 + out  # two paths through every layer
    assert count_paths(out, [x]) == 2**60
    assert count_graph(out, [x]).backward_steps == 60 * 4


def test_str_lists_every_count():
    text = str(count_graph(Value(1.0) * 2.0))
    assert "operations created" in text and "backward steps" in text
    assert text.splitlines()[3].split()[-1] == "3"


@pytest.mark.parametrize("f", [count_graph, lambda r: count_paths(r, [])])
def test_root_must_be_a_value(f):
    with pytest.raises(TypeError, match="root must be a Value, got float"):
        f(1.0)
