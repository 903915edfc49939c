"""The trainer's model-parallel ways: `ddp_train --tensor-parallel N` and
`ddp_train --pipeline N` (chapter 12).

Every rank of the group is one tensor-parallel slice or one pipeline stage
(no data parallelism besides), and all ranks see the whole global batch of
each step.  A runner holds this rank's part of the model and its AdamW
(the book's settings, as `ddp_train.make_optimizer`): AdamW acts on each
entry of a parameter alone, so updating slices or stages gives exactly the
update of the whole model.  Replicated parameters (tensor parallelism's
layer norms, embeddings and biases of the row-parallel layers; the
pipeline's two copies of the tied wte) get the same gradient on the ranks
that hold them and take the same step.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.distributed as dist

from ..gpt.model import init_params
from ..gpt.train import DECAYED
from . import pipeline as pp
from .tensor_parallel import TPGPT

__all__ = ["TensorParallelRunner", "PipelineRunner", "adamw"]


def adamw(named, options):
    """torch.optim.AdamW over (book name, parameter) pairs, decay on DECAYED."""
    decayed, other = [], []
    for name, p in named:
        (decayed if name in DECAYED else other).append(p)
    groups = [
        {"params": decayed, "weight_decay": options.weight_decay},
        {"params": other, "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=options.lr, betas=(0.9, 0.95), eps=1e-8)


def _params(options):
    return init_params(
        options.config, seed=options.seed, dtype=np.dtype(options.dtype)
    )


class TensorParallelRunner:
    """This rank's slices of every block (Megatron's split, f and g by hand)."""

    def __init__(self, options, rank: int, world: int):
        self.model = TPGPT(
            _params(options), options.config, "manual", rank, world
        )
        self.optimizer = adamw(
            ((n, p) for n, _, p in self.model.book_named_parameters()), options
        )
        self.accumulate = options.accumulate
        self.description = (
            f"tensor parallel over {world} ranks "
            f"({options.config.n_head // world} of {options.config.n_head} "
            f"heads each)"
        )

    def step(self, x: np.ndarray, y: np.ndarray) -> float:
        """One optimizer step on the whole batch; its mean loss (every rank
        computes the same)."""
        self.optimizer.zero_grad(set_to_none=True)
        total = 0.0
        for xs, ys in zip(
            np.split(x, self.accumulate), np.split(y, self.accumulate)
        ):
            loss = self.model(torch.as_tensor(xs), torch.as_tensor(ys))
            (loss / self.accumulate).backward()
            total += loss.item() / self.accumulate
        self.optimizer.step()
        return total

    @torch.no_grad()
    def evaluate(self, x, y) -> float:
        return float(self.model(torch.as_tensor(x), torch.as_tensor(y)).item())


class PipelineRunner:
    """This rank's stage, under PyTorch's GPipe or 1F1B schedule."""

    def __init__(self, options, rank: int, world: int):
        self.rank, self.world = rank, world
        self.module = pp.PipelineStageModule(
            _params(options), options.config, rank, world
        )
        self.schedule = pp.make_schedule(
            options.schedule, self.module, rank, world, options.micro_batches
        )
        self.tied = dist.new_group([0, world - 1])
        named = (
            (name.rsplit(".", 1)[-1], p)
            for name, p in self.module.named_parameters()
        )
        self.optimizer = adamw(named, options)
        layers = self.module.layers
        self.description = (
            f"pipeline of {world} stages ({options.schedule}, "
            f"{options.micro_batches} micro-batches; this stage: blocks "
            f"{layers.start}-{layers.stop - 1})"
        )

    def _from_last(self, value) -> float:
        t = torch.zeros((), dtype=torch.float64)
        if value is not None:
            t += value.detach().double()
        dist.broadcast(t, src=self.world - 1)
        return float(t.item())

    def step(self, x, y) -> float:
        self.optimizer.zero_grad(set_to_none=True)
        loss = pp.run_step(
            self.schedule, self.module, x, y, self.rank, self.world, self.tied
        )
        self.optimizer.step()
        return self._from_last(loss)

    @torch.no_grad()
    def evaluate(self, x, y) -> float:
        """The whole batch through the stages in turn (no micro-batches)."""
        B, T = x.shape
        C = self.module.config.n_embd
        if self.rank == 0:
            h = torch.as_tensor(x)
        else:
            dtype = next(self.module.parameters()).dtype
            h = torch.empty(B, T, C, dtype=dtype)
            dist.recv(h, src=self.rank - 1)
        h = self.module(h)
        loss = None
        if self.module.last:
            loss = pp._loss_fn(h, torch.as_tensor(y))
        else:
            dist.send(h.contiguous(), dst=self.rank + 1)
        return self._from_last(loss)
