"""Megatron-LM's tensor parallelism for the book's GPT, twice: by hand with
the f and g operators of `collectives`, and with PyTorch's own
`torch.distributed.tensor.parallel` (chapter 12).

Every rank holds the whole residual stream x (B, T, C) and a slice of each
block's four matrices (Shoeybi et al. 2019, section 3):

- qkv and fc are column-parallel: rank r holds the output rows of its heads
  (qkv) or its share of the 4C hidden units (fc), computes its slice of
  the output, and nothing is sent forward.  Attention runs on the rank's own
  heads, the GELU on its own hidden units: both act on one slice at a time.
- attproj and fcproj are row-parallel: rank r holds the input columns that
  match its slice, so x_slice @ W_slice^T is a partial sum of the full
  product; g all-reduces it (forward), then the bias is added once.
- f sits in front of each column-parallel layer: the identity forward, and
  in the backward the all-reduce of the input gradients each rank's slice
  contributes.

So a block sends 2 all-reduces of (B, T, C) forward (g) and 2 backward (f).
The layer norms, embeddings and LM head are replicated: every rank computes
them in full, and their gradients come out the same on every rank.

The qkv matrix (3C, C) stacks all of q's rows, then k's, then v's.  A rank
needs q, k and v of its own heads, so `qkv_rows(C, NH, world)` reorders the
rows into "TP layout" (rank 0's q, k, v rows, then rank 1's...): each rank's
share is then one contiguous block, which is also what PyTorch's
`ColwiseParallel` hands out (it shards dim 0 in equal contiguous blocks).

Modes of `TPGPT`: "single" (one process, the whole matrices), "manual" (f and
g by hand, this rank's slices) and "dtensor" (the whole matrices, then
`parallelize_module(..., {"qkv": ColwiseParallel(), "attproj":
RowwiseParallel(), "fc": ColwiseParallel(), "fcproj": RowwiseParallel()})`
on a 1-D device mesh turns them into sharded DTensors).
"""

from __future__ import annotations

import warnings

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F

from ..gpt.layers import LAYERNORM_EPS
from ..gpt.model import PARAMETER_TABLE, PARAMETERS, GPTConfig
from ..gpt.reference import torch_attention
from . import collectives

__all__ = [
    "qkv_rows",
    "shard_slices",
    "TPBlock",
    "TPGPT",
    "BOOK_NAMES",
    "full_gradients",
    "tp_gradients",
    "comm_per_step",
]

MODES = ("single", "manual", "dtensor")


# module parameter name (inside a block) -> the book's name: the layernorms'
# are registered under the book's names, each linear layer is a module
# named after its weight ("qkv.weight" for qkvw, "qkv.bias" for qkvb)
def _module_name(name: str) -> str:
    """Where a block's parameter lives in TPBlock: "qkvw" -> "qkv.weight"."""
    if name.startswith("ln"):
        return name
    return name[:-1] + (".weight" if name.endswith("w") else ".bias")


BOOK_NAMES = {_module_name(p.name): p.name for p in PARAMETERS if p.per_block}

#: Held whole by every rank: a block's layernorms, and the parameters
#: outside the blocks (the embeddings, the final layernorm)
_BLOCK_NORMS = tuple(
    p.name for p in PARAMETERS if p.per_block and p.name.startswith("ln")
)
_OUTSIDE = tuple(p.name for p in PARAMETERS if not p.per_block)
#: How each rank's slice of a parameter sits in the whole ("manual" mode):
#: the axis along which the slices are put side by side.
_GATHER_AXIS = {
    p.name: {"column": 0, "row": 1}[p.split] for p in PARAMETERS if p.split
}


#: Under sequence parallelism, applied to this rank's positions only, so
#: their gradients are partial sums: the blocks' layer norms, the
#: row-parallel layers' biases (added after the reduce-scatter), the final
#: layer norm.
SEQUENCE_PARTIAL = (
    *_BLOCK_NORMS,
    *(p.name[:-1] + "b" for p in PARAMETERS if p.split == "row"),
    *(name for name in _OUTSIDE if name.startswith("ln")),
)


def _check_sequence(mode: str, sequence_parallel: bool) -> None:
    if sequence_parallel and mode != "manual":
        raise ValueError(
            f"tensor parallel: sequence parallelism is written by hand here; "
            f"it needs mode 'manual', got {mode!r}"
        )


