"""The backward of communication: each collective as a differentiable function.

A collective is a function of every rank's input to every rank's output.
Given a cotangent dy_r on each rank r, its VJP (the backward) gives each
rank s the cotangent of its input, dx_s = sum_r J_{r,s}^T dy_r, and that
sum over ranks is itself a collective (chapter 12):

    forward                          backward (VJP)
    all-reduce  y_r = sum_s x_s      dx_s = sum_r dy_r          all-reduce
    all-gather  y_r = [x_0; x_1...]  dx_s = sum_r dy_r[block s] reduce-scatter
    reduce-scatter y_r = (sum_s x_s)[block r]
                                     dx_s = [dy_0; dy_1; ...]   all-gather
    broadcast   y_r = x_src          dx_src = sum_r dy_r,        reduce to src
                                     dx_s = 0 (s != src)

Megatron-LM's two operators (Shoeybi et al. 2019, section 3) are the pair
for a loss every rank computes identically (a replicated value, counted
once): f is the identity forward and an all-reduce backward, g an
all-reduce forward and the identity backward.  Sequence parallelism
(Korthikanti et al. 2022) splits the residual stream along T and puts an
all-gather in f's place (`SequenceParallelLinear`, which also splits its
backward into the input gradient, sent at once, and the weight gradient,
computed while it travels) and a reduce-scatter in g's; the embeddings
enter the split region by `ScatterToSequence` and the head leaves it by
`GatherFromSequence`, whose backwards follow f and g's rule for a
replicated value.

`check_collective_vjps(rank, world)` runs on the ranks of a group (through
`distributed.run_workers`): for every collective it compares the backward
autograd computes through these Functions with central finite differences of
L = sum_r <w_r, y_r> (all ranks perturb together, one input entry at a time)
and with `torch.distributed.nn.functional`'s own differentiable collectives.
All in float64 on gloo.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F

from ..gradcheck import numerical_gradient

__all__ = [
    "AllReduce",
    "AllGather",
    "ReduceScatter",
    "Broadcast",
    "CopyToParallel",
    "ReduceFromParallel",
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "broadcast",
    "f",
    "g",
    "SEQ",
    "ScatterToSequence",
    "GatherFromSequence",
    "SequenceParallelLinear",
    "scatter_to_sequence",
    "gather_from_sequence",
    "sequence_parallel_linear",
    "wire_elements",
    "CommCounter",
    "COUNTER",
    "finite_difference_vjp",
    "check_collective_vjps",
]


class CommCounter:
    """Elements each rank sends into collectives, per kind, while enabled
    (the chapter counts a step's communication with it)."""

    def __init__(self):
        self.enabled = False
        self.elements: dict[str, int] = {}

    def add(self, kind: str, n: int) -> None:
        if self.enabled:
            self.elements[kind] = self.elements.get(kind, 0) + int(n)

    def reset(self) -> None:
        self.elements = {}


COUNTER = CommCounter()


def _all_reduce(t: torch.Tensor, group=None) -> torch.Tensor:
    out = t.clone().contiguous()
    COUNTER.add("all-reduce", out.numel())
    dist.all_reduce(out, op=dist.ReduceOp.SUM, group=group)
    return out


def _all_gather(t: torch.Tensor, group=None, dim: int = 0) -> torch.Tensor:
    world = dist.get_world_size(group)
    parts = [torch.empty_like(t) for _ in range(world)]
    COUNTER.add("all-gather", t.numel())
    dist.all_gather(parts, t.contiguous(), group=group)
    return torch.cat(parts, dim=dim)


def _blocks(t: torch.Tensor, world: int, dim: int, op: str) -> list[torch.Tensor]:
    if t.shape[dim] % world:
        raise ValueError(
            f"{op}: dim {dim} ({t.shape[dim]}) must split evenly over "
            f"{world} ranks"
        )
    return [b.contiguous() for b in t.chunk(world, dim=dim)]


def _reduce_scatter(
    t: torch.Tensor, group=None, dim: int = 0, async_op: bool = False
):
    """Block r (along `dim`) of the sum over the ranks; with async_op,
    (the work to wait for, the output it fills)."""
    blocks = _blocks(t, dist.get_world_size(group), dim, "reduce_scatter")
    out = torch.empty_like(blocks[0])
    COUNTER.add("reduce-scatter", t.numel())
    work = dist.reduce_scatter(
        out, blocks, op=dist.ReduceOp.SUM, group=group, async_op=async_op
    )
    return (work, out) if async_op else out


class AllReduce(torch.autograd.Function):
    """y_r = sum_s x_s on every rank; backward: dx_s = sum_r dy_r (all-reduce)."""

    @staticmethod
    def forward(ctx, x):
        return _all_reduce(x)

    @staticmethod
    def backward(ctx, dy):
        return _all_reduce(dy)


class AllGather(torch.autograd.Function):
    """y_r = concat of every rank's x along `dim` (0); backward:
    reduce-scatter."""

    @staticmethod
    def forward(ctx, x, dim: int = 0):
        ctx.dim = dim
        return _all_gather(x, dim=dim)

    @staticmethod
    def backward(ctx, dy):
        return _reduce_scatter(dy, dim=ctx.dim), None


class ReduceScatter(torch.autograd.Function):
    """y_r = block r of sum_s x_s (along `dim`, 0); backward: all-gather."""

    @staticmethod
    def forward(ctx, x, dim: int = 0):
        ctx.dim = dim
        return _reduce_scatter(x, dim=dim)

    @staticmethod
    def backward(ctx, dy):
        return _all_gather(dy, dim=ctx.dim), None


class Broadcast(torch.autograd.Function):
    """y_r = x_src on every rank; backward: the sum of every rank's dy
    reaches src (a reduce), every other rank's dx is zero."""

    @staticmethod
    def forward(ctx, x, src: int):
        ctx.src = src
        out = x.clone().contiguous()
        COUNTER.add("broadcast", out.numel())
        dist.broadcast(out, src=src)
        return out

    @staticmethod
    def backward(ctx, dy):
        total = dy.clone().contiguous()
        COUNTER.add("reduce", total.numel())
        dist.reduce(total, dst=ctx.src, op=dist.ReduceOp.SUM)
        if dist.get_rank() != ctx.src:
            total = torch.zeros_like(dy)
        return total, None


class CopyToParallel(torch.autograd.Function):
    """Megatron's f: the identity forward (every rank already holds the
    replicated input), an all-reduce backward (each rank's partial input
    gradient, from its slice of the next layer, summed)."""

    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, dy):
        return _all_reduce(dy)


