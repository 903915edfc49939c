"""Forward and reverse mode as two orders of one matrix product.

The chain rule for y = f_n(... f_2(f_1(x))) says the Jacobian of the whole
is the product of the steps' Jacobians, J = J_n ... J_2 J_1, where J_k has
shape (d_k, d_(k-1)): d_0 inputs, d_n outputs.  Matrix multiplication is
associative, so every way of bracketing gives the same J; the cost depends
on the bracketing.  Multiplying (a, b) by (b, c) takes a b c multiply-adds.

    forward order   J_n (... (J_3 (J_2 J_1)))   carries a (d_k, d_0) matrix:
                    d_0 * sum_{k=2..n} d_k d_(k-1)    (forward mode: d_0 JVPs)
    reverse order   ((J_n J_(n-1)) J_(n-2)) ... carries a (d_n, d_k) matrix:
                    d_n * sum_{k=1..n-1} d_k d_(k-1)  (reverse mode: d_n VJPs)

Each order starts from a Jacobian as it is (J_1 forward, J_n reverse), not
from an identity seed times it, so that end of the chain costs nothing: a
chain of one Jacobian costs 0 in both orders.

For a loss, d_n = 1: reverse order costs one sweep of vector-matrix
products, whatever the number of parameters d_0.  That is backpropagation.
`best_chain_cost` finds the cheapest bracketing of all (the matrix-chain
problem) for comparison: for a scalar loss it is the reverse order.

Counts only, plus the products themselves for checking (NumPy).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache

import numpy as np

__all__ = ["chain_cost", "best_chain_cost", "multiply_chain"]

ORDERS = ("forward", "reverse")


def _check_dims(dims: Sequence[int], op: str) -> tuple[int, ...]:
    dims = tuple(dims)
    if len(dims) < 2 or any(
        not isinstance(d, int) or isinstance(d, bool) or d < 1 for d in dims
    ):
        raise ValueError(
            f"{op}: dims must be at least two positive ints "
            f"(d_0 inputs, ..., d_n outputs), got {dims!r}"
        )
    return dims


def chain_cost(dims: Sequence[int], order: str) -> int:
    """Multiply-adds to form J_n ... J_1 (J_k of shape (dims[k], dims[k-1]))
    in `order`: 'forward' (from J_1 up) or 'reverse' (from J_n down).

    forward: d_0 * sum_{k=2..n} d_k d_(k-1); reverse: d_n * sum_{k=1..n-1}
    d_k d_(k-1).  The Jacobian each order starts from is taken as it is.
    """
    d = _check_dims(dims, "chain_cost")
    if order not in ORDERS:
        raise ValueError(
            f"chain_cost: order must be one of {ORDERS}, got {order!r}"
        )
    if order == "forward":
        # J_1 as it is, then for k = 2 .. n:
        # J_k (d_k, d_(k-1)) times the (d_(k-1), d_0) so far
        return d[0] * sum(d[k] * d[k - 1] for k in range(2, len(d)))
    # J_n as it is, then for k = n-1 .. 1:
    # the (d_n, d_k) so far times J_k (d_k, d_(k-1))
    return d[-1] * sum(d[k] * d[k - 1] for k in range(1, len(d) - 1))


def best_chain_cost(dims: Sequence[int]) -> int:
    """The fewest multiply-adds of any bracketing (dynamic programming over
    the split points, the textbook matrix-chain order)."""
    d = _check_dims(dims, "best_chain_cost")

    @cache
    def cost(i: int, j: int) -> int:  # product of J_(i+1) ... J_j
        if j - i <= 1:
            return 0
        return min(
            cost(i, k) + cost(k, j) + d[i] * d[k] * d[j] for k in range(i + 1, j)
        )

    return cost(0, len(d) - 1)


def multiply_chain(jacobians: Sequence[np.ndarray], order: str) -> np.ndarray:
    """J_n ... J_1 for jacobians = [J_1, ..., J_n], multiplied in `order`."""
    if order not in ORDERS:
        raise ValueError(
            f"multiply_chain: order must be one of {ORDERS}, got {order!r}"
        )
    js = [np.asarray(j, dtype=np.float64) for j in jacobians]
    for k in range(1, len(js)):
        if js[k].shape[1] != js[k - 1].shape[0]:
            raise ValueError(
                f"multiply_chain: J_{k + 1} has shape "
                f"{js[k].shape} but J_{k} has {js[k - 1].shape}; "
                "J_k must be (d_k, d_(k-1))"
            )
    if order == "forward":
        out = js[0]
        for j in js[1:]:
            out = j @ out  # (d_k, d_0)
        return out
    out = js[-1]
    for j in reversed(js[:-1]):
        out = out @ j  # (d_n, d_k)
    return out
