"""The layers of a GPT-2 style decoder as forward/backward pairs, in NumPy, with no autograd.

Laid out like llm.c's `train_gpt2.c`: every layer is a `*_forward` function
followed directly by its `*_backward`.  A forward returns `(out, cache)`,
where the cache holds exactly what the backward needs.  A backward takes the
gradient buffers first, then `dout` and the cache, and **adds** into the
buffers (`+=`), never assigns: a tensor used twice (the token embedding
`wte`, which is also the LM head; the residual stream) collects both
contributions, and the caller zeroes the buffers once per step.  A buffer
may be `None` when that gradient is not wanted.

Shape legend (used on every array below):

    B = batch size          T = sequence length (time)
    C = channels (n_embd)   V = vocabulary size
    NH = number of heads    hs = head size = C // NH
    OC = output channels of a matmul

What this module is not: fast in the way llm.c is (no fused kernels), or a
general library.  It exists to be read next to its derivations (chapter 6).
References: A. Karpathy, llm.c (train_gpt2.c, doc/layernorm); nanoGPT.
"""

from __future__ import annotations

import functools
import math

import numpy as np

__all__ = [
    "encoder_forward", "encoder_backward",
    "layernorm_forward", "layernorm_backward",
    "rmsnorm_forward", "rmsnorm_backward",
    "matmul_forward", "matmul_backward",
    "attention_forward", "attention_backward",
    "gelu_forward", "gelu_backward",
    "residual_forward", "residual_backward",
    "crossentropy_softmax_forward", "crossentropy_softmax_backward",
    "LAYERNORM_EPS",
]

LAYERNORM_EPS = 1e-5  # as in GPT-2 and PyTorch's nn.LayerNorm


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


# ---- layernorm ---------------------------------------------------------------

def layernorm_forward(inp, weight, bias, eps=LAYERNORM_EPS):
    """out = (x - mean) / sqrt(var + eps) * weight + bias, over the last axis.

    inp (B, T, C), weight (C,), bias (C,) -> out (B, T, C).
    The cache keeps mean and rstd = 1/sqrt(var + eps), each (B, T, 1); the
    normalized input xhat (B, T, C) is recomputed in the backward from them,
    which costs one subtract and one multiply and saves a (B, T, C) array.
    """
    C = inp.shape[-1]
    mean = inp.mean(axis=-1, keepdims=True)                # (B, T, 1)
    out = inp - mean                                       # x - mean, (B, T, C)
    # (B, T, 1), the mean of squares
    var = np.einsum("...c,...c->...", out, out)[..., None] / C
    rstd = 1.0 / np.sqrt(var + eps)                        # (B, T, 1)
    out *= rstd                          # xhat (var is biased, as in PyTorch)
    out *= weight
    out += bias                                            # (B, T, C)
    return out, (inp, weight, mean, rstd)


def layernorm_backward(dinp, dweight, dbias, dout, cache):
    """Backward of layernorm, all three terms of the chain rule through mean
    and var.

    With xhat = (x - mu) * rstd and g = dout * weight (the gradient at xhat):

        dx = rstd * (g - mean(g) - xhat * mean(g * xhat))

    (means over the C channels).  The `- mean(g)` term is the path through mu,
    the `- xhat * mean(g * xhat)` term the path through the variance.
    dweight = sum over (B, T) of dout * xhat,  dbias = sum over (B, T) of dout.
    dinp (B, T, C), dweight (C,), dbias (C,), dout (B, T, C).
    """
    inp, weight, mean, rstd = cache
    C = inp.shape[-1]
    xhat = inp - mean
    xhat *= rstd                # (B, T, C), recomputed (see the forward)
    if dbias is not None:
        dbias += dout.sum(axis=(0, 1))
    if dweight is not None:
        # sum over (b, t) of dout * xhat
        dweight += np.einsum("btc,btc->c", dout, xhat)
    if dinp is not None:
        g = dout * weight                 # (B, T, C), the gradient at xhat
        mean_g = g.mean(axis=-1, keepdims=True)           # (B, T, 1)
        # mean(g xhat), (B, T, 1)
        mean_gx = np.einsum("...c,...c->...", g, xhat)[..., None] / C
        # in place, the same formula: rstd * (g - mean(g) - xhat mean(g xhat))
        g -= mean_g
        xhat *= mean_gx
        g -= xhat
        g *= rstd
        dinp += g


# ---- rmsnorm -----------------------------------------------------------------

