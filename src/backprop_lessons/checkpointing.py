"""Activation checkpointing in segments of k blocks, counted (chapter 8).

The PyTorch twin's N blocks are run in segments of `k` consecutive blocks,
each under one `torch.utils.checkpoint`: the forward keeps only a segment's
input, and the backward runs the segment's k blocks forward again, keeping
all their activations at once, before it backs through them.  With a block
input of s bytes and A bytes saved by one block, the bytes held at the
worst moment of the backward are about

    (N / k) s   +   k A          the segments' inputs, one segment rebuilt

which is smallest at k = sqrt(N s / A).  Chen et al. (2016) count layers
that save about what a checkpoint keeps (A ~ s): k = sqrt(N), and memory
grows as sqrt(N) instead of N.  A transformer block saves many times its
input, so a segment of one block is the better choice until N exceeds
about A / s.  Every k recomputes each block's forward once: the FLOPs do
not depend on k (the last segment is checkpointed too, so k = N keeps
everything and still pays the recompute).  Revolve (Griewank and Walther,
2000) places a fixed number of checkpoints by a binomial schedule and
recomputes some steps more than once, which brings the memory down to a
logarithm of the chain's length; PyTorch's `checkpoint_sequential` uses
equal segments, as here.

What it is not: a memory profiler.  The counts come from
`scale.backward_cost.saved_tensor_bytes` (every tensor autograd saves,
parameters excluded) and `count_flops`: exact and the same on every
machine; the allocator's peak, which adds gradients and temporaries, is
`debug.measure_memory`'s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch.utils.checkpoint import checkpoint

from .gpt.model import GPTConfig
from .gpt.reference import torch_gpt_block, torch_gpt_loss
from .scale.backward_cost import count_flops, saved_tensor_bytes
from .validate import instance_of, positive_int

__all__ = [
    "run_blocks",
    "torch_gpt_loss_segments",
    "SegmentCost",
    "SegmentTable",
    "segment_costs",
]


def run_blocks(
    x: torch.Tensor, tp: dict, config: GPTConfig, first: int, last: int
) -> torch.Tensor:
    """Blocks first..last-1 of the twin, one after the other: x (B, T, C)."""
    for l in range(first, last):
        x = torch_gpt_block(x, tp, config, l)
    return x


def torch_gpt_loss_segments(
    tp: dict, config: GPTConfig, idx: torch.Tensor, targets: torch.Tensor, k: int
) -> torch.Tensor:
    """The twin's loss with its blocks checkpointed in segments of `k`.

    `torch_gpt_loss` calls its `run_block` once per block; here the call at
    a segment's first block runs the whole segment under `checkpoint`, and
    the other calls pass x on (their blocks ran inside the segment).
    """
    k = positive_int("torch_gpt_loss_segments", "k", k)

    def run_block(x, tp, config, l):
        if l % k:  # inside a segment: already run by its first block
            return x
        last = min(l + k, config.n_layer)
        # use_reentrant=True: the segment's input goes through
        # save_for_backward, where saved_tensor_bytes counts it
        return checkpoint(run_blocks, x, tp, config, l, last, use_reentrant=True)

    return torch_gpt_loss(tp, config, idx, targets, run_block=run_block)


@dataclass(frozen=True)
class SegmentCost:
    """One segment length: `kept` bytes saved through the forward (the
    segments' inputs, plus the final layer norm and the head), `rebuilt`
    bytes saved by one segment run again in the backward, and the FLOPs of
    a training step (forward and backward, matmuls)."""

    k: int
    segments: int
    kept: int
    rebuilt: int
    flops: int

    @property
    def worst(self) -> int:
        """Held at the worst moment of the backward: kept + rebuilt."""
        return self.kept + self.rebuilt


@dataclass(frozen=True)
class SegmentTable:
    """`segment_costs`' rows beside the plain twin's saved bytes and FLOPs."""

    n_layer: int
    plain_bytes: int
    plain_flops: int
    rows: tuple[SegmentCost, ...]

    def __str__(self) -> str:
        head = (
            f"{'k':>3} {'segments':>8} {'kept':>11} {'one segment':>12} "
            f"{'worst':>11} {'/ plain':>8} {'FLOPs / plain':>14}"
        )
        lines = [
            f"{self.n_layer} blocks; without checkpointing "
            f"{self.plain_bytes:,} bytes saved",
            head,
            "-" * len(head),
        ]
        for r in self.rows:
            lines.append(
                f"{r.k:>3} {r.segments:>8} {r.kept:>11,} {r.rebuilt:>12,} "
                f"{r.worst:>11,} {r.worst / self.plain_bytes:>8.2f} "
                f"{r.flops / self.plain_flops:>14.2f}"
            )
        return "\n".join(lines)

    def _repr_pretty_(self, p, cycle) -> None:
        p.text(str(self))


def _step_flops(loss_fn, *args) -> int:
    """Matmul FLOPs of one forward and its backward."""
    forward, loss = count_flops(loss_fn, *args)
    return forward + count_flops(loss.backward)[0]


def segment_costs(
    tp: dict, config: GPTConfig, idx: torch.Tensor, targets: torch.Tensor, lengths
) -> SegmentTable:
    """Saved bytes and FLOPs of the twin checkpointed in segments of each
    length k in `lengths`, counted on the batch (idx, targets), with the
    plain twin's as the reference."""
    instance_of("segment_costs", "config", config, GPTConfig)
    lengths = [positive_int("segment_costs", "k", k) for k in lengths]
    params = list(tp.values())
    plain, _ = saved_tensor_bytes(
        torch_gpt_loss, tp, config, idx, targets, exclude=params
    )
    block_input = tp["wte"][idx] + tp["wpe"][: idx.shape[1]]  # (B, T, C)
    rows = []
    for k in lengths:
        k_eff = min(k, config.n_layer)
        kept, _ = saved_tensor_bytes(
            torch_gpt_loss_segments, tp, config, idx, targets, k, exclude=params
        )
        rebuilt, _ = saved_tensor_bytes(
            run_blocks, block_input, tp, config, 0, k_eff, exclude=params
        )
        flops = _step_flops(torch_gpt_loss_segments, tp, config, idx, targets, k)
        segments = math.ceil(config.n_layer / k)
        rows.append(SegmentCost(k, segments, kept.bytes, rebuilt.bytes, flops))
    plain_flops = _step_flops(torch_gpt_loss, tp, config, idx, targets)
    return SegmentTable(config.n_layer, plain.bytes, plain_flops, tuple(rows))