class ReduceFromParallel(torch.autograd.Function):
    """Megatron's g: an all-reduce forward (the partial sums of a row-parallel
    layer added up), the identity backward (the output is one replicated
    value, and every rank already holds its whole gradient)."""

    @staticmethod
    def forward(ctx, x):
        return _all_reduce(x)

    @staticmethod
    def backward(ctx, dy):
        return dy


def f(x):
    return CopyToParallel.apply(x)


def g(x):
    return ReduceFromParallel.apply(x)


# ---------------------------------------------------------------------------
# Sequence parallelism (Korthikanti et al. 2022): the same pairs along T
# ---------------------------------------------------------------------------

SEQ = 1  # the sequence axis of the residual stream (B, T, C)


class ScatterToSequence(torch.autograd.Function):
    """A replicated (B, T, C) -> this rank's block of the T positions; the
    backward all-gathers: the one gradient of the replicated value is every
    rank's block of it, and every rank needs it whole."""

    @staticmethod
    def forward(ctx, x):
        world, rank = dist.get_world_size(), dist.get_rank()
        return _blocks(x, world, SEQ, "scatter_to_sequence")[rank]

    @staticmethod
    def backward(ctx, dy):
        return _all_gather(dy, dim=SEQ)


class GatherFromSequence(torch.autograd.Function):
    """This rank's block of T -> the whole sequence on every rank, for layers
    every rank computes in full (a replicated value); the backward takes
    this rank's block of the gradient, which every rank holds whole (a
    reduce-scatter would count it once per rank: f and g's lesson)."""

    @staticmethod
    def forward(ctx, x):
        return _all_gather(x, dim=SEQ)

    @staticmethod
    def backward(ctx, dy):
        world, rank = dist.get_world_size(), dist.get_rank()
        return _blocks(dy, world, SEQ, "gather_from_sequence")[rank]


