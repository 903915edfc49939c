"""Pipeline parallelism for the book's GPT on `torch.distributed.pipelining`
(chapter 12).

The model is cut into consecutive stages: the first also holds the
embeddings, the last the final layer norm and the LM head.  Activations go
forward from stage s to s + 1 and their gradients come back; PyTorch's
schedules split the batch into m micro-batches and decide the order of the
forwards and backwards on each rank:

- "gpipe" (`ScheduleGPipe`, after Huang et al. 2019): all m forwards, then
  all m backwards.  Without recomputation (PyTorch's schedule has none) a
  stage holds all m micro-batches' activations; the GPipe paper
  rematerializes them and keeps only each stage's input.
- "1f1b" (`Schedule1F1B`): one forward, one backward, flushed at the end of
  the step: PipeDream-Flush (Narayanan et al. 2021), the schedule Megatron
  runs; stage s holds at most p - s micro-batches.
- "interleaved-1f1b" (`ScheduleInterleaved1F1B`, Narayanan et al. 2021):
  v = 2 stages per rank, in a loop (rank r holds stages r and r + p).
- "zbv" (`ScheduleZBVZeroBubble`, Qi et al. 2024): v = 2 stages per rank
  in a V (rank r holds stages r and 2p - 1 - r), and every backward split
  into its input-gradient part (I, which the previous stage waits for) and
  its weight-gradient part (W, which nothing waits for), so the Ws fill
  the gaps.

With p ranks and one forward f, backward b per micro-batch on each rank,
GPipe and 1F1B take (m + p - 1)(f + b) and idle (p - 1)/(m + p - 1) of it;
interleaving cuts the ramp to (p - 1)(f + b)/v, an idle share of
(p - 1)/(v m + p - 1) ((p - 1)/(v m) of the work, as Narayanan et al. count
it).  `bubble_fraction` gives the formulas, `schedule_grid` PyTorch's own
zero-bubble timetable.

Where the blocks do not split evenly over the stages, the embedding and the
LM head count as one piece each (Megatron's options to account for the
embedding and the loss in the pipeline split): 2 blocks make 4 stages of
one piece each.

The LM head is tied to the token embedding (wte), which lives on the first
stage.  The last stage holds a copy; after every backward the two parts of
wte's gradient (embedding, LM head) are summed, by an all-reduce between
the two ranks or, when one rank holds both stages (zbv), on that rank, and
both copies take the same optimizer step (as Megatron-LM does with its
embedding group).

`Probe` measures what the chapter shows: each stage's forward, input
gradient and weight gradient can sleep a fixed time (so a stage's work
takes a known time, larger than the communication) and write down when
they ran; and the bytes of activations the stage's module saves for
backward that are alive at once (saved-tensor hooks, parameters left out).
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
from ..torch_private import schedule_timetable

__all__ = [
    "SCHEDULES",
    "STAGES_PER_RANK",
    "SPLIT_BACKWARD",
    "rank_stages",
    "stage_rank",
    "stage_layers",
    "Probe",
    "PipelineStageModule",
    "make_schedule",
    "microbatch_loss",
    "tie_embedding_gradients",
    "run_step",
    "bubble_fraction",
    "schedule_grid",
    "in_flight",
    "pipeline_run",
]

SCHEDULES = ("gpipe", "1f1b", "interleaved-1f1b", "zbv")
#: v, the stages each rank holds under each schedule
STAGES_PER_RANK = {"gpipe": 1, "1f1b": 1, "interleaved-1f1b": 2, "zbv": 2}
#: schedules that run a backward as two actions: input, then weight gradient
SPLIT_BACKWARD = ("zbv",)
BLOCK_NAMES = BLOCK_PARAMETERS  # per-block parameters, stacked along L


def _check_schedule(schedule: str, where: str) -> None:
    if schedule not in SCHEDULES:
        raise ValueError(
            f"{where}: schedule must be one of {SCHEDULES}, got {schedule!r}"
        )


def rank_stages(schedule: str, rank: int, n_ranks: int) -> tuple[int, ...]:
    """The stages rank `rank` holds: (rank,) with one stage per rank; in a
    loop (rank, rank + p) for interleaved 1F1B; in a V (rank, 2p - 1 - rank)
    for zbv."""
    _check_schedule(schedule, "rank_stages")
    if STAGES_PER_RANK[schedule] == 1:
        return (rank,)
    if schedule == "zbv":
        return (rank, 2 * n_ranks - 1 - rank)
    return (rank, rank + n_ranks)


def stage_rank(schedule: str, stage: int, n_ranks: int) -> int:
    """The rank that holds stage `stage` (the inverse of `rank_stages`)."""
    for rank in range(n_ranks):
        if stage in rank_stages(schedule, rank, n_ranks):
            return rank
    raise ValueError(
        f"stage_rank: {schedule} on {n_ranks} ranks has no stage {stage}"
    )


def stage_layers(config: GPTConfig, stage: int, n_stages: int) -> range:
    """The blocks stage `stage` of `n_stages` runs: an equal, consecutive
    share of the blocks; or, when the blocks do not split evenly, of the
    n_layer + 2 pieces (embedding, blocks, head), so a stage may hold the
    embedding or the head alone."""
    L = config.n_layer
    if not isinstance(n_stages, int) or n_stages < 1:
        raise ValueError(
            f"pipeline: n_stages must be a positive int, got {n_stages!r}"
        )
    if L % n_stages == 0:
        per = L // n_stages
        return range(stage * per, (stage + 1) * per)
    if (L + 2) % n_stages:
        raise ValueError(
            f"pipeline: {L} blocks do not split into {n_stages} equal "
            f"stages, alone or with the embedding and the head as a piece "
            f"each ({L + 2} pieces); use a number of stages that divides "
            f"{L} or {L + 2}"
        )
    per = (L + 2) // n_stages  # piece k > 0 is block k - 1
    return range(max(stage * per - 1, 0), min((stage + 1) * per - 1, L))


def bubble_fraction(n_ranks: int, n_micro: int, schedule: str = "1f1b") -> float:
    """Idle share of a step, every micro-batch's forward and backward taking
    the same time on every rank: (p - 1) / (m + p - 1) for GPipe and 1F1B,
    (p - 1) / (v m + p - 1) interleaved.  For zbv, the share of empty slots
    in PyTorch's own timetable (`schedule_grid`), whose slots are a stage's
    forward, input gradient or weight gradient, all taken as equal."""
    _check_schedule(schedule, "bubble_fraction")
    p, m, v = n_ranks, n_micro, STAGES_PER_RANK[schedule]
    if schedule == "zbv":
        grid = schedule_grid(schedule, p, m)
        length = max(len(row) for row in grid)
        return 1 - sum(a is not None for a in grid[0]) / length
    return (p - 1) / (v * m + p - 1)


def schedule_grid(schedule: str, n_ranks: int, n_micro: int) -> list[list]:
    """PyTorch's timetable of a multi-stage schedule: for every rank the list
    of its actions (stage, F / I / W / B, micro-batch) in order, None where
    it waits, as `ScheduleZBVZeroBubble` or `ScheduleInterleaved1F1B`
    compute it for every rank (no process group needed)."""
    from torch.distributed.pipelining import schedules as S

    _check_schedule(schedule, "schedule_grid")
    if STAGES_PER_RANK[schedule] == 1:
        raise ValueError(
            f"schedule_grid: {schedule} runs one stage per rank and has no "
            f"timetable in PyTorch; use one of interleaved-1f1b, zbv"
        )
    kind = (
        S.ScheduleZBVZeroBubble
        if schedule == "zbv"
        else S.ScheduleInterleaved1F1B
    )
    return schedule_timetable(kind, n_ranks, n_micro)


def in_flight(schedule: str, n_stages: int, n_micro: int, stage: int) -> int:
    """Micro-batches whose activations stage `stage` holds at once: GPipe
    all m, 1F1B at most p - stage."""
    if schedule not in ("gpipe", "1f1b"):
        raise ValueError(
            f"in_flight: schedule must be one of ('gpipe', '1f1b'), got "
            f"{schedule!r}"
        )
    return n_micro if schedule == "gpipe" else min(n_micro, n_stages - stage)


class Probe:
    """Timeline and saved-activation bytes of one rank's stages (see the
    module): a forward sleeps `forward_s`, an input gradient `backward_s`, a
    weight gradient `weight_s`."""

    def __init__(
        self,
        forward_s: float = 0.0,
        backward_s: float = 0.0,
        weight_s: float = 0.0,
    ):
        self.forward_s, self.backward_s = forward_s, backward_s
        self.weight_s = weight_s
        # (kind "F" / "B" / "W", stage, micro-batch, start, end)
        self.events: list[tuple[str, int, int, float, float]] = []
        self.n_forward: dict[int, int] = {}
        self.live_bytes = 0
        self.peak_bytes = 0
        self.after_forward: list[int] = []  # live bytes after each forward
        self.base_bytes = 0
        self.exclude: set[int] = set()  # parameters' storages

    def reset(self) -> None:
        self.events, self.n_forward, self.after_forward = [], {}, []
        # bytes still held from an earlier step: not this step's activations
        self.base_bytes = self.peak_bytes = self.live_bytes

    def record(self, kind: str, stage: int, mb: int, seconds: float) -> None:
        t0 = time.perf_counter()
        time.sleep(seconds)
        self.events.append((kind, stage, mb, t0, time.perf_counter()))

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
    """The identity on the activations: its forward and its backward (part
    of the input gradient) sleep and write down when."""

    @staticmethod
    def forward(ctx, x, probe: Probe, stage: int):
        ctx.probe, ctx.stage = probe, stage
        ctx.mb = probe.n_forward.get(stage, 0)
        probe.n_forward[stage] = ctx.mb + 1
        probe.record("F", stage, ctx.mb, probe.forward_s)
        return x.view_as(x)

    @staticmethod
    def backward(ctx, dx):
        ctx.probe.record("B", ctx.stage, ctx.mb, ctx.probe.backward_s)
        return dx, None, None


class _WeightWork(torch.autograd.Function):
    """A zero added to the activations from a parameter alone: its backward
    lies on no input's path, so it runs with the weight gradients."""

    @staticmethod
    def forward(ctx, anchor, probe: Probe, stage: int):
        ctx.probe, ctx.stage = probe, stage
        ctx.mb = probe.n_forward[stage] - 1
        ctx.like = anchor.shape, anchor.dtype
        return anchor.new_zeros(())

    @staticmethod
    def backward(ctx, dz):
        ctx.probe.record("W", ctx.stage, ctx.mb, ctx.probe.weight_s)
        shape, dtype = ctx.like
        return torch.zeros(shape, dtype=dtype), None, None


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
        self.config, self.probe, self.stage = config, probe, stage
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
            # the weight work's own parameter: used nowhere else, so its
            # gradient lies on no activation's path (a parameter the model
            # also uses would tie the two paths together)
            dtype = self.blocks[0].ln1w.dtype if self.blocks else None
            dtype = dtype or next(self.parameters()).dtype
            self.work_anchor = torch.nn.Parameter(torch.zeros((), dtype=dtype))
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
                x = _Work.apply(x, probe, self.stage)
                x = x + _WeightWork.apply(self.work_anchor, probe, self.stage)
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
            if name == "work_anchor":  # the probe's, not the model's
                continue
            g = p.grad.detach().numpy().copy()
            if name.startswith("blocks."):
                _, i, pname = name.split(".")
                out.setdefault(pname, {})[self.layers[int(i)]] = g
            else:
                out[name] = g
        return out


