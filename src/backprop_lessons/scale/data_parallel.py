"""Data parallelism with PyTorch's own tools, one step at a time (chapter
8): DDP or FSDP2 around `gpt_module.GPTModule`, and the step `ddp_train`
runs on every rank.

    wrap_ddp(model, device)       DistributedDataParallel: rank 0's
                                  parameters broadcast, gradients averaged
                                  bucket by bucket during the backward
    wrap_fsdp(model, device)      FSDP2's fully_shard on every block and the
                                  root
    gradient_sync(model, enabled) DDP's no_sync(), FSDP2's
                                  set_requires_gradient_sync
    train_step(model, optimizer, micro, device, clip)
                                  one optimizer step over this rank's
                                  micro-batches
    clip_gradients(model, max_norm)  the global norm over the ranks
    evaluate(model, x, y, device) the mean loss on a batch
"""

from __future__ import annotations

import contextlib

import numpy as np
import torch
import torch.distributed as dist

from .clipping import clip_by_global_norm
from .gpt_module import GPTModule

__all__ = [
    "wrap_ddp",
    "wrap_fsdp",
    "gradient_sync",
    "train_step",
    "clip_gradients",
    "evaluate",
]


def wrap_ddp(model: GPTModule, device: torch.device, bucket_cap_mb: float = 25.0):
    """DistributedDataParallel: broadcasts rank 0's parameters now, then
    averages gradients bucket by bucket during every backward."""
    from torch.nn.parallel import DistributedDataParallel

    ids = [device.index] if device.type == "cuda" else None
    return DistributedDataParallel(
        model, device_ids=ids, bucket_cap_mb=bucket_cap_mb
    )


def wrap_fsdp(model: GPTModule, device: torch.device):
    """FSDP2: every block, then the root, sharded over the ranks (dim 0 of
    every parameter).  A block's full parameters exist only while it runs
    forward or backward; its gradient is reduce-scattered right after its
    backward.  The root's own parameters (wte, wpe, lnfw, lnfb) are one
    more sharded group.  No broadcast: every rank must build the same model
    (same seed), and ddp_train does.
    """
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh(device.type, (dist.get_world_size(),))
    for block in model.blocks:
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model


def gradient_sync(model: torch.nn.Module, enabled: bool):
    """A context in which backward does (enabled) or does not average the
    gradients over the ranks: DDP's `no_sync()`, FSDP2's
    `set_requires_gradient_sync`.  Without sync, gradients only accumulate
    in this rank's `.grad`; the next synced backward sends their sum."""
    if hasattr(model, "no_sync"):  # DDP
        return contextlib.nullcontext() if enabled else model.no_sync()
    if hasattr(model, "set_requires_gradient_sync"):  # FSDP2
        model.set_requires_gradient_sync(enabled)
        return contextlib.nullcontext()
    return contextlib.nullcontext()  # a plain module


def train_step(
    model: torch.nn.Module,
    optimizer,
    micro: list,
    device: torch.device,
    clip: float | None = None,
) -> torch.Tensor:
    """One optimizer step over this rank's micro-batches; returns this
    rank's mean loss (a detached scalar tensor).

    Each micro-batch's loss is divided by n_acc = len(micro), so the n_acc
    backwards add up the gradient of the mean over the rank's shard; the
    gradients are averaged over the ranks only in the last backward.  With
    `clip`, the averaged gradient is clipped to that global norm before
    the step (`clip_gradients`).
    """
    optimizer.zero_grad(set_to_none=True)
    total = torch.zeros((), dtype=torch.float64, device=device)
    n_acc = len(micro)
    for k, (x, y) in enumerate(micro):
        idx = torch.as_tensor(x, device=device)  # (b, T)
        targets = torch.as_tensor(y, device=device)  # (b, T)
        with gradient_sync(model, enabled=k == n_acc - 1):
            loss = model(idx, targets) / n_acc
            loss.backward()
        total += loss.detach().double()
    if clip is not None:
        clip_gradients(model, clip)
    optimizer.step()
    return total


def clip_gradients(model: torch.nn.Module, max_norm: float) -> float:
    """Clip the gradients of a DDP or FSDP model (or a plain one) to the
    global norm `max_norm`; returns the norm before clipping.  Under DDP
    every rank holds the same averaged gradient, so rank 0 alone counts
    it; under FSDP every rank counts its own shards."""
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    fsdp = any(hasattr(g, "to_local") for g in grads)
    counted = grads if fsdp or dist.get_rank() == 0 else []
    return clip_by_global_norm(counted, grads, max_norm)


@torch.no_grad()
def evaluate(
    model: torch.nn.Module, x: np.ndarray, y: np.ndarray, device: torch.device
) -> float:
    """Mean loss of the model on (x, y), the whole batch on every rank (a
    collective under FSDP, whose forward gathers the shards)."""
    loss = model(
        torch.as_tensor(x, device=device), torch.as_tensor(y, device=device)
    )
    return float(loss.double().item())
