"""backprop_lessons.jacobian_chain: the cost of the two orders of the
Jacobian product, counted, and the products themselves."""

from __future__ import annotations

import numpy as np
import pytest

from backprop_lessons.jacobian_chain import (
    best_chain_cost,
    chain_cost,
    multiply_chain,
)


def test_costs_of_a_scalar_loss():
    dims = [1000, 100, 100, 1]  # 1,000 parameters, one loss
    assert chain_cost(dims, "forward") == 1000 * (100 * 100 + 1 * 100)
    assert chain_cost(dims, "reverse") == 1 * (100 * 1000 + 100 * 100)
    assert best_chain_cost(dims) == chain_cost(dims, "reverse")


def test_the_first_jacobian_of_each_order_is_free():
    # forward d_0 * sum_{k=2..n} d_k d_(k-1), reverse d_n * sum_{k=1..n-1}:
    # the order starts from J_1 (forward) or J_n (reverse) as it is, so the
    # k = 1 (forward) and k = n (reverse) terms of the full sum are absent
    dims = [1000, 100, 100, 1]
    assert chain_cost(dims, "forward") == 10_100_000  # not 110,100,000
    assert chain_cost(dims, "reverse") == 110_000  # not 110,100
    # two Jacobians: one product, (d_2, d_1) times (d_1, d_0), in either order
    assert chain_cost([3, 5, 7], "forward") == 3 * 5 * 7
    assert chain_cost([3, 5, 7], "reverse") == 3 * 5 * 7


def _multiply_adds_of_multiply_chain(dims, order):
    # replay multiply_chain's products on shapes: (a, b) @ (b, c) is a*b*c
    js = [(dims[k], dims[k - 1]) for k in range(1, len(dims))]  # J_1 .. J_n
    total = 0
    if order == "forward":
        out = js[0]  # (d_1, d_0), taken as it is
        for a, b in js[1:]:
            assert b == out[0]
            total += a * b * out[1]
            out = (a, out[1])
    else:
        out = js[-1]  # (d_n, d_(n-1)), taken as it is
        for b, c in reversed(js[:-1]):
            assert b == out[1]
            total += out[0] * b * c
            out = (out[0], c)
    return total


def test_costs_count_the_products_multiply_chain_does():
    rng = np.random.default_rng(2)
    for _ in range(20):
        dims = [int(d) for d in rng.integers(1, 30, size=rng.integers(2, 7))]
        for order in ("forward", "reverse"):
            assert chain_cost(dims, order) == _multiply_adds_of_multiply_chain(
                dims, order
            )


def test_forward_wins_with_few_inputs_and_many_outputs():
    dims = [2, 100, 100, 1000]
    assert chain_cost(dims, "forward") < chain_cost(dims, "reverse")
    assert best_chain_cost(dims) == chain_cost(dims, "forward")


def test_costs_scale_with_inputs_or_outputs():
    base = chain_cost([10, 50, 50, 1], "forward")
    assert chain_cost([20, 50, 50, 1], "forward") == 2 * base
    r = chain_cost([10, 50, 50, 3], "reverse")
    assert r == 3 * (50 * 10 + 50 * 50)


def test_a_single_jacobian_costs_nothing():
    assert chain_cost([5, 7], "forward") == chain_cost([5, 7], "reverse") == 0
    assert best_chain_cost([5, 7]) == 0


def test_best_is_never_worse_than_either_order():
    rng = np.random.default_rng(0)
    for _ in range(20):
        dims = [int(d) for d in rng.integers(1, 30, size=rng.integers(2, 7))]
        assert best_chain_cost(dims) <= min(
            chain_cost(dims, "forward"), chain_cost(dims, "reverse")
        )


def test_both_orders_give_the_same_jacobian():
    rng = np.random.default_rng(1)
    dims = [6, 4, 5, 3, 2]
    js = [
        rng.standard_normal((dims[k], dims[k - 1])) for k in range(1, len(dims))
    ]
    fwd, rev = multiply_chain(js, "forward"), multiply_chain(js, "reverse")
    assert fwd.shape == (2, 6)
    np.testing.assert_allclose(fwd, rev, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(fwd, js[3] @ js[2] @ js[1] @ js[0], rtol=1e-13)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: chain_cost([3], "forward"), "at least two positive ints"),
        (lambda: chain_cost([3, 0], "forward"), "at least two positive ints"),
        (lambda: chain_cost([3, 2], "sideways"), "order must be one of"),
        (
            lambda: multiply_chain([np.ones((2, 3)), np.ones((2, 3))], "forward"),
            r"J_2 has shape \(2, 3\) but J_1 has \(2, 3\)",
        ),
        (lambda: multiply_chain([np.ones((2, 3))], "up"), "order must be one of"),
    ],
)
def test_errors(call, match):
    with pytest.raises(ValueError, match=match):
        call()
