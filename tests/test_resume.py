"""A run saved and resumed (backprop_lessons.scale.resume): a resumed run
reaches the float the uninterrupted one does, a resume with other options
is refused, and a half-written save is skipped.  In this process, in a
process group of one; the resume across world sizes and after a rank died
is in test_ddp_train."""

from __future__ import annotations

import pytest
import torch

from backprop_lessons.scale.ddp_train import (
    Environment,
    start_process_group,
    train,
)
from backprop_lessons.scale.resume import latest_checkpoint
from backprop_lessons.scale.train_options import TrainOptions


@pytest.fixture
def group_of_one():
    """A process group of this process alone (an in-process store: no
    network), as `ddp_train` makes when it runs without torchrun."""
    env = Environment(rank=0, local_rank=0, world_size=1, launched=False)
    start_process_group(env, torch.device("cpu"), timeout=30)
    yield env
    torch.distributed.destroy_process_group()


def test_a_resumed_run_continues_exactly(tmp_path, group_of_one):
    cpu = torch.device("cpu")
    options = TrainOptions(steps=3, seed=4)
    uninterrupted = train(options, group_of_one, cpu)
    # a run that stopped after step 2, then the same command with --resume
    train(TrainOptions(steps=2, seed=4), group_of_one, cpu, tmp_path)
    assert latest_checkpoint(tmp_path) == (2, tmp_path / "step-000002")
    resumed = train(options, group_of_one, cpu, tmp_path, resume=True)
    assert resumed == uninterrupted  # same way of running: the same float
    with pytest.raises(ValueError, match=r"other options \(seed differ"):
        train(
            TrainOptions(steps=4, seed=5),
            group_of_one,
            cpu,
            tmp_path,
            resume=True,
        )


def test_latest_checkpoint_skips_incomplete_ones(tmp_path):
    assert latest_checkpoint(tmp_path) is None
    for step, complete in ((1, True), (2, True), (3, False)):
        d = tmp_path / f"step-{step:06d}"
        d.mkdir()
        if complete:
            (d / ".metadata").write_bytes(b"")
    (tmp_path / "step-notanumber").mkdir()
    assert latest_checkpoint(tmp_path) == (2, tmp_path / "step-000002")
