"""The trainer's model-parallel ways: `ddp_train --tensor-parallel N
[--sequence-parallel]` and `ddp_train --pipeline N --schedule S` (chapter 12).

Every rank of the group is one tensor-parallel slice or holds one or two
pipeline stages (no data parallelism besides), and all ranks see the whole
global batch of each step.  A runner holds this rank's part of the model
and its AdamW (`optimizer.adamw`, as under data parallelism): AdamW
acts on each entry of a parameter alone, so updating slices or stages
gives exactly the update of the whole model.  Replicated parameters
(tensor parallelism's layer norms, embeddings and biases of the
row-parallel layers; the pipeline's two copies of the tied wte) get the
same gradient on the ranks that hold them and take the same step.  Only
`--clip` needs the whole model: its factor comes from the norm over every
rank (`scale.clipping`), each parameter counted once (`counted_once`).
"""

from __future__ import annotations

import numpy as np
import torch
import torch.distributed as dist

from ..gpt.model import init_params
from . import pipeline as pp
from .clipping import clip_by_global_norm
from .optimizer import adamw
from .tensor_parallel import TPGPT

__all__ = ["TensorParallelRunner", "PipelineRunner"]


def _params(options):
    return init_params(
        options.config, seed=options.seed, dtype=np.dtype(options.dtype)
    )


class TensorParallelRunner:
    """This rank's slices of every block (Megatron's split, f and g by hand;
    with `sequence_parallel`, the residual stream split along T too)."""

    def __init__(self, options, rank: int, world: int):
        self.rank = rank
        self.model = TPGPT(
            _params(options),
            options.config,
            "manual",
            rank,
            world,
            sequence_parallel=options.sequence_parallel,
        )
        self.optimizer = adamw(
            ((n, p) for n, _, p in self.model.book_named_parameters()), options
        )
        self.accumulate, self.clip = options.accumulate, options.clip
        sequence = ", sequence parallel" if options.sequence_parallel else ""
        self.description = (
            f"tensor parallel over {world} ranks "
            f"({options.config.n_head // world} of {options.config.n_head} "
            f"heads each{sequence})"
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
        self.model.all_reduce_sequence_gradients()
        if self.clip is not None:
            held = [p.grad for p in self.model.parameters()]
            clip_by_global_norm(
                self.model.counted_once(self.rank), held, self.clip
            )
        self.optimizer.step()
        return total

    @torch.no_grad()
    def evaluate(self, x, y) -> float:
        return float(self.model(torch.as_tensor(x), torch.as_tensor(y)).item())


class PipelineRunner:
    """This rank's stages (one, or two for interleaved-1f1b and zbv), under
    the PyTorch schedule the options name."""

    def __init__(self, options, rank: int, world: int):
        self.rank, self.world = rank, world
        self.schedule_name = options.schedule
        v = pp.STAGES_PER_RANK[options.schedule]
        self.n_stages = v * world
        self.modules = pp.stage_modules(
            _params(options), options.config, options.schedule, rank, world
        )
        self.schedule = pp.make_schedule(
            options.schedule, self.modules, self.n_stages, options.micro_batches
        )
        self.tied = pp.tied_group(options.schedule, world)
        named = (
            (name.rsplit(".", 1)[-1], p)
            for module in self.modules
            for name, p in module.named_parameters()
        )
        self.optimizer = adamw(named, options)
        self.clip = options.clip
        held = ", ".join(f"stage {m.stage} ({_holds(m)})" for m in self.modules)
        self.description = (
            f"pipeline of {self.n_stages} stages on {world} ranks "
            f"({options.schedule}, {options.micro_batches} micro-batches; "
            f"this rank: {held})"
        )

    def _from_last(self, value) -> float:
        t = torch.zeros((), dtype=torch.float64)
        if value is not None:
            t += value.detach().double()
        last = pp.stage_rank(self.schedule_name, self.n_stages - 1, self.world)
        dist.broadcast(t, src=last)
        return float(t.item())

    def counted_once(self) -> list[torch.Tensor]:
        """The gradients this rank counts in the global norm: all of its
        stages' but the last stage's copy of the tied wte."""
        return [
            p.grad
            for m in self.modules
            for name, p in m.named_parameters()
            if not (name == "wte" and m.last and not m.first)
        ]

    def step(self, x, y) -> float:
        for module in self.modules:
            module.zero_grad(set_to_none=True)
        loss = pp.run_step(self.schedule, self.modules, x, y, self.tied)
        if self.clip is not None:
            held = [p.grad for m in self.modules for p in m.parameters()]
            clip_by_global_norm(self.counted_once(), held, self.clip)
        self.optimizer.step()
        return self._from_last(loss)

    @torch.no_grad()
    def evaluate(self, x, y) -> float:
        """The whole batch through the stages in turn (no micro-batches)."""
        B, T = x.shape
        config = self.modules[0].config
        dtype = next(self.modules[0].parameters()).dtype
        mine = {m.stage: m for m in self.modules}
        h, loss = None, None
        for stage in range(self.n_stages):
            if stage not in mine:
                continue
            if stage == 0:
                h = torch.as_tensor(x)
            else:
                came_from = pp.stage_rank(
                    self.schedule_name, stage - 1, self.world
                )
                if came_from != self.rank:
                    h = torch.empty(B, T, config.n_embd, dtype=dtype)
                    dist.recv(h, src=came_from)
            h = mine[stage](h)
            if stage == self.n_stages - 1:
                loss = pp.microbatch_loss(h, torch.as_tensor(y))
                continue
            goes_to = pp.stage_rank(self.schedule_name, stage + 1, self.world)
            if goes_to != self.rank:
                dist.send(h.contiguous(), dst=goes_to)
        return self._from_last(loss)


def _holds(module) -> str:
    parts = ["embeddings"] if module.first else []
    layers = module.layers
    if len(layers) == 1:
        parts.append(f"block {layers.start}")
    elif len(layers) > 1:
        parts.append(f"blocks {layers.start}-{layers.stop - 1}")
    if module.last:
        parts.append("head")
    return ", ".join(parts)
