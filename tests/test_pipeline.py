"""The GPT in pipeline stages (backprop_lessons.scale.pipeline): how blocks
split into stages and stages sit on ranks, the bubble and in-flight
formulas, PyTorch's timetables, and each of the four schedules' gradients,
order of work and memory on two ranks (chapter 12's one launch,
chapter12_launch)."""

from __future__ import annotations

import numpy as np
import pytest

from backprop_lessons.gpt.model import GPTConfig
from backprop_lessons.scale import pipeline
from chapter12_launch import CONFIG


def test_stages_split_blocks_or_pieces_and_sit_in_a_loop_or_a_v():
    # 2 blocks on 2 stages: one block each; on 4 stages the embedding and
    # the head are stages of their own
    assert [pipeline.stage_layers(CONFIG, s, 2) for s in range(2)] == [
        range(0, 1),
        range(1, 2),
    ]
    assert [pipeline.stage_layers(CONFIG, s, 4) for s in range(4)] == [
        range(0, 0),
        range(0, 1),
        range(1, 2),
        range(2, 2),
    ]
    deep = GPTConfig(vocab_size=28, block_size=16, n_layer=4, n_head=2, n_embd=16)
    assert [len(pipeline.stage_layers(deep, s, 4)) for s in range(4)] == [1] * 4
    assert [pipeline.rank_stages("interleaved-1f1b", r, 2) for r in (0, 1)] == [
        (0, 2),
        (1, 3),
    ]
    assert [pipeline.rank_stages("zbv", r, 4) for r in range(4)] == [
        (0, 7),
        (1, 6),
        (2, 5),
        (3, 4),
    ]
    assert [pipeline.stage_rank("zbv", s, 2) for s in range(4)] == [0, 1, 1, 0]
    assert pipeline.stage_rank("1f1b", 1, 2) == 1


def test_bubble_and_in_flight_formulas():
    assert pipeline.bubble_fraction(2, 4) == pytest.approx(0.2)
    assert pipeline.bubble_fraction(4, 1) == pytest.approx(0.75)
    assert pipeline.bubble_fraction(2, 4, "gpipe") == pytest.approx(0.2)
    # interleaved: (p - 1) / (v m + p - 1)
    assert pipeline.bubble_fraction(2, 4, "interleaved-1f1b") == pytest.approx(
        1 / 9
    )
    assert pipeline.bubble_fraction(4, 8, "interleaved-1f1b") == pytest.approx(
        3 / 19
    )
    # zbv: PyTorch's timetable has 25 slots for 24 actions (p = 2, m = 4)
    grid = pipeline.schedule_grid("zbv", 2, 4)
    assert [len(row) for row in grid] == [24, 25]
    assert [sum(a is not None for a in row) for row in grid] == [24, 24]
    assert pipeline.bubble_fraction(2, 4, "zbv") == pytest.approx(1 / 25)
    assert [pipeline.in_flight("1f1b", 4, 8, s) for s in range(4)] == [4, 3, 2, 1]
    assert pipeline.in_flight("gpipe", 4, 8, 3) == 8
    assert pipeline.in_flight("1f1b", 4, 2, 0) == 2


ORDERS = {  # each rank's order of work, as one string
    "gpipe": ("F0 F1 F2 F3 B0 B1 B2 B3", "F0 F1 F2 F3 B0 B1 B2 B3"),
    "1f1b": ("F0 F1 B0 F2 B1 F3 B2 B3", "F0 B0 F1 B1 F2 B2 F3 B3"),
    # stage, kind, micro-batch: rank 0 holds stages 0 and 2, rank 1 1 and 3
    "interleaved-1f1b": (
        "0F0 0F1 2F0 2F1 0F2 2B0 0F3 2B1 2F2 0B0 2F3 0B1 2B2 2B3 0B2 0B3",
        "1F0 1F1 3F0 3B0 3F1 3B1 1F2 1B0 1F3 1B1 3F2 3B2 3F3 3B3 1B2 1B3",
    ),
    # rank 0 holds stages 0 and 3, rank 1 1 and 2; I the input gradient, W
    # the weight gradient (stage 0 has no input gradient: PyTorch runs its
    # whole backward at its W)
    "zbv": (
        "0F0 0F1 0F2 3F0 3I0 3W0 3F1 3I1 3W1 0F3 0W0 0I0 3F2 3I2 3W2 0W1 "
        "0I1 3F3 3I3 3W3 0W2 0I2 0W3 0I3",
        "1F0 2F0 1F1 2F1 2I0 2W0 1F2 1I0 1W0 2F2 2I1 2W1 1F3 1I1 1W1 2F3 "
        "2I2 2W2 1I2 2I3 1I3 1W2 2W3 1W3",
    ),
}


@pytest.mark.multiprocess
@pytest.mark.parametrize("schedule", pipeline.SCHEDULES)
def test_pipeline_gradients_order_and_memory(
    chapter12_ranks, chapter12_problem, schedule
):
    _, _, _, (ref_loss, ref) = chapter12_problem
    last = pipeline.stage_rank(
        schedule, 2 * pipeline.STAGES_PER_RANK[schedule] - 1, 2
    )
    assert chapter12_ranks[last][schedule]["loss"] == pytest.approx(
        ref_loss, rel=1e-13
    )
    grads = {}
    for r in chapter12_ranks:
        for name, g in r[schedule]["grads"].items():
            if isinstance(g, dict):
                grads.setdefault(name, {}).update(g)
            else:
                grads[name] = g
    for name, g in ref.items():
        got = grads[name]
        if isinstance(got, dict):
            got = np.stack([got[l] for l in range(CONFIG.n_layer)])
        np.testing.assert_allclose(got, g, rtol=1e-11, atol=1e-15, err_msg=name)
    held = [
        r[schedule]["grads"]["wte"]
        for r in chapter12_ranks
        if "wte" in r[schedule]["grads"]
    ]
    for wte in held[1:]:  # the two copies of the tied wte
        np.testing.assert_array_equal(wte, held[0])
    orders = tuple(" ".join(r[schedule]["order"]) for r in chapter12_ranks)
    assert orders == ORDERS[schedule]
    if schedule not in ("gpipe", "1f1b"):
        return
    for stage, r in enumerate(chapter12_ranks):
        held, rest = divmod(
            r[schedule]["peak_bytes"], r[schedule]["per_micro_bytes"]
        )
        assert rest == 0
        assert held == pipeline.in_flight(schedule, 2, 4, stage)


def test_bad_splits_are_clear_errors():
    with pytest.raises(ValueError, match="2 blocks do not split into 3"):
        pipeline.stage_layers(CONFIG, 0, 3)
    with pytest.raises(ValueError, match="schedule must be one of"):
        pipeline.in_flight("zbv", 2, 4, 0)
    with pytest.raises(ValueError, match="schedule must be one of"):
        pipeline.rank_stages("interleaved", 0, 2)
    with pytest.raises(ValueError, match="no timetable"):
        pipeline.schedule_grid("1f1b", 2, 4)