def _check_split(config: GPTConfig, world: int) -> None:
    if not isinstance(world, int) or world < 1 or config.n_head % world:
        raise ValueError(
            f"tensor parallel: {config.n_head} heads do not split over "
            f"{world!r} ranks; use a number of ranks that divides n_head"
        )


def qkv_rows(C: int, NH: int, world: int) -> np.ndarray:
    """Row order of qkvw (3C, C) in TP layout: for each rank, the q rows of
    its heads, then their k rows, then their v rows."""
    per = C // world  # rows of q (or k, or v) per rank: its NH/world heads
    return np.concatenate(
        [
            np.arange(part * C + r * per, part * C + (r + 1) * per)
            for r in range(world)
            for part in range(3)
        ]
    )


def shard_slices(C: int, world: int, rank: int) -> dict[str, slice]:
    """This rank's rows (column-parallel) or columns (row-parallel) of each
    matrix, in TP layout."""
    return {
        "qkv": slice(rank * 3 * C // world, (rank + 1) * 3 * C // world),
        "attproj": slice(rank * C // world, (rank + 1) * C // world),
        "fc": slice(rank * 4 * C // world, (rank + 1) * 4 * C // world),
        "fcproj": slice(rank * 4 * C // world, (rank + 1) * 4 * C // world),
    }


def _linear(weight: np.ndarray, bias: np.ndarray) -> torch.nn.Linear:
    out_f, in_f = weight.shape
    layer = torch.nn.Linear(in_f, out_f, dtype=torch.from_numpy(weight).dtype)
    with torch.no_grad():
        layer.weight.copy_(torch.from_numpy(np.ascontiguousarray(weight)))
        layer.bias.copy_(torch.from_numpy(np.ascontiguousarray(bias)))
    return layer


class TPBlock(torch.nn.Module):
    """Block l of the book's GPT holding this rank's slices ("manual") or the
    whole matrices ("single", "dtensor"); qkv in TP layout for `world`."""

    def __init__(
        self,
        params,
        l,
        config,
        mode="single",
        rank=0,
        world=1,
        sequence_parallel=False,
    ):
        super().__init__()
        if mode not in MODES:
            raise ValueError(
                f"TPBlock: mode must be one of {MODES}, got {mode!r}"
            )
        _check_split(config, world)
        _check_sequence(mode, sequence_parallel)
        self.mode, self.config = mode, config
        self.sequence_parallel = sequence_parallel
        C = config.n_embd
        p = {name: params[name][l] for name in set(BOOK_NAMES.values())}
        rows = qkv_rows(C, config.n_head, world)
        qkvw, qkvb = p["qkvw"][rows], p["qkvb"][rows]
        attw, attb = p["attprojw"], p["attprojb"]
        fcw, fcb = p["fcw"], p["fcb"]
        projw, projb = p["fcprojw"], p["fcprojb"]
        if mode == "manual":
            s = shard_slices(C, world, rank)
            qkvw, qkvb = qkvw[s["qkv"]], qkvb[s["qkv"]]
            attw = attw[:, s["attproj"]]
            fcw, fcb = fcw[s["fc"]], fcb[s["fc"]]
            projw = projw[:, s["fcproj"]]
        for name in _BLOCK_NORMS:
            self.register_parameter(
                name, torch.nn.Parameter(torch.tensor(p[name]))
            )
        self.qkv = _linear(qkvw, qkvb)
        self.attproj = _linear(attw, attb)
        self.fc = _linear(fcw, fcb)
        self.fcproj = _linear(projw, projb)

    def column_parallel(self, layer, x):
        if self.sequence_parallel:  # all-gather T; reduce-scatter backward
            return collectives.sequence_parallel_linear(
                x, layer.weight, layer.bias
            )
        if self.mode == "manual":
            x = collectives.f(x)  # identity; all-reduce of dx backward
        return layer(x)

    def row_parallel(self, layer, x):
        if self.sequence_parallel:  # partial sums, added and split over T
            partial = F.linear(x, layer.weight)
            return (
                collectives.reduce_scatter(partial, collectives.SEQ) + layer.bias
            )
        if self.mode == "manual":  # partial sums, added up by g, bias once
            return collectives.g(F.linear(x, layer.weight)) + layer.bias
        return layer(x)  # whole matrix, or RowwiseParallel's own all-reduce

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        C = x.shape[-1]
        hs = C // self.config.n_head
        h = F.layer_norm(x, (C,), self.ln1w, self.ln1b, LAYERNORM_EPS)
        qkv = self.column_parallel(self.qkv, h)  # (B, T, 3 C_local)
        heads = qkv.shape[-1] // 3 // hs  # this rank's heads
        y = torch_attention(qkv, heads)  # (B, T, C_local)
        x = x + self.row_parallel(self.attproj, y)
        h = F.layer_norm(x, (C,), self.ln2w, self.ln2b, LAYERNORM_EPS)
        h = F.gelu(self.column_parallel(self.fc, h), approximate="tanh")
        return x + self.row_parallel(self.fcproj, h)


class TPGPT(torch.nn.Module):
    """The book's GPT with `TPBlock`s; embeddings, final norm and the tied LM
    head replicated.  forward(idx, targets) -> mean cross-entropy.

    With `sequence_parallel` ("manual" mode only) the residual stream
    between the blocks' split layers is split along T instead of
    replicated: each rank holds T / world positions of it, and the layer
    norms, residual additions and row-parallel biases act on those alone.
    The embeddings are computed whole and scattered; the last layer norm's
    output is gathered again for the (replicated) LM head.  The parameters
    used on the rank's positions only (`SEQUENCE_PARTIAL`) get partial
    gradients: `all_reduce_sequence_gradients` adds them up after every
    backward."""

    def __init__(
        self,
        params,
        config,
        mode="single",
        rank=0,
        world=1,
        sequence_parallel=False,
    ):
        super().__init__()
        _check_sequence(mode, sequence_parallel)
        self.config, self.sequence_parallel = config, sequence_parallel
        for name in _OUTSIDE:
            self.register_parameter(
                name, torch.nn.Parameter(torch.tensor(params[name]))
            )
        self.blocks = torch.nn.ModuleList(
            TPBlock(params, l, config, mode, rank, world, sequence_parallel)
            for l in range(config.n_layer)
        )

    def block_input(self, idx):
        """The embeddings (B, T, C); this rank's (B, T / world, C) of them
        under sequence parallelism."""
        x = self.wte[idx] + self.wpe[: idx.shape[1]]
        if self.sequence_parallel:
            x = collectives.scatter_to_sequence(x)
        return x

    def forward(self, idx, targets):
        B, T = idx.shape
        C = self.config.n_embd
        x = self.block_input(idx)
        for block in self.blocks:
            x = block(x)
        x = F.layer_norm(x, (C,), self.lnfw, self.lnfb, LAYERNORM_EPS)
        if self.sequence_parallel:
            x = collectives.gather_from_sequence(x)  # (B, T, C) again
        logits = x @ self.wte.T
        return F.cross_entropy(logits.reshape(B * T, -1), targets.reshape(B * T))

    def book_named_parameters(self):
        """(book name, layer or None, parameter) for every parameter."""
        for name in _OUTSIDE:
            yield name, None, getattr(self, name)
        for l, block in enumerate(self.blocks):
            for pname, p in block.named_parameters():
                yield BOOK_NAMES[pname], l, p

    def all_reduce_sequence_gradients(self) -> None:
        """Under sequence parallelism: sum the partial gradients of the
        parameters each rank applied to its own positions only (one
        all-reduce of them all, flattened together)."""
        if not self.sequence_parallel:
            return
        grads = [
            p.grad
            for name, _, p in self.book_named_parameters()
            if name in SEQUENCE_PARTIAL
        ]
        flat = torch.cat([g.reshape(-1) for g in grads])
        dist.all_reduce(flat)
        for g, part in zip(grads, flat.split([g.numel() for g in grads])):
            g.copy_(part.view_as(g))

    def counted_once(self, rank: int) -> list[torch.Tensor]:
        """The gradients this rank counts in a norm over all ranks: its slices
        of the split matrices and biases; the replicated parameters on rank
        0 only (each is one parameter, held by every rank)."""
        return [
            p.grad
            for name, _, p in self.book_named_parameters()
            if name in _GATHER_AXIS or rank == 0
        ]


def parallelize(model: TPGPT, mesh) -> TPGPT:
    """PyTorch's tensor parallelism on a "dtensor" model's blocks."""
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        RowwiseParallel,
        parallelize_module,
    )

    plan = {
        "qkv": ColwiseParallel(),
        "attproj": RowwiseParallel(),
        "fc": ColwiseParallel(),
        "fcproj": RowwiseParallel(),
    }
    for block in model.blocks:
        parallelize_module(block, mesh, plan)
    return model


def full_gradients(model: TPGPT, world: int) -> dict[str, np.ndarray]:
    """The gradients in the book's layout and names (as `gpt_backward`
    returns them): slices gathered from every rank, qkv rows put back in
    order.  A collective in modes "manual" and "dtensor"."""
    C, NH = model.config.n_embd, model.config.n_head
    mode = model.blocks[0].mode
    per_layer: dict[str, list] = {}
    top = {}
    for name, l, p in model.book_named_parameters():
        grad = p.grad
        if hasattr(grad, "full_tensor"):  # a DTensor: gather its shards
            grad = grad.full_tensor()
        elif mode == "manual" and name in _GATHER_AXIS:
            grad = torch.cat(_gather(grad), dim=_GATHER_AXIS[name])
        g = grad.detach().numpy().copy()
        if name in ("qkvw", "qkvb"):
            g[qkv_rows(C, NH, world)] = g.copy()  # TP layout -> book layout
        if l is None:
            top[name] = g
        else:
            per_layer.setdefault(name, []).append(g)
    out = {**top, **{n: np.stack(v) for n, v in per_layer.items()}}
    return {name: out[name] for name, _ in PARAMETER_TABLE}


def _gather(t: torch.Tensor) -> list[torch.Tensor]:
    parts = [torch.empty_like(t) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, t.contiguous())
    return parts


def tp_gradients(
    rank,
    world,
    params,
    config,
    idx,
    targets,
    mode="manual",
    sequence_parallel=False,
):
    """Loss and full gradients of one forward and backward, tensor-parallel
    over the group's ranks (with `sequence_parallel`, the residual stream
    split along T too); also the elements this rank sent into each kind of
    collective ("manual") or the collectives PyTorch's CommDebugMode counted
    ("dtensor"), and the bytes of activations this rank saved for the
    backward (`backward_cost.saved_tensor_bytes`: parameters left out)."""
    from .backward_cost import saved_tensor_bytes

    idx, targets = torch.as_tensor(idx), torch.as_tensor(targets)
    if mode == "dtensor":
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor.debug import CommDebugMode

        model = parallelize(
            TPGPT(params, config, "dtensor", rank, world),
            init_device_mesh("cpu", (world,)),
        )
        counter = CommDebugMode()
        # CommDebugMode's module hooks warn that the inputs (token ids)
        # need no gradient: true, and harmless.
        with counter, warnings.catch_warnings():
            warnings.filterwarnings("ignore", "Full backward hook")
            loss = model(idx, targets)
            loss.backward()
        counts = {
            str(k).rsplit(".", 1)[-1]: v
            for k, v in counter.get_comm_counts().items()
        }
        saved = block_saved = None
    else:
        model = TPGPT(params, config, mode, rank, world, sequence_parallel)
        collectives.COUNTER.reset()
        collectives.COUNTER.enabled = True
        try:
            saved, loss = saved_tensor_bytes(
                model, idx, targets, exclude=model.parameters()
            )
            loss.backward()
            model.all_reduce_sequence_gradients()
        finally:
            collectives.COUNTER.enabled = False
        counts = dict(collectives.COUNTER.elements)
        # one block's share, measured on a forward of its own (not counted)
        block_saved, _ = saved_tensor_bytes(
            model.blocks[0],
            model.block_input(idx).detach().requires_grad_(),
            exclude=model.parameters(),
        )
    return {
        "loss": float(loss.item()),
        "grads": full_gradients(model, world),
        "comm": counts,
        "activation_bytes": None if saved is None else saved.bytes,
        "block_activation_bytes": None if saved is None else block_saved.bytes,
    }


def comm_per_step(config: GPTConfig, tokens: int, n_params: int) -> dict:
    """Elements each rank puts into all-reduces in one step (forward and
    backward of `tokens` = B x T positions): tensor parallelism all-reduces
    4 activations of (tokens, C) per block, data parallelism (DDP) all the
    parameters' gradients once."""
    return {
        "tensor parallel": 4 * config.n_layer * tokens * config.n_embd,
        "data parallel (DDP)": n_params,
    }
