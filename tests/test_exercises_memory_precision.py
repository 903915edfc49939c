"""The checks of chapter 10's exercises: a right answer is correct, a stub
is not attempted, typical wrong answers get a hint."""

from __future__ import annotations

import numpy as np

from backprop_lessons.exercises.memory_and_precision import (
    check_merge,
    check_unscale_or_skip,
)


def merge(state1, state2):
    (m1, l1, o1), (m2, l2, o2) = state1, state2
    m = np.maximum(m1, m2)
    a1, a2 = np.exp(m1 - m), np.exp(m2 - m)
    return m, a1 * l1 + a2 * l2, a1 * o1 + a2 * o2


def merge_unscaled(state1, state2):  # forgets to rescale
    (m1, l1, o1), (m2, l2, o2) = state1, state2
    return np.maximum(m1, m2), l1 + l2, o1 + o2


def unscale_or_skip(grads, scale):
    if not all(np.isfinite(g).all() for g in grads.values()):
        return None, scale / 2
    return {k: g / scale for k, g in grads.items()}, scale


def never_skips(grads, scale):
    return {k: g / scale for k, g in grads.items()}, scale


def stub(*args):
    raise NotImplementedError


def test_merge_check(capsys):
    assert check_merge(merge, exercise=1).correct
    verdict = check_merge(merge_unscaled, exercise=1)
    assert verdict.status == "not yet" and "rescale" in verdict.hint
    assert not check_merge(stub, exercise=1).attempted
    assert "Exercise 1: not attempted yet" in capsys.readouterr().out


def test_unscale_or_skip_check(capsys):
    assert check_unscale_or_skip(unscale_or_skip, exercise=2).correct
    verdict = check_unscale_or_skip(never_skips, exercise=2)
    assert verdict.status == "not yet" and "skip" in verdict.hint
    assert not check_unscale_or_skip(stub, exercise=2).attempted
    assert "Exercise 2: not attempted yet" in capsys.readouterr().out
