"""Chapter 8's data-parallel measurements (scale_out) on local gloo processes.

The measurements that need 2 ranks run in the tests' one launch of two
ranks (two_ranks.py), the world-size-1 byte counts in a launch of their
own: starting processes that import torch costs seconds.  The model is
the tiny GPT, so every measurement is quick; what is checked is exact
(counts, bits, float64 agreement) or causal (all-reduces launched during
backward), never a time.
"""

from __future__ import annotations

import numpy as np
import pytest

import two_ranks
from backprop_lessons.gpt import (
    PARAMETER_TABLE,
    gpt_backward,
    gpt_forward,
    init_params,
)
from backprop_lessons.gpt.model import num_parameters
from backprop_lessons.scale import distributed as D
from backprop_lessons.scale import scale_out as S
from backprop_lessons.scale.batches import corpus_tokens, step_batch
from backprop_lessons.scale.train_options import TINY_CONFIG, TrainOptions

# they start processes: `make multiprocess`, one at a time (tests/conftest.py)
pytestmark = pytest.mark.multiprocess

CONFIG = TINY_CONFIG
CAP_MB = 0.01  # about 10 kB: several buckets even for the tiny model
N = num_parameters(init_params(CONFIG))
TENSORS = 4 + 12 * CONFIG.n_layer  # wte, wpe, lnfw, lnfb + 12 per block


def _batch():
    return step_batch(corpus_tokens(), TrainOptions(seed=7), 0)


@two_ranks.tasks_for("scale_out_ranks")
def _tasks() -> dict:
    x, y = _batch()
    return {
        "broadcast": (S.ddp_construction_broadcast, (CONFIG, x, y, 2)),
        "no_sync": (S.no_sync_accumulation, (CONFIG, x, y, 2, CAP_MB)),
        "ddp_bytes": (S.state_bytes, (CONFIG, x, y, False)),
        "fsdp_bytes": (S.state_bytes, (CONFIG, x, y, True)),
        "speed": (S.throughput, (CONFIG, 8, 2, 1)),
        "trace": (S.profile_ddp_steps, (CONFIG, 8, CAP_MB, 2)),
    }


@pytest.fixture(scope="module")
def scale_out_ranks(rank_launch):
    """_tasks' results, per rank: from the tests' one launch of two ranks."""
    return rank_launch["scale_out_ranks"]


@pytest.fixture(scope="module")
def one_rank():
    x, y = _batch()
    tasks = {
        "ddp_bytes": (S.state_bytes, (CONFIG, x, y, False)),
        "fsdp_bytes": (S.state_bytes, (CONFIG, x, y, True)),
    }
    return D.run_workers(D.run_tasks, tasks, world_size=1, timeout=120)[0]


def test_ddp_gives_every_rank_rank_0s_parameters_and_keeps_them_equal(
    scale_out_ranks,
):
    results = [r["broadcast"] for r in scale_out_ranks]
    assert list(results[0]) == ["built", "after DDP()", "after 2 steps"]
    assert S.spread_over_ranks(results, "built") > 0.01
    assert S.spread_over_ranks(results, "after DDP()") == 0.0
    assert S.spread_over_ranks(results, "after 2 steps") == 0.0
    for name, p in results[0]["built"].items():
        assert np.array_equal(results[1]["after DDP()"][name], p), name
    # training moved them
    assert any(
        not np.array_equal(results[0]["after 2 steps"][n], p)
        for n, p in results[0]["built"].items()
    )


def test_no_sync_accumulation_equals_the_large_batch_gradient(scale_out_ranks):
    x, y = _batch()
    params = init_params(CONFIG, seed=0, dtype=np.float64)
    _, cache = gpt_forward(params, CONFIG, x, y)
    expected = gpt_backward(params, CONFIG, cache)
    for rank in (0, 1):
        for how in ("no_sync", "sync_every"):
            grads = scale_out_ranks[rank]["no_sync"][how]["grads"]
            assert list(grads) == [name for name, _ in PARAMETER_TABLE]
            for name, g in expected.items():
                np.testing.assert_allclose(
                    grads[name],
                    g,
                    rtol=1e-12,
                    atol=1e-16,
                    err_msg=f"{how} {name}",
                )


def test_no_sync_sends_the_gradients_once_per_step(scale_out_ranks):
    counts = scale_out_ranks[0]["no_sync"]
    buckets = counts["buckets"]
    assert buckets > 2
    assert counts["no_sync"]["allreduces"] == [0, buckets]
    assert counts["sync_every"]["allreduces"] == [buckets, buckets]
    assert scale_out_ranks[1]["no_sync"]["no_sync"]["allreduces"] == [0, buckets]


def test_fsdp_holds_half_the_state_per_rank_ddp_all_of_it(
    scale_out_ranks, one_rank
):
    full = {
        "parameters": 8 * N,
        "gradients": 8 * N,
        "adam_moments": 16 * N,
        "adam_steps": 4 * TENSORS,
        "numel": N,
    }  # a float32 step per tensor
    assert one_rank["ddp_bytes"] == full
    assert one_rank["fsdp_bytes"] == full
    for rank in (0, 1):
        assert scale_out_ranks[rank]["ddp_bytes"] == full
        half = scale_out_ranks[rank]["fsdp_bytes"]
        assert half == {
            k: v if k == "adam_steps" else v // 2 for k, v in full.items()
        }


