"""The array formulas several modules share, and number formatting.

Array functions (NumPy; shape legend: `(...)` any shape, `(..., K)` K
classes along `axis`), each computed so that `exp` never overflows:

    sigmoid(z)                1 / (1 + e^-z), elementwise
    softmax(z, axis=-1)       e^z / sum(e^z)
    log_softmax(z, axis=-1)   z - log(sum(e^z))
    one_hot(y, K)             integer labels (B,) -> rows (B, K) of 0s and a 1
    format_fixed(x, digits)   fixed-point text without "-0.0000"

They are the forward formulas of the Tensor engine (`tensor.py`), the
hand-written MLPs (`mlp3.py`, `deep_mlp.py`) and GPT sampling
(`gpt/train.py`), written once.  The scalar engine keeps its own
`float_sigmoid` on Python floats: a NumPy call per number would cost more
than the arithmetic.  The checks of inputs are in `validate`.

What this is not: a place for anything with a backward.  A function here is
plain forward arithmetic; the backward rules stay next to their forward in
the engines.
"""

from __future__ import annotations

import numpy as np

from .validate import below

__all__ = ["sigmoid", "softmax", "log_softmax", "one_hot", "format_fixed"]


def sigmoid(z: np.ndarray) -> np.ndarray:
    """1 / (1 + exp(-z)) without overflow: exp is only ever taken of -|z| <= 0."""
    e = np.exp(-np.abs(z))  # (...) in (0, 1]
    return np.where(z >= 0, 1 / (1 + e), e / (1 + e)).astype(z.dtype, copy=False)


def softmax(z: np.ndarray, axis: int = -1) -> np.ndarray:
    """exp(z) / sum(exp(z)) along `axis`; exp never sees a positive number."""
    e = np.exp(z - z.max(axis=axis, keepdims=True))  # (..., K) in (0, 1]
    return e / e.sum(axis=axis, keepdims=True)  # (..., K) sums to 1 along axis


def log_softmax(z: np.ndarray, axis: int = -1) -> np.ndarray:
    """z - log(sum(exp(z))) along `axis`, with the maximum subtracted first."""
    shifted = z - z.max(axis=axis, keepdims=True)  # (..., K) the max is now 0
    return shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))


def one_hot(y, K: int, dtype=np.float64) -> np.ndarray:
    """Integer labels (B,) in [0, K) -> one-hot rows (B, K)."""
    y = np.asarray(y)
    if y.ndim != 1 or (y.size and y.dtype.kind not in "iu"):
        raise ValueError(
            "one_hot: labels must be a 1-D array of integers, "
            f"got shape {y.shape} and dtype {y.dtype}"
        )
    below("one_hot", "labels", y, K)
    Y = np.zeros((y.shape[0], K), dtype=dtype)  # (B, K)
    Y[np.arange(y.shape[0]), y] = 1
    return Y


# ---- the scalar engines' operands and domains (Value, Dual) ----------------


def format_fixed(x: float, digits: int) -> str:
    """`x` with `digits` decimals; a value that rounds to zero prints without
    its sign ("0.0000", never "-0.0000", which would look like information)."""
    text = f"{x:.{digits}f}"
    return text[1:] if text.startswith("-") and float(text) == 0.0 else text
