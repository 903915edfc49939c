"""The layers of a GPT-2 style decoder as forward/backward pairs, in NumPy,
with no autograd.

Laid out like llm.c's `train_gpt2.c`: every layer is a `*_forward` function
followed directly by its `*_backward`.  A forward returns `(out, cache)`,
where the cache holds exactly what the backward needs.  A backward takes the
gradient buffers first, then `dout` and the cache, and **adds** into the
buffers (`+=`), never assigns: a tensor used twice (the token embedding
`wte`, which is also the LM head; the residual stream) collects both
contributions, and the caller zeroes the buffers once per step.  A buffer
may be `None` when that gradient is not wanted.

Batch normalization's pair (chapter 5's) sits beside layernorm's: not a
layer of the GPT, but the same form over the other axis, (B, C) normalized
over the batch, and the first backward of this form the reader writes.

Shape legend (used on every array below):

    B = batch size          T = sequence length (time)
    C = channels (n_embd)   V = vocabulary size
    NH = number of heads    hs = head size = C // NH
    OC = output channels of a matmul

What this module is not: fast in the way llm.c is (no fused kernels), or a
general library.  It exists to be read next to its derivations (chapter 6):
every layer is its formula.  The same step laid out for speed, with buffers
made once and written in place, is benchmarks/gpt_tuned.py.
References: A. Karpathy, llm.c (train_gpt2.c, doc/layernorm); nanoGPT.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from ..validate import (
    batch_of_channels,
    classifier_inputs,
    output_gradient,
    qkv_heads,
    tile_size,
)

__all__ = [
    "encoder_forward", "encoder_backward",
    "layernorm_forward", "layernorm_backward",
    "batchnorm_forward", "batchnorm_backward",
    "rmsnorm_forward", "rmsnorm_backward",
    "matmul_forward", "matmul_backward",
    "attention_forward", "attention_backward",
    "gelu_forward", "gelu_backward",
    "residual_forward", "residual_backward",
    "crossentropy_softmax_forward", "crossentropy_softmax_backward",
    "LAYERNORM_EPS", "BATCHNORM_EPS",
]

LAYERNORM_EPS = 1e-5  # as in GPT-2 and PyTorch's nn.LayerNorm
BATCHNORM_EPS = 1e-5  # as in PyTorch's nn.BatchNorm1d


# ---- encoder: token + position embeddings -------------------------------------

def encoder_forward(wte, wpe, inp):
    """out[b, t] = wte[inp[b, t]] + wpe[t].

    wte (V, C), wpe (maxT, C), inp (B, T) integer tokens -> out (B, T, C).
    """
    T = inp.shape[1]
    out = wte[inp]            # (B, T, C), a gathered copy of the rows
    out += wpe[:T]            # (B, T, C) += (T, C), broadcast over b
    return out, inp


def encoder_backward(dwte, dwpe, dout, cache):
    """Scatter-add: each row of wte gets the sum of dout over every (b, t) that
    used it.

    The forward *reads* row inp[b, t] of wte, so the backward *adds* dout[b, t]
    into that row; a token seen k times gets k contributions.  `np.add.at` is
    the unbuffered add that handles repeated indices (`dwte[inp] += dout`
    would keep only one of them).  wpe[t] is used by every sequence of the
    batch: its gradient is dout summed over b.
    dwte (V, C), dwpe (maxT, C), dout (B, T, C).
    """
    inp = cache  # (B, T)
    T = inp.shape[1]
    if dwte is not None:
        np.add.at(dwte, inp, dout)  # (V, C) += scatter of (B, T, C)
    if dwpe is not None:
        dwpe[:T] += dout.sum(axis=0)  # (T, C)


# ---- layernorm ----------------------------------------------------------------

def layernorm_forward(inp, weight, bias, eps=LAYERNORM_EPS):
    """out = (x - mean) / sqrt(var + eps) * weight + bias, over the last axis.

    inp (B, T, C), weight (C,), bias (C,) -> out (B, T, C).
    The variance is the biased one (divided by C), as in PyTorch.  The cache
    keeps inp, weight, mean and rstd = 1/sqrt(var + eps), each statistic
    (B, T, 1); the backward recomputes xhat (B, T, C) from them instead of
    keeping a third array of the input's size.
    """
    mean = inp.mean(axis=-1, keepdims=True)                 # (B, T, 1)
    var = ((inp - mean) ** 2).mean(axis=-1, keepdims=True)  # (B, T, 1)
    rstd = 1.0 / np.sqrt(var + eps)                         # (B, T, 1)
    xhat = (inp - mean) * rstd                              # (B, T, C)
    out = xhat * weight + bias                              # (B, T, C)
    return out, (inp, weight, mean, rstd)


def layernorm_backward(dinp, dweight, dbias, dout, cache):
    """Backward of layernorm, all three terms of the chain rule through mean
    and var.

    With xhat = (x - mean) * rstd and g = dout * weight (the gradient at xhat):

        dx = rstd * (g - mean(g) - xhat * mean(g * xhat))

    (means over the C channels).  The `- mean(g)` term is the path through
    the mean, the `- xhat * mean(g * xhat)` term the path through the
    variance.  dweight = sum over (B, T) of dout * xhat, dbias = sum over
    (B, T) of dout.  dinp (B, T, C), dweight (C,), dbias (C,), dout (B, T, C).
    """
    inp, weight, mean, rstd = cache
    C = inp.shape[-1]
    xhat = (inp - mean) * rstd          # (B, T, C), recomputed (see the forward)
    if dbias is not None:
        dbias += dout.reshape(-1, C).sum(axis=0)                     # (C,)
    if dweight is not None:
        dweight += (dout * xhat).reshape(-1, C).sum(axis=0)          # (C,)
    if dinp is not None:
        g = dout * weight                                           # (B, T, C)
        dinp += rstd * (g - g.mean(axis=-1, keepdims=True)
                        - xhat * (g * xhat).mean(axis=-1, keepdims=True))


# ---- batch normalization (chapter 5) -----------------------------------------

def batchnorm_forward(inp, weight, bias, eps=BATCHNORM_EPS):
    """Batch normalization in training mode (Ioffe and Szegedy, 2015): each
    channel normalized over the B examples of the batch.

    inp (B, C), weight (C,), bias (C,) -> out (B, C), with the batch's own
    mean and biased variance (divided by B, as PyTorch normalizes) per
    channel.  Layernorm's pair above normalizes over the other axis, the C
    channels of one example.  The cache keeps inp, weight, mean and rstd =
    1/sqrt(var + eps), each statistic (1, C); the backward recomputes xhat
    from them.  No running estimates: what evaluation uses instead is
    chapter 5's text.
    """
    inp = batch_of_channels("batchnorm_forward", inp, weight, bias)
    mean = inp.mean(axis=0, keepdims=True)                  # (1, C)
    var = ((inp - mean) ** 2).mean(axis=0, keepdims=True)   # (1, C) biased
    rstd = 1.0 / np.sqrt(var + eps)                         # (1, C)
    xhat = (inp - mean) * rstd                              # (B, C)
    out = xhat * weight + bias                              # (B, C)
    return out, (inp, weight, mean, rstd)


def batchnorm_backward(dinp, dweight, dbias, dout, cache):
    """Backward of batch normalization in training mode: layernorm's formula
    with the means taken over the batch.

    With xhat = (x - mean) * rstd and g = dout * weight (the gradient at xhat):

        dx = rstd * (g - mean(g) - xhat * mean(g * xhat))

    (means over the B examples of each channel): the `- mean(g)` term is
    the path through the batch's mean, the `- xhat * mean(g * xhat)` term
    the path through its variance; every example of a channel reaches every
    other's output.  dweight = sum over B of dout * xhat, dbias = sum over B
    of dout.  dinp (B, C), dweight (C,), dbias (C,), dout (B, C).
    """
    inp, weight, mean, rstd = cache
    xhat = (inp - mean) * rstd          # (B, C), recomputed (see the forward)
    if dbias is not None:
        dbias += dout.sum(axis=0)                                    # (C,)
    if dweight is not None:
        dweight += (dout * xhat).sum(axis=0)                         # (C,)
    if dinp is not None:
        g = dout * weight                                           # (B, C)
        dinp += rstd * (g - g.mean(axis=0, keepdims=True)
                        - xhat * (g * xhat).mean(axis=0, keepdims=True))


# ---- rmsnorm -----------------------------------------------------------------

def rmsnorm_forward(inp, weight=None, eps=1e-5):
    """out = x / sqrt(mean(x^2) + eps) * weight, over the last axis.

    RMSNorm (Zhang and Sennrich, 2019) is layernorm without the mean and the
    bias: it rescales, it does not recenter.  inp (B, T, C), weight (C,) or
    None (no gain, as in microgpt) -> out (B, T, C).  The cache keeps inp,
    weight and rstd = 1/sqrt(mean(x^2) + eps) (B, T, 1); xhat = x * rstd is
    recomputed in the backward, as layernorm's is.
    """
    rstd = 1.0 / np.sqrt((inp * inp).mean(axis=-1, keepdims=True) + eps)
    out = inp * rstd                                       # xhat, (B, T, C)
    if weight is not None:
        out *= weight
    return out, (inp, weight, rstd)


def rmsnorm_backward(dinp, dweight, dout, cache):
    """Backward of rmsnorm: layernorm's formula without the path through the
    mean.

    With xhat = x * rstd and g = dout * weight (g = dout without a weight):
    d rstd / d x_i = -rstd^3 x_i / C = -rstd^2 xhat_i / C, so

        dx = rstd * (g - xhat * mean(g * xhat))

    (the mean over the C channels is the path through mean(x^2)).
    dweight = sum over (B, T) of dout * xhat.
    dinp (B, T, C), dweight (C,) or None, dout (B, T, C).
    """
    inp, weight, rstd = cache
    C = inp.shape[-1]
    if dweight is not None and weight is None:
        raise ValueError("rmsnorm_backward: got a dweight buffer, but the "
                         "forward had no weight (weight=None)")
    xhat = inp * rstd                   # (B, T, C), recomputed (see the forward)
    if dweight is not None:
        dweight += (dout * xhat).reshape(-1, C).sum(axis=0)          # (C,)
    if dinp is not None:
        g = dout if weight is None else dout * weight               # (B, T, C)
        dinp += rstd * (g - xhat * (g * xhat).mean(axis=-1, keepdims=True))


# ---- matmul (a linear layer) --------------------------------------------------

def matmul_forward(inp, weight, bias):
    """out = inp @ weight.T + bias, weight shaped (out, in) as in PyTorch and
    llm.c.

    inp (B, T, C), weight (OC, C), bias (OC,) or None -> out (B, T, OC).
    The B*T positions are flattened into one (B*T, C) matrix: one large BLAS
    call is faster than B smaller ones.
    """
    B, T, C = inp.shape
    OC = weight.shape[0]
    out = inp.reshape(B * T, C) @ weight.T  # (B*T, OC)
    if bias is not None:
        out += bias
    return out.reshape(B, T, OC), (inp, weight)


def matmul_backward(dinp, dweight, dbias, dout, cache):
    """dinp += dout @ weight,  dweight += dout^T @ inp (summed over B and T),
    dbias += sum dout.

    dinp (B, T, C), dweight (OC, C), dbias (OC,), dout (B, T, OC).
    """
    inp, weight = cache
    OC, C = weight.shape
    dout2 = dout.reshape(-1, OC)  # (B*T, OC)
    if dinp is not None:
        # (B*T, OC) @ (OC, C) -> (B, T, C)
        dinp += (dout2 @ weight).reshape(dinp.shape)
    if dweight is not None:
        dweight += dout2.T @ inp.reshape(-1, C)  # (OC, B*T) @ (B*T, C) -> (OC, C)
    if dbias is not None:
        dbias += dout2.sum(axis=0)


# ---- causal multi-head self-attention -----------------------------------------

def _split_heads(x, NH):
    """(B, T, C) -> (B, NH, T, hs): a view of x, never a copy."""
    B, T, C = x.shape
    return x.reshape(B, T, NH, C // NH).transpose(0, 2, 1, 3)


@functools.cache
def _causal_mask(T, dtype):
    """(T, T): 0 where position t may look at t2 (t2 <= t), -inf above the
    diagonal.  Made once per (T, dtype) and shared, so it is read-only."""
    mask = np.triu(np.full((T, T), -np.inf, dtype=dtype), k=1)
    mask.flags.writeable = False
    return mask


def attention_forward(inp, n_head):
    """Causal multi-head attention on the output of the qkv matmul.

    inp (B, T, 3C) holds q, k, v side by side -> out (B, T, C).
    Per head: att = softmax(q k^T / sqrt(hs) with the future masked out),
    out = att v.  The softmax is computed in place on the scores, as llm.c
    does: subtract the row max (so exp cannot overflow), exponentiate,
    divide by the row sum.  The cache keeps inp and att (B, NH, T, T), the
    probabilities; the scores before the softmax are not needed.
    """
    B, T, C3 = inp.shape
    hs = qkv_heads("attention_forward", inp, n_head)
    q, k, v = (_split_heads(x, n_head)
               for x in np.split(inp, 3, axis=-1))        # (B, NH, T, hs)
    att = (q / math.sqrt(hs)) @ k.swapaxes(-1, -2)         # (B, NH, T, T)
    att += _causal_mask(T, att.dtype)                      # -inf where t2 > t
    att -= att.max(axis=-1, keepdims=True)
    np.exp(att, out=att)
    att /= att.sum(axis=-1, keepdims=True)                 # rows sum to 1
    out = (att @ v).swapaxes(1, 2).reshape(B, T, C3 // 3)   # (B, T, C)
    return out, (inp, att, n_head)


def attention_backward(dinp, dout, cache):
    """Backward of attention: through out = att v, the softmax, then the
    scores q k^T / sqrt(hs).

    Per head, with dy = dout:
        datt = dy v^T,                 dv = att^T dy
    softmax VJP, row by row (att = softmax(s)):
        ds = att * (datt - sum_j(datt * att))
        (masked entries have att = 0, so ds = 0)
    scores s = q k^T / sqrt(hs):
        dq = ds k / sqrt(hs),          dk = ds^T q / sqrt(hs)
    dinp (B, T, 3C), dout (B, T, C).
    """
    inp, att, n_head = cache
    hs = inp.shape[-1] // 3 // n_head
    q, k, v = (_split_heads(x, n_head)
               for x in np.split(inp, 3, axis=-1))        # (B, NH, T, hs)
    # the same views of dinp: adding into them adds into dinp
    dq, dk, dv = (_split_heads(x, n_head)
                  for x in np.split(dinp, 3, axis=-1))    # (B, NH, T, hs)
    dy = _split_heads(dout, n_head)                       # (B, NH, T, hs)
    dv += att.swapaxes(-1, -2) @ dy
    ds = dy @ v.swapaxes(-1, -2)          # datt (B, NH, T, T), ds in place:
    ds -= np.einsum("...j,...j->...", ds, att)[..., None]  # - sum_j datt att
    ds *= att
    ds /= math.sqrt(hs)             # the scores' 1/sqrt(hs), once for both
    dq += ds @ k
    dk += ds.swapaxes(-1, -2) @ q


# ---- GELU (tanh approximation) ------------------------------------------------

GELU_SCALE = math.sqrt(2.0 / math.pi)
GELU_CUBIC = 0.044715


def gelu_forward(inp):
    """gelu(x) = 0.5 x (1 + tanh(u)),  u = sqrt(2/pi) (x + 0.044715 x^3).

    inp (B, T, 4C) -> out (B, T, 4C).  The cache keeps inp and tanh(u), so
    that the backward does not compute the tanh again: one more (B, T, 4C)
    array of memory for less time (llm.c keeps only inp and recomputes).
    x * x * x, not x**3: NumPy's power with a float exponent is several
    times slower than two multiplications.
    """
    x = inp
    tanh_u = np.tanh(GELU_SCALE * (x + GELU_CUBIC * x * x * x))
    return 0.5 * x * (1.0 + tanh_u), (x, tanh_u)


def gelu_backward(dinp, dout, cache):
    """Product rule on 0.5 x (1 + tanh u), and tanh' = 1 - tanh^2:

        d gelu/dx = 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) du/dx,
        du/dx = sqrt(2/pi) (1 + 3 * 0.044715 x^2).

    dinp (B, T, 4C), dout (B, T, 4C).
    """
    x, tanh_u = cache
    du_dx = GELU_SCALE * (1.0 + 3.0 * GELU_CUBIC * x * x)
    dgelu_dx = 0.5 * (1.0 + tanh_u) + 0.5 * x * (1.0 - tanh_u * tanh_u) * du_dx
    dinp += dgelu_dx * dout


# ---- residual -----------------------------------------------------------------

def residual_forward(inp1, inp2):
    """out = inp1 + inp2, all (B, T, C).  Nothing to cache."""
    return inp1 + inp2, None


def residual_backward(dinp1, dinp2, dout, cache=None):
    """Addition copies the gradient to both inputs: dinp1 += dout,
    dinp2 += dout."""
    dinp1 += dout
    dinp2 += dout


# ---- softmax + cross-entropy, fused -------------------------------------------

def crossentropy_softmax_forward(logits, targets):
    """Mean over all B*T positions of -log softmax(logits)[target].

    logits (B, T, V), targets (B, T) integers -> loss (a float),
    cache (probs, targets).  With z = logits - max (so exp cannot overflow),
    -log softmax(z)[target] = log(sum_j exp(z_j)) - z[target]: the log of a
    sum of at least 1, never the log of a probability that may round to 0.
    The softmax is computed in place, as in attention: z, exp(z), then
    divided by its row sum (V is large: each (B, T, V) array counts).
    """
    probs = logits - logits.max(axis=-1, keepdims=True)    # z (B, T, V)
    z_target = np.take_along_axis(probs, targets[..., None], axis=-1)  # (B, T, 1)
    np.exp(probs, out=probs)
    sums = probs.sum(axis=-1, keepdims=True)                # (B, T, 1)
    probs /= sums                                           # softmax
    loss = np.mean(np.log(sums) - z_target)
    return float(loss), (probs, targets)


def crossentropy_softmax_backward(dlogits, dloss, cache):
    """Fused backward: d loss / d logits = (probs - onehot(target)) / (B*T),
    times dloss.

    The softmax Jacobian and the log's 1/p cancel, which is why the two are
    fused.  dlogits (B, T, V), dloss a float (1.0 for the loss itself).
    """
    probs, targets = cache
    B, T, V = probs.shape
    b, t = np.indices((B, T))                               # (B, T) each
    dlogits += probs * (dloss / (B * T))                    # (B, T, V)
    dlogits[b, t, targets] -= dloss / (B * T)               # the one-hot part


# ---- FlashAttention: the same attention, tiled, no T x T array -----------------

__all__ += [
    "flash_attention_forward", "flash_attention_backward",
    "fused_classifier_forward", "fused_classifier_backward",
]


def _flash_query_tile(qi, k, v, i0, tile):
    """The online softmax of flash_attention_forward for one tile of
    queries qi (B, NH, tq, hs), already scaled by 1/sqrt(hs), starting at
    row i0: the keys are read `tile` at a time, up to the diagonal.
    Returns this tile's out (B, NH, tq, hs) and L (B, NH, tq, 1)."""
    i1, T = i0 + qi.shape[2], k.shape[2]
    m = np.full(qi.shape[:3] + (1,), -np.inf, qi.dtype)  # (B, NH, tq, 1)
    l = np.zeros_like(m)                                  # (B, NH, tq, 1)
    acc = np.zeros_like(qi)                               # (B, NH, tq, hs)
    for j0 in range(0, i1, tile):                         # keys j0 < i1 only
        j1 = min(j0 + tile, i1)
        s = qi @ k[:, :, j0:j1].swapaxes(-1, -2)          # (B, NH, tq, tk)
        if j1 > i0 + 1:      # the tile reaches above the diagonal: mask
            s += _causal_mask(T, s.dtype)[i0:i1, j0:j1]
        m_new = np.maximum(m, s.max(axis=-1, keepdims=True))
        p = np.exp(s - m_new)                             # (B, NH, tq, tk)
        rescale = np.exp(m - m_new)                       # (B, NH, tq, 1)
        l = l * rescale + p.sum(axis=-1, keepdims=True)
        acc = acc * rescale + p @ v[:, :, j0:j1]
        m = m_new
    return acc / l, m + np.log(l)


