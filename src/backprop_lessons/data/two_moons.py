"""Two interleaving half circles: a seeded 2-class dataset for the scalar
engine (no downloads).

    two_moons(n, noise, seed) -> X (n lists [x1, x2] of floats), y (n labels)
"""

from __future__ import annotations

import math
import random

from ..validate import non_negative, positive_int

__all__ = ["two_moons"]


def two_moons(
    n: int = 100, noise: float = 0.1, seed: int = 0
) -> tuple[list[list[float]], list[int]]:
    """`n` points on two interleaving half circles, with Gaussian noise.

    Returns `(X, y)`: `X` a list of `[x1, x2]` floats, `y` a list of labels
    (0 for the upper moon, centered at (0, 0); 1 for the lower one, centered at
    (1, 0.5)).  The same arguments always give the same points; the points
    are shuffled so that the classes alternate at random.  Plain lists, so
    they feed the scalar engine directly (`np.array(X)` for NumPy).
    """
    n = positive_int("two_moons", "n", n, minimum=2)
    noise = non_negative("two_moons", "noise", noise)
    rng = random.Random(seed)
    n_upper = n // 2
    n_lower = n - n_upper
    points = []
    for i in range(
        n_upper
    ):  # upper moon: the half circle (cos t, sin t), t in [0, pi]
        t = math.pi * i / max(n_upper - 1, 1)
        points.append(([math.cos(t), math.sin(t)], 0))
    for i in range(n_lower):  # lower moon: (1 - cos t, 0.5 - sin t)
        t = math.pi * i / max(n_lower - 1, 1)
        points.append(([1.0 - math.cos(t), 0.5 - math.sin(t)], 1))
    for xy, _ in points:
        xy[0] += rng.gauss(0.0, noise)
        xy[1] += rng.gauss(0.0, noise)
    rng.shuffle(points)
    return [xy for xy, _ in points], [label for _, label in points]
