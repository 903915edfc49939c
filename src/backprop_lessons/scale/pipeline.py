"""Pipeline parallelism for the book's GPT on `torch.distributed.pipelining`
(chapter 12).

The blocks are cut into consecutive stages, one per rank: the first stage
also holds the embeddings, the last the final layer norm and the LM head.
Activations go forward from stage s to s + 1 and their gradients come back;
PyTorch's schedules (`ScheduleGPipe`, `Schedule1F1B`) split the batch into
m micro-batches and decide the order of the forwards and backwards on each
stage.  GPipe (Huang et al. 2019) runs all m forwards, then all m
backwards; 1F1B (PipeDream, Narayanan et al. 2019) starts each backward as
soon as it can, so stage s holds at most p - s micro-batches' activations
instead of m.  Both leave every stage idle for the same (p - 1) forward and
backward slots: a bubble of (p - 1) / (m + p - 1) of the step.

The LM head is tied to the token embedding (wte), which lives on the first
stage.  The last stage holds a copy; after every backward the two parts of
wte's gradient (embedding on the first stage, LM head on the last) are
summed by an all-reduce between those two ranks, and both copies then take
the same optimizer step (as Megatron-LM does with its embedding group).

`Probe` measures what the chapter shows: each stage's forward and backward
can sleep a fixed time (so a stage's work takes a known time, larger than
the communication) and writes down when it ran; and the bytes of
activations the stage's module saves for backward that are alive at once
(saved-tensor hooks, parameters left out).
"""

from __future__ import annotations

import contextlib
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F

from ..gpt.layers import LAYERNORM_EPS
from ..gpt.model import BLOCK_PARAMETERS, GPTConfig
from ..gpt.reference import torch_gpt_block

__all__ = [
    "SCHEDULES",
    "stage_layers",
    "Probe",
    "PipelineStageModule",
    "make_schedule",
    "tie_embedding_gradients",
    "bubble_fraction",
    "in_flight",
    "pipeline_run",
]

SCHEDULES = ("gpipe", "1f1b")
BLOCK_NAMES = BLOCK_PARAMETERS  # per-block parameters, stacked along L


def stage_layers(config: GPTConfig, stage: int, n_stages: int) -> range:
    """The blocks stage `stage` of `n_stages` runs: an equal, consecutive
    share."""
    L = config.n_layer
    if not isinstance(n_stages, int) or n_stages < 1 or L % n_stages:
        raise ValueError(
            f"pipeline: {L} blocks do not split into {n_stages!r} equal "
            f"stages; use a number of stages that divides n_layer"
        )
    per = L // n_stages
    return range(stage * per, (stage + 1) * per)


def bubble_fraction(n_stages: int, n_micro: int) -> float:
    """Idle share of a step for GPipe and 1F1B: (p - 1) / (m + p - 1)."""
    return (n_stages - 1) / (n_micro + n_stages - 1)


def in_flight(schedule: str, n_stages: int, n_micro: int, stage: int) -> int:
    """Micro-batches whose activations stage `stage` holds at once: GPipe
    all m, 1F1B at most p - stage."""
    if schedule not in SCHEDULES:
        raise ValueError(f"in_flight: schedule must be one of {SCHEDULES}")
    return n_micro if schedule == "gpipe" else min(n_micro, n_stages - stage)


class Probe:
    """Timeline and saved-activation bytes of one stage (see the module)."""

    def __init__(self, forward_s: float = 0.0, backward_s: float = 0.0):
        self.forward_s, self.backward_s = forward_s, backward_s
        self.events: list[tuple[str, int, float, float]] = []
        self.n_forward = 0
        self.live_bytes = 0
        self.peak_bytes = 0
        self.after_forward: list[int] = []  # live bytes after each forward
        self.base_bytes = 0
        self.exclude: set[int] = set()  # parameters' storages

    def reset(self) -> None:
        self.events, self.n_forward, self.after_forward = [], 0, []
        # bytes still held from an earlier step: not this step's activations
        self.base_bytes = self.peak_bytes = self.live_bytes

    @contextlib.contextmanager
    def saving(self):
        probe = self

        class Held:
            # one saved tensor, counted while autograd keeps it
            def __init__(self, t):
                self.t, self.nbytes = t, t.nbytes
                probe.live_bytes += t.nbytes
                probe.peak_bytes = max(probe.peak_bytes, probe.live_bytes)

            def __del__(self):
                probe.live_bytes -= self.nbytes

        def pack(t):
            if t.untyped_storage().data_ptr() in probe.exclude:
                return t
            return Held(t)

        def unpack(h):
            return h.t if isinstance(h, Held) else h

        with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
            yield


class _Work(torch.autograd.Function):
    """The identity, which sleeps and writes down when (a stage's work of
    known length)."""

    @staticmethod
    def forward(ctx, x, probe: Probe):
        ctx.probe, ctx.mb = probe, probe.n_forward
        probe.n_forward += 1
        t0 = time.perf_counter()
        time.sleep(probe.forward_s)
        probe.events.append(("F", ctx.mb, t0, time.perf_counter()))
        return x.view_as(x)

    @staticmethod
    def backward(ctx, dx):
        t0 = time.perf_counter()
        time.sleep(ctx.probe.backward_s)
        ctx.probe.events.append(("B", ctx.mb, t0, time.perf_counter()))
        return dx, None


class _Block(torch.nn.Module):
    """One block, its parameters under the book's names (as chapter 8's
    trainer holds them)."""

    def __init__(self, params, l, config):
        super().__init__()
        self.config = config
        for name in BLOCK_NAMES:
            self.register_parameter(
                name, torch.nn.Parameter(torch.tensor(params[name][l]))
            )

    def forward(self, x):
        tp = {name: (getattr(self, name),) for name in BLOCK_NAMES}
        return torch_gpt_block(x, tp, self.config, 0)