def _flash_key_tile(q, dq, kj, vj, dy, lse, D, j0, tile):
    """flash_attention_backward for the tile of keys kj, vj (B, NH, tk, hs)
    starting at row j0: each tile of queries at or below the diagonal
    recomputes its probabilities from L and adds into dq; returns the key
    tile's dk and dv (B, NH, tk, hs)."""
    T, hs = q.shape[2], q.shape[3]
    j1, scale = j0 + kj.shape[2], 1.0 / math.sqrt(hs)
    dkj, dvj = np.zeros_like(kj), np.zeros_like(vj)       # (B, NH, tk, hs)
    for i0 in range(j0 - j0 % tile, T, tile):             # queries i1 > j0
        i1 = min(i0 + tile, T)
        qi, dyi = q[:, :, i0:i1], dy[:, :, i0:i1]         # (B, NH, tq, hs)
        s = (qi * scale) @ kj.swapaxes(-1, -2)            # (B, NH, tq, tk)
        if j1 > i0 + 1:
            s += _causal_mask(T, s.dtype)[i0:i1, j0:j1]
        p = np.exp(s - lse[:, :, i0:i1])                  # att's tile
        dvj += p.swapaxes(-1, -2) @ dyi
        ds = p * (dyi @ vj.swapaxes(-1, -2) - D[:, :, i0:i1]) * scale
        dq[:, :, i0:i1] += ds @ kj
        dkj += ds.swapaxes(-1, -2) @ qi
    return dkj, dvj