def test_throughput_counts_halve_the_work_per_rank(scale_out_ranks):
    speed = scale_out_ranks[0]["speed"]
    assert speed["tokens_per_step"] == 8 * CONFIG.block_size
    assert [len(s) for s in speed["seconds"].values()] == [1, 1]
    assert all(t > 0 for s in speed["seconds"].values() for t in s)
    flops = speed["flops_per_rank"]
    assert flops["2 processes"] * 2 == flops["1 process"] > 0
    assert speed["optimizer_numbers_per_rank"] == N
    assert speed["gradient_rel_diff"] < 1e-5  # float32 summation order
    with pytest.raises(ValueError, match="compares 1 process with 2"):
        S.throughput(0, 1, CONFIG)


def test_profile_shows_every_bucket_launched_during_backward(scale_out_ranks):
    per_rank = [scale_out_ranks[r]["trace"] for r in (0, 1)]
    assert [len(t) for t in per_rank] == [2, 2]
    for rank, traces in enumerate(per_rank):
        for trace in traces:
            assert trace.rank == rank
            f, b, call, o = (
                trace.forward,
                trace.backward,
                trace.backward_call,
                trace.optimizer,
            )
            assert (
                0
                <= f.start
                < f.end
                <= call.start
                <= b.start
                < b.end
                <= call.end
                <= o.start
                < o.end
            )
            assert trace.launched_during_backward() == len(trace.allreduces)
            params = [p for a in trace.allreduces for p in a.params]
            assert len(params) == len(set(params)) == TENSORS
            assert sum(a.bytes for a in trace.allreduces) == 4 * N  # float32
            assert params[:2] == ["lnfw", "lnfb"]  # used last, sent first
            for a in trace.allreduces:
                assert a.launch <= a.start < a.end
    for step in map(S.StepOverlap.from_ranks, zip(*per_rank)):
        transfers = step.transfers()
        assert len(transfers) > 2
        assert all(t.start < t.end for t in transfers)
        assert 0 <= step.hidden_ms() <= step.communication_ms()
        assert 0 <= step.hidden_fraction() <= 1


def _trace(rank, origin_ns, backward_end, allreduces):
    return S.StepTrace(
        rank=rank,
        origin_ns=origin_ns,
        forward=S.Span("forward", 0, 10),
        backward=S.Span("backward", 11, backward_end),
        backward_call=S.Span("backward call", 10, backward_end + 6),
        optimizer=S.Span("optimizer", backward_end + 6, backward_end + 10),
        allreduces=tuple(
            S.AllReduce(k, (f"p{k}",), 8, *times)
            for k, times in enumerate(allreduces)
        ),
    )


def test_hidden_time_is_transfer_before_the_slowest_backward_ends():
    # rank 1's step started 2 ms after rank 0's (the machine's clock)
    rank0 = _trace(0, 1_000_000, 30, [(14, 15, 26), (20, 21, 33)])
    rank1 = _trace(1, 3_000_000, 32, [(22, 22.5, 24), (29, 29.5, 31)])
    step = S.StepOverlap.from_ranks([rank0, rank1])
    assert step.ranks[1].backward.end == pytest.approx(34)  # rank 0's axis
    assert step.backward_end == pytest.approx(34)
    spans = step.transfers()
    assert [(t.start, t.end) for t in spans] == [
        pytest.approx((24.5, 26)),
        pytest.approx((31.5, 33)),
    ]
    assert step.communication_ms() == pytest.approx(1.5 + 1.5)
    assert step.hidden_fraction() == pytest.approx(1.0)
    # a rank 1 that finished its backward early: the last bucket's transfer
    # (29.5, 38) is hidden only until rank 0's backward ends at 30
    late = S.StepOverlap.from_ranks(
        [rank0, _trace(1, 3_000_000, 28, [(22, 22.5, 24), (27.5, 27.5, 36)])]
    )
    assert late.backward_end == pytest.approx(30)
    assert late.hidden_ms() == pytest.approx(1.5 + 0.5)
    assert late.hidden_fraction() == pytest.approx(2 / 10)
    assert rank0.launched_during_backward() == 2
    assert S._union_length([(0, 2), (1, 3), (5, 6), (4, 4)]) == 4


def test_gpt2_plan_arithmetic():
    plan = S.GPT2Plan()
    assert plan.parameters == 124_439_808  # GPT-2 small, wte tied
    C, L, T, V = 768, 12, 1024, 50257
    assert plan.flops_per_token == 6 * (12 * L * C * C + V * C) + 12 * L * T * C
    assert plan.accumulation == 4  # 2**19 / (8 GPUs x 16 x 1024)
    assert plan.allreduce_bytes == 2 * 7 / 8 * 4 * plan.parameters
    assert plan.compute_seconds == pytest.approx(
        plan.flops_per_token * 2**19 / (8 * 312e12 * 0.4)
    )
    rows = dict(plan.rows())
    assert rows["parameters N"] == "124,439,808"
    assert rows["micro-batches per GPU per step"] == "4"
    with pytest.raises(ValueError, match="do not split into 8 GPUs"):
        _ = S.GPT2Plan(tokens_per_step=1000).accumulation


def test_timeline_plot_draws_every_rank_and_bucket():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from backprop_lessons.viz.timeline import bucket_label, plot_step_timeline

    assert (
        bucket_label(["lnfw", "lnfb", "blocks.1.fcw", "blocks.1.fcb"])
        == "lnf, block 1"
    )
    assert bucket_label(["blocks.0.ln1w", "wpe", "wte"]) == "block 0, wpe, wte"
    rank0 = _trace(0, 0, 30, [(14, 15, 26), (20, 21, 33)])
    rank1 = _trace(1, 2_000_000, 32, [(22, 22.5, 24), (29, 29.5, 31)])
    ax = plot_step_timeline(S.StepOverlap.from_ranks([rank0, rank1]))
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == ["rank 0", "rank 1", "bucket 0: p0", "bucket 1: p1"]
    assert "100% of the transfer time hidden" in ax.get_title()
    plt.close(ax.figure)
