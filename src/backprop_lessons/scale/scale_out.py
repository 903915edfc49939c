"""Data parallelism over several processes, measured: chapter 8's DDP and FSDP
experiments.

A comparison module, like `distributed` and `backward_cost`: it imports torch
and no engine imports it.  The model is `gpt_module.GPTModule`, the PyTorch
twin of the chapter 6 GPT that `python -m backprop_lessons.scale.ddp_train`
trains.

Functions the ranks run (start them with `distributed.run_workers`, several
in one launch with `distributed.run_tasks`):

    ddp_construction_broadcast  ranks build different weights; DDP(model)
                                gives every rank rank 0's; training keeps
                                them identical
    no_sync_accumulation        K micro-batches, `no_sync()` on all but the
                                last: the gradients, and how many all-reduces
                                each backward launched
    state_bytes                 bytes of parameters, gradients and optimizer
                                state this rank holds, DDP or FSDP, read from
                                its own (sharded) tensors
    throughput                  tokens per second of 1 process and of 2,
                                measured in turns, and the FLOPs each rank does
    profile_ddp_steps           a torch.profiler trace of DDP steps on each
                                rank: forward, backward, optimizer, and every
                                bucket's all-reduce (launch, start, end)

In the caller: `StepOverlap` (the ranks' traces of one step on one time
axis, and the fraction of the transfer time hidden behind backward),
`spread_over_ranks`, and `GPT2Plan` (arithmetic, not measurement: GPT-2
124M on 8 GPUs with NCCL).

Counts here are exact and repeat on every machine; times are measurements
of a shared 2-core CPU and change from run to run.  References: Li et al.
2020 (DDP); Rajbhandari et al. 2020 (ZeRO); Zhao et al. 2023 (FSDP); Kaplan
et al. 2020 (6N); Patarasuk and Yuan 2009 (ring all-reduce).
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass, field, replace

import numpy as np
import torch
import torch.distributed as dist

from ..gpt.model import GPTConfig, parameter_shapes
from ..gradcheck import largest_difference, relative_error
from ..torch_private import ddp_buckets, trace_start_ns
from .backward_cost import count_flops, gpt_flops_formula
from .batches import corpus_tokens, micro_batches, step_batch
from .data_parallel import train_step, wrap_ddp, wrap_fsdp
from .gpt_module import full_gradients, full_parameters, make_model
from .optimizer import adamw
from .train_options import TrainOptions

__all__ = [
    "ddp_construction_broadcast",
    "spread_over_ranks",
    "no_sync_accumulation",
    "state_bytes",
    "throughput",
    "Span",
    "AllReduce",
    "StepTrace",
    "StepOverlap",
    "profile_ddp_steps",
    "GPT2_124M",
    "GPT2Plan",
]

CPU = torch.device("cpu")


# ---------------------------------------------------------------------------
# DDP's broadcast at construction
# ---------------------------------------------------------------------------


def ddp_construction_broadcast(
    rank: int,
    world_size: int,
    config: GPTConfig,
    x: np.ndarray,
    y: np.ndarray,
    steps: int = 2,
) -> dict:
    """Parameters of this rank: as built, after `DDP(model)`, after `steps`.

    Every rank builds its model from a different seed (seed = rank), so the
    ranks start different.  DDP's constructor broadcasts rank 0's
    parameters to all ranks; from then on every rank applies the same
    averaged gradient with the same optimizer arithmetic, so the copies
    stay identical bit for bit.  Returns {stage: {name: array}}.
    """
    model = make_model(config, seed=rank, dtype="float64")
    built = full_parameters(model)
    ddp = wrap_ddp(model, CPU)  # broadcast from rank 0
    wrapped = full_parameters(ddp)
    optimizer = adamw(ddp.named_parameters(), TrainOptions(config=config))
    for _ in range(steps):
        train_step(ddp, optimizer, micro_batches(x, y, rank, world_size, 1), CPU)
    return {
        "built": built,
        "after DDP()": wrapped,
        f"after {steps} steps": full_parameters(ddp),
    }


def spread_over_ranks(results: list[dict], stage: str) -> float:
    """The largest |p_rank - p_0| over all ranks and parameters at `stage`
    (0.0: every rank holds exactly rank 0's numbers)."""
    first = results[0][stage]
    return max(
        largest_difference(r[stage][name], first[name])
        for r in results[1:]
        for name in first
    )


# ---------------------------------------------------------------------------
# Gradient accumulation with no_sync
# ---------------------------------------------------------------------------


def no_sync_accumulation(
    rank: int,
    world_size: int,
    config: GPTConfig,
    x: np.ndarray,
    y: np.ndarray,
    accumulate: int,
    bucket_cap_mb: float = 25.0,
) -> dict:
    """One step's gradients with `accumulate` micro-batches per rank, two
    ways: `no_sync()` on all but the last micro-batch, and syncing every
    backward.  A communication hook counts the bucket all-reduces each
    backward launches.

    Returns {"no_sync": {...}, "sync_every": {...}, "buckets": DDP's
    number of buckets} with, for each way, "grads" ({name: gradient}, the
    names of `gpt_backward`) and "allreduces" (one count per micro-batch
    backward).  Both equal the
    gradient of the mean loss over the whole batch (x, y); no_sync sends
    the gradients once instead of `accumulate` times.
    """
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import (
        allreduce_hook,
    )

    ddp = wrap_ddp(
        make_model(config, seed=0, dtype="float64"),
        CPU,
        bucket_cap_mb=bucket_cap_mb,
    )
    launched = [0]

    def counting_allreduce(state, bucket):
        launched[0] += 1
        return allreduce_hook(state, bucket)  # DDP's own: sum, / world

    ddp.register_comm_hook(dist.group.WORLD, counting_allreduce)
    micro = micro_batches(x, y, rank, world_size, accumulate)
    out = {}
    # The first backward with sync lets DDP rebuild its buckets in
    # gradient-ready order; the counts below are of the rebuilt ones.
    for how in ("warm-up", "no_sync", "sync_every"):
        ddp.zero_grad(set_to_none=True)
        counts = []
        for k, (xb, yb) in enumerate(micro):
            sync = how != "no_sync" or k == accumulate - 1
            launched[0] = 0
            with ddp.no_sync() if not sync else contextlib.nullcontext():
                loss = ddp(torch.as_tensor(xb), torch.as_tensor(yb))
                (loss / accumulate).backward()
            counts.append(launched[0])
        out[how] = {"grads": full_gradients(ddp), "allreduces": counts}
    del out["warm-up"]
    out["buckets"] = len(ddp_buckets(ddp))
    return out


# ---------------------------------------------------------------------------
# ZeRO / FSDP: what each rank holds
# ---------------------------------------------------------------------------


def _local_bytes(t) -> int:
    """Bytes of this rank's part of `t` (its shard for a DTensor)."""
    local = t.to_local() if hasattr(t, "to_local") else t
    return local.numel() * local.element_size()


def state_bytes(
    rank: int,
    world_size: int,
    config: GPTConfig,
    x: np.ndarray,
    y: np.ndarray,
    fsdp: bool,
) -> dict:
    """Bytes of training state held by this rank after one AdamW step
    (float64), under DDP or FSDP, summed over its own tensors.

    Under FSDP every parameter, its gradient and its Adam moments are
    DTensors sharded on dim 0: a rank counts only its local shard.  Under
    DDP every rank holds everything.  Returns {"parameters",
    "gradients", "adam_moments" (m and v), "adam_steps" (the scalar step
    counters, one per parameter tensor, never sharded): bytes}, plus
    "numel": how many parameter numbers this rank holds.
    """
    model = make_model(config, seed=0, dtype="float64")
    model = wrap_fsdp(model, CPU) if fsdp else wrap_ddp(model, CPU)
    optimizer = adamw(model.named_parameters(), TrainOptions(config=config))
    train_step(model, optimizer, micro_batches(x, y, rank, world_size, 1), CPU)
    params = list(model.parameters())
    moments = steps = 0
    for p in params:
        for key, t in optimizer.state[p].items():
            if key == "step":
                steps += _local_bytes(t)
            else:  # exp_avg, exp_avg_sq
                moments += _local_bytes(t)
    numel = sum(_local_bytes(p) // p.element_size() for p in params)
    return {
        "parameters": sum(_local_bytes(p) for p in params),
        "gradients": sum(_local_bytes(p.grad) for p in params),
        "adam_moments": moments,
        "adam_steps": steps,
        "numel": numel,
    }


# ---------------------------------------------------------------------------
# Speed-up: 1 process and 2, in turns
# ---------------------------------------------------------------------------


def throughput(
    rank: int,
    world_size: int,
    config: GPTConfig,
    batch_size: int = 8,
    steps: int = 5,
    repeats: int = 3,
    dtype: str = "float32",
) -> dict:
    """Training speed of the same global batch on 1 process and on 2.

    In one launch of 2 processes, `repeats` rounds of: rank 0 alone trains
    a plain copy of the model for `steps` steps on the whole batch (rank 1
    waits at a barrier), then both ranks train with DDP for `steps` steps on
    half the batch each.  Taking turns exposes both settings to the same
    background load.  Rank 0 returns the seconds of every round, the exact
    counts that explain them (forward + backward FLOPs each rank does per
    step, and the numbers the optimizer updates on each rank), and
    "gradient_rel_diff": before anything is timed, the largest relative
    difference (max |a - b| / max |b| per tensor) between one process's
    gradient and DDP's, of the same batch from the same weights.
    """
    if world_size != 2:
        raise ValueError(
            f"throughput: compares 1 process with 2, so run it "
            f"on 2 ranks, got world_size={world_size}"
        )
    options = TrainOptions(config=config, batch_size=batch_size, dtype=dtype)
    data = corpus_tokens()
    solo = make_model(config, seed=0, dtype=dtype)
    solo_optimizer = adamw(solo.named_parameters(), options)
    ddp = wrap_ddp(make_model(config, seed=0, dtype=dtype), CPU)
    ddp_optimizer = adamw(ddp.named_parameters(), options)
    x, y = step_batch(data, options, 0)
    whole = micro_batches(x, y, 0, 1, 1)
    half = micro_batches(x, y, rank, 2, 1)
    # Before timing, check that both sides compute the same thing: the
    # gradient of the whole batch on one process, and DDP's average of the
    # two halves' gradients.
    grads = []
    for model, ((xb, yb),) in ((solo, whole), (ddp, half)):
        model(torch.as_tensor(xb), torch.as_tensor(yb)).backward()
        grads.append(full_gradients(model))
        model.zero_grad(set_to_none=True)
    agreement = max(relative_error(grads[1][n], g) for n, g in grads[0].items())
    seconds = {"1 process": [], "2 processes": []}
    for round_ in range(repeats + 1):  # round 0 warms up
        dist.barrier()
        if rank == 0:
            t0 = time.perf_counter()
            for _ in range(steps):
                train_step(solo, solo_optimizer, whole, CPU)
            solo_seconds = time.perf_counter() - t0
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(steps):
            train_step(ddp, ddp_optimizer, half, CPU)
        dist.barrier()  # both ranks done
        if round_ and rank == 0:
            seconds["1 process"].append(solo_seconds)
            seconds["2 processes"].append(time.perf_counter() - t0)
    return {
        "seconds": seconds,
        "steps": steps,
        "gradient_rel_diff": agreement,
        "tokens_per_step": batch_size * config.block_size,
        "flops_per_rank": {
            "1 process": _step_flops(solo, whole),
            "2 processes": _step_flops(solo, half),
        },
        "optimizer_numbers_per_rank": sum(p.numel() for p in solo.parameters()),
    }


def _step_flops(model, micro) -> int:
    """Forward + backward matmul FLOPs of one step on `micro`."""
    ((xb, yb),) = micro
    forward, loss = count_flops(model, torch.as_tensor(xb), torch.as_tensor(yb))
    backward, _ = count_flops(loss.backward)
    model.zero_grad(set_to_none=True)
    return forward + backward


# ---------------------------------------------------------------------------
# Overlap: a torch.profiler trace of DDP steps
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Span:
    """[start, end) in milliseconds from the start of the step."""

    name: str
    start: float
    end: float

    @property
    def ms(self) -> float:
        return self.end - self.start


@dataclass(frozen=True)
class AllReduce:
    """One bucket's all-reduce on one rank: launched by the backward thread
    (from DDP's gradient hook), run by a gloo thread from `start` to `end`;
    the run includes waiting for the other rank to start the same bucket."""

    bucket: int
    params: tuple[str, ...]
    bytes: int
    launch: float
    start: float
    end: float


@dataclass(frozen=True)
class StepTrace:
    """One DDP step on one rank, from torch.profiler: the phases, the
    backward's computation (its first to its last autograd node), and every
    bucket's all-reduce in launch order.  Times in ms from the step's start,
    which was `origin_ns` nanoseconds after the Unix epoch by the
    profiler's clock (the machine's clock: the same in all its processes)."""

    rank: int
    origin_ns: int
    forward: Span
    backward: Span  # the computation, without the final wait
    backward_call: Span  # loss.backward(): returns when all is sent
    optimizer: Span
    allreduces: tuple[AllReduce, ...] = field(default_factory=tuple)

    def launched_during_backward(self) -> int:
        """How many all-reduces were launched before backward's last
        autograd node ended.  The gradient hooks run on the backward
        thread, between its nodes, so the count does not depend on timing."""
        return sum(a.launch < self.backward.end for a in self.allreduces)

    def shifted(self, ms: float) -> StepTrace:
        """The same trace with every time moved by `ms`."""

        def move(x):
            return Span(x.name, x.start + ms, x.end + ms)

        return replace(
            self,
            origin_ns=self.origin_ns - round(ms * 1e6),
            forward=move(self.forward),
            backward=move(self.backward),
            backward_call=move(self.backward_call),
            optimizer=move(self.optimizer),
            allreduces=tuple(
                replace(
                    a, launch=a.launch + ms, start=a.start + ms, end=a.end + ms
                )
                for a in self.allreduces
            ),
        )


@dataclass(frozen=True)
class StepOverlap:
    """One DDP step seen from every rank, on rank 0's time axis.

    Bucket k's data can only travel once every rank has started its
    all-reduce, so its transfer is [latest start, latest end] over the
    ranks; before that, a rank that is ahead is only waiting for a slower
    one.  The step cannot end before the slowest rank's backward does, so
    communication that finishes by then costs no time: it is hidden.
    """

    ranks: tuple[StepTrace, ...]

    @classmethod
    def from_ranks(cls, traces) -> StepOverlap:
        """Align the traces of one step (one per rank) to rank 0's clock."""
        zero = traces[0].origin_ns
        return cls(tuple(t.shifted((t.origin_ns - zero) / 1e6) for t in traces))

    @property
    def backward_end(self) -> float:
        """When the slowest rank finished computing its backward."""
        return max(t.backward.end for t in self.ranks)

    def transfers(self) -> list[Span]:
        """Per bucket, [every rank has started it, every rank is done]."""
        return [
            Span(
                f"bucket {k}",
                max(t.allreduces[k].start for t in self.ranks),
                max(t.allreduces[k].end for t in self.ranks),
            )
            for k in range(len(self.ranks[0].allreduces))
        ]

    def communication_ms(self) -> float:
        """Time during which at least one bucket was being transferred."""
        return _union_length([(s.start, s.end) for s in self.transfers()])

    def hidden_ms(self) -> float:
        """Transfer time before the slowest rank's backward ended."""
        end = self.backward_end
        return _union_length(
            [(s.start, min(s.end, end)) for s in self.transfers()]
        )

    def hidden_fraction(self) -> float:
        """hidden_ms / communication_ms (0 if nothing was sent)."""
        total = self.communication_ms()
        return self.hidden_ms() / total if total else 0.0


def _union_length(intervals) -> float:
    """Total length covered by (start, end) intervals (empty ones skipped)."""
    total, reach = 0.0, float("-inf")
    for lo, hi in sorted(i for i in intervals if i[1] > i[0]):
        if hi > reach:
            total += hi - max(lo, reach)
            reach = hi
    return total


def profile_ddp_steps(
    rank: int,
    world_size: int,
    config: GPTConfig,
    batch_size: int = 8,
    bucket_cap_mb: float = 0.5,
    steps: int = 4,
    dtype: str = "float32",
) -> list:
    """`steps` DDP training steps under torch.profiler (CPU activities, all
    threads), after two warm-up steps; returns one `StepTrace` per step.

    Every rank returns its own traces; `StepOverlap.from_ranks` puts the
    ranks' traces of one step on one time axis (the profiler stamps events
    with the machine's clock, which all processes on it share).
    `bucket_cap_mb` is DDP's bucket size cap: a small one gives several
    buckets (about one per transformer block here), so the first can be sent
    while backward still computes the earlier blocks.  (The bucket contents
    are read from DDP's reducer (`torch_private.ddp_buckets`), which DDP's
    own tests use.)
    """
    from torch.profiler import ProfilerActivity, profile, record_function

    # Kineto logs "USDT: profiler_start/stop" lines to stderr, which a
    # notebook shows under the cell; level 6 keeps it quiet.
    os.environ.setdefault("KINETO_LOG_LEVEL", "6")
    options = TrainOptions(config=config, batch_size=batch_size, dtype=dtype)
    ddp = wrap_ddp(
        make_model(config, seed=0, dtype=dtype), CPU, bucket_cap_mb=bucket_cap_mb
    )
    optimizer = adamw(ddp.named_parameters(), options)
    x, y = step_batch(corpus_tokens(), options, 0)
    ((xb, yb),) = micro_batches(x, y, rank, world_size, 1)
    idx, targets = torch.as_tensor(xb), torch.as_tensor(yb)
    # DDP records the gradient-ready order in the first backward and
    # rebuilds its buckets from it in the next forward.
    for _ in range(2):
        train_step(ddp, optimizer, [(xb, yb)], CPU)
    names = {id(p): n for n, p in ddp.module.named_parameters()}
    buckets = [
        (
            [names[id(p)] for p in b.parameters()],
            b.buffer().numel() * b.buffer().element_size(),
        )
        for b in ddp_buckets(ddp)
    ]
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for s in range(steps):
            dist.barrier()
            with record_function(f"step {s}"):
                optimizer.zero_grad(set_to_none=True)
                with record_function("forward"):
                    loss = ddp(idx, targets)
                with record_function("backward"):
                    loss.backward()
                with record_function("optimizer"):
                    optimizer.step()
    # event times are microseconds after the trace started, at trace_start
    start_ns = trace_start_ns(prof)
    return _step_traces(prof.events(), rank, steps, start_ns, buckets)


def _step_traces(events, rank: int, steps: int, start_ns: int, buckets) -> list:
    """Cut the profiler's events into one StepTrace per step."""
    main = [e for e in events if e.name.startswith("step ")]
    main_thread = main[0].thread
    traces = []
    for s in range(steps):
        window = next(e for e in main if e.name == f"step {s}")
        lo, hi = window.time_range.start, window.time_range.end
        origin = start_ns + round(lo * 1000)

        def ms(t, lo=lo):
            return (t - lo) / 1e3

        def span(name, found):
            return Span(
                name,
                ms(min(e.time_range.start for e in found)),
                ms(max(e.time_range.end for e in found)),
            )

        inside = [e for e in events if lo <= e.time_range.start <= hi]
        on_main = [e for e in inside if e.thread == main_thread]
        phase = {
            e.name: e
            for e in on_main
            if e.name in ("forward", "backward", "optimizer")
        }
        nodes = [
            e
            for e in on_main
            if e.name.startswith("autograd::engine::evaluate_function")
        ]
        launches = sorted(
            e.time_range.start for e in on_main if e.name == "c10d::allreduce_"
        )
        runs = sorted(
            (e.time_range.start, e.time_range.end)
            for e in inside
            if e.name == "gloo:all_reduce"
        )
        if not len(launches) == len(runs) == len(buckets):
            raise RuntimeError(
                f"profile_ddp_steps: step {s} has {len(launches)} all-reduce "
                f"launches and {len(runs)} gloo all-reduces for "
                f"{len(buckets)} buckets; expected one of each per bucket"
            )
        allreduces = tuple(
            AllReduce(
                k,
                tuple(buckets[k][0]),
                buckets[k][1],
                ms(launch),
                ms(start),
                ms(end),
            )
            for k, (launch, (start, end)) in enumerate(zip(launches, runs))
        )
        traces.append(
            StepTrace(
                rank=rank,
                origin_ns=origin,
                forward=span("forward", [phase["forward"]]),
                backward=span("backward", nodes),
                backward_call=span("backward call", [phase["backward"]]),
                optimizer=span("optimizer", [phase["optimizer"]]),
                allreduces=allreduces,
            )
        )
    return traces


# ---------------------------------------------------------------------------
# A worked plan at real scale (arithmetic, not measurement)
# ---------------------------------------------------------------------------

GPT2_124M = GPTConfig(
    vocab_size=50257, block_size=1024, n_layer=12, n_head=12, n_embd=768
)


@dataclass(frozen=True)
class GPT2Plan:
    """Training GPT-2 124M data-parallel on `gpus` GPUs with NCCL, worked
    out from the chapter's formulas.  Assumptions are the fields; every
    other number is derived from them.  Nothing here is measured.

    Defaults: 8 A100 GPUs (312 TFLOP/s dense bf16 each) at 40% model FLOP
    utilization; 2**19 = 524,288 tokens per step (GPT-3's batch for its
    125M model, llm.c's for GPT-2 124M) in micro-batches of 16 sequences of
    1024 tokens; gradients all-reduced in fp32 once per step (no_sync on
    the other micro-batches) over NVLink at 200 GB/s of NCCL bus bandwidth;
    AdamW state in fp32 (params, grads, m, v: 16 bytes per parameter).
    """

    config: GPTConfig = GPT2_124M
    gpus: int = 8
    tokens_per_step: int = 2**19
    micro_batch: int = 16  # sequences per GPU per backward
    peak_flops: float = 312e12  # per GPU, dense bf16 (A100)
    mfu: float = 0.40  # achieved / peak
    bus_bandwidth: float = 200e9  # NCCL bus bytes/s (NVLink)
    grad_bytes: int = 4  # fp32 gradients in the buckets
    state_bytes: int = 16  # fp32 param + grad + Adam m, v

    @property
    def parameters(self) -> int:
        """N: every number the model learns (wte counted once)."""
        return sum(
            int(np.prod(s)) for s in parameter_shapes(self.config).values()
        )

    @property
    def flops_per_token(self) -> int:
        """6 N_mm + 12 n_layer T C: chapter 8's count
        (`backward_cost.gpt_flops_formula`)."""
        T = self.config.block_size
        return gpt_flops_formula(self.config, 1, T)["total"] // T

    @property
    def accumulation(self) -> int:
        """Micro-batches per GPU per step."""
        tokens = self.gpus * self.micro_batch * self.config.block_size
        micro, left = divmod(self.tokens_per_step, tokens)
        if left or micro < 1:
            raise ValueError(
                f"GPT2Plan: {self.tokens_per_step:,} tokens per "
                f"step do not split into {self.gpus} GPUs x "
                f"micro-batches of {self.micro_batch} sequences "
                f"of {self.config.block_size} tokens"
            )
        return micro

    @property
    def compute_seconds(self) -> float:
        """One step's FLOPs / (gpus x peak x MFU)."""
        flops = self.flops_per_token * self.tokens_per_step
        return flops / (self.gpus * self.peak_flops * self.mfu)

    @property
    def allreduce_bytes(self) -> float:
        """Bytes each GPU sends per step in a ring all-reduce of all the
        gradients: 2 (n - 1) / n times their size."""
        n = self.gpus
        return 2 * (n - 1) / n * self.parameters * self.grad_bytes

    @property
    def allreduce_seconds(self) -> float:
        return self.allreduce_bytes / self.bus_bandwidth

    def rows(self) -> list[tuple[str, str]]:
        """(quantity, value) rows for a table, assumptions first."""
        p = self
        step = p.compute_seconds
        return [
            (
                "assumed: GPUs x peak x MFU",
                f"{p.gpus} x {p.peak_flops / 1e12:.0f} TFLOP/s x {p.mfu:.0%}",
            ),
            ("assumed: tokens per step", f"{p.tokens_per_step:,}"),
            ("assumed: NCCL bus bandwidth", f"{p.bus_bandwidth / 1e9:.0f} GB/s"),
            ("parameters N", f"{p.parameters:,}"),
            (
                "FLOPs per token (6 N_mm + 12 n_layer T C)",
                f"{p.flops_per_token:,}",
            ),
            ("micro-batches per GPU per step", f"{p.accumulation}"),
            ("compute per step", f"{step * 1e3:.0f} ms"),
            ("tokens per second", f"{p.tokens_per_step / step:,.0f}"),
            (
                "all-reduce per GPU per step (ring)",
                f"{p.allreduce_bytes / 1e6:,.0f} MB in "
                f"{p.allreduce_seconds * 1e3:.1f} ms",
            ),
            ("all-reduce / compute", f"{p.allreduce_seconds / step:.1%}"),
            (
                "training state per GPU, DDP",
                f"{p.parameters * p.state_bytes / 1e9:.2f} GB",
            ),
            (
                f"training state per GPU, FSDP over {p.gpus}",
                f"{p.parameters * p.state_bytes / p.gpus / 1e9:.2f} GB",
            ),
        ]