def microbatch_loss(logits, targets):
    """The mean cross-entropy of one micro-batch: the loss every schedule
    runs on the last stage."""
    return F.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), targets.reshape(-1)
    )


def make_schedule(name: str, modules: list, n_stages: int, n_micro: int):
    """PyTorch's PipelineStage around each of this rank's stage modules and
    the schedule `name` over them."""
    from torch.distributed.pipelining import (
        PipelineStage,
        Schedule1F1B,
        ScheduleGPipe,
        ScheduleInterleaved1F1B,
        ScheduleZBVZeroBubble,
    )

    _check_schedule(name, "pipeline")
    kind = {
        "gpipe": ScheduleGPipe,
        "1f1b": Schedule1F1B,
        "interleaved-1f1b": ScheduleInterleaved1F1B,
        "zbv": ScheduleZBVZeroBubble,
    }[name]
    stages = [
        PipelineStage(m, m.stage, n_stages, torch.device("cpu")) for m in modules
    ]
    # scale_grads (the default): gradients divided by n_micro, so a mean
    # loss per micro-batch gives the gradient of the batch's mean
    if STAGES_PER_RANK[name] == 1:
        return kind(stages[0], n_microbatches=n_micro, loss_fn=microbatch_loss)
    return kind(stages, n_microbatches=n_micro, loss_fn=microbatch_loss)


