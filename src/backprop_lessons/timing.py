"""The one timing helper of the chapters: the best of a few runs.

    best_time(fn, repeat=5) -> seconds
    theoretical_peak() -> TheoreticalPeak (the CPU's float32 peak, for MFU)

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
from dataclasses import dataclass

from .validate import positive_int

__all__ = ["best_time", "theoretical_peak", "TheoreticalPeak"]


def best_time(
    fn: Callable[[], object],
    repeat: int = 5,
    clock: Callable[[], float] | None = None,
) -> float:
    """The fewest seconds one call `fn()` took, over `repeat` calls.

    `clock` reads the time: wall-clock seconds (`time.perf_counter`) by
    default; pass `time.process_time` for this process's CPU seconds,
    which other programs on a busy machine disturb far less (the time
    spent waiting for a core does not count).
    """
    repeat = positive_int("best_time", "repeat", repeat)
    clock = time.perf_counter if clock is None else clock
    best = float("inf")
    for _ in range(repeat):
        start = clock()
        fn()
        best = min(best, clock() - start)
    return best


@dataclass(frozen=True)
class TheoreticalPeak:
    """A CPU's theoretical float32 peak, derived from its flags and clock.

    flops = cores x fma_units x lanes x 2 (an FMA is a multiply and an add)
    x clock.  `lanes` is the float32 width of the widest vector instructions
    the flags list (avx512f: 16, avx2 or avx: 8, else sse: 4); `fma_units`
    is an assumption (2 per core on recent x86 server cores), and some cores
    run 512-bit instructions as two 256-bit halves (AMD Zen 4), which halves
    what the flags promise; `clock_ghz` is what /proc/cpuinfo reports, not
    a boost clock.  It is the book's formula for a CPU's peak, the
    denominator of MFU as PaLM defines MFU; the rate a matrix product
    reaches on the machine is a different, measured, figure.
    """

    cores: int
    fma_units: int
    lanes: int
    clock_ghz: float
    flags: str

    @property
    def flops(self) -> float:
        return self.cores * self.fma_units * self.lanes * 2 * self.clock_ghz * 1e9

    def __str__(self) -> str:
        return (
            f"{self.cores} core{'s' if self.cores != 1 else ''} x "
            f"{self.fma_units} FMA units x {self.lanes} "
            f"float32 lanes ({self.flags}) x 2 x {self.clock_ghz:.2f} GHz "
            f"= {self.flops / 1e9:.0f} GFLOP/s"
        )


def theoretical_peak(cores: int | None = None, fma_units: int = 2):
    """The TheoreticalPeak of this machine's CPU (Linux: /proc/cpuinfo), or
    None where the flags or the clock cannot be read.  `cores`: how many the
    computation may use (default: the CPUs this process may run on)."""
    import os
    import re
    from pathlib import Path

    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return None
    flags = set(re.search(r"^flags\s*:(.*)$", text, re.M).group(1).split())
    mhz = re.search(r"^cpu MHz\s*:\s*([\d.]+)", text, re.M)
    if not flags or mhz is None:
        return None
    widths = (("avx512f", 16), ("avx2", 8), ("avx", 8), ("sse", 4))
    flag, lanes = next((f, n) for f, n in widths if f in flags or f == "sse")
    if cores is None:
        cores = len(os.sched_getaffinity(0))
    return TheoreticalPeak(
        cores, fma_units, lanes, float(mhz.group(1)) / 1e3, flag
    )
