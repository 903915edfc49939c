"""Interleaved spirals: a seeded classification data set for NumPy models (no
downloads).

spirals(n_per_class, n_classes, noise, seed)
    -> X (n_classes * n_per_class, 2) float64, y (n_classes * n_per_class,) int64
"""

from __future__ import annotations

import numpy as np

from ..validate import non_negative, positive_int

__all__ = ["spirals"]


def spirals(
    n_per_class: int = 100, n_classes: int = 3, noise: float = 0.2, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """`n_classes` spiral arms around the origin, `n_per_class` points each,
    labels 0..n_classes-1.

    Arm k is the curve r (sin t, cos t) with the radius r going from 0 to 1
    while the angle t sweeps 4 radians starting at 4k, plus Gaussian noise of
    standard deviation `noise` on t.  No straight line separates two arms, so
    a linear classifier stays far from 100 % and a network with hidden layers
    does not.  Rows are shuffled; the same arguments always give the same data.
    """
    n_per_class = positive_int("spirals", "n_per_class", n_per_class)
    n_classes = positive_int("spirals", "n_classes", n_classes, minimum=2)
    noise = non_negative("spirals", "noise", noise)
    rng = np.random.default_rng(seed)
    X = np.zeros((n_per_class * n_classes, 2))  # (N, 2)
    y = np.zeros(n_per_class * n_classes, dtype=np.int64)  # (N,)
    for k in range(n_classes):
        rows = slice(n_per_class * k, n_per_class * (k + 1))
        r = np.linspace(0.0, 1.0, n_per_class)  # (n,)
        t = np.linspace(4.0 * k, 4.0 * (k + 1), n_per_class)  # (n,)
        t = t + noise * rng.standard_normal(n_per_class)
        X[rows] = np.column_stack([r * np.sin(t), r * np.cos(t)])
        y[rows] = k
    order = rng.permutation(len(y))
    return X[order], y[order]