class SequenceParallelLinear(torch.autograd.Function):
    """A column-parallel layer in the sequence-parallel region: all-gather
    this rank's block of T, then y = x W^T + b with this rank's rows of W.

    Saves the rank's own block, not the gathered sequence (the memory
    sequence parallelism is for), and gathers it again in the backward.
    The backward is the layer's two parts: the input gradient dY W, which
    the layer in front waits for, goes out at once in a reduce-scatter
    (each rank's slice of W gave a partial sum for every position), and
    while it travels the weight gradient dY^T X is computed, which needs
    nothing from the other ranks (Megatron-LM overlaps the two the same
    way)."""

    @staticmethod
    def forward(ctx, x, weight, bias):
        ctx.save_for_backward(x, weight)
        return F.linear(_all_gather(x, dim=SEQ), weight, bias)

    @staticmethod
    def backward(ctx, dy):
        x, weight = ctx.saved_tensors
        full = _all_gather(x, dim=SEQ)  # (B, T, C) again
        work, dx = _reduce_scatter(dy @ weight, dim=SEQ, async_op=True)
        dw = dy.flatten(0, -2).T @ full.flatten(0, -2)  # while it travels
        db = dy.sum(dim=tuple(range(dy.dim() - 1)))
        work.wait()
        return dx, dw, db


def all_reduce(x):
    return AllReduce.apply(x)


def all_gather(x, dim: int = 0):
    return AllGather.apply(x, dim)


def reduce_scatter(x, dim: int = 0):
    return ReduceScatter.apply(x, dim)


def broadcast(x, src: int = 0):
    return Broadcast.apply(x, src)


def scatter_to_sequence(x):
    return ScatterToSequence.apply(x)


def gather_from_sequence(x):
    return GatherFromSequence.apply(x)


def sequence_parallel_linear(x, weight, bias):
    return SequenceParallelLinear.apply(x, weight, bias)


def wire_elements(counts: dict[str, int], world: int) -> float:
    """Elements each rank sends on a ring, from `COUNTER.elements` (the
    elements each rank put in, per kind): an all-reduce sends 2 (R - 1) / R
    times its input, a reduce-scatter (R - 1) / R, an all-gather (whose
    input is the rank's block) R - 1."""
    R = world
    factor = {
        "all-reduce": 2 * (R - 1) / R,
        "reduce-scatter": (R - 1) / R,
        "all-gather": R - 1,
    }
    unknown = sorted(set(counts) - set(factor))
    if unknown:
        raise ValueError(
            f"wire_elements: no ring cost for {', '.join(unknown)}; counts "
            f"must name only {', '.join(factor)}"
        )
    return sum(factor[kind] * n for kind, n in counts.items())


# ---------------------------------------------------------------------------
# The numerical check, run on every rank
# ---------------------------------------------------------------------------


