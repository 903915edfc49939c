"""The options of a training run of `ddp_train` (chapters 8 and 12): every
number that decides what the run computes, checked when made.

    TrainOptions        steps, seed, dtype, the global batch, micro-batches,
                        FSDP, the optimizer's lr and weight decay, the model
                        (TINY_CONFIG), chapter 12's model parallelism, --clip
    TrainOptions.check_world(world_size)
                        the sequences per micro-batch, or why the batch does
                        not split over that many ranks
    TINY_CONFIG         the chapters' small GPT

`ddp_train`'s command line sets them (`--steps`, `--fsdp`, ...); the other
modules of the trainer read them (`batches`, `optimizer`, `resume`,
`data_parallel`, `model_parallel_train`).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..gpt.model import GPTConfig
from .pipeline import SCHEDULES

__all__ = ["TINY_CONFIG", "TrainOptions"]

# The chapter's small GPT: 28 characters, 16 positions, 2 blocks of width 16.
TINY_CONFIG = GPTConfig(
    vocab_size=28, block_size=16, n_layer=2, n_head=2, n_embd=16
)


@dataclass(frozen=True)
class TrainOptions:
    """Everything that decides the numbers a run computes.

    Two runs with equal options compute the same final loss up to float64
    rounding, whatever their world size, `accumulate` or `fsdp`: those three
    only change how the same sums are split up.
    """

    steps: int = 20
    seed: int = 0
    dtype: str = "float64"
    batch_size: int = 8  # global batch, in sequences of block_size
    accumulate: int = 1  # micro-batches per step on every rank
    fsdp: bool = False
    lr: float = 3e-3
    weight_decay: float = 0.1  # decoupled, on the names in DECAYED
    config: GPTConfig = TINY_CONFIG
    # model parallelism (chapter 12): every rank a tensor-parallel slice, or
    # a pipeline stage with its schedule and micro-batches
    tensor_parallel: int = 1
    pipeline: int = 1
    schedule: str = "1f1b"
    micro_batches: int = 4
    sequence_parallel: bool = False  # with tensor_parallel > 1
    # global gradient-norm clipping (every mode); None: no clipping
    clip: float | None = None

    def __post_init__(self):
        for name in (
            "steps",
            "batch_size",
            "accumulate",
            "tensor_parallel",
            "pipeline",
            "micro_batches",
        ):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(
                    f"TrainOptions: {name} must be a positive int, got {value!r}"
                )
        if self.dtype not in ("float32", "float64"):
            raise ValueError(
                f"TrainOptions: dtype must be 'float32' or "
                f"'float64', got {self.dtype!r}"
            )
        if self.schedule not in SCHEDULES:
            raise ValueError(
                f"TrainOptions: schedule must be one of {', '.join(SCHEDULES)}, "
                f"got {self.schedule!r}"
            )
        if self.sequence_parallel and self.tensor_parallel == 1:
            raise ValueError(
                "TrainOptions: --sequence-parallel splits tensor parallelism's "
                "residual stream; it needs --tensor-parallel N with N > 1"
            )
        if self.clip is not None and (
            isinstance(self.clip, bool)
            or not isinstance(self.clip, int | float)
            or not self.clip > 0
        ):
            raise ValueError(
                f"TrainOptions: clip (--clip MAX_NORM) must be a positive "
                f"number, got {self.clip!r}"
            )
        if self.tensor_parallel > 1 and self.pipeline > 1:
            raise ValueError(
                "TrainOptions: --tensor-parallel and --pipeline do not combine "
                "in this trainer; use one of them"
            )
        if self.model_parallel > 1 and self.fsdp:
            raise ValueError(
                "TrainOptions: --fsdp is data parallelism; it does not combine "
                "with --tensor-parallel or --pipeline here"
            )
        if self.pipeline > 1 and self.accumulate > 1:
            raise ValueError(
                "TrainOptions: under --pipeline the micro-batches are the "
                "pipeline's (--micro-batches); leave --accumulate at 1"
            )

    @property
    def model_parallel(self) -> int:
        """Ranks one model is split over (1: data parallelism)."""
        return max(self.tensor_parallel, self.pipeline)

    def check_world(self, world_size: int) -> int:
        """Sequences per micro-batch; refuse a batch that does not split
        evenly over world_size ranks x accumulate micro-batches.  Under
        model parallelism the world must be exactly the ranks one model is
        split over (every rank sees the whole batch)."""
        if self.model_parallel > 1:
            return self._check_model_parallel(world_size)
        parts = world_size * self.accumulate
        if self.batch_size % parts:
            raise ValueError(
                f"ddp_train: a global batch of {self.batch_size} sequences "
                f"does not split into {world_size} ranks x {self.accumulate} "
                f"micro-batches; use a batch size divisible by {parts} "
                f"(equal micro-batches make the mean of their mean losses "
                f"the mean loss of the batch)"
            )
        return self.batch_size // parts

    def _check_model_parallel(self, world_size: int) -> int:
        how = (
            f"--tensor-parallel {self.tensor_parallel}"
            if self.tensor_parallel > 1
            else f"--pipeline {self.pipeline}"
        )
        if world_size != self.model_parallel:
            raise ValueError(
                f"ddp_train: {how} needs exactly {self.model_parallel} "
                f"processes (torchrun --nproc-per-node {self.model_parallel}), "
                f"got a world of {world_size}; this trainer does not combine "
                f"model and data parallelism"
            )
        parts = self.micro_batches if self.pipeline > 1 else self.accumulate
        if self.batch_size % parts:
            raise ValueError(
                f"ddp_train: a global batch of {self.batch_size} sequences "
                f"does not split into {parts} equal micro-batches; use a "
                f"batch size divisible by {parts}"
            )
        return self.batch_size // parts