def flash_attention_forward(inp, n_head, tile=64):
    """Causal multi-head attention as FlashAttention-2 computes it: an online
    softmax over tiles of keys, one logsumexp per row kept, no T x T array
    (FlashAttention 1 kept two numbers per row, m and l).

    inp (B, T, 3C) holds q, k, v side by side -> out (B, T, C), equal to
    attention_forward's out.  For each tile of `tile` queries, the keys are
    read `tile` at a time (only the tiles at or below the diagonal: the
    mask is causal).  Per query row, three running numbers replace the row
    of probabilities (Milakov and Gimelshein 2018; Dao 2023, Algorithm 1):

        m   the largest score seen so far,
        l   sum_j exp(s_j - m) over the keys seen so far,
        acc sum_j exp(s_j - m) v_j  (hs numbers).

    A new tile of scores s (tile, tile) with largest m' = max(m, max s):
    rescale l and acc by exp(m - m'), add the tile's exp(s - m') terms.
    At the end out = acc / l, and the logsumexp L = m + log l is all the
    backward needs of the softmax: att[t, j] = exp(s[t, j] - L[t]).
    The cache keeps inp, out and L (B, NH, T, 1): O(T), where
    attention_forward keeps att (B, NH, T, T).
    """
    hs = qkv_heads("flash_attention_forward", inp, n_head)
    tile = tile_size("flash_attention_forward", "tile", tile)
    B, T, C3 = inp.shape
    q, k, v = (_split_heads(x, n_head)
               for x in np.split(inp, 3, axis=-1))        # (B, NH, T, hs)
    out = np.empty((B, n_head, T, hs), inp.dtype)         # (B, NH, T, hs)
    lse = np.empty((B, n_head, T, 1), inp.dtype)          # L, one per row
    for i0 in range(0, T, tile):                          # a tile of queries
        i1 = min(i0 + tile, T)
        out[:, :, i0:i1], lse[:, :, i0:i1] = _flash_query_tile(
            q[:, :, i0:i1] * (1.0 / math.sqrt(hs)), k, v, i0, tile)
    out = out.swapaxes(1, 2).reshape(B, T, C3 // 3)       # (B, T, C)
    return out, (inp, out, lse, n_head, tile)


def flash_attention_backward(dinp, dout, cache):
    """Backward of flash_attention_forward: attention_backward's formulas,
    with the probabilities recomputed tile by tile from L.

    Per head (Dao 2023, Algorithm 2), for a tile of queries i and keys j:
        p  = exp(q_i k_j^T / sqrt(hs) - L_i)     (recomputed, tq x tk)
        dv_j += p^T dy_i,           dp = dy_i v_j^T
        ds = p * (dp - D_i),        D = rowsum(dy * out)
        dq_i += ds k_j / sqrt(hs),  dk_j += ds^T q_i / sqrt(hs)
    D is the eager backward's sum_j datt * att, computed once per row from
    the output instead: sum_j (dy . v_j) att_j = dy . (sum_j att_j v_j)
    = dy . out.  Nothing of size T x T is made.
    dinp (B, T, 3C), dout (B, T, C).
    """
    inp, out, lse, n_head, tile = cache
    output_gradient("flash_attention_backward", dout, out.shape)
    T = inp.shape[1]
    q, k, v = (_split_heads(x, n_head)
               for x in np.split(inp, 3, axis=-1))        # (B, NH, T, hs)
    dq, dk, dv = (_split_heads(x, n_head)
                  for x in np.split(dinp, 3, axis=-1))    # views of dinp
    dy = _split_heads(dout, n_head)                       # (B, NH, T, hs)
    D = np.einsum("bhtd,bhtd->bht", dy, _split_heads(out, n_head))[..., None]
    for j0 in range(0, T, tile):                          # a tile of keys
        j1 = min(j0 + tile, T)
        dkj, dvj = _flash_key_tile(q, dq, k[:, :, j0:j1], v[:, :, j0:j1],
                                   dy, lse, D, j0, tile)
        dk[:, :, j0:j1] += dkj
        dv[:, :, j0:j1] += dvj


# ---- the tied LM head, softmax and cross-entropy, fused -----------------------

def _flat_view(dinp, N, C):
    """dinp (B, T, C) as an (N, C) view, so that adding into it adds into
    dinp (a reshape of a non-contiguous array would be a copy)."""
    dx = dinp.reshape(N, C)
    if not np.shares_memory(dx, dinp):
        raise ValueError("fused_classifier_backward: dinp must be contiguous")
    return dx


def fused_classifier_forward(inp, wte, targets, chunk=8192):
    """loss = crossentropy_softmax_forward(matmul_forward(inp, wte, None)),
    without ever holding the (B, T, V) logits.

    inp (B, T, C), wte (V, C) (the tied LM head), targets (B, T) -> loss
    (a float), cache.  The vocabulary is read `chunk` rows of wte at a
    time: logits (B*T, chunk) for that slice, folded into a running max m
    and sum l of exp(logit - m) per position (the online softmax of
    flash_attention_forward, over V instead of T).  The cache keeps inp,
    wte, targets and the logsumexp L = m + log l (B*T,): the backward
    recomputes each chunk's probabilities as exp(logit - L).

    This is Cut Cross-Entropy's design (Wijmans et al. 2024): vocabulary
    chunks, no logits held.  llm.c's fused_classifier differs: the matmul
    before it writes the full (B, T, Vp) logits, which it overwrites in
    place with their gradient.  Liger Kernel's fused linear cross-entropy
    differs too: it chunks over positions (each chunk's full rows of
    logits) and computes the gradients already in the forward.
    """
    chunk, targets = classifier_inputs("fused_classifier_forward", inp, wte,
                                       targets, chunk)
    B, T, C = inp.shape
    x = inp.reshape(B * T, C)                               # (N, C), N = B*T
    m = np.full(B * T, -np.inf, inp.dtype)                  # (N,)
    l = np.zeros(B * T, inp.dtype)                          # (N,)
    for v0 in range(0, wte.shape[0], chunk):
        logits = x @ wte[v0:v0 + chunk].T                   # (N, chunk)
        m_new = np.maximum(m, logits.max(axis=-1))
        logits -= m_new[:, None]
        l *= np.exp(m - m_new)
        l += np.exp(logits, out=logits).sum(axis=-1)
        m = m_new
    lse = m + np.log(l)                                     # (N,)
    # the target's logit: one dot product per position
    z_target = np.einsum("nc,nc->n", x, wte[targets.reshape(-1)])
    loss = np.mean(lse - z_target)
    return float(loss), (inp, wte, targets, lse, chunk)


def fused_classifier_backward(dinp, dwte, dloss, cache):
    """Backward of fused_classifier_forward, chunk by chunk of the
    vocabulary.

    For the chunk of rows v0:v1 of wte, with x = inp as (N, C):
        g = (exp(x wte[v0:v1]^T - L) - onehot(target)) * dloss / N
    (crossentropy_softmax_backward's dlogits, for those columns only), then
    matmul_backward's two products:
        dinp += g wte[v0:v1],        dwte[v0:v1] += g^T x
    so neither the (N, V) dlogits nor a (V, C) temporary exists: the
    largest temporaries are (N, chunk) and (chunk, C).
    dinp (B, T, C), dwte (V, C) (either may be None), dloss a float.
    """
    inp, wte, targets, lse, chunk = cache
    B, T, C = inp.shape
    N = B * T
    x = inp.reshape(N, C)
    tgt = targets.reshape(-1)
    rows = np.arange(N)
    dx = None if dinp is None else _flat_view(dinp, N, C)  # (N, C)
    for v0 in range(0, wte.shape[0], chunk):
        w = wte[v0:v0 + chunk]                              # (chunk, C)
        g = x @ w.T                                         # (N, chunk)
        g -= lse[:, None]
        np.exp(g, out=g)                                    # probabilities
        hit = (tgt >= v0) & (tgt < v0 + w.shape[0])         # target here
        g[rows[hit], tgt[hit] - v0] -= 1.0
        g *= dloss / N
        if dx is not None:
            dx += g @ w                                     # (N, C)
        if dwte is not None:
            dwte[v0:v0 + chunk] += g.T @ x                  # (chunk, C)
