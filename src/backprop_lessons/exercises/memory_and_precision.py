"""Checks for the exercises of "Memory and precision" (chapter 10).

    check_flash_attention_backward(fn)  fn like layers.flash_attention_backward
    check_fused_classifier_backward(fn) fn like layers.fused_classifier_backward
    check_merge(merge)                 two online-softmax states into one
    check_unscale_or_skip(unscale_or_skip)
                                       one step of dynamic loss scaling

The two backwards are checked as chapter 6's layers are (`layer_checks`,
the machinery they share): `fn` has the signature of the book's backward,
gets buffers filled with random numbers and the cache of the book's
forward, and what it adds is compared with PyTorch's gradient in float64,
on several shapes (a length that is not a multiple of the tile or chunk,
a single sequence, a single position).  The first wrong gradient is named
(for FlashAttention, which third of dinp: dq, dk or dv), and the classic
slips of a tiled backward are computed and recognised: for FlashAttention
the missing D = rowsum(dy * out), p not recomputed from the logsumexp, the
mask on the diagonal tiles, the 1/sqrt(hs) scale, `=` for `+=`; for the
fused classifier the chunk boundaries, the dloss / (B*T) scale and the
target's -1.

Each check prints "Exercise N: ..." and returns a `Verdict` (see
`checking`); PyTorch is imported only when a backward's check runs.

`SELF_CHECKS` holds the chapter's self-check questions (`questions`).
"""

from __future__ import annotations

import math

import numpy as np

from ..gpt.layers import flash_attention_forward, fused_classifier_forward
from ..gradcheck import close
from .checking import NotYet, Verdict, attempt, run_check
from .layer_checks import (
    LayerCase,
    label_at,
    random_buffers,
    run_layer_check,
    torch_vjp,
    what_to_write,
    wrong_thirds,
)
from .questions import Number

__all__ = [
    "check_flash_attention_backward",
    "check_fused_classifier_backward",
    "check_merge",
    "check_unscale_or_skip",
    "SELF_CHECKS",
]


# ---- FlashAttention's backward -------------------------------------------------