def tied_group(schedule: str, n_ranks: int):
    """The process group of the ranks holding wte's two copies (first and
    last stage), or None when one rank holds both; every rank must call
    this (a new group is a collective)."""
    first = stage_rank(schedule, 0, n_ranks)
    last = stage_rank(schedule, STAGES_PER_RANK[schedule] * n_ranks - 1, n_ranks)
    if first == last:
        return None
    return dist.new_group(sorted({first, last}))


def tie_embedding_gradients(modules: list, group) -> None:
    """Sum wte's two gradients (embedding on the first stage, LM head on the
    last): on this rank if it holds both, else an all-reduce of the two
    ranks in `group`."""
    held = [m for m in modules if m.first or m.last]
    if len(held) == 2:
        total = held[0].wte.grad + held[1].wte.grad
        for m in held:
            m.wte.grad.copy_(total)
    elif held and group is not None:
        dist.all_reduce(held[0].wte.grad, group=group)


def run_step(schedule, modules, x, y, group=None):
    """One forward and backward of the pipeline over the global batch (x, y)
    (NumPy (B, T)) on this rank's stage modules; returns the mean loss if
    this rank holds the last stage, else None."""
    losses: list = []
    first = any(m.first for m in modules)
    last = any(m.last for m in modules)
    args = (torch.as_tensor(x),) if first else ()
    kwargs = {"target": torch.as_tensor(y), "losses": losses} if last else {}
    schedule.step(*args, **kwargs)
    tie_embedding_gradients(modules, group)
    return torch.stack(losses).mean() if losses else None


