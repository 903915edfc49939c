"""Checks for the exercises of "Backprop at scale" (chapter 8).

    check_predicted_flops(predicted_flops)   matmul FLOPs of forward and backward
    check_combine(combine)                   shards of unequal size
    check_rank_accumulation(rank_times_accumulation)
                                             ranks that also accumulate

FLOPs are counted by `backward_cost.count_flops`; gradients are compared
with the full batch's (`distributed.full_batch_gradients`), on models and
data drawn by the check, not the chapter's.  What an answer may not call is
each check's own (`run_check`'s `refuse=`: the FLOP counter, the full
batch's gradient); PyTorch's autograd is these exercises' tool, refused
nowhere.  No check prints a number the reader is asked to find.  (Exercise
1, a prediction, is `predictions.check_prediction`'s.)  Each check prints
"Exercise N: ..." and returns a `Verdict` (see `checking`).

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


def _flops_refused() -> tuple:
    """What predicted_flops may not call: the counter the check measures
    with (counting is the answer; the exercise asks for a formula)."""
    from torch.utils.flop_counter import FlopCounterMode

    from ..scale.backward_cost import count_flops

    return (count_flops, FlopCounterMode.__enter__)


def _flops_slips(forward: int, backward: int, first: int) -> list:
    """[((forward, backward) of a common slip, what it misses)], for an MLP
    whose first layer's forward costs `first` FLOPs."""
    return [
        (
            (forward, 2 * forward),
            "that backward computes the first layer's input gradient too; its "
            "input is data, which needs no gradient",
        ),
        (
            (forward // 2, backward // 2),
            "those are multiply-adds: count 2 FLOPs for each (a multiply and "
            "an add)",
        ),
        (
            (forward, forward),
            "a matmul's backward is two matmuls of its forward's size, one "
            "per input, wherever both gradients are needed",
        ),
        (
            (forward, forward - first),
            "a matmul's backward is two matmuls of its forward's size, one "
            "per input: only the first layer's input gradient is skipped",
        ),
        ((backward, forward), "the pair is (forward, backward), in that order"),
    ]


def check_predicted_flops(predicted_flops, *, exercise: int) -> Verdict:
    """predicted_flops(sizes, batch) -> (forward, backward) matmul FLOPs of a
    tanh MLP on inputs that need no gradient, against the counted ones, for
    the chapter's MLP and for three more drawn here.  No count is printed
    (they are the answer): a wrong pair is told by its slip, or which way
    each number is off.  Refused: the counter itself (`count_flops`,
    PyTorch's FlopCounterMode), since measuring is the answer."""
    import torch

    from ..scale.backward_cost import count_flops

    def check(predicted_flops):
        todo = "write predicted_flops(sizes, batch) and run its cell"
        rng = np.random.default_rng(8)
        cases = [((32, 64, 64, 10), 128), ((5, 7, 3), 4)]
        cases += [
            (tuple(int(n) for n in rng.integers(2, 40, size=k)), int(b))
            for k, b in ((3, 9), (4, 17), (5, 1))
        ]
        for sizes, batch in cases:
            torch.manual_seed(0)
            layers = []
            for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
                layers += [torch.nn.Linear(fan_in, fan_out), torch.nn.Tanh()]
            mlp = torch.nn.Sequential(*layers[:-1])
            forward, out = count_flops(mlp, torch.randn(batch, sizes[0]))
            backward, _ = count_flops(out.sum().backward)
            predicted = attempt(predicted_flops, sizes, batch, todo=todo)
            if not (isinstance(predicted, (tuple, list)) and len(predicted) == 2):
                raise NotYet("return the pair (forward, backward)")
            if tuple(predicted) == (forward, backward):
                continue
            where = f"for sizes {sizes} and batch {batch}"
            first = 2 * batch * sizes[0] * sizes[1]
            for slip, hint in _flops_slips(forward, backward, first):
                if tuple(predicted) == slip:
                    raise NotYet(f"{where}: {hint}")
            off = [
                f"your {name} is {'too high' if mine > right else 'too low'}"
                for name, mine, right in zip(
                    ("forward", "backward"), predicted, (forward, backward)
                )
                if mine != right
            ]
            hint = (
                "which input gradient is never computed?"
                if predicted[0] == forward
                else "a layer's forward is 2 x batch x fan_in x fan_out FLOPs"
            )
            raise NotYet(f"{where}, {' and '.join(off)} ({hint})")

    return run_check(exercise, check, predicted_flops, refuse=_flops_refused())


def check_combine(combine, *, exercise: int) -> Verdict:
    """combine(grads, sizes): the full batch's mean-loss gradient from the
    shards' mean-loss gradients, for shards of 4, 3 and 3 examples and of
    2, 5, 1 and 4, on a model and data drawn here (not the chapter's).

    Nothing is refused: the gradients are the reader's input, the batch
    they came from is not, and the package has no function that combines
    unequal shards (`distributed.shard` refuses them)."""
    import torch

    def check(combine):
        todo = "write combine(grads, sizes) and run its cell"
        for seed, sizes in ((7, (4, 3, 3)), (8, (2, 5, 1, 4))):
            torch.manual_seed(seed)
            model = torch.nn.Linear(3, 1, dtype=torch.float64)
            x = torch.randn(sum(sizes), 3, dtype=torch.float64)
            y = torch.randn(sum(sizes), 1, dtype=torch.float64)

            def gradient(xb, yb, model=model):
                model.zero_grad()
                torch.nn.functional.mse_loss(model(xb), yb).backward()
                return model.weight.grad.clone()

            ends = np.cumsum((0, *sizes))
            grads = [gradient(x[a:b], y[a:b]) for a, b in zip(ends, ends[1:])]
            got = attempt(combine, grads, list(sizes), todo=todo)
            want = gradient(x, y)
            try:
                got = torch.as_tensor(got, dtype=torch.float64)
            except (TypeError, ValueError, RuntimeError):
                got = None
            if got is None or got.shape != want.shape:
                raise NotYet(
                    "combine returns one tensor of the shards' gradients' "
                    "shape: the weight's gradient"
                )
            if not torch.allclose(got, want, rtol=1e-12):
                raise NotYet(
                    f"with shards of {', '.join(map(str, sizes))} examples, "
                    "that is not the full batch's gradient: weight each shard "
                    "by its number of examples"
                )

    return run_check(exercise, check, combine)


def check_rank_accumulation(rank_times_accumulation, *, exercise: int) -> Verdict:
    """rank_times_accumulation(model, x, y, ranks, micro) -> {name: gradient}
    equal to the full batch's, for 2 ranks of 2 micro-batches each (the
    chapter's), 4 ranks of 1 and 1 rank of 4, on batches of 16 drawn here,
    each forward on one micro-batch.

    Refused: `distributed.full_batch_gradients`, the book's own gradient of
    the whole batch (the answer).  PyTorch's autograd is the exercise's
    tool (each micro-batch's backward), not refused."""
    from ..scale.distributed import full_batch_gradients, make_mlp

    def check(rank_times_accumulation):
        todo = "write rank_times_accumulation(...) and run its cell"
        rng = np.random.default_rng(5)
        for seed, ranks, micro in ((1, 2, 2), (2, 4, 1), (3, 1, 4)):
            x, y = rng.normal(size=(16, 4)), rng.normal(size=(16, 1))
            reference = full_batch_gradients(x, y, seed=seed)
            model = make_mlp(seed=seed)
            rows = []  # the examples each forward of the model ran on
            hook = model.register_forward_pre_hook(
                lambda module, args, rows=rows: rows.append(len(args[0]))
            )
            try:
                got = attempt(
                    rank_times_accumulation, model, x, y, ranks, micro, todo=todo
                )
            finally:
                hook.remove()
            got = require_filled(got, todo)
            if not isinstance(got, dict) or list(got) != list(reference):
                raise NotYet(
                    f"return a dict with the keys {list(reference)}, in order"
                )
            where = f"with {ranks} ranks of {micro} micro-batches"
            if rows and max(rows) > 16 // (ranks * micro):
                raise NotYet(
                    f"{where}, a forward ran on {max(rows)} of the 16 "
                    "examples: every backward takes one micro-batch"
                )
            for name, g in reference.items():
                if not np.allclose(
                    np.asarray(got[name]), g, rtol=1e-12, atol=1e-15
                ):
                    raise NotYet(
                        f"{where}, {name} differs from the full batch's "
                        "gradient: divide by the micro-batches on each rank "
                        "and by the ranks at the end"
                    )

    return run_check(
        exercise,
        check,
        rank_times_accumulation,
        refuse=(full_batch_gradients,),
    )


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