def _split(x, n_head):
    """(B, T, C) -> (B, NH, T, hs), as the layers split the heads."""
    B, T, C = x.shape
    return x.reshape(B, T, n_head, C // n_head).transpose(0, 2, 1, 3)


def _merge(x):
    """(B, NH, T, hs) -> (B, T, C), the inverse of `_split`."""
    B, NH, T, hs = x.shape
    return x.transpose(0, 2, 1, 3).reshape(B, T, NH * hs)


def _flash_dinp(
    cache,
    dout,
    *,
    probs="lse",
    mask="diagonal",
    d_term="rows",
    scale="once",
    assigned=None,
    tiles="all",
):
    """What flash_attention_backward adds into dinp (B, T, 3C), and what its
    classic slips add instead, computed tile pair by tile pair:

    probs   "lse" p = exp(s - L_i); "exp" exp(s); "tile softmax" a softmax
            over the tile's keys; "key lse" exp(s - L_j), the keys' L
    mask    "diagonal" the tiles above skipped, those on it masked; "open
            diagonal" the diagonal tiles unmasked; "none" every tile,
            none masked; "strict" the diagonal itself masked too
    d_term  "rows" D = rowsum(dy * out) per head; "none" no D; "all heads"
            summed over all C channels; "tile" sum(dp * p) over one tile
    scale   "once" right; "ds" no 1/sqrt(hs) in ds; "scores" none in the
            recomputed scores; "dk twice" dk scaled twice (the scaled q)
    assigned  "dq", "dk" or "dv": that gradient's tile is assigned (=) in
            the inner loop, so it keeps the last tile's part only
    tiles   "all" right; "whole" the last tile left out when it is
            shorter than `tile`
    """
    inp, out, lse, n_head, tile = cache
    T, hs = inp.shape[1], inp.shape[2] // 3 // n_head
    q, k, v = (_split(x, n_head) for x in np.split(inp, 3, axis=-1))
    dy = _split(dout, n_head)  # (B, NH, T, hs)
    if d_term == "all heads":
        D = np.einsum("btc,btc->bt", dout, out)[:, None, :, None]  # (B,1,T,1)
    else:
        D = (dy * _split(out, n_head)).sum(axis=-1, keepdims=True)  # (B,NH,T,1)
    root = math.sqrt(hs)
    above = {"strict": 0}.get(mask, 1)  # np.triu's k: the masked entries
    future = np.triu(np.full((T, T), -np.inf), k=above)  # (T, T)
    dq, dk, dv = np.zeros_like(q), np.zeros_like(k), np.zeros_like(v)
    starts = range(0, T - T % tile if tiles == "whole" else T, tile)
    for j0 in starts:  # a tile of keys
        j1 = min(j0 + tile, T)
        for i0 in starts:  # a tile of queries
            i1 = min(i0 + tile, T)
            if j0 >= i1 and mask != "none":
                continue  # the key tile is in the query tile's future
            qi, dyi = q[:, :, i0:i1], dy[:, :, i0:i1]  # (B, NH, tq, hs)
            kj, vj = k[:, :, j0:j1], v[:, :, j0:j1]  # (B, NH, tk, hs)
            s = qi @ kj.swapaxes(-1, -2)  # (B, NH, tq, tk)
            if scale != "scores":
                s = s / root
            if mask in ("diagonal", "strict"):
                s = s + future[i0:i1, j0:j1]
            if probs == "lse":
                p = np.exp(s - lse[:, :, i0:i1])
            elif probs == "exp":
                p = np.exp(s)
            elif probs == "key lse":
                p = np.exp(s - lse[:, :, j0:j1].swapaxes(-1, -2))
            else:  # "tile softmax"
                p = np.exp(s - s.max(axis=-1, keepdims=True))
                p /= p.sum(axis=-1, keepdims=True)
            dp = dyi @ vj.swapaxes(-1, -2)  # (B, NH, tq, tk)
            if d_term == "none":
                Di = 0.0
            elif d_term == "tile":
                Di = (dp * p).sum(axis=-1, keepdims=True)  # (B, NH, tq, 1)
            else:
                Di = D[:, :, i0:i1]  # (B, NH or 1, tq, 1)
            ds = p * (dp - Di)
            if scale != "ds":
                ds = ds / root
            q_for_dk = qi / root if scale == "dk twice" else qi
            parts = {
                "dq": (dq, slice(i0, i1), ds @ kj),
                "dk": (dk, slice(j0, j1), ds.swapaxes(-1, -2) @ q_for_dk),
                "dv": (dv, slice(j0, j1), p.swapaxes(-1, -2) @ dyi),
            }
            for name, (grad, rows, part) in parts.items():
                if name == assigned:
                    grad[:, :, rows] = part
                else:
                    grad[:, :, rows] += part
    return np.concatenate([_merge(d) for d in (dq, dk, dv)], axis=-1)


#: (the slip, as _flash_dinp's keywords; what the hint says)
_FLASH_SLIPS = [
    (
        {"d_term": "none"},
        "it lacks the - D_i of ds = p * (dp - D_i): D = rowsum(dy * out), one "
        "number per row and head, is the eager softmax's sum_j(datt * att); "
        "compute it once from dout and the cached out",
    ),
    (
        {"d_term": "all heads"},
        "its D sums dy * out over all C channels: D is per head, the dot "
        "product of dy and out over that head's hs channels (split dout and "
        "out into heads first)",
    ),
    (
        {"d_term": "tile"},
        "its D is the sum of dp * p over one tile of keys: D_t sums over the "
        "whole row, which no single tile holds; compute it once as "
        "rowsum(dy * out)",
    ),
    (
        {"probs": "exp"},
        "p is not recomputed from the logsumexp: p = exp(s - L_i), with L the "
        "cache's logsumexp of the query rows; exp(s) alone is not normalized",
    ),
    (
        {"probs": "tile softmax"},
        "p is a softmax over one tile of keys: the softmax runs over the "
        "whole row, so recompute p = exp(s - L_i) from the cache's "
        "logsumexp L",
    ),
    (
        {"probs": "key lse"},
        "p subtracts the logsumexp of the key rows: L belongs to the query "
        "rows, p = exp(s - L_i) with the query tile's L_i (tq, 1)",
    ),
    (
        {"mask": "open diagonal"},
        "the tiles on the diagonal are not masked: a diagonal tile holds "
        "pairs with key j > query t, whose p must be 0; add -inf above the "
        "diagonal to those tiles' scores before the exp",
    ),
    (
        {"mask": "none"},
        "it does not mask the future: skip the key tiles above the diagonal "
        "and mask the tiles on it (p = 0 where key j > query t)",
    ),
    (
        {"mask": "strict"},
        "the mask hides the diagonal too: query t attends to the keys "
        "j <= t, itself included; mask only j > t (np.triu(..., k=1))",
    ),
    (
        {"scale": "ds"},
        "it lacks the 1/sqrt(hs) in dq and dk: the scores are q k^T / "
        "sqrt(hs), so ds is divided by sqrt(hs) once",
    ),
    (
        {"scale": "scores"},
        "the recomputed scores lack the 1/sqrt(hs): p = exp(q_i k_j^T / "
        "sqrt(hs) - L_i), the scores the forward computed",
    ),
    (
        {"scale": "dk twice"},
        "dk is divided by sqrt(hs) twice: ds already holds the 1/sqrt(hs), so "
        "dk_j += ds^T q_i with the unscaled q",
    ),
    (
        {"tiles": "whole"},
        "it leaves out the last tile, shorter than `tile` when the tile "
        "does not divide T: loop over range(0, T, tile) and end each tile at "
        "min(i0 + tile, T)",
    ),
] + [
    (
        {"assigned": name},
        f"{name} keeps the last {tiles} tile's part only: it sums {part} "
        f"over every {tiles} tile, so add each (+=), not =",
    )
    for name, tiles, part in (
        ("dq", "key", "ds k_j"),
        ("dk", "query", "ds^T q_i"),
        ("dv", "query", "p^T dy_i"),
    )
]


def _pieces(n: int, size: int) -> str:
    """The slices of range(n) in pieces of `size`: "0:3, 3:6, 6:7"."""
    return ", ".join(f"{a}:{min(a + size, n)}" for a in range(0, n, size))


def _flash_case(rng, B: int, T: int, NH: int, hs: int, tile: int) -> LayerCase:
    C = NH * hs
    inp = rng.standard_normal((B, T, 3 * C))  # (B, T, 3C)
    dout = rng.standard_normal((B, T, C))  # (B, T, C)
    _, cache = flash_attention_forward(inp, NH, tile=tile)

    def forward(inp):
        from ..gpt.reference import torch_attention

        return torch_attention(inp, NH)

    right = torch_vjp(forward, {"inp": inp}, dout)["inp"]
    buffers = random_buffers(rng, dinp=(B, T, 3 * C))
    before = np.split(buffers["dinp"], 3, axis=-1)
    bugs = [
        (_flash_dinp(cache, dout, **flags), what) for flags, what in _FLASH_SLIPS
    ]
    for n, name in enumerate(("dq", "dk", "dv")):
        # the third assigned whole (= where += belongs), or not written at all
        thirds = np.split(right, 3, axis=-1)
        thirds[n] = thirds[n] - before[n]
        bugs.append(
            (
                np.concatenate(thirds, axis=-1),
                f"its {name} part is assigned (=) where it must be added "
                f"(+=): that third of dinp already held a gradient (from "
                f"another use of the same input) and after your call holds "
                f"only this layer's part",
            )
        )
        # a tile of it assigned in the loop, the start of the buffer lost too
        partial = np.split(_flash_dinp(cache, dout, assigned=name), 3, axis=-1)
        thirds = np.split(right, 3, axis=-1)
        thirds[n] = partial[n] - before[n]
        tiles = "key" if name == "dq" else "query"
        bugs.append(
            (
                np.concatenate(thirds, axis=-1),
                f"{name} is assigned (=) tile by tile where it must be added "
                f"(+=): it keeps the last {tiles} tile's part only, and not "
                f"the gradient the buffer held",
            )
        )
        thirds = np.split(right, 3, axis=-1)
        thirds[n] = np.zeros_like(thirds[n])
        bugs.append(
            (
                np.concatenate(thirds, axis=-1),
                f"nothing was added into the {name} third of dinp (`{name} = "
                f"...` only rebinds the name: add into the view in place, "
                f"`{name} += ...` or `{name}[...] += ...`)",
            )
        )
    return LayerCase(
        buffers=buffers,
        dout=dout,
        cache=cache,
        expected={"dinp": right},
        shapes=f"shapes: dinp (B, T, 3C) = {(B, T, 3 * C)}, dout and out "
        f"(B, T, C) = {(B, T, C)}, L (B, NH, T, 1) = {(B, NH, T, 1)}, "
        f"n_head = {NH}, tile = {tile}",
        label=label_at(B=B, T=T, NH=NH, hs=hs, tile=tile),
        on_error=f"(here the tiles are the rows {_pieces(T, tile)}, the "
        "last one shorter)"
        if T % tile
        else "",
        bugs={"dinp": bugs},
    )


def check_flash_attention_backward(fn, *, exercise: int) -> Verdict:
    """fn(dinp, dout, cache), like `layers.flash_attention_backward`, with
    the cache of `layers.flash_attention_forward` (inp, out, L, n_head,
    tile): it must add dinp (B, T, 3C), checked against PyTorch's attention
    in float64 with T a multiple of the tile, not one, and 1."""

    def check(fn):
        todo = what_to_write(fn, "(dinp, dout, cache)")
        rng = np.random.default_rng(10)
        cases = [
            _flash_case(rng, *s)
            # (B, T, NH, hs, tile): 3 tiles, the last of 1 row; whole tiles
            # in one sequence; a single position in a tile of 4
            for s in [(2, 7, 2, 3, 3), (1, 8, 3, 2, 4), (2, 1, 2, 2, 4)]
        ]
        run_layer_check(fn, cases, todo, detail=wrong_thirds)

    return run_check(exercise, check, fn)


# ---- the fused classifier's backward -------------------------------------------


def _classifier_grads(
    cache,
    dloss,
    *,
    chunks="all",
    probs="lse",
    target="minus",
    divide="N",
    use_dloss=True,
    onehot_scaled=True,
    dinp_assigned=False,
):
    """(dinp, dwte) that fused_classifier_backward adds, and what its classic
    slips add instead, chunk by chunk:

    chunks  "all" right; "last dropped" only the full chunks; "short" each
            chunk one row short (wte[v0:v0 + chunk - 1])
    probs   "lse" exp(z - L); "exp" exp(z); "chunk softmax" over the chunk
    target  "minus" -1 at the target; "none"; "plus" +1; "not at v0" the
            targets on a chunk's first row missed (target > v0)
    divide  "N" dloss / (B*T); "1", "B" or "T"; use_dloss False ignores
            dloss; onehot_scaled False subtracts an unscaled 1
    dinp_assigned  dinp's chunk products assigned (=), not added: the
            last chunk's only
    """
    inp, wte, targets, lse, chunk = cache
    B, T, C = inp.shape
    N, V = B * T, wte.shape[0]
    x, tgt = inp.reshape(N, C), targets.reshape(-1)  # (N, C), (N,)
    rows = np.arange(N)
    factor = (dloss if use_dloss else 1.0) / {"N": N, "1": 1, "B": B, "T": T}[
        divide
    ]
    dx, dw = np.zeros((N, C)), np.zeros_like(wte)  # (N, C), (V, C)
    last = V - chunk + 1 if chunks == "last dropped" else V
    width = chunk - 1 if chunks == "short" else chunk
    for v0 in range(0, max(last, 1), chunk):
        v1 = min(v0 + width, V)
        z = x @ wte[v0:v1].T  # (N, v1 - v0)
        if probs == "lse":
            g = np.exp(z - lse[:, None])
        elif probs == "exp":
            g = np.exp(z)
        else:  # "chunk softmax"
            g = np.exp(z - z.max(axis=-1, keepdims=True))
            g /= g.sum(axis=-1, keepdims=True)
        start = v0 + 1 if target == "not at v0" else v0
        hit = (tgt >= start) & (tgt < v1)
        one = {"none": 0.0, "plus": -1.0}.get(target, 1.0)
        if onehot_scaled:
            g[rows[hit], tgt[hit] - v0] -= one
            g *= factor
        else:
            g *= factor
            g[rows[hit], tgt[hit] - v0] -= one
        if dinp_assigned:
            dx = g @ wte[v0:v1]
        else:
            dx += g @ wte[v0:v1]
        dw[v0:v1] += g.T @ x
    return dx.reshape(B, T, C), dw


#: (the slip, as _classifier_grads' keywords; what the hint says)
_CLASSIFIER_SLIPS = [
    (
        {"chunks": "last dropped"},
        "it leaves out the last chunk of the vocabulary, shorter than chunk "
        "when chunk does not divide V: loop over range(0, V, chunk) and take "
        "wte[v0:v0 + chunk], which stops at V by itself",
    ),
    (
        {"chunks": "short"},
        "each chunk stops one row short: wte[v0:v0 + chunk] holds the rows v0 "
        "to v0 + chunk - 1 already (a slice leaves out its end)",
    ),
    (
        {"target": "not at v0"},
        "a target on a chunk's first row gets no -1: the chunk of rows v0:v1 "
        "holds the targets v0 <= target < v1",
    ),
    (
        {"target": "none"},
        "it lacks the -1 at each position's target: g = (p - onehot(target)) "
        "* dloss / (B*T), the -1 in the chunk that holds the target",
    ),
    (
        {"target": "plus"},
        "the target's 1 is added: it is subtracted, g = (p - "
        "onehot(target)) * dloss / (B*T)",
    ),
    (
        {"onehot_scaled": False},
        "the -1 is not scaled: both parts, p and the one-hot, are multiplied "
        "by dloss / (B*T)",
    ),
    (
        {"divide": "1"},
        "it is not divided by B*T: the loss is the mean over the B*T "
        "positions, so g = (p - onehot) * dloss / (B*T)",
    ),
    (
        {"divide": "B"},
        "it is divided by B only: the loss is the mean over all B*T positions",
    ),
    (
        {"divide": "T"},
        "it is divided by T only: the loss is the mean over all B*T positions",
    ),
    (
        {"use_dloss": False},
        "it ignores dloss: multiply by it (the chain rule; dloss is 1 only "
        "for the loss itself, here it is 0.7)",
    ),
    (
        {"probs": "exp"},
        "p is not recomputed from the logsumexp: p = exp(z - L) with the "
        "cache's L; exp(z) alone is not normalized",
    ),
    (
        {"probs": "chunk softmax"},
        "p is a softmax over one chunk: the softmax runs over the whole "
        "vocabulary, so recompute p = exp(z - L) from the cache's logsumexp L",
    ),
]


def _classifier_case(rng, targets, C: int, V: int, chunk: int) -> LayerCase:
    B, T = targets.shape
    inp = rng.standard_normal((B, T, C))  # (B, T, C)
    wte = rng.standard_normal((V, C))  # (V, C)
    dloss = 0.7  # not 1: a backward must use it
    _, cache = fused_classifier_forward(inp, wte, targets, chunk=chunk)

    def forward(inp, wte, targets):
        import torch.nn.functional as F

        logits = (inp @ wte.T).reshape(B * T, V)  # (B*T, V)
        return F.cross_entropy(logits, targets.reshape(-1))

    inputs = {"inp": inp, "wte": wte, "targets": targets}
    right = torch_vjp(forward, inputs, dloss)
    buffers = random_buffers(rng, dinp=(B, T, C), dwte=(V, C))
    bugs = {"dinp": [], "dwte": []}
    for flags, what in _CLASSIFIER_SLIPS:
        dx, dw = _classifier_grads(cache, dloss, **flags)
        bugs["dinp"].append((dx, what))
        bugs["dwte"].append((dw, what))
    last_part, _ = _classifier_grads(cache, dloss, dinp_assigned=True)
    bugs["dinp"] += [
        (
            last_part - buffers["dinp"],
            "dinp is assigned (=) chunk by chunk where it must be added "
            "(+=): it holds the last chunk's g wte[v0:v1] only, and not the "
            "gradient the buffer held",
        ),
        (
            last_part,
            "dinp got the last chunk's g wte[v0:v1] only: it sums over every "
            "chunk of the vocabulary, so add each (+=), not =",
        ),
    ]
    return LayerCase(
        buffers=buffers,
        dout=dloss,
        cache=cache,
        expected={"dinp": right["inp"], "dwte": right["wte"]},
        shapes=f"shapes: dinp (B, T, C) = {(B, T, C)}, dwte (V, C) = "
        f"{(V, C)}, dloss a float ({dloss}), targets (B, T) = {(B, T)}, L "
        f"(B*T,) = {(B * T,)}, chunk = {chunk}",
        label=label_at(B=B, T=T, C=C, V=V, chunk=chunk),
        on_error=f"here the chunks of wte are the rows {_pieces(V, chunk)}; a "
        "target's -1 goes into its own chunk (v0 <= target < v1), at column "
        "target - v0",
        bugs=bugs,
    )


def check_fused_classifier_backward(fn, *, exercise: int) -> Verdict:
    """fn(dinp, dwte, dloss, cache), like `layers.fused_classifier_backward`,
    with the cache of `layers.fused_classifier_forward` (inp, wte, targets,
    L, chunk): it must add dinp (B, T, C) and dwte (V, C), checked against
    PyTorch's matmul and cross-entropy in float64, with V a multiple of the
    chunk, not one, and smaller than one chunk."""

    def check(fn):
        todo = what_to_write(fn, "(dinp, dwte, dloss, cache)")
        rng = np.random.default_rng(11)
        cases = [
            # V = 11 in chunks of 4 (the last of 3 rows); targets on the
            # first and last rows of chunks, token 4 twice
            _classifier_case(rng, np.array([[4, 10, 0], [8, 3, 4]]), 4, 11, 4),
            # one sequence, V = 8 in two whole chunks, token 4 twice
            _classifier_case(rng, np.array([[7, 4, 0, 4]]), 3, 8, 4),
            # one position per sequence, V = 6 in one chunk of 8
            _classifier_case(rng, np.array([[5], [0], [5]]), 5, 6, 8),
        ]
        run_layer_check(fn, cases, todo)

    return run_check(exercise, check, fn)


# ---- the online softmax and loss scaling ---------------------------------------


def _state(scores, values):
    """(m, l, o) of an online softmax over the given keys, per row:
    scores (R, K), values (K, D)."""
    m = scores.max(axis=-1, keepdims=True)  # (R, 1)
    e = np.exp(scores - m)  # (R, K)
    return m, e.sum(axis=-1, keepdims=True), e @ values  # l (R, 1), o (R, D)


def check_merge(merge, *, exercise: int) -> Verdict:
    """merge((m1, l1, o1), (m2, l2, o2)) -> (m, l, o): the state of the
    online softmax over the union of two disjoint sets of keys."""

    def check(merge):
        todo = "write merge(state1, state2) and run its cell"
        rng = np.random.default_rng(0)
        for shift in (0.0, 30.0, -30.0):
            scores = rng.standard_normal((5, 12)) * 4  # (R, K)
            scores[:, 7:] += shift  # very unequal maxima
            values = rng.standard_normal((12, 3))  # (K, D)
            first = _state(scores[:, :7], values[:7])
            second = _state(scores[:, 7:], values[7:])
            got = attempt(merge, first, second, todo=todo)
            if not (isinstance(got, tuple) and len(got) == 3):
                raise NotYet("return a tuple (m, l, o)")
            m, l, o = (np.asarray(a, dtype=np.float64) for a in got)
            out = o / l
            reference = _state(scores, values)
            want = reference[2] / reference[1]
            if not close(out, want, 1e-12):
                raise NotYet(
                    "o / l is not the softmax-weighted sum of all the values: "
                    "rescale each state's l and o by exp(its m - the new m)"
                    + (
                        " (the maxima differ by 30 here: check both states)"
                        if shift
                        else ""
                    )
                )
            if not close(
                m + np.log(l), reference[0] + np.log(reference[1]), 1e-12
            ):
                raise NotYet(
                    "o / l is right, but m + log l is not the "
                    "logsumexp of all the scores"
                )

    return run_check(exercise, check, merge)


def check_unscale_or_skip(unscale_or_skip, *, exercise: int) -> Verdict:
    """unscale_or_skip(grads, scale) -> (grads / scale or None, new scale):
    the unscaled gradients and the same scale when every gradient is
    finite, else None (skip the step) and half the scale."""

    def check(unscale_or_skip):
        todo = "write unscale_or_skip(grads, scale) and run its cell"
        rng = np.random.default_rng(0)
        grads = {
            "w": rng.standard_normal((3, 4)).astype(np.float32) * 2**12,
            "b": rng.standard_normal(4).astype(np.float32) * 2**12,
        }
        got = attempt(
            unscale_or_skip,
            {k: g.copy() for k, g in grads.items()},
            2.0**12,
            todo=todo,
        )
        if not (isinstance(got, tuple) and len(got) == 2):
            raise NotYet("return a pair (grads or None, new scale)")
        unscaled, scale = got
        if unscaled is None:
            raise NotYet("every gradient was finite: the step must be taken")
        if scale != 2.0**12:
            raise NotYet(
                "after a finite step keep the scale (growing it is "
                "a separate rule)"
            )
        for k, g in grads.items():
            if not close(unscaled[k], g / 2.0**12, 1e-7):
                raise NotYet(f"{k}: the gradients must be divided by the scale")
        for bad in (np.inf, -np.inf, np.nan):
            broken = {k: g.copy() for k, g in grads.items()}
            broken["b"][2] = bad
            got = attempt(unscale_or_skip, broken, 2.0**12, todo=todo)
            if got[0] is not None:
                raise NotYet(
                    f"a gradient holds {bad}: return None to skip the step"
                )
            if got[1] != 2.0**11:
                raise NotYet("after a skipped step, halve the scale")

    return run_check(exercise, check, unscale_or_skip)


# ---- self-checks -------------------------------------------------------------

#: The chapter's self-check questions, shown by `widgets.self_check`.
SELF_CHECKS = {
    "attention-probabilities-mib": Number(
        "Still per layer and sequence, with 12 heads in float32: how many MiB "
        "do the eager attention's probabilities take at T = 2048?",
        answer=4 * 12 * 2048**2 / 2**20,
        hint="4 bytes x n_head x T x T, divided by 2^20.",
        explanation="4 · 12 · 2048² / 2²⁰ = 192 MiB, four times the 48 MiB at "
        "T = 1024: the probabilities grow with T².",
    ),
    "largest-logit-gradient": Number(
        "In that run B x T = 64 positions, so the gradient of the mean loss "
        "with respect to any one logit is at most 1/64 in size. How large can "
        "it be in the scaled backward at s = 2^17?",
        answer=2**17 / 64,
        hint="The scaled loss is s times the loss, so every gradient is s times "
        "larger.",
        explanation="2¹⁷ / 64 = 2,048, comfortably below float16's 65,504; "
        "the overflows at larger s happen further down the "
        "backward, where such gradients are summed and multiplied.",
    ),
}