def rmsnorm_forward(inp, weight=None, eps=1e-5):
    """out = x / sqrt(mean(x^2) + eps) * weight, over the last axis.

    RMSNorm (Zhang and Sennrich, 2019) is layernorm without the mean and the
    bias: it rescales, it does not recenter.  inp (B, T, C), weight (C,) or
    None (no gain, as in microgpt) -> out (B, T, C).  The cache keeps inp,
    weight and rstd = 1/sqrt(mean(x^2) + eps) (B, T, 1); xhat = x * rstd is
    recomputed in the backward, as layernorm's is.
    """
    C = inp.shape[-1]
    # (B, T, 1), the mean of squares
    ms = np.einsum("...c,...c->...", inp, inp)[..., None] / C
    rstd = 1.0 / np.sqrt(ms + eps)                         # (B, T, 1)
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
        # sum over (b, t) of dout * xhat, (C,)
        dweight += np.einsum("nc,nc->c", dout.reshape(-1, C), xhat.reshape(-1, C))
    if dinp is not None:
        g = dout * weight if weight is not None else dout.copy()  # (B, T, C)
        # mean(g xhat), (B, T, 1)
        mean_gx = np.einsum("...c,...c->...", g, xhat)[..., None] / C
        xhat *= mean_gx                 # in place: rstd * (g - xhat mean(g xhat))
        g -= xhat
        g *= rstd
        dinp += g


# ---- matmul (a linear layer) -----------------------------------------------------

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


# ---- causal multi-head self-attention -------------------------------------------

