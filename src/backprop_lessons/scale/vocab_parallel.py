"""Megatron-LM's vocabulary-parallel embedding and cross-entropy (chapter 12).

Rank r of R holds rows [r V/R, (r + 1) V/R) of the token embedding wte
(V, C), which the LM head shares (tied).  Nothing (B, T, V) is ever whole on
one rank:

- the embedding: each rank looks up the tokens in its own rows, writes
  zeros for the others, and an all-reduce adds the ranks' parts (Megatron's
  g: all-reduce forward, identity backward, for the embeddings are then a
  replicated value).  Its backward adds each position's gradient into the
  row of its token on the one rank that holds it.
- the LM head: logits_r = x wte_r^T, this rank's V/R columns of the
  logits; x is replicated, so f sits in front (identity forward, the
  all-reduce of x's partial gradients backward).
- the cross-entropy, with no rank holding a whole row of logits: each rank
  reduces its columns to the pair (m_r, s_r) = (max, sum of exp(l - m_r))
  and the pairs merge as chapter 10's online softmax merges tiles:
  m = max_r m_r, s = sum_r s_r exp(m_r - m), two all-reduces (MAX, then
  SUM); the target's logit comes from the rank that holds it (a third
  all-reduce).  loss = m + log s - l_target per position.  The backward
  needs no communication: d logits_r = (softmax_r - onehot_r) dloss, every
  factor already on the rank.

`vocab_parallel_check(rank, world, ...)` runs both on the ranks of a group
and returns each rank's loss and gradients next to PyTorch's unsharded
ones (float64), for `distributed.run_workers`.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F

from . import collectives

__all__ = [
    "vocab_range",
    "vocab_parallel_embedding",
    "VocabParallelCrossEntropy",
    "vocab_parallel_cross_entropy",
    "vocab_parallel_check",
]


def vocab_range(V: int, rank: int, world: int) -> range:
    """The token ids whose rows rank `rank` holds."""
    if not isinstance(world, int) or world < 1 or V % world:
        raise ValueError(
            f"vocab parallel: a vocabulary of {V} does not split over "
            f"{world!r} ranks; use a number of ranks that divides it"
        )
    per = V // world
    return range(rank * per, (rank + 1) * per)


def vocab_parallel_embedding(idx: torch.Tensor, wte_r: torch.Tensor, rows: range):
    """wte[idx] (B, T, C) from this rank's rows `rows` of wte: its own
    tokens looked up, zeros for the others, the ranks' parts all-reduced."""
    mine = (idx >= rows.start) & (idx < rows.stop)
    local = torch.where(mine, idx - rows.start, 0)
    x = wte_r[local] * mine.unsqueeze(-1).to(wte_r.dtype)
    return collectives.g(x)


class VocabParallelCrossEntropy(torch.autograd.Function):
    """Mean cross-entropy over the positions from this rank's columns
    (..., V/R) of the logits; the same scalar on every rank."""

    @staticmethod
    def forward(ctx, logits_r, targets, rows: range):
        logits_r = logits_r.detach()
        # this rank's columns reduced to (m_r, s_r), as a tile of chapter 10
        m_r = logits_r.amax(dim=-1)  # (N,)
        s_r = torch.exp(logits_r - m_r.unsqueeze(-1)).sum(dim=-1)
        # the merge: m = max_r m_r, s = sum_r s_r exp(m_r - m)
        m = m_r.clone()
        collectives.COUNTER.add("all-reduce", 3 * m.numel())  # m, s, target
        dist.all_reduce(m, op=dist.ReduceOp.MAX)
        s = s_r * torch.exp(m_r - m)
        dist.all_reduce(s)
        e = torch.exp(logits_r - m.unsqueeze(-1))
        mine = (targets >= rows.start) & (targets < rows.stop)
        local = torch.where(mine, targets - rows.start, 0)
        target_logit = torch.where(
            mine, logits_r.gather(-1, local.unsqueeze(-1)).squeeze(-1), 0.0
        )
        dist.all_reduce(target_logit)
        losses = m + torch.log(s) - target_logit
        ctx.save_for_backward(e / s.unsqueeze(-1), local, mine)
        return losses.mean()

    @staticmethod
    def backward(ctx, dloss):
        probs_r, local, mine = ctx.saved_tensors
        grad = probs_r.clone()
        onehot = F.one_hot(local, grad.shape[-1]).to(grad.dtype)
        grad -= onehot * mine.unsqueeze(-1).to(grad.dtype)
        return grad * (dloss / probs_r.shape[0]), None, None


def vocab_parallel_cross_entropy(logits_r, targets, rows: range):
    """Mean cross-entropy from this rank's columns of the logits (N, V/R)
    and the targets (N,)."""
    return VocabParallelCrossEntropy.apply(logits_r, targets, rows)


def vocab_parallel_check(
    rank: int,
    world: int,
    V: int = 28,
    C: int = 16,
    B: int = 8,
    T: int = 16,
    seed: int = 0,
) -> dict:
    """Embedding, tied LM head and cross-entropy, vocabulary-parallel over
    the group's ranks and unsharded with PyTorch, on the same random wte,
    token ids, hidden states h and targets (float64): the loss, this rank's
    rows of wte's gradient and h's gradient, both ways, and the elements
    this rank put into collectives."""
    rng = np.random.default_rng(seed)  # the same numbers on every rank
    wte = torch.tensor(rng.normal(0, 0.5, (V, C)))
    idx = torch.tensor(rng.integers(0, V, (B, T)))
    h = torch.tensor(rng.normal(0, 1, (B, T, C)))
    w_emb = torch.tensor(rng.normal(0, 1, (B, T, C)))  # a cotangent
    targets = torch.tensor(rng.integers(0, V, (B * T,)))
    rows = vocab_range(V, rank, world)

    def objective(emb, h_in, head):
        # <w, embedding> + mean cross-entropy of the head's logits
        return (emb * w_emb).sum() + head(h_in.reshape(B * T, C))

    wte_r = wte[rows.start : rows.stop].clone().requires_grad_()
    hp = h.clone().requires_grad_()
    collectives.COUNTER.reset()
    collectives.COUNTER.enabled = True
    try:
        emb = vocab_parallel_embedding(idx, wte_r, rows)
        loss = objective(
            emb,
            hp,
            lambda x: vocab_parallel_cross_entropy(
                collectives.f(x) @ wte_r.T, targets, rows
            ),
        )
        loss.backward()
    finally:
        collectives.COUNTER.enabled = False
    wt = wte.clone().requires_grad_()
    ht = h.clone().requires_grad_()
    ref = objective(wt[idx], ht, lambda x: F.cross_entropy(x @ wt.T, targets))
    ref.backward()
    return {
        "loss": loss.item(),
        "ref_loss": ref.item(),
        "wte_grad": wte_r.grad,
        "ref_wte_grad": wt.grad[rows.start : rows.stop],
        "h_grad": hp.grad,
        "ref_h_grad": ht.grad,
        "comm": dict(collectives.COUNTER.elements),
    }
