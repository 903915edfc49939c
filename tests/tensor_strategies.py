"""Hypothesis strategies for the Tensor engine: small shapes, broadcasting
pairs, op chains.

Arrays are drawn from a seed (standard normal entries), not entry by entry:
random entries have no ties (so `max` has one winner) and drawing stays
fast; the shapes, the broadcasting pattern and the chain of operations are
what hypothesis explores and shrinks.
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra.numpy import (
    array_shapes,
    arrays,
    mutually_broadcastable_shapes,
)

from strategies import special_floats

__all__ = [
    "small_shapes",
    "seeds",
    "random_array",
    "broadcast_pairs",
    "matmul_shapes",
    "op_chains",
    "chain_operands",
    "run_chain",
    "CHAIN_OPS",
    "special_arrays",
]


def special_arrays(min_dims: int = 1, max_dims: int = 2, max_side: int = 4):
    """float64 arrays whose entries mix NaN, +-inf, +-0.0 and huge values with
    ordinary ones (entry by entry, from `strategies.special_floats`)."""
    shapes = small_shapes(min_dims, max_dims, max_side)
    return arrays(np.float64, shapes, elements=special_floats())


def small_shapes(min_dims: int = 0, max_dims: int = 3, max_side: int = 4):
    """Shapes with up to `max_dims` axes of size 1..max_side."""
    return array_shapes(
        min_dims=min_dims, max_dims=max_dims, min_side=1, max_side=max_side
    )


seeds = st.integers(0, 2**32 - 1)


def random_array(shape: tuple, seed: int, low: float | None = None) -> np.ndarray:
    """Standard normal float64 entries (or uniform in [low, low + 2] when `low`
    is given)."""
    rng = np.random.default_rng(seed)
    if low is not None:
        return rng.uniform(low, low + 2.0, shape)
    return rng.standard_normal(shape)


def broadcast_pairs(max_dims: int = 3, max_side: int = 4):
    """Two shapes that broadcast together (inserted axes, size-1 axes or both)."""
    return mutually_broadcastable_shapes(
        num_shapes=2, min_dims=0, max_dims=max_dims, min_side=1, max_side=max_side
    ).map(lambda s: s.input_shapes)


@st.composite
def matmul_shapes(draw, max_batch_dims: int = 2, max_side: int = 4):
    """Shapes (..., m, n) and (..., n, k) whose batch dimensions broadcast."""
    m, n, k = (draw(st.integers(1, max_side)) for _ in range(3))
    batch_a, batch_b = draw(
        mutually_broadcastable_shapes(
            num_shapes=2,
            min_dims=0,
            max_dims=max_batch_dims,
            min_side=1,
            max_side=3,
        )
    ).input_shapes
    return batch_a + (m, n), batch_b + (n, k)


# One step of a chain: (name, needs a second operand?).  Every step keeps the
# running value finite and moderate: tanh/sigmoid squash, exp is applied to a
# squashed value, log to a positive one.
CHAIN_OPS = (
    "add",
    "sub",
    "mul",
    "div",
    "tanh",
    "sigmoid",
    "exp_tanh",
    "log_sq",
    "relu",
    "pow2",
    "neg",
    "sum0",
    "mean_last",
    "softmax",
    "log_softmax",
    "matmul",
)


@st.composite
def op_chains(draw, max_len: int = 6):
    """A start shape and a list of chain steps; `run_chain` executes them."""
    shape = draw(small_shapes(1, 3, 4))
    steps = draw(
        st.lists(st.sampled_from(CHAIN_OPS), min_size=1, max_size=max_len)
    )
    return shape, steps, draw(seeds)


def chain_operands(seed: int):
    """A function (step, current shape) -> second operand, deterministic in
    `seed`:
    called in the same order, it returns the same arrays for both engines."""
    rng = np.random.default_rng(seed)

    def operand(step: str, shape: tuple) -> np.ndarray:
        if step == "matmul":  # (..., n) @ (n, k)
            return rng.standard_normal((shape[-1], int(rng.integers(1, 4)))) / 2
        drop = int(rng.integers(0, len(shape) + 1))  # inserted leading axes
        kept = tuple(
            1 if rng.random() < 0.3 else n for n in shape[drop:]
        )  # stretched axes
        if step == "div":
            return rng.uniform(0.5, 2.5, kept)
        return rng.standard_normal(kept)

    return operand


def run_chain(x, steps, operands, lib):
    """Apply `steps` to `x`; `operands` yields second operands (arrays) and `lib`
    wraps them ("tensor" or "torch"); the same code runs on both engines."""
    import torch

    from backprop_lessons.tensor import Tensor

    wrap = (
        (lambda a: Tensor(a)) if lib == "tensor" else (lambda a: torch.tensor(a))
    )
    for step in steps:
        if step == "matmul" and len(x.shape) < 2:
            step = "add"  # the engine's matmul needs 2-D operands
        if step in ("add", "sub", "mul", "div", "matmul"):
            other = wrap(operands(step, tuple(x.shape)))
            if step == "add":
                x = x + other
            elif step == "sub":
                x = other - x
            elif step == "mul":
                x = x * other
            elif step == "div":
                x = x / other
            else:
                x = x @ other
        elif step == "tanh":
            x = x.tanh()
        elif step == "sigmoid":
            x = x.sigmoid()
        elif step == "exp_tanh":
            x = x.tanh().exp()
        elif step == "log_sq":
            x = (x * x + 1).log()
        elif step == "relu":
            x = x.relu() + x * 0.1
        elif step == "pow2":
            x = x.tanh() ** 2
        elif step == "neg":
            x = -x
        elif step == "sum0" and len(x.shape) > 1:
            x = x.sum(0)
        elif step == "mean_last":
            x = x.mean(-1, keepdims=True) + x
        elif step == "softmax":
            x = x.softmax(-1)
        elif step == "log_softmax":
            x = x.log_softmax(-1)
    return x
