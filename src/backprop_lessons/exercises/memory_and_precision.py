"""Checks for the exercises of "Memory and precision" (chapter 10).

    check_merge(merge)                 two online-softmax states into one
    check_unscale_or_skip(unscale_or_skip)
                                       one step of dynamic loss scaling

Each check prints "Exercise N: ..." and returns a `Verdict` (see
`checking`).

`SELF_CHECKS` holds the chapter's self-check questions (`questions`).
"""

from __future__ import annotations

import numpy as np

from .checking import NotYet, Verdict, attempt, close, run_check
from .questions import Number

__all__ = ["check_merge", "check_unscale_or_skip", "SELF_CHECKS"]


def _state(scores, values):
    """(m, l, o) of an online softmax over the given keys, per row:
    scores (R, K), values (K, D)."""
    m = scores.max(axis=-1, keepdims=True)  # (R, 1)
    e = np.exp(scores - m)  # (R, K)
    return m, e.sum(axis=-1, keepdims=True), e @ values  # l (R, 1), o (R, D)


def check_merge(merge, *, exercise: int) -> Verdict:
    """merge((m1, l1, o1), (m2, l2, o2)) -> (m, l, o): the state of the
    online softmax over the union of two disjoint sets of keys."""

    def check(merge):
        todo = "write merge(state1, state2) and run its cell"
        rng = np.random.default_rng(0)
        for shift in (0.0, 30.0, -30.0):
            scores = rng.standard_normal((5, 12)) * 4  # (R, K)
            scores[:, 7:] += shift  # very unequal maxima
            values = rng.standard_normal((12, 3))  # (K, D)
            first = _state(scores[:, :7], values[:7])
            second = _state(scores[:, 7:], values[7:])
            got = attempt(merge, first, second, todo=todo)
            if not (isinstance(got, tuple) and len(got) == 3):
                raise NotYet("return a tuple (m, l, o)")
            m, l, o = (np.asarray(a, dtype=np.float64) for a in got)
            out = o / l
            reference = _state(scores, values)
            want = reference[2] / reference[1]
            if not close(out, want, 1e-12):
                raise NotYet(
                    "o / l is not the softmax-weighted sum of all the values: "
                    "rescale each state's l and o by exp(its m - the new m)"
                    + (
                        " (the maxima differ by 30 here: check both states)"
                        if shift
                        else ""
                    )
                )
            if not close(
                m + np.log(l), reference[0] + np.log(reference[1]), 1e-12
            ):
                raise NotYet(
                    "o / l is right, but m + log l is not the "
                    "logsumexp of all the scores"
                )

    return run_check(exercise, check, merge)


def check_unscale_or_skip(unscale_or_skip, *, exercise: int) -> Verdict:
    """unscale_or_skip(grads, scale) -> (grads / scale or None, new scale):
    the unscaled gradients and the same scale when every gradient is
    finite, else None (skip the step) and half the scale."""

    def check(unscale_or_skip):
        todo = "write unscale_or_skip(grads, scale) and run its cell"
        rng = np.random.default_rng(0)
        grads = {
            "w": rng.standard_normal((3, 4)).astype(np.float32) * 2**12,
            "b": rng.standard_normal(4).astype(np.float32) * 2**12,
        }
        got = attempt(
            unscale_or_skip,
            {k: g.copy() for k, g in grads.items()},
            2.0**12,
            todo=todo,
        )
        if not (isinstance(got, tuple) and len(got) == 2):
            raise NotYet("return a pair (grads or None, new scale)")
        unscaled, scale = got
        if unscaled is None:
            raise NotYet("every gradient was finite: the step must be taken")
        if scale != 2.0**12:
            raise NotYet(
                "after a finite step keep the scale (growing it is "
                "a separate rule)"
            )
        for k, g in grads.items():
            if not close(unscaled[k], g / 2.0**12, 1e-7):
                raise NotYet(f"{k}: the gradients must be divided by the scale")
        for bad in (np.inf, -np.inf, np.nan):
            broken = {k: g.copy() for k, g in grads.items()}
            broken["b"][2] = bad
            got = attempt(unscale_or_skip, broken, 2.0**12, todo=todo)
            if got[0] is not None:
                raise NotYet(
                    f"a gradient holds {bad}: return None to skip the step"
                )
            if got[1] != 2.0**11:
                raise NotYet("after a skipped step, halve the scale")

    return run_check(exercise, check, unscale_or_skip)


# ---- self-checks -------------------------------------------------------------

#: The chapter's self-check questions, shown by `widgets.self_check`.
SELF_CHECKS = {
    "attention-probabilities-mib": Number(
        "Still per layer and sequence, with 12 heads in float32: how many MiB "
        "do the eager attention's probabilities take at T = 2048?",
        answer=4 * 12 * 2048**2 / 2**20,
        hint="4 bytes x n_head x T x T, divided by 2^20.",
        explanation="4 · 12 · 2048² / 2²⁰ = 192 MiB, four times the 48 MiB at "
        "T = 1024: the probabilities grow with T².",
    ),
    "largest-logit-gradient": Number(
        "In that run B x T = 64 positions, so the gradient of the mean loss "
        "with respect to any one logit is at most 1/64 in size. How large can "
        "it be in the scaled backward at s = 2^17?",
        answer=2**17 / 64,
        hint="The scaled loss is s times the loss, so every gradient is s times "
        "larger.",
        explanation="2¹⁷ / 64 = 2,048, comfortably below float16's 65,504; "
        "the overflows at larger s happen further down the "
        "backward, where such gradients are summed and multiplied.",
    ),
}
