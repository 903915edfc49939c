"""Tests of `backprop_lessons.timing.best_time`: counts, not clocks.

The helper's contract is that it calls `fn` exactly `repeat` times and
returns the smallest of the measured durations; both are checked with a
fake clock, so nothing here depends on how loaded the machine is.
"""

from __future__ import annotations

import pytest

from backprop_lessons import timing
from backprop_lessons.timing import best_time


def test_best_time_calls_fn_repeat_times():
    calls = []
    best_time(lambda: calls.append(1), repeat=7)
    assert len(calls) == 7


def test_best_time_returns_the_smallest_duration(monkeypatch):
    # perf_counter readings around each call: durations 5, 2 and 9 seconds
    readings = iter([0.0, 5.0, 10.0, 12.0, 20.0, 29.0])
    monkeypatch.setattr(timing.time, "perf_counter", lambda: next(readings))
    assert best_time(lambda: None, repeat=3) == 2.0


def test_best_time_reads_the_clock_it_is_given():
    # a CPU-time clock: durations 3 and 1 seconds
    readings = iter([0.0, 3.0, 4.0, 5.0])
    assert best_time(lambda: None, repeat=2, clock=lambda: next(readings)) == 1.0


@pytest.mark.parametrize("repeat", [0, -1, 2.5, True])
def test_best_time_needs_a_positive_repeat(repeat):
    with pytest.raises(
        ValueError, match="best_time: repeat must be a positive int"
    ):
        best_time(lambda: None, repeat=repeat)


def test_theoretical_peak_is_the_product_of_its_factors():
    from backprop_lessons.timing import TheoreticalPeak, theoretical_peak

    peak = TheoreticalPeak(
        cores=4, fma_units=2, lanes=16, clock_ghz=2.5, flags="x"
    )
    assert peak.flops == 4 * 2 * 16 * 2 * 2.5e9
    assert "= 640 GFLOP/s" in str(peak)
    here = theoretical_peak(cores=1)
    assert here is None or (here.cores == 1 and here.lanes in (4, 8, 16))
