"""Checks for the exercises of "The backward of model parallelism" (chapter
12).

    check_all_gather_backward(all_gather_backward)
    check_broadcast_backward(broadcast_backward)

The reader writes a collective's backward on a simulated group: a list that
holds every rank's array, rank r at index r (no processes needed).  The
check compares it with the exact VJP and runs the dot-product test a VJP
must pass, sum_r <y_r, w_r> = sum_r <x_r, backward(w)_r> for the forward
y = collective(x).  Each check prints "Exercise N: ..." and returns a
`Verdict` (see `checking`).

`SELF_CHECKS` holds the chapter's self-check questions (`questions`).
"""

from __future__ import annotations

import numpy as np

from .checking import NotYet, Verdict, attempt, close, run_check
from .questions import Choice, Number

__all__ = [
    "all_gather_forward",
    "broadcast_forward",
    "check_all_gather_backward",
    "check_broadcast_backward",
    "SELF_CHECKS",
]


def all_gather_forward(xs: list) -> list:
    """Every rank gets the concatenation of all ranks' arrays (axis 0)."""
    whole = np.concatenate(xs)
    return [whole.copy() for _ in xs]


def broadcast_forward(xs: list, src: int) -> list:
    """Every rank gets rank src's array."""
    return [xs[src].copy() for _ in xs]


def _dot(a: list, b: list) -> float:
    return float(sum(np.vdot(x, y) for x, y in zip(a, b)))


def _check_backward(backward, forward, expected, todo, args, sizes):
    rng = np.random.default_rng(0)
    for world, n in sizes:
        xs = [rng.normal(size=n) for _ in range(world)]
        ys = forward(xs, *args)
        ws = [rng.normal(size=y.shape) for y in ys]
        got = attempt(backward, [w.copy() for w in ws], *args, todo=todo)
        if not isinstance(got, (list, tuple)) or len(got) != world:
            raise NotYet(
                f"return a list with one array per rank ({world} here), "
                f"got {type(got).__name__}"
            )
        want = expected(ws, *args)
        for r, (g, e) in enumerate(zip(got, want)):
            if np.shape(g) != e.shape:
                raise NotYet(
                    f"with {world} ranks, rank {r}'s gradient must have its "
                    f"input's shape {e.shape}, got {np.shape(g)}"
                )
        if not close(np.concatenate(got), np.concatenate(want), 1e-12):
            lhs, rhs = _dot(ys, ws), _dot(xs, got)
            raise NotYet(
                f"with {world} ranks the dot-product test fails: "
                f"sum <y_r, w_r> = {lhs:.6f} but sum <x_r, dx_r> = "
                f"{rhs:.6f}; which outputs did each input reach?"
            )


def check_all_gather_backward(all_gather_backward, *, exercise: int) -> Verdict:
    """all_gather_backward(ws) -> dxs, ws[r] the cotangent of rank r's
    gathered output (world * n entries), dxs[r] that of rank r's input (n)."""

    def expected(ws):
        world = len(ws)
        total = np.sum(ws, axis=0)
        return list(np.split(total, world))

    def check(fn):
        _check_backward(
            fn,
            all_gather_forward,
            expected,
            "write all_gather_backward(ws) and run its cell",
            (),
            [(2, 3), (3, 2), (4, 1)],
        )

    return run_check(exercise, check, all_gather_backward)


def check_broadcast_backward(broadcast_backward, *, exercise: int) -> Verdict:
    """broadcast_backward(ws, src) -> dxs for y_r = x_src on every rank."""

    def expected(ws, src):
        total = np.sum(ws, axis=0)
        return [total if r == src else np.zeros_like(w) for r, w in enumerate(ws)]

    def check(fn):
        for src in (0, 1):
            _check_backward(
                fn,
                broadcast_forward,
                expected,
                "write broadcast_backward(ws, src) and run its cell",
                (src,),
                [(2, 3), (3, 2)],
            )

    return run_check(exercise, check, broadcast_backward)


# ---- self-checks -------------------------------------------------------------

#: The chapter's self-check questions, shown by `widgets.self_check`.
SELF_CHECKS = {
    "activation-elements-per-rank": Number(
        "A model has n_layer = 24 blocks of width C = 2048. One tensor-parallel "
        "step processes 4,096 tokens. How many million elements does each rank "
        "put into all-reduces (forward and backward)?",
        answer=4 * 24 * 4096 * 2048 / 1e6,
        rel_tolerance=1e-3,
        unit="million",
        hint="Four all-reduces of (tokens, C) per block: two forward, two "
        "backward.",
        explanation="4 · 24 · 4,096 · 2,048 = 805.3 million elements.",
    ),
    "1f1b-in-flight": Number(
        "A 1F1B pipeline has p = 8 stages and m = 32 micro-batches. How many "
        "micro-batches' activations does stage 0 hold at most?",
        answer=8,
        hint="1F1B: stage s holds at most p - s micro-batches.",
        explanation="p - 0 = 8 (GPipe would hold all 32). The bubble is "
        "7/39, about 0.18, in both.",
    ),
    "interleaved-bubble": Number(
        "An interleaved 1F1B pipeline runs on p = 4 ranks with v = 2 stages "
        "each and m = 8 micro-batches. What share of the step does each rank "
        "idle?",
        answer=3 / 19,
        rel_tolerance=0.02,
        hint="The ramp-up and ramp-down take (p - 1) stage slots, and a "
        "stage is 1/v of the rank's work: (p - 1) / (v m + p - 1).",
        explanation="3 / (16 + 3) = 3/19, about 0.158; without interleaving "
        "it is 3/11, about 0.273.",
    ),
    "sequence-parallel-partial": Choice(
        "Under sequence parallelism, which gradients must be all-reduced over "
        "the tensor-parallel ranks after the backward?",
        choices=[
            "The layer norms' weights and biases, and the row-parallel "
            "layers' biases",
            "The column-parallel layers' weights",
            "Every gradient, as in data parallelism",
            "None: the reduce-scatters already summed them",
        ],
        answer=0,
        hint="Which parameters does a rank apply to its own positions only?",
        explanation="The layer norms and the biases added after the "
        "reduce-scatter act on the rank's T / R positions, so each rank "
        "holds the part of their gradient from those positions. The split "
        "matrices see every position (their inputs are all-gathered) and "
        "their slices' gradients are complete.",
    ),
}
