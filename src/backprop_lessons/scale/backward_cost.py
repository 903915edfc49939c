"""What a backward pass costs: FLOPs, saved activations, and when gradients
are ready.

A comparison module, like `gradcheck` and `distributed`: it imports torch,
and no engine imports it.  It measures the chapter 6 GPT's PyTorch twin
(`gpt.reference.torch_gpt_loss`) in chapter 8:

- `count_flops(fn)`: the floating point operations of the matrix
  multiplications `fn` runs, counted by
  `torch.utils.flop_counter.FlopCounterMode` (exact: the counts follow from
  the shapes), and `gpt_flops_formula`, the same count from the model's
  sizes (2 FLOPs per multiply-add).
- `saved_tensor_bytes(fn)`: the bytes of the tensors autograd saves for
  backward while `fn` runs, read with
  `torch.autograd.graph.saved_tensors_hooks` (each storage counted once; the
  parameters themselves are not counted).
- `torch_gpt_loss_checkpointed`: the twin's loss with every transformer
  block (`gpt.reference.torch_gpt_block`) under activation checkpointing
  (the block's inside is recomputed during backward instead of saved).
- `gradient_ready_order(params, loss_fn)`: the order in which the
  parameters' gradients are finished during backward, recorded with
  `register_post_accumulate_grad_hook`.
- `assign_buckets` and `bucket_timeline`: how DistributedDataParallel
  groups gradients into buckets (in the order they become ready, closed
  when a size cap is reached) and at which step of backward each bucket is
  complete, so its all-reduce can start while backward still runs.

What it is not: a profiler.  Nothing here times anything; every number is
a count that repeats exactly from run to run.  References: Kaplan et al.
2020 (training compute C ~ 6 N per token); Chen et al. 2016 (checkpointing);
Li et al. 2020 (DDP's gradient buckets).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import torch
from torch.utils.checkpoint import checkpoint
from torch.utils.flop_counter import FlopCounterMode

from ..gpt.model import GPTConfig
from ..gpt.reference import torch_gpt_block, torch_gpt_loss
from ..validate import instance_of, positive_int

__all__ = [
    "count_flops",
    "gpt_matmul_parameters",
    "gpt_flops_formula",
    "SavedBytes",
    "saved_tensor_bytes",
    "checkpointed_block",
    "torch_gpt_loss_checkpointed",
    "gradient_ready_order",
    "assign_buckets",
    "BucketEvent",
    "bucket_timeline",
]


# ---------------------------------------------------------------------------
# FLOPs
# ---------------------------------------------------------------------------


def count_flops(fn: Callable, *args, **kwargs) -> tuple[int, object]:
    """(FLOPs of the matrix multiplications `fn(*args, **kwargs)` ran,
    its result).

    FlopCounterMode intercepts every aten operation and counts the ones it
    has a formula for (mm, addmm, bmm, convolutions, attention kernels):
    2 * m * n * k for an (m, k) @ (k, n) product.  Elementwise work (adds,
    layer norms, softmax, GELU) is not counted: it is small next to the
    matmuls and limited by memory, not arithmetic.
    """
    with FlopCounterMode(display=False) as counter:
        result = fn(*args, **kwargs)
    return counter.get_total_flops(), result


def gpt_matmul_parameters(config: GPTConfig) -> int:
    """How many parameters take part in a matrix multiplication: the block
    weights and the LM head.

    Per block: qkvw 3C*C, attprojw C*C, fcw 4C*C, fcprojw 4C*C (12 C^2); plus
    wte (V*C), used by the tied LM head.  Left out: wpe (only looked up),
    the biases and the layer norm gains and shifts (added or multiplied
    elementwise).
    """
    C = config.n_embd
    return config.n_layer * 12 * C * C + config.vocab_size * C


def gpt_flops_formula(config: GPTConfig, B: int, T: int) -> dict[str, int]:
    """Forward and backward matmul FLOPs of the GPT on a (B, T) batch, from
    its sizes.

    forward per token  = 2 * N_mm + 4 * L * T * C
        (2 FLOPs per weight per token, plus the attention products
         q @ k^T and att @ v: 2 * T * C each per layer, computed on the
         full T x T matrix before the causal mask)
    backward           = 2 * forward (each matmul's backward is two matmuls
                         of the same size: one for each input's gradient)
    """
    instance_of("gpt_flops_formula", "config", config, GPTConfig)
    n_mm, L, C = gpt_matmul_parameters(config), config.n_layer, config.n_embd
    forward = B * T * (2 * n_mm + 4 * L * T * C)
    return {"forward": forward, "backward": 2 * forward, "total": 3 * forward}


# ---------------------------------------------------------------------------
# Saved activations
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class SavedBytes:
    """What autograd kept for backward: `bytes` in `tensors` distinct
    storages (parameters excluded)."""

    bytes: int
    tensors: int

    def __str__(self) -> str:
        return f"{self.bytes:,} bytes in {self.tensors} saved tensors"


def saved_tensor_bytes(
    fn: Callable, *args, exclude: Iterable[torch.Tensor] = (), **kwargs
) -> tuple[SavedBytes, object]:
    """(bytes of the tensors saved for backward while `fn` ran, its result).

    Every tensor autograd saves passes through the pack hook of
    `saved_tensors_hooks`; we note its storage (address and size) and hand
    the tensor back unchanged.  A storage saved twice (x saved by two
    operations, or two views of one buffer) is counted once; storages of
    the tensors in `exclude` (the parameters, which exist anyway) are not
    counted.  Operations under activation checkpointing save nothing, so
    they do not show up.  Exact and repeatable: sizes follow from shapes.
    """
    excluded = {t.untyped_storage().data_ptr() for t in exclude}
    storages: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        if storage.data_ptr() not in excluded:
            storages[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        result = fn(*args, **kwargs)
    return SavedBytes(sum(storages.values()), len(storages)), result


# ---------------------------------------------------------------------------
# Activation checkpointing
# ---------------------------------------------------------------------------


def checkpointed_block(
    x: torch.Tensor, tp: dict, config: GPTConfig, l: int
) -> torch.Tensor:
    """Block `l` of the twin under `checkpoint`: only its input x is saved.

    During backward the block's forward runs again from that input, to
    rebuild the activations its backward needs.
    """
    # use_reentrant=True: the block's input is saved with save_for_backward,
    # so saved_tensor_bytes sees (and counts) it.
    return checkpoint(torch_gpt_block, x, tp, config, l, use_reentrant=True)


def torch_gpt_loss_checkpointed(
    tp: dict, config: GPTConfig, idx: torch.Tensor, targets: torch.Tensor
) -> torch.Tensor:
    """The twin's loss with every block checkpointed.

    About one extra forward of compute, in exchange for keeping one block's
    activations at a time instead of all of them.
    """
    return torch_gpt_loss(tp, config, idx, targets, run_block=checkpointed_block)


# ---------------------------------------------------------------------------
# Gradient-ready order and buckets
# ---------------------------------------------------------------------------


def gradient_ready_order(
    named_params: Iterable[tuple[str, torch.Tensor]],
    loss_fn: Callable[[], torch.Tensor],
) -> list[str]:
    """The names of the parameters in the order their gradients are finished
    by `loss_fn().backward()`.

    A post-accumulate-grad hook runs right after a parameter's `.grad` has
    received its last contribution: the moment a data-parallel framework
    may start sending it.  The hooks are removed afterwards.
    """
    order: list[str] = []
    handles = []
    try:
        for name, p in named_params:
            if not isinstance(p, torch.Tensor) or not p.requires_grad:
                raise ValueError(
                    f"gradient_ready_order: {name!r} must be a "
                    "tensor that requires grad"
                )
            handles.append(
                p.register_post_accumulate_grad_hook(
                    lambda _p, name=name: order.append(name)
                )
            )
        loss_fn().backward()
    finally:
        for h in handles:
            h.remove()
    return order


def assign_buckets(sizes: dict[str, int], cap_bytes: int) -> list[list[str]]:
    """DDP's bucket assignment: fill buckets in the order of `sizes`, close
    one at `cap_bytes`.

    `sizes`: name -> bytes of the gradient, in the order the gradients
    become ready (DDP records that order during the first backward and
    rebuilds its buckets from it; before that, with its default settings,
    every parameter shares one bucket).  A bucket is closed as
    soon as it holds `cap_bytes` or more, so one large gradient may exceed
    the cap on its own.
    """
    positive_int("assign_buckets", "cap_bytes", cap_bytes)
    buckets: list[list[str]] = [[]]
    filled = 0
    for name, size in sizes.items():
        buckets[-1].append(name)
        filled += size
        if filled >= cap_bytes:
            buckets.append([])
            filled = 0
    return [b for b in buckets if b]


@dataclass(frozen=True)
class BucketEvent:
    """Step `step` of backward finished gradient `name` (in `bucket`);
    `launched` says if that bucket is now complete."""

    step: int
    name: str
    bucket: int
    launched: bool


def bucket_timeline(
    ready_order: list[str], buckets: list[list[str]]
) -> list[BucketEvent]:
    """For each gradient in the order backward finishes them: its bucket, and
    whether the bucket is complete.

    A complete bucket's all-reduce can start at once, while backward goes on
    computing the gradients of the earlier layers.
    """
    bucket_of = {name: i for i, bucket in enumerate(buckets) for name in bucket}
    missing = set(ready_order) ^ set(bucket_of)
    if missing:
        raise ValueError(
            "bucket_timeline: the ready order and the buckets must hold the same "
            f"names; these are in only one of them: {sorted(missing)}"
        )
    waiting = [set(b) for b in buckets]
    events = []
    for step, name in enumerate(ready_order):
        i = bucket_of[name]
        waiting[i].discard(name)
        events.append(BucketEvent(step, name, i, not waiting[i]))
    return events
