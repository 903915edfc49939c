"""Tests of `backprop_lessons.graph_order`: the walk both reverse-mode
engines share puts every node after its inputs, lists a shared node once,
survives a deep chain, and refuses what is not a graph node."""

from __future__ import annotations

import pytest

from backprop_lessons.graph_order import topological_order
from backprop_lessons.scalar import Value
from backprop_lessons.tensor import Tensor


def test_every_node_comes_after_its_inputs_and_once():
    a, b = Value(2.0), Value(3.0)
    c = a * b
    out = c + c * a  # c and a are used twice
    order = topological_order(out)
    assert order[-1] is out and len(order) == len({id(n) for n in order}) == 5
    seen = set()
    for node in order:
        assert all(id(child) in seen for child in node._children)
        seen.add(id(node))


def test_the_same_walk_serves_tensors():
    x = Tensor([1.0, 2.0], requires_grad=True)
    y = (x * x).sum()
    assert topological_order(y)[0] is x and topological_order(y)[-1] is y


def test_a_deep_chain_needs_no_recursion():
    x = Value(1.0)
    for _ in range(50_000):
        x = x + 1.0
    assert len(topological_order(x)) == 100_001  # 50,000 adds and constants


def test_a_non_node_is_refused_by_name():
    with pytest.raises(
        TypeError, match="topological_order: root must be a Value"
    ):
        topological_order(3.0)
