"""The trainer's model-parallel ways
(backprop_lessons.scale.model_parallel_train):
`ddp_train --tensor-parallel 2 --sequence-parallel --accumulate 2` and
`--pipeline 2 --schedule zbv --micro-batches 8 --clip 0.05` under torchrun
reach the single-process loss (alone_losses), clipped or not; each says
what it is; a pipeline rank that dies ends the run with a clear error, and
no process is left.  The runs are chapter12_launch's (trainer_runs).
Every mode in one launch (train_in_group) against the run alone, clipped or
not, is chapter 12's own launch, whose table nbval checks: it is not run
twice."""

from __future__ import annotations

import psutil
import pytest

import dying_rank
from chapter12_launch import CRASH_AFTER, final_loss_of


@pytest.mark.multiprocess
@pytest.mark.parametrize(
    "name",
    ["sequence-accumulate", "zbv-clip"],
)
def test_model_parallel_runs_reach_the_single_process_loss(
    trainer_runs, alone_losses, name
):
    alone = alone_losses[0.05 if name.endswith("-clip") else None]
    assert final_loss_of(trainer_runs[name]) == pytest.approx(alone, rel=1e-10)


@pytest.mark.multiprocess
def test_the_clip_is_active(alone_losses):
    alone, clipped = alone_losses[None], alone_losses[0.05]
    assert abs(clipped - alone) > 1e-6 * abs(alone)


@pytest.mark.multiprocess
def test_each_way_says_what_it_is(trainer_runs):
    assert (
        "tensor parallel over 2 ranks (1 of 2 heads each, sequence parallel), "
        "world size 2 (gloo on cpu), float64, global batch 8 = 2 micro-batches"
        in trainer_runs["sequence-accumulate"].stdout
    )
    assert (
        "pipeline of 4 stages on 2 ranks (zbv, 8 micro-batches; this rank: "
        "stage 0 (embeddings), stage 3 (head))" in trainer_runs["zbv-clip"].stdout
    )


@pytest.mark.multiprocess
def test_a_dying_worker_ends_the_run_with_a_clear_error(trainer_runs):
    crash = trainer_runs["pipeline-crash"]
    assert crash.returncode != 0, crash.stdout
    assert f"rank 1: crashing on purpose after step {CRASH_AFTER}" in crash.stdout
    assert "final loss" not in crash.stdout
    assert dying_rank.root_cause(crash.stderr) == {
        "rank": 1,
        "exitcode": -9,
        "signal": "SIGKILL",
    }, crash.stderr[-3000:]


@pytest.mark.multiprocess
def test_no_process_is_left(trainer_runs, trainer_launcher):
    assert psutil.wait_procs(trainer_launcher.marked(), timeout=30)[1] == []
