"""Tests of `backprop_lessons.higher_order`: chapter 1's design with local
derivatives that are Duals (forward over reverse) or Values (reverse over
reverse); both Hessian-vector products equal PyTorch's in float64."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from backprop_lessons.forward_mode import Dual
from backprop_lessons.gradcheck import relative_error
from backprop_lessons.higher_order import (
    Node,
    gradient,
    hvp_forward_over_reverse,
    hvp_reverse_over_reverse,
)
from backprop_lessons.scalar import Value
from strategies import evaluate_graph, expression_graphs


def f(x):
    a, b, c = x
    return (
        (a * b).tanh()
        + (b * c).sigmoid() * a.exp()
        - (a * a + 1.0).log() / c
        + (b - c).relu()
        + 2.0 / (c**2 + a)
        - (1.0 - b) ** 3
    ) ** 2


def torch_hvp(fn, xs, v):
    t = torch.tensor(xs, dtype=torch.float64)
    tv = torch.tensor(v, dtype=torch.float64)
    _, hv = torch.autograd.functional.hvp(lambda z: fn(list(z)), t, tv)
    g = torch.func.grad(lambda z: fn(list(z)))(t)
    return g.numpy(), hv.numpy()


@pytest.mark.parametrize(
    "hvp", [hvp_forward_over_reverse, hvp_reverse_over_reverse]
)
def test_hvp_matches_torch(hvp):
    xs, v = [0.3, -0.7, 1.2], [1.0, 0.5, -2.0]
    g, hv = hvp(f, xs, v)
    g_ref, hv_ref = torch_hvp(f, xs, v)
    assert relative_error(g, g_ref) < 1e-13
    assert relative_error(hv, hv_ref) < 1e-12


@given(expression_graphs(), st.integers(0, 1000))
def test_both_hvps_match_torch_on_random_graphs(graph, seed):
    xs = list(graph.inputs)
    v = list(np.random.default_rng(seed).standard_normal(len(xs)))

    def fn(z):
        return evaluate_graph(graph, z) * 1.0 + 0.0 * z[0]  # a Node even if
        # the graph ignores its inputs

    g1, h1 = hvp_forward_over_reverse(fn, xs, v)
    g2, h2 = hvp_reverse_over_reverse(fn, xs, v)
    g_ref, h_ref = torch_hvp(fn, xs, v)
    # The floor: a derivative that is 0 in exact arithmetic (x e^-x has
    # f'' = 0 at x = 2) is round-off in each engine, ~1e-17.
    for ours, ref in ((g1, g_ref), (g2, g_ref), (h1, h_ref), (h2, h_ref)):
        assert relative_error(ours, ref, floor=1e-4) < 1e-9


def test_gradient_keeps_the_number_type():
    assert gradient(lambda x: x[0] * x[0], [3.0]) == [6.0]
    (g,) = gradient(lambda x: x[0] * x[0], [Dual(3.0, 1.0)])
    assert isinstance(g, Dual) and (g.value, g.tangent) == (6.0, 2.0)
    x = Value(3.0)
    (g,) = gradient(lambda z: z[0] ** 3, [x])
    assert isinstance(g, Value) and g.data == 27.0
    g.backward()  # d/dx (3 x^2) = 6 x
    assert x.grad == 18.0


def test_relu_and_errors():
    g, hv = hvp_forward_over_reverse(
        lambda x: (x[0] * x[1]).relu(), [1.0, 2.0], [1.0, 0.0]
    )
    assert g == [2.0, 1.0] and hv == [0.0, 1.0]
    with pytest.raises(TypeError, match="Node: data must be"):
        Node("a")
    with pytest.raises(TypeError, match="the exponent must be a number"):
        Node(1.0) ** Node(2.0)
    with pytest.raises(ValueError, match="2 inputs but 1 entries"):
        hvp_forward_over_reverse(f, [1.0, 2.0], [1.0])
    with pytest.raises(TypeError, match="hvp_reverse_over_reverse xs"):
        hvp_reverse_over_reverse(f, "ab", [1.0])
    with pytest.raises(TypeError, match="gradient: f must return one number"):
        gradient(lambda x: 3.0, [1.0])
