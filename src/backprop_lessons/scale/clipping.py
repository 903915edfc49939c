"""Global gradient-norm clipping when the parameters are spread over ranks
(`ddp_train --clip MAX_NORM`, chapter 12).

Clipping scales every gradient by min(1, max_norm / (||g|| + 1e-6)), as
`torch.nn.utils.clip_grad_norm_` does, where ||g|| is the norm of the
*whole* model's gradient.  AdamW acts on each entry of a parameter alone,
so a rank can update its own slice or stage without knowing the rest;
clipping cannot: its factor depends on every entry of every gradient.  So
the ranks add up the squares they hold and exchange one number, and every
parameter must be counted exactly once:

- a parameter split over ranks (a tensor-parallel slice, an FSDP shard) is
  counted by every rank for its own part;
- a replicated parameter (DDP's whole model, tensor parallelism's layer
  norms and embeddings, the pipeline's second copy of the tied wte) is one
  parameter held several times: one rank counts it.

Each caller says which gradients this rank counts (`counted`) and which it
scales (`held`: every gradient it holds, copies included, so the copies
stay equal).
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
import torch.distributed as dist

from ..validate import real_number

__all__ = ["EPS", "global_norm", "clip_by_global_norm"]

EPS = 1e-6  # torch.nn.utils.clip_grad_norm_'s guard against a zero norm


def _local(g: torch.Tensor) -> torch.Tensor:
    # an FSDP gradient is a DTensor: this rank's shard is its part
    return g.to_local() if hasattr(g, "to_local") else g


def global_norm(counted: Iterable[torch.Tensor], group=None) -> float:
    """The 2-norm of the gradient over all ranks of `group`: the squares of
    the gradients this rank counts, summed in float64, all-reduced."""
    total = torch.zeros((), dtype=torch.float64)
    for g in counted:
        total += _local(g).detach().double().pow(2).sum()
    if dist.is_initialized() and dist.get_world_size(group) > 1:
        dist.all_reduce(total, group=group)
    return float(total.sqrt())


def clip_by_global_norm(
    counted: Iterable[torch.Tensor],
    held: Iterable[torch.Tensor],
    max_norm: float,
    group=None,
) -> float:
    """Scale the gradients in `held` so the global norm is at most
    `max_norm`; returns the norm before clipping.  A collective: every rank
    of `group` calls it."""
    max_norm = real_number("clip_by_global_norm", "max_norm", max_norm)
    if not max_norm > 0:
        raise ValueError(
            f"clip_by_global_norm: max_norm must be positive, got {max_norm!r}"
        )
    norm = global_norm(counted, group)
    scale = min(1.0, max_norm / (norm + EPS))
    if scale < 1.0:
        for g in held:
            _local(g).mul_(scale)
    return norm