def _objective(op, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """L = sum_r <w_r, op(x)_r>, the same number on every rank."""
    local = (op(x) * w).sum().reshape(1)
    dist.all_reduce(local)
    return local[0]


def finite_difference_vjp(op, x: torch.Tensor, w: torch.Tensor, eps: float):
    """dL/dx on this rank by central differences; a collective: every rank
    runs it with its own x and w (same shapes on every rank).

    Rank s perturbs entry i of its x while the others keep theirs, for every
    s and i in turn, so every evaluation is a call of `op` on all ranks.
    """
    rank, world = dist.get_rank(), dist.get_world_size()
    grad = None
    for s in range(world):
        if rank == s:  # gradcheck's routine moves this rank's entries ...
            grad = numerical_gradient(
                lambda a: _objective(op, torch.from_numpy(a), w),
                x.detach().numpy().copy(),
                eps,
            )
        else:  # ... while the others make the same calls, unmoved
            for _ in range(2 * x.numel()):
                _objective(op, x, w)
    return torch.from_numpy(grad)


def _torch_collectives():
    import torch.distributed.nn.functional as nnf

    def torch_all_gather(x):
        return torch.cat(nnf.all_gather(x), dim=0)

    def torch_reduce_scatter(x):
        world = dist.get_world_size()
        out = torch.empty_like(x.chunk(world)[0])
        return nnf.reduce_scatter(out, list(x.chunk(world)))

    return {
        "all-reduce": nnf.all_reduce,
        "all-gather": torch_all_gather,
        "reduce-scatter": torch_reduce_scatter,
        "broadcast": lambda x: nnf.broadcast(x, src=0),
    }


def check_collective_vjps(
    rank: int, world_size: int, n: int = 4, seed: int = 0, eps: float = 1e-4
) -> dict:
    """For each collective: this rank's x, w, the derived backward's dx (from
    autograd through our Functions), the finite-difference dx and torch's
    own (torch.distributed.nn.functional) dx; float64, inputs of n * world
    entries (so reduce-scatter's blocks have n entries).

    The entry "f and g" checks Megatron's pair where it applies: x is one
    replicated variable (every rank holds the same x and the difference
    perturbs it on all ranks at once), each rank scales it by its own a_r
    (its slice of a layer), and L = <w, g(a_r * f(x))> is one replicated
    number (w the same on every rank).  Its "all-reduce as g" entry uses the
    plain all-reduce, whose backward sums the ranks' copies of the one
    replicated gradient: world_size times too much.
    """
    import warnings

    ops = {
        "all-reduce": all_reduce,
        "all-gather": all_gather,
        "reduce-scatter": reduce_scatter,
        "broadcast": broadcast,
    }
    theirs = _torch_collectives()
    gen = torch.Generator().manual_seed(seed * 1000 + rank)
    out = {}
    for name, op in ops.items():
        size = n * world_size
        x = torch.randn(size, dtype=torch.float64, generator=gen)
        x.requires_grad_(True)
        y = op(x)
        w = torch.randn(y.shape, dtype=torch.float64, generator=gen)
        (derived,) = torch.autograd.grad((y * w).sum(), x)
        numeric = finite_difference_vjp(op, x.detach(), w, eps)
        xt = x.detach().clone().requires_grad_(True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            yt = theirs[name](xt)
            (mine_vs_torch,) = torch.autograd.grad((yt * w).sum(), xt)
        out[name] = {
            "x": x.detach(),
            "w": w,
            "derived": derived,
            "numeric": numeric,
            "torch": mine_vs_torch,
        }
    out["f and g"] = _check_f_and_g(rank, n, seed, eps)
    return out


def _check_f_and_g(rank: int, n: int, seed: int, eps: float) -> dict:
    shared = torch.Generator().manual_seed(seed * 1000 + 999)
    x = torch.randn(n, dtype=torch.float64, generator=shared)  # replicated
    w = torch.randn(n, dtype=torch.float64, generator=shared)  # replicated
    own = torch.Generator().manual_seed(seed * 1000 + 500 + rank)
    a = torch.randn(n, dtype=torch.float64, generator=own)  # this rank's slice

    def loss(x, reduce):
        return (reduce(a * f(x)) * w).sum()

    grads = {}
    for label, reduce in (("derived", g), ("all-reduce as g", all_reduce)):
        xg = x.clone().requires_grad_(True)
        (grads[label],) = torch.autograd.grad(loss(xg, reduce), xg)
    with torch.no_grad():  # every rank moves the same entry of the same x
        numeric = numerical_gradient(
            lambda v: float(loss(torch.from_numpy(v), g)), x.numpy().copy(), eps
        )
    numeric = torch.from_numpy(numeric)
    return {"x": x, "w": w, "a": a, "numeric": numeric, **grads}
