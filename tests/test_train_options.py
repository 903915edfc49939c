"""The options of a training run (backprop_lessons.scale.train_options):
refused when they contradict each other or do not split over the ranks,
for data parallelism and for chapter 12's model parallelism; and the
command line that sets them (ddp_train.parse_args)."""

from __future__ import annotations

import pytest

from backprop_lessons.scale.ddp_train import parse_args
from backprop_lessons.scale.train_options import TrainOptions


def test_options_are_checked():
    with pytest.raises(ValueError, match="does not split into 2 ranks x 3"):
        TrainOptions(batch_size=8, accumulate=3).check_world(2)
    assert TrainOptions(batch_size=8, accumulate=2).check_world(2) == 2
    with pytest.raises(ValueError, match="steps must be a positive int"):
        TrainOptions(steps=0)
    with pytest.raises(ValueError, match="dtype must be"):
        TrainOptions(dtype="float16")


def test_trainer_options_are_checked():
    with pytest.raises(ValueError, match="do not combine"):
        TrainOptions(tensor_parallel=2, pipeline=2)
    with pytest.raises(ValueError, match="--fsdp is data parallelism"):
        TrainOptions(tensor_parallel=2, fsdp=True)
    with pytest.raises(ValueError, match="leave --accumulate at 1"):
        TrainOptions(pipeline=2, accumulate=2)
    with pytest.raises(ValueError, match="schedule must be"):
        TrainOptions(schedule="zero-bubble")
    with pytest.raises(ValueError, match="needs --tensor-parallel N"):
        TrainOptions(sequence_parallel=True)
    for bad in (0, -1.0, True, "0.05"):
        with pytest.raises(ValueError, match="clip \\(--clip MAX_NORM\\)"):
            TrainOptions(clip=bad)
    args = parse_args(
        ["--tensor-parallel", "2", "--sequence-parallel", "--clip", "0.05"]
    )
    assert args.sequence_parallel and args.clip == 0.05
    assert parse_args(["--schedule", "zbv"]).schedule == "zbv"
    with pytest.raises(ValueError, match="needs exactly 2 processes"):
        TrainOptions(tensor_parallel=2).check_world(4)
    with pytest.raises(ValueError, match="3 equal micro-batches"):
        TrainOptions(pipeline=2, micro_batches=3).check_world(2)
    assert TrainOptions(pipeline=2).check_world(2) == 2
    # data parallelism keeps its options
    assert TrainOptions(fsdp=True, accumulate=2).check_world(2) == 2