class PipelineStageModule(torch.nn.Module):
    """Stage `stage` of `n_stages`: (first) token ids (b, T) -> embeddings,
    its blocks, (last) final norm and tied LM head -> logits (b, T, V).
    Otherwise activations (b, T, C) in and out."""

    def __init__(self, params, config, stage, n_stages, probe=None):
        super().__init__()
        self.config, self.probe = config, probe
        self.layers = stage_layers(config, stage, n_stages)
        self.first, self.last = stage == 0, stage == n_stages - 1
        names = (["wte", "wpe"] if self.first else []) + (
            ["lnfw", "lnfb"] + ([] if self.first else ["wte"])
            if self.last
            else []
        )
        for name in names:
            self.register_parameter(
                name, torch.nn.Parameter(torch.tensor(params[name]))
            )
        self.blocks = torch.nn.ModuleList(
            _Block(params, l, config) for l in self.layers
        )
        if probe is not None:
            probe.exclude |= {
                p.untyped_storage().data_ptr() for p in self.parameters()
            }

    def forward(self, x):
        probe = self.probe
        with probe.saving() if probe else contextlib.nullcontext():
            if self.first:
                x = self.wte[x] + self.wpe[: x.shape[1]]
            for block in self.blocks:
                x = block(x)
            if probe is not None:
                x = _Work.apply(x, probe)
            if self.last:
                C = self.config.n_embd
                x = F.layer_norm(x, (C,), self.lnfw, self.lnfb, LAYERNORM_EPS)
                x = x @ self.wte.T
        if probe is not None:
            probe.after_forward.append(probe.live_bytes)
        return x

    def book_gradients(self) -> dict[str, np.ndarray]:
        """This stage's gradients under the book's names; block gradients as
        {name: {layer: array}}."""
        out: dict = {}
        for name, p in self.named_parameters():
            g = p.grad.detach().numpy().copy()
            if name.startswith("blocks."):
                _, i, pname = name.split(".")
                out.setdefault(pname, {})[self.layers[int(i)]] = g
            else:
                out[name] = g
        return out


def _loss_fn(logits, targets):
    return F.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), targets.reshape(-1)
    )


def make_schedule(name: str, module, stage: int, n_stages: int, n_micro: int):
    """PyTorch's PipelineStage around `module` and its schedule `name`."""
    from torch.distributed.pipelining import (
        PipelineStage,
        Schedule1F1B,
        ScheduleGPipe,
    )

    if name not in SCHEDULES:
        raise ValueError(
            f"pipeline: schedule must be one of {SCHEDULES}, got {name!r}"
        )
    kind = ScheduleGPipe if name == "gpipe" else Schedule1F1B
    pipe_stage = PipelineStage(module, stage, n_stages, torch.device("cpu"))
    # scale_grads (the default): gradients divided by n_micro, so a mean
    # loss per micro-batch gives the gradient of the batch's mean
    return kind(pipe_stage, n_microbatches=n_micro, loss_fn=_loss_fn)


def tie_embedding_gradients(module: PipelineStageModule, group) -> None:
    """Sum wte's two gradients (embedding on the first stage, LM head on the
    last); a collective of the first and last stage (`group`)."""
    if (module.first or module.last) and group is not None:
        dist.all_reduce(module.wte.grad, group=group)


def run_step(schedule, module, x, y, rank, n_stages, group=None):
    """One forward and backward of the pipeline over the global batch (x, y)
    (NumPy (B, T)); returns the mean loss on the last stage, else None."""
    losses: list = []
    if rank == 0:
        schedule.step(torch.as_tensor(x))
    elif rank == n_stages - 1:
        schedule.step(target=torch.as_tensor(y), losses=losses)
    else:
        schedule.step()
    tie_embedding_gradients(module, group)
    return torch.stack(losses).mean() if losses else None


def pipeline_run(
    rank,
    world,
    params,
    config,
    idx,
    targets,
    schedule="gpipe",
    n_micro=4,
    forward_s=0.0,
    backward_s=0.0,
    repeats=1,
):
    """Forward and backward of the batch on `world` stages (one per rank),
    `repeats` times after a warm-up step; each rank returns its gradients
    (after the last repeat), its loss (last stage), its probe's timeline
    (seconds from a barrier before the step to a barrier after it) and the
    activation bytes it held."""
    probe = Probe(forward_s, backward_s)
    module = PipelineStageModule(params, config, rank, world, probe)
    pipe = make_schedule(schedule, module, rank, world, n_micro)
    group = dist.new_group([0, world - 1]) if world > 1 else None
    runs = []
    # Step 0 is a warm-up, not recorded: on its first step PyTorch's stage
    # also runs a forward of its own to learn the shapes it will send.
    for repeat in range(repeats + 1):
        module.zero_grad(set_to_none=True)
        probe.reset()
        dist.barrier()
        t0 = time.perf_counter()
        loss = run_step(pipe, module, idx, targets, rank, world, group)
        dist.barrier()
        span = time.perf_counter() - t0
        if repeat == 0:
            continue
        runs.append(
            {
                "span": span,
                "events": [
                    (k, mb, a - t0, b - t0) for k, mb, a, b in probe.events
                ],
                "busy": sum(b - a for _, _, a, b in probe.events),
            }
        )
    return {
        "loss": None if loss is None else float(loss.detach()),
        "grads": module.book_gradients(),
        "runs": runs,
        "order": [f"{k}{mb}" for k, mb, _, _ in probe.events],
        "per_micro_bytes": probe.after_forward[0] - probe.base_bytes,
        "peak_bytes": probe.peak_bytes - probe.base_bytes,
        "base_bytes": probe.base_bytes,
    }
