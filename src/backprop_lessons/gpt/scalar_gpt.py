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

from ..scalar import Value
from .layers import GELU_CUBIC, GELU_SCALE, LAYERNORM_EPS
from .model import GPTConfig

__all__ = ["scalar_params", "scalar_gradients", "scalar_gpt_loss"]


def scalar_params(params) -> dict:
    """Each array of `params` as nested lists of Values (same nesting as the array's shape)."""
    def wrap(a):
        return [wrap(x) for x in a] if isinstance(a, list) else Value(float(a))
    return {name: wrap(np.asarray(p, np.float64).tolist()) for name, p in params.items()}


def scalar_gradients(sparams) -> dict[str, np.ndarray]:
    """The `.grad` of every Value of `sparams`, as float64 arrays under the same names."""
    def grads(a):
        return [grads(x) for x in a] if isinstance(a, list) else a.grad
    return {name: np.array(grads(p), dtype=np.float64) for name, p in sparams.items()}


def linear(x, w, b=None):
    """[b_i + sum_j w_ij x_j for every row i]: x a list of C Values, w OC rows of C Values."""
    return [sum((wi * xi for wi, xi in zip(row, x)), b[i] if b is not None else 0.0)
            for i, row in enumerate(w)]


def layernorm(x, w, b):
    """(x - mean) / sqrt(var + eps) * w + b over the list x."""
    n = len(x)
    mean = sum(x) * (1.0 / n)
    xc = [xi - mean for xi in x]
    rstd = (sum(d * d for d in xc) * (1.0 / n) + LAYERNORM_EPS) ** -0.5
    return [d * rstd * wi + bi for d, wi, bi in zip(xc, w, b)]


def gelu(x):
    """0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) for each Value of x."""
    return [0.5 * xi * (1.0 + (GELU_SCALE * (xi + GELU_CUBIC * xi ** 3)).tanh()) for xi in x]


def softmax(scores):
    """exp(s - max) / sum: the max is a plain float, a constant for the graph."""
    top = max(s.data for s in scores)
    exps = [(s - top).exp() for s in scores]
    total = sum(exps)
    return [e / total for e in exps]


def scalar_gpt_loss(sparams, config: GPTConfig, idx, targets) -> Value:
    """Mean cross-entropy of the model on one sequence idx (T,) with targets
    (T,), as a Value."""
    T, C, NH = len(idx), config.n_embd, config.n_head
    if T > config.block_size or len(targets) != T:
        raise ValueError(f"scalar_gpt_loss: need len(idx) == len(targets) "
                         f"<= block_size={config.block_size}, "
                         f"got {len(idx)} and {len(targets)}")
    hs = C // NH
    p = sparams
    xs = [[a + b for a, b in zip(p["wte"][tok], p["wpe"][t])]
          for t, tok in enumerate(idx)]                     # T x C
    for l in range(config.n_layer):
        qkv = [linear(layernorm(x, p["ln1w"][l], p["ln1b"][l]),
                      p["qkvw"][l], p["qkvb"][l])
               for x in xs]                                 # T x 3C
        ys = []
        for t in range(T):                                  # causal: t2 <= t
            y = []
            for h in range(NH):
                q = qkv[t][h * hs:(h + 1) * hs]
                scores = [sum(qi * ki for qi, ki
                              in zip(q, qkv[t2][C + h * hs:C + (h + 1) * hs]))
                          * (1.0 / math.sqrt(hs)) for t2 in range(t + 1)]
                att = softmax(scores)
                y += [sum(a * qkv[t2][2 * C + h * hs + i]
                          for t2, a in enumerate(att))
                      for i in range(hs)]
            ys.append(y)                                    # T x C
        xs = [[a + b for a, b in zip(x, linear(y, p["attprojw"][l],
                                               p["attprojb"][l]))]
              for x, y in zip(xs, ys)]
        xs = [[a + b for a, b in zip(x, linear(
                  gelu(linear(layernorm(x, p["ln2w"][l], p["ln2b"][l]),
                              p["fcw"][l], p["fcb"][l])),
                  p["fcprojw"][l], p["fcprojb"][l]))]
              for x in xs]
    losses = []
    for x, target in zip(xs, targets):
        # V, tied head
        logits = linear(layernorm(x, p["lnfw"], p["lnfb"]), p["wte"])
        losses.append(-softmax(logits)[int(target)].log())
    return sum(losses) * (1.0 / T)
