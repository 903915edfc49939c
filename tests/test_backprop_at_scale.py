"""Chapter 8's checks (exercises 2-4) against gaming: the FLOP count may
not be measured (the book's counter, directly or bound at import, PyTorch's
FlopCounterMode through its method), its hint never prints a count, and
the combination and the accumulation are checked on models and data of
the check's own, where the chapter's own numbers copied in fail;
`full_batch_gradients`, the answer, is refused.  PyTorch's autograd is
these exercises' tool and stays allowed."""

from __future__ import annotations

import numpy as np
import pytest

from backprop_lessons.exercises import backprop_at_scale as E
from verdicts import refused

torch = pytest.importorskip("torch")


def flops(sizes, batch):
    layer = [2 * batch * a * b for a, b in zip(sizes[:-1], sizes[1:])]
    return sum(layer), 2 * sum(layer) - layer[0]


def test_the_flops_may_not_be_measured(capsys):
    from torch.utils.flop_counter import FlopCounterMode

    from backprop_lessons.scale.backward_cost import count_flops

    def counted(sizes, batch):  # the book's counter, bound at import
        layers = [torch.nn.Linear(a, b) for a, b in zip(sizes[:-1], sizes[1:])]
        mlp, x = torch.nn.Sequential(*layers), torch.randn(batch, sizes[0])
        forward, out = count_flops(mlp, x)
        backward, _ = count_flops(out.sum().backward)
        return forward, backward

    def by_pytorch(sizes, batch):  # PyTorch's counter, through its method
        with FlopCounterMode(display=False) as counter:
            torch.nn.Linear(sizes[0], sizes[1])(torch.randn(batch, sizes[0]))
        return counter.get_total_flops(), 0

    assert E.check_predicted_flops(flops, exercise=2).correct
    refused(
        E.check_predicted_flops(counted, exercise=2),
        "backprop_lessons.scale.backward_cost.count_flops",
    )
    refused(
        E.check_predicted_flops(by_pytorch, exercise=2),
        "torch.utils.flop_counter.FlopCounterMode.__enter__",
    )


@pytest.mark.parametrize(
    "wrong, words",
    [
        (lambda s, b: (flops(s, b)[0], 2 * flops(s, b)[0]), "input gradient too"),
        (lambda s, b: (flops(s, b)[0] // 2, flops(s, b)[1] // 2), "multiply-add"),
        (lambda s, b: flops(s, b)[::-1], "(forward, backward), in that order"),
        (
            lambda s, b: (flops(s, b)[0], flops(s, b)[1] + 5),
            "backward is too high",
        ),
        (lambda s, b: flops(s, b)[0], "return the pair"),
    ],
)
def test_a_wrong_flop_count_is_told_without_the_counts(wrong, words, capsys):
    verdict = E.check_predicted_flops(wrong, exercise=2)
    assert verdict.status == "not yet" and words in verdict.hint, verdict
    forward, backward = flops((32, 64, 64, 10), 128)
    for count in (forward, backward):
        assert f"{count:,}" not in verdict.hint and str(count) not in verdict.hint


def test_a_table_of_the_chapters_mlps_does_not_pass(capsys):
    table = {((32, 64, 64, 10), 128): flops((32, 64, 64, 10), 128)}
    table[(5, 7, 3), 4] = flops((5, 7, 3), 4)
    verdict = E.check_predicted_flops(
        lambda s, b: table.get((tuple(s), b), (0, 0)), exercise=2
    )
    assert verdict.status == "not yet"


def test_combine_meets_shards_of_its_own(capsys):
    """The chapter's full-batch gradient, copied in, is not the answer for
    the check's model and shards."""
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1, dtype=torch.float64)
    x = torch.randn(10, 3, dtype=torch.float64)
    y = torch.randn(10, 1, dtype=torch.float64)
    torch.nn.functional.mse_loss(model(x), y).backward()
    full = model.weight.grad.clone()

    def right(grads, sizes):
        return sum(n * g for n, g in zip(sizes, grads)) / sum(sizes)

    assert E.check_combine(right, exercise=3).correct
    assert E.check_combine(lambda g, s: full, exercise=3).status == "not yet"
    verdict = E.check_combine(lambda g, s: sum(g) / len(g), exercise=3)
    assert "shards of 4, 3, 3" in verdict.hint


def rank_times_accumulation(model, x, y, ranks, micro):
    from backprop_lessons.scale import distributed

    total = {n: torch.zeros_like(p) for n, p in model.named_parameters()}
    for r in range(ranks):
        model.zero_grad()
        xr, yr = distributed.shard(x, r, ranks), distributed.shard(y, r, ranks)
        for k in range(micro):
            xb = distributed.shard(xr, k, micro)
            yb = distributed.shard(yr, k, micro)
            (distributed.mse_loss(model, xb, yb) / micro).backward()
        for n, p in model.named_parameters():
            total[n] += p.grad
    return {n: (g / ranks).numpy() for n, g in total.items()}


def test_rank_accumulation_may_not_take_the_full_batch(capsys):
    from backprop_lessons.scale import distributed
    from backprop_lessons.scale.distributed import full_batch_gradients

    def the_answer(model, x, y, ranks, micro):  # bound at import
        return full_batch_gradients(x, y)

    def one_backward(model, x, y, ranks, micro):  # autograd, but one batch
        model.zero_grad()
        distributed.mse_loss(model, x, y).backward()
        return {n: p.grad.numpy() for n, p in model.named_parameters()}

    chapter = full_batch_gradients(*_chapters_batch())

    assert E.check_rank_accumulation(rank_times_accumulation, exercise=4).correct
    refused(
        E.check_rank_accumulation(the_answer, exercise=4),
        "backprop_lessons.scale.distributed.full_batch_gradients",
    )
    verdict = E.check_rank_accumulation(one_backward, exercise=4)
    assert "a forward ran on 16 of the 16" in verdict.hint, verdict
    copied = E.check_rank_accumulation(lambda *a: chapter, exercise=4)
    assert copied.status == "not yet"


def _chapters_batch():
    rng = np.random.default_rng(0)
    return rng.normal(size=(16, 4)), rng.normal(size=(16, 1))
