"""The same GPT built from scalar `Value`s, one node per number (microgpt style).

`scalar_gpt_loss(sparams, config, idx, targets)` runs the model of
`model.py` on one sequence with every number a `backprop_lessons.Value`:
the same layers (layernorm, qkv, causal attention, projections, GELU,
residuals, tied LM head, cross-entropy), written as loops over lists.
`loss.backward()` then fills in every parameter's gradient through the
scalar engine's generic chain-rule loop, with no layer-specific backward
code at all.  `scalar_params` wraps a NumPy parameter dict in Values;
`scalar_gradients` reads the gradients back as arrays with the same keys.

It exists to be measured: how many nodes a tiny model creates per
sequence, and how long the scalar engine takes compared with the
vectorized hand-written backward (chapter 6).  Its gradients equal those of
`gpt_backward` to rounding, which is one more independent check.
Compare A. Karpathy's microgpt (2026): 4,064 parameters and about 24,000
nodes for a 5-character name.
"""

from __future__ import annotations

import math

import numpy as np

from ..numerics import instance_of, token_ids
from ..scalar import Value
from .layers import GELU_CUBIC, GELU_SCALE, LAYERNORM_EPS
from .model import BLOCK_PARAMETERS, GPTConfig

__all__ = ["scalar_params", "scalar_gradients", "scalar_gpt_loss"]


def scalar_params(params) -> dict:
    """Each array of `params` as nested lists of Values (same nesting as the
    array's shape)."""
    instance_of("scalar_params", "params", params, dict)

    def wrap(a):
        return [wrap(x) for x in a] if isinstance(a, list) else Value(float(a))

    return {
        name: wrap(np.asarray(p, np.float64).tolist())
        for name, p in params.items()
    }


def scalar_gradients(sparams) -> dict[str, np.ndarray]:
    """The `.grad` of every Value of `sparams`, as float64 arrays under the
    same names."""
    instance_of("scalar_gradients", "sparams", sparams, dict)

    def grads(a):
        return [grads(x) for x in a] if isinstance(a, list) else a.grad

    return {
        name: np.array(grads(p), dtype=np.float64) for name, p in sparams.items()
    }


# ---- the layers, one number at a time ---------------------------------------
# x is a list of C Values (one position); w a list of rows of Values.


def linear(x, w, b=None):
    """w x + b: out_i = b_i + sum_j w_ij x_j for every row i of w (the sum
    starts at 0.0 without a bias)."""
    out = []
    for i, row in enumerate(w):
        total = b[i] if b is not None else 0.0
        for w_ij, x_j in zip(row, x):
            total = total + w_ij * x_j
        out.append(total)
    return out


def layernorm(x, w, b):
    """(x - mean) / sqrt(var + eps) * w + b over the list x."""
    n = len(x)
    mean = sum(x) * (1.0 / n)
    xc = [xi - mean for xi in x]
    rstd = (sum(d * d for d in xc) * (1.0 / n) + LAYERNORM_EPS) ** -0.5
    return [d * rstd * wi + bi for d, wi, bi in zip(xc, w, b)]


def gelu(x):
    """0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) for each Value of x."""
    out = []
    for xi in x:
        inner = GELU_SCALE * (xi + GELU_CUBIC * xi**3)
        out.append(0.5 * xi * (1.0 + inner.tanh()))
    return out


def softmax(scores):
    """exp(s - max) / sum: the max is a plain float, a constant for the graph."""
    top = max(s.data for s in scores)
    exps = [(s - top).exp() for s in scores]
    total = sum(exps)
    return [e / total for e in exps]


def attention(qkv, t: int, n_head: int):
    """Position t's output (C Values) from the qkv rows (3C Values each) of
    positions 0..t: per head, softmax(q . k / sqrt(hs)) weights the values."""
    C = len(qkv[t]) // 3
    hs = C // n_head
    y = []
    for h in range(n_head):
        q = qkv[t][h * hs : (h + 1) * hs]
        scores = []
        for s in range(t + 1):  # causal: only the positions up to t
            k = qkv[s][C + h * hs : C + (h + 1) * hs]
            dot = sum(qi * ki for qi, ki in zip(q, k))
            scores.append(dot * (1.0 / math.sqrt(hs)))
        att = softmax(scores)
        for i in range(hs):
            v_i = [qkv[s][2 * C + h * hs + i] for s in range(t + 1)]
            y.append(sum(a * v for a, v in zip(att, v_i)))
    return y


# ---- the model ---------------------------------------------------------------


def _check_sequence(config: GPTConfig, idx, targets) -> tuple[list, list]:
    """idx and targets as lists of token ids in [0, V), of one length in
    [1, block_size], or a ValueError/TypeError naming scalar_gpt_loss."""
    op = "scalar_gpt_loss"
    V = instance_of(op, "config", config, GPTConfig).vocab_size
    idx = token_ids(op, "idx", idx, V, min_size=1)
    targets = token_ids(op, "targets", targets, V, min_size=1)
    if (
        idx.ndim != 1
        or idx.shape != targets.shape
        or len(idx) > config.block_size
    ):
        raise ValueError(
            f"{op}: need 1-D idx and targets of one length <= block_size="
            f"{config.block_size}, got shapes {idx.shape} and {targets.shape}"
        )
    return idx.tolist(), targets.tolist()


def scalar_gpt_loss(sparams, config: GPTConfig, idx, targets) -> Value:
    """Mean cross-entropy of the model on one sequence idx (T,) with targets
    (T,), as a Value."""
    idx, targets = _check_sequence(config, idx, targets)
    T, NH = len(idx), config.n_head
    p = sparams
    xs = []  # xs[t]: the residual stream at position t, C Values
    for t, token in enumerate(idx):
        xs.append([a + b for a, b in zip(p["wte"][token], p["wpe"][t])])
    for l in range(config.n_layer):
        w = {name: p[name][l] for name in BLOCK_PARAMETERS}  # block l's weights
        qkv = []  # T x 3C, from the stream before this block
        for x in xs:
            ln1 = layernorm(x, w["ln1w"], w["ln1b"])
            qkv.append(linear(ln1, w["qkvw"], w["qkvb"]))
        for t in range(T):
            atty = attention(qkv, t, NH)
            attproj = linear(atty, w["attprojw"], w["attprojb"])
            xs[t] = [a + b for a, b in zip(xs[t], attproj)]  # residual
        for t in range(T):
            ln2 = layernorm(xs[t], w["ln2w"], w["ln2b"])
            fch = linear(ln2, w["fcw"], w["fcb"])
            fcproj = linear(gelu(fch), w["fcprojw"], w["fcprojb"])
            xs[t] = [a + b for a, b in zip(xs[t], fcproj)]  # residual
    losses = []
    for x, target in zip(xs, targets):
        logits = linear(layernorm(x, p["lnfw"], p["lnfb"]), p["wte"])  # V, tied
        losses.append(-softmax(logits)[int(target)].log())
    return sum(losses) * (1.0 / T)