def stage_modules(params, config, schedule, rank, n_ranks, probe=None) -> list:
    """This rank's `PipelineStageModule`s under `schedule`, in stage order."""
    n_stages = STAGES_PER_RANK[schedule] * n_ranks
    return [
        PipelineStageModule(params, config, s, n_stages, probe)
        for s in sorted(rank_stages(schedule, rank, n_ranks))
    ]


def book_gradients(modules: list) -> dict:
    """The gradients of this rank's stages, as `PipelineStageModule`'s."""
    out: dict = {}
    for m in modules:
        for name, g in m.book_gradients().items():
            if isinstance(g, dict):
                out.setdefault(name, {}).update(g)
            else:
                out[name] = g
    return out


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
    weight_s=0.0,
    repeats=1,
):
    """Forward and backward of the batch on `world` ranks, `repeats` times
    after a warm-up step; each rank returns its gradients (after the last
    repeat), its loss (if it holds the last stage), its probe's timeline
    (seconds from a barrier before the step to a barrier after it) and the
    activation bytes it held.  The sleeps are per rank and micro-batch: a
    rank with v stages sleeps 1/v of them in each."""
    v = STAGES_PER_RANK[schedule]
    probe = Probe(forward_s / v, backward_s / v, weight_s / v)
    modules = stage_modules(params, config, schedule, rank, world, probe)
    pipe = make_schedule(schedule, modules, v * world, n_micro)
    group = tied_group(schedule, world) if world > 1 else None
    runs = []
    # Step 0 is a warm-up, not recorded: on its first step PyTorch's stage
    # also runs a forward of its own to learn the shapes it will send.
    for repeat in range(repeats + 1):
        for m in modules:
            m.zero_grad(set_to_none=True)
        probe.reset()
        dist.barrier()
        t0 = time.perf_counter()
        loss = run_step(pipe, modules, idx, targets, group)
        dist.barrier()
        span = time.perf_counter() - t0
        if repeat == 0:
            continue
        runs.append(
            {
                "span": span,
                "events": [
                    (k, s, mb, a - t0, b - t0) for k, s, mb, a, b in probe.events
                ],
                "busy": sum(b - a for *_, a, b in probe.events),
            }
        )
    return {
        "loss": None if loss is None else float(loss.detach()),
        "grads": book_gradients(modules),
        "runs": runs,
        "order": _order(probe.events, schedule),
        "per_micro_bytes": probe.after_forward[0] - probe.base_bytes,
        "peak_bytes": probe.peak_bytes - probe.base_bytes,
        "base_bytes": probe.base_bytes,
    }


def _order(events, schedule) -> list[str]:
    """The probe's events as labels: "F0" (forward of micro-batch 0), "B0"
    (its backward) with one stage per rank; "2F0", "2B0" (stage 2's) with
    two.  Where the schedule splits the backward, in PyTorch's notation:
    "2I0" the input gradient, "2W0" the weight gradient; elsewhere the
    weight gradients ("W" events) run inside the backward and are left
    out."""
    split = schedule in SPLIT_BACKWARD
    one = STAGES_PER_RANK[schedule] == 1
    labels = []
    for k, s, mb, *_ in events:
        if k == "W" and not split:
            continue
        k = "I" if split and k == "B" else k
        labels.append(f"{k}{mb}" if one else f"{s}{k}{mb}")
    return labels