def _split_heads(x, NH):
    """(B, T, C) -> (B, NH, T, hs), a view of x (splitting one axis in two never copies)."""
    B, T, C = x.shape
    return x.reshape(B, T, NH, C // NH).transpose(0, 2, 1, 3)


@functools.lru_cache(maxsize=None)
def _causal_mask(T, dtype):
    """(T, T): 0 where position t may look at t2 (t2 <= t), -inf above the diagonal.

    Made once per (T, dtype) and shared, so it is read-only."""
    mask = np.triu(np.full((T, T), -np.inf, dtype=dtype), k=1)
    mask.flags.writeable = False
    return mask


def attention_forward(inp, n_head):
    """Causal multi-head attention on the output of the qkv matmul.

    inp (B, T, 3C) holds q, k, v side by side -> out (B, T, C).
    Per head: att = softmax(q k^T / sqrt(hs) with the future masked out),
    out = att v.
    The cache keeps inp and att (B, NH, T, T), the probabilities after the
    softmax; the scores before it are not needed by the backward.
    """
    B, T, C3 = inp.shape
    C = C3 // 3
    if C3 % 3 or C % n_head:
        raise ValueError(f"attention_forward: the last axis {C3} must be 3*C "
                         f"with C divisible by n_head={n_head}")
    hs = C // n_head
    q, k, v = (_split_heads(inp[..., i * C:(i + 1) * C], n_head)
               for i in range(3))                        # (B, NH, T, hs)
    scale = 1.0 / math.sqrt(hs)
    att = q @ k.transpose(0, 1, 3, 2)                    # (B, NH, T, T)
    att *= scale                                         # scores
    # -inf where t2 > t: exp(-inf) = 0
    att += _causal_mask(T, np.dtype(att.dtype))
    # stable softmax (the diagonal is finite)
    att -= att.max(axis=-1, keepdims=True)
    np.exp(att, out=att)
    att /= att.sum(axis=-1, keepdims=True)   # (B, NH, T, T), rows sum to 1
    out = np.empty((B, T, C), dtype=att.dtype)
    # y = att v (B, NH, T, hs), written straight into out (B, T, C)
    np.matmul(att, v, out=_split_heads(out, n_head))
    return out, (inp, att, n_head)


def attention_backward(dinp, dout, cache):
    """Backward of attention: through y = att v, the softmax, then the scores
    q k^T.

    Per head, with y = att v and dy = dout:
        datt = dy v^T,                 dv = att^T dy
    softmax VJP, row by row (att = softmax(s)):
        ds = att * (datt - sum_j(datt * att))
        (masked entries have att = 0, so ds = 0)
    scores s = scale * q k^T:
        dq = scale * ds k,             dk = scale * ds^T q
    dinp (B, T, 3C), dout (B, T, C).
    """
    inp, att, n_head = cache
    B, T, C3 = inp.shape
    C = C3 // 3
    hs = C // n_head
    scale = 1.0 / math.sqrt(hs)
    q, k, v = (_split_heads(inp[..., i * C:(i + 1) * C], n_head)
               for i in range(3))                          # (B, NH, T, hs)
    dy = _split_heads(dout, n_head)                        # (B, NH, T, hs)
    datt = dy @ v.transpose(0, 1, 3, 2)                    # (B, NH, T, T)
    dv = att.transpose(0, 1, 3, 2) @ dy                    # (B, NH, T, hs)
    # softmax VJP, in place: ds = att * (datt - sum_j datt att), the einsum
    # being that row sum
    datt -= np.einsum("...j,...j->...", datt, att)[..., None]
    datt *= att
    datt *= scale                          # through the scaling of the scores
    dq = datt @ k                                          # (B, NH, T, hs)
    dk = datt.transpose(0, 1, 3, 2) @ q                    # (B, NH, T, hs)
    # (B, 3NH, T, hs), a view of dinp
    dqkv = _split_heads(dinp, 3 * n_head)
    # added straight into dinp's q, k, v heads: no merged copies
    dqkv[:, 0 * n_head:1 * n_head] += dq
    dqkv[:, 1 * n_head:2 * n_head] += dk
    dqkv[:, 2 * n_head:3 * n_head] += dv


# ---- GELU (tanh approximation) ------------------------------------------------------

GELU_SCALE = math.sqrt(2.0 / math.pi)
GELU_CUBIC = 0.044715


def gelu_forward(inp):
    """gelu(x) = 0.5 x (1 + tanh(u)),  u = sqrt(2/pi) (x + 0.044715 x^3).

    inp (B, T, 4C) -> out (B, T, 4C).  The cache keeps inp and tanh(u), so
    the backward does not compute the tanh a second time: one more (B, T, 4C)
    array of memory traded for time (llm.c and PyTorch keep only inp and
    recompute).  Written with in-place updates, because this elementwise
    layer works on the largest arrays of the model; and tanh(u) is computed
    as 2 / (1 + exp(-2u)) - 1, the same function, because NumPy's exp is
    about 1.5 times as fast as its tanh (exp(-2u) overflows to inf for very
    negative x, which gives the right limit tanh = -1).
    """
    th = inp * inp                    # x^2
    th *= -2.0 * GELU_SCALE * GELU_CUBIC
    th -= 2.0 * GELU_SCALE
    th *= inp                         # -2u, u = sqrt(2/pi) (x + 0.044715 x^3)
    with np.errstate(over="ignore"):
        np.exp(th, out=th)            # exp(-2u)
    th += 1.0
    np.divide(2.0, th, out=th)
    # tanh(u) = 2 / (1 + exp(-2u)) - 1, kept for the backward
    th -= 1.0
    out = th + 1.0
    out *= inp
    out *= 0.5                        # 0.5 x (1 + tanh u)
    return out, (inp, th)


def gelu_backward(dinp, dout, cache):
    """Product rule on 0.5 x (1 + tanh u):

        d gelu/dx = 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) du/dx,
        du/dx = sqrt(2/pi) (1 + 3 * 0.044715 x^2).

    dinp (B, T, 4C), dout (B, T, 4C).  Multiplying out du/dx gives three
    terms, each added into dinp (times dout) in turn, so one scratch array t
    holds every intermediate.
    """
    x, th = cache
    t = th + 1.0                        # 1 + tanh u
    t *= dout
    t *= 0.5
    dinp += t                           # 0.5 (1 + tanh u) dout
    np.multiply(th, th, out=t)
    np.subtract(1.0, t, out=t)          # 1 - tanh^2 u
    t *= x
    t *= dout
    t *= 0.5 * GELU_SCALE
    dinp += t                           # + 0.5 x (1 - tanh^2 u) sqrt(2/pi) dout
    t *= x
    t *= x
    t *= 3.0 * GELU_CUBIC
    dinp += t                           # + the same times 3 * 0.044715 x^2


# ---- residual ---------------------------------------------------------------------

def residual_forward(inp1, inp2):
    """out = inp1 + inp2, all (B, T, C).  Nothing to cache."""
    return inp1 + inp2, None


def residual_backward(dinp1, dinp2, dout, cache=None):
    """Addition copies the gradient to both inputs: dinp1 += dout,
    dinp2 += dout."""
    dinp1 += dout
    dinp2 += dout


# ---- softmax + cross-entropy, fused ---------------------------------------------------

def crossentropy_softmax_forward(logits, targets):
    """Mean over all B*T positions of -log softmax(logits)[target].

    logits (B, T, V), targets (B, T) integers -> loss (a float),
    cache (probs, targets).
    """
    B, T, V = logits.shape
    # (B, T, V), max is 0: no overflow
    shifted = logits - logits.max(axis=-1, keepdims=True)
    logsumexp = np.log(np.exp(shifted).sum(axis=-1, keepdims=True))  # (B, T, 1)
    logprobs = shifted - logsumexp                           # (B, T, V)
    picked = np.take_along_axis(logprobs, targets[..., None],
                                axis=-1)                     # (B, T, 1)
    loss = -picked.mean()
    return float(loss), (np.exp(logprobs), targets)


def crossentropy_softmax_backward(dlogits, dloss, cache):
    """Fused backward: d loss / d logits = (probs - onehot(target)) / (B*T),
    times dloss.

    The softmax Jacobian and the log's 1/p cancel, which is why the two are fused.
    dlogits (B, T, V), dloss a float (1.0 for the loss itself).
    """
    probs, targets = cache
    B, T, V = probs.shape
    d = probs * (dloss / (B * T))                       # (B, T, V)
    b, t = np.indices((B, T))                           # (B, T) each
    d[b, t, targets] -= dloss / (B * T)       # minus the one-hot of the targets
    dlogits += d
