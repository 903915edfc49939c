"""Checks for the exercises of "Backprop at scale" (chapter 8).

    check_predicted_flops(predicted_flops)   matmul FLOPs of forward and backward
    check_combine(combine)                   shards of unequal size
    check_rank_accumulation(rank_times_accumulation)
                                             ranks that also accumulate

FLOPs are counted by `backward_cost.count_flops`; gradients are compared
with the full batch's (`distributed.full_batch_gradients`).  Each check
prints "Exercise N: ..." and returns a `Verdict` (see `checking`).

`SELF_CHECKS` holds the chapter's self-check questions (`questions`).
"""

from __future__ import annotations

import numpy as np

from .checking import NotYet, Verdict, attempt, require_filled, run_check
from .questions import Number

__all__ = [
    "check_predicted_flops",
    "check_combine",
    "check_rank_accumulation",
    "SELF_CHECKS",
]


def check_predicted_flops(predicted_flops, *, exercise: int) -> Verdict:
    """predicted_flops(sizes, batch) -> (forward, backward) matmul FLOPs of a
    tanh MLP on inputs that need no gradient, against the counted ones."""
    import torch

    from ..scale.backward_cost import count_flops

    def check(predicted_flops):
        todo = "write predicted_flops(sizes, batch) and run its cell"
        for sizes, batch in (((32, 64, 64, 10), 128), ((5, 7, 3), 4)):
            torch.manual_seed(0)
            layers = []
            for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
                layers += [torch.nn.Linear(fan_in, fan_out), torch.nn.Tanh()]
            mlp = torch.nn.Sequential(*layers[:-1])
            forward, out = count_flops(mlp, torch.randn(batch, sizes[0]))
            backward, _ = count_flops(out.sum().backward)
            predicted = attempt(predicted_flops, sizes, batch, todo=todo)
            if tuple(predicted) != (forward, backward):
                raise NotYet(
                    f"for sizes {sizes} and batch {batch} the counts are "
                    f"forward {forward:,}, backward {backward:,}; you predicted "
                    f"{predicted!r} (which input gradient is never computed?)"
                )

    return run_check(exercise, check, predicted_flops)


def check_combine(combine, *, exercise: int) -> Verdict:
    """combine(grads, sizes): the full batch's mean-loss gradient from the
    shards' mean-loss gradients, for shards of 4, 3 and 3 examples."""
    import torch

    def check(combine):
        todo = "write combine(grads, sizes) and run its cell"
        torch.manual_seed(0)
        model = torch.nn.Linear(3, 1, dtype=torch.float64)
        x = torch.randn(10, 3, dtype=torch.float64)
        y = torch.randn(10, 1, dtype=torch.float64)

        def gradient(xb, yb):
            model.zero_grad()
            torch.nn.functional.mse_loss(model(xb), yb).backward()
            return model.weight.grad.clone()

        cuts = [(0, 4), (4, 7), (7, 10)]
        grads = [gradient(x[a:b], y[a:b]) for a, b in cuts]
        sizes = [b - a for a, b in cuts]
        got = attempt(combine, grads, sizes, todo=todo)
        want = gradient(x, y)
        try:
            got = torch.as_tensor(got, dtype=torch.float64)
        except (TypeError, ValueError, RuntimeError):
            got = None
        if got is None or got.shape != want.shape:
            raise NotYet(
                "combine returns one tensor of the shards' gradients' shape: "
                "the weight's gradient"
            )
        if not torch.allclose(got, want, rtol=1e-12):
            raise NotYet(
                "that is not the full batch's gradient: weight each shard by "
                "its number of examples"
            )

    return run_check(exercise, check, combine)


def check_rank_accumulation(rank_times_accumulation, *, exercise: int) -> Verdict:
    """rank_times_accumulation(model, x, y, ranks, micro) -> {name: gradient}
    equal to the full batch's, for 2 ranks of 2 micro-batches each."""
    from ..scale.distributed import full_batch_gradients, make_mlp

    def check(rank_times_accumulation):
        todo = "write rank_times_accumulation(...) and run its cell"
        rng = np.random.default_rng(0)
        x, y = rng.normal(size=(16, 4)), rng.normal(size=(16, 1))
        reference = full_batch_gradients(x, y)
        got = attempt(rank_times_accumulation, make_mlp(), x, y, 2, 2, todo=todo)
        got = require_filled(got, todo)
        if not isinstance(got, dict) or list(got) != list(reference):
            raise NotYet(
                f"return a dict with the keys {list(reference)}, in order"
            )
        for name, g in reference.items():
            if not np.allclose(np.asarray(got[name]), g, rtol=1e-12, atol=1e-15):
                raise NotYet(
                    f"{name} differs from the full batch's gradient: divide by "
                    "the micro-batches on each rank and by the ranks at the end"
                )

    return run_check(exercise, check, rank_times_accumulation)


# ---- self-checks -------------------------------------------------------------

#: The chapter's self-check questions, shown by `widgets.self_check`.
SELF_CHECKS = {
    "flops-per-token": Number(
        "A model's matmuls hold N = 10⁹ parameters and its context is short, so "
        "training costs about 6 FLOPs per parameter per token. How many FLOPs "
        "does one training step on 1,000 tokens cost?",
        answer=6e12,
        rel_tolerance=1e-3,
        hint="Forward 2N per token, backward 4N per token.",
        explanation="6 · 10⁹ · 1,000 = 6 · 10¹² FLOPs: 2N for the forward and 4N "
        "for the backward (two matmuls of the forward's size).",
    ),
    "ring-all-reduce-bytes": Number(
        "In a ring all-reduce each of R ranks sends 2(R - 1)/R times the "
        "gradient's bytes. With R = 4 ranks and 100 MB of gradients, how many "
        "MB does each rank send per step?",
        answer=150,
        unit="MB",
        hint="Put R = 4 into 2(R - 1)/R, then multiply by the gradient's size.",
        explanation="2 · 3/4 · 100 MB = 150 MB, and it tends to 2 × 100 MB as R "
        "grows: a rank's traffic barely depends on the number of "
        "ranks.",
    ),
}
