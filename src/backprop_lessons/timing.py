"""The one timing helper of the chapters: the best of a few runs.

    best_time(fn, repeat=5) -> seconds

A timing on a shared machine is the true cost plus whatever else the
machine was doing; the fastest of several runs is the least disturbed, so
it is the figure to compare (the same reasoning as `timeit`'s documentation
gives).  Timings are illustrations: a chapter prints them in a cell tagged
for nbval to ignore, and what it checks rests on counts or on ratios with a
margin no load can eat.

What this is not: a benchmark harness.  `benchmarks/` alternates the sides
it compares, pins thread counts and validates both sides first.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from .numerics import positive_int

__all__ = ["best_time"]


def best_time(fn: Callable[[], object], repeat: int = 5) -> float:
    """The fewest seconds one call `fn()` took, over `repeat` calls."""
    repeat = positive_int("best_time", "repeat", repeat)
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best
