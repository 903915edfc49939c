"""Checks for the exercises in which the reader writes each GPT layer's
backward, then the whole model's (chapter 6).

    check_layernorm_backward(fn)             fn like layers.layernorm_backward
    check_rmsnorm_backward(fn)               fn like layers.rmsnorm_backward
    check_gelu_backward(fn)                  fn like layers.gelu_backward
    check_crossentropy_softmax_backward(fn)  ... crossentropy_softmax_backward
    check_attention_backward(fn)             fn like layers.attention_backward
    check_encoder_backward(fn)               fn like layers.encoder_backward
    check_matmul_backward(fn)                fn like layers.matmul_backward
    check_gpt_backward(fn)                   fn like model.gpt_backward

A layer's `fn` has exactly the signature of the book's backward: the
gradient buffers first, then dout (dloss for the cross-entropy) and the
cache made by the book's forward; it adds into the buffers and returns
nothing.  `layer_checks` runs it (random non-zero buffers, one call per
case, what it added compared with PyTorch's gradient in float64, the first
wrong gradient named with its diagnosis); this module builds the cases:
each layer's inputs on several shapes and its classic bugs (a missing
term, a transpose, `=` for `+=`, ...).  The inputs are chosen to expose
them: repeated tokens for the embedding, a square and a non-square
weight for the matmul, inputs near |x| = 2 for the GELU (where the
derivatives of the tanh and the erf GELU differ most).  A slip is named,
not the answer: a wrong gradient no slip explains points to the
exercise's Hint 3, which holds the formula.

`check_gpt_backward` runs the book's `gpt_forward` on a 2-layer float64
model, calls `fn(params, config, cache)` for the dict of gradients and
compares each with PyTorch's autograd (`gpt.reference`), block by block
in the order the backward computes them: the first wrong gradient going
back from the loss is where the bug is.  Unless the reader's layers are:
while fn runs, the check notes which of the reader's functions it calls
with which layer's cache (`layer_checks.readers_calls_with`), and when
something is wrong it runs each of them, quietly, through its own layer's
check; the first that is still a stub or fails is named with its
exercise's number (the number the chapter gave that layer's check when it
ran), and a function given another layer's cache than its own is named
as miswired.

Each check prints "Exercise N: ..." and returns a `Verdict` (see
`checking`); PyTorch is imported only when a check runs.

`SELF_CHECKS` holds the chapter's self-check questions (`questions`).
"""

from __future__ import annotations

import math

import numpy as np

from ..gpt.layers import (
    LAYERNORM_EPS,
    attention_forward,
    crossentropy_softmax_forward,
    encoder_forward,
    gelu_forward,
    layernorm_forward,
    matmul_forward,
    rmsnorm_forward,
)
from ..gpt.model import BLOCK_PARAMETERS, GPTConfig, gpt_forward, init_params
from ..gradcheck import CheckTable, compare_arrays, relative_error
from .checking import NotAttempted, NotYet, Verdict, attempt, run_check
from .layer_checks import (
    LAYER_SHAPES,
    TOL,
    LayerCase,
    label_at,
    random_buffers,
    readers_calls_with,
    run_layer_check,
    torch_vjp,
    what_to_write,
    wrong_thirds,
)
from .questions import Choice, Number

__all__ = [
    "check_layernorm_backward",
    "check_rmsnorm_backward",
    "check_gelu_backward",
    "check_crossentropy_softmax_backward",
    "check_attention_backward",
    "check_encoder_backward",
    "check_matmul_backward",
    "check_gpt_backward",
    "TOL",
    "GPT_TOL",
    "SELF_CHECKS",
]

# TOL, a layer's gradient's relative tolerance, is layer_checks'.
# The whole model, float64, against PyTorch (gpt.reference's tolerance).
GPT_TOL = 1e-10


#: What the layers' checks have seen so far, for the capstone's hints: the
#: number the chapter gave each layer's exercise, and the layer each of the
#: reader's functions (by name) was checked as.
_EXERCISE_OF: dict[str, int] = {}
_LAYER_OF: dict[str, str] = {}


def _run_layer_check(layer: str, fn, exercise: int) -> Verdict:
    """The verdict of the layer's check (`_LAYER_CHECKS`) on fn."""
    _EXERCISE_OF[layer] = exercise
    name = getattr(fn, "__name__", "")
    if name.isidentifier():
        _LAYER_OF[name] = layer
    return run_check(exercise, _LAYER_CHECKS[layer], fn)


def _mean_c(a: np.ndarray) -> np.ndarray:
    """The mean over the C channels of each position, kept as (B, T, 1)."""
    return a.mean(axis=-1, keepdims=True)


# ---- layernorm ---------------------------------------------------------------


def _layernorm_case(rng, B: int, T: int, C: int) -> LayerCase:
    inp = 2.0 * rng.standard_normal((B, T, C)) + rng.standard_normal((B, T, 1))
    weight = 1.0 + 0.5 * rng.standard_normal(C)
    bias = 0.5 * rng.standard_normal(C)
    dout = rng.standard_normal((B, T, C))
    _, cache = layernorm_forward(inp, weight, bias)

    def forward(inp, weight, bias):
        import torch.nn.functional as F

        return F.layer_norm(inp, (C,), weight, bias, LAYERNORM_EPS)

    grads = torch_vjp(forward, {"inp": inp, "weight": weight, "bias": bias}, dout)
    _, _, mean, rstd = cache
    xhat = (inp - mean) * rstd
    g = dout * weight

    mean_term, var_term = _mean_c(g), xhat * _mean_c(g * xhat)
    path_mean = "the path through the mean"
    path_var = "the path through the variance"
    bugs = {
        "dinp": [
            (
                rstd * (g - var_term),
                f"it lacks the - mean(g) term ({path_mean})",
            ),
            (
                rstd * (g - mean_term),
                f"it lacks the - xhat * mean(g * xhat) term ({path_var})",
            ),
            (
                rstd * g,
                f"it lacks both the - mean(g) term ({path_mean}) and the "
                f"- xhat * mean(g * xhat) term ({path_var}): rstd * g is "
                "only the direct path",
            ),
            (
                g - mean_term - var_term,
                "it lacks the factor rstd in front: every path moves xhat "
                "through (x - mean) * rstd",
            ),
            (
                rstd * (dout - _mean_c(dout) - xhat * _mean_c(dout * xhat)),
                "it uses dout where g = dout * weight belongs: the gradient "
                "reaches xhat through the weight",
            ),
            (
                rstd * (g - mean_term + var_term),
                "the xhat * mean(g * xhat) term has the wrong sign: it is "
                "subtracted",
            ),
        ],
        "dweight": [
            (
                (dout * inp).sum(axis=(0, 1)),
                "it multiplies dout by the input x; the weight multiplies "
                "xhat = (x - mean) * rstd",
            ),
            (
                dout.sum(axis=(0, 1)),
                "it is dbias's formula: the weight multiplies xhat, so "
                "dweight sums dout * xhat",
            ),
        ],
        "dbias": [
            (
                (dout * xhat).sum(axis=(0, 1)),
                "it is dweight's formula: the bias is added, so dbias sums "
                "dout alone",
            ),
        ],
    }
    return LayerCase(
        buffers=random_buffers(rng, dinp=(B, T, C), dweight=(C,), dbias=(C,)),
        dout=dout,
        cache=cache,
        expected={
            "dinp": grads["inp"],
            "dweight": grads["weight"],
            "dbias": grads["bias"],
        },
        shapes=f"shapes: dinp and dout (B, T, C) = {(B, T, C)}, "
        f"dweight and dbias (C,) = {(C,)}",
        label=label_at(B=B, T=T, C=C),
        bugs=bugs,
    )


def _check_layernorm(fn) -> None:
    todo = what_to_write(fn, "(dinp, dweight, dbias, dout, cache)")
    rng = np.random.default_rng(3)
    cases = [_layernorm_case(rng, *s) for s in LAYER_SHAPES]
    run_layer_check(fn, cases, todo)


def check_layernorm_backward(fn, *, exercise: int) -> Verdict:
    """fn(dinp, dweight, dbias, dout, cache), like `layers.layernorm_backward`:
    it must add the three gradients into the buffers."""
    return _run_layer_check("layernorm", fn, exercise)


# ---- rmsnorm -----------------------------------------------------------------


def _rmsnorm_case(rng, B: int, T: int, C: int) -> LayerCase:
    inp = 2.0 * rng.standard_normal((B, T, C)) + rng.standard_normal((B, T, 1))
    weight = 1.0 + 0.5 * rng.standard_normal(C)
    dout = rng.standard_normal((B, T, C))
    _, cache = rmsnorm_forward(inp, weight)

    def forward(inp, weight):
        import torch.nn.functional as F

        return F.rms_norm(inp, (C,), weight, eps=1e-5)

    grads = torch_vjp(forward, {"inp": inp, "weight": weight}, dout)
    _, _, rstd = cache
    xhat = inp * rstd
    g = dout * weight

    term = xhat * _mean_c(g * xhat)
    bugs = {
        "dinp": [
            (
                rstd * (g - _mean_c(g) - term),
                "it subtracts mean(g), layernorm's path through the mean; "
                "RMSNorm subtracts no mean, so that path is not there",
            ),
            (
                rstd * g,
                "it lacks the - xhat * mean(g * xhat) term, the path through "
                "mean(x^2)",
            ),
            (
                g - term,
                "it lacks the factor rstd in front: both paths move xhat "
                "through x * rstd",
            ),
            (
                rstd * (dout - xhat * _mean_c(dout * xhat)),
                "it uses dout where g = dout * weight belongs: the gradient "
                "reaches xhat through the weight",
            ),
            (
                rstd * (g + term),
                "the xhat * mean(g * xhat) term has the wrong sign: it is "
                "subtracted",
            ),
        ],
        "dweight": [
            (
                (dout * inp).sum(axis=(0, 1)),
                "it multiplies dout by the input x; the weight multiplies "
                "xhat = x * rstd",
            ),
            (
                dout.sum(axis=(0, 1)),
                "that sums dout alone, a bias's gradient (RMSNorm has none); "
                "the weight multiplies xhat, so dweight sums dout * xhat",
            ),
        ],
    }
    return LayerCase(
        buffers=random_buffers(rng, dinp=(B, T, C), dweight=(C,)),
        dout=dout,
        cache=cache,
        expected={"dinp": grads["inp"], "dweight": grads["weight"]},
        shapes=f"shapes: dinp and dout (B, T, C) = {(B, T, C)}, "
        f"dweight (C,) = {(C,)}",
        label=label_at(B=B, T=T, C=C),
        bugs=bugs,
    )


def _check_rmsnorm(fn) -> None:
    todo = what_to_write(fn, "(dinp, dweight, dout, cache)")
    rng = np.random.default_rng(4)
    cases = [_rmsnorm_case(rng, *s) for s in LAYER_SHAPES]
    run_layer_check(fn, cases, todo)


def check_rmsnorm_backward(fn, *, exercise: int) -> Verdict:
    """fn(dinp, dweight, dout, cache), like `layers.rmsnorm_backward` with a
    weight: it must add both gradients into the buffers."""
    return _run_layer_check("rmsnorm", fn, exercise)


# ---- GELU --------------------------------------------------------------------


def _gelu_case(rng, B: int, T: int, C: int) -> LayerCase:
    C4 = 4 * C
    x = 1.5 * rng.standard_normal((B, T, C4))
    # where the tanh and the erf GELU's derivatives differ most (|x| = 2),
    # and far out, where tanh saturates
    x[0, 0, :6] = [-4.0, -2.0, -1.0, 1.0, 2.0, 4.0]
    dout = rng.standard_normal((B, T, C4))
    _, cache = gelu_forward(x)

    def forward(inp):
        import torch.nn.functional as F

        return F.gelu(inp, approximate="tanh")

    right = torch_vjp(forward, {"inp": x}, dout)["inp"]
    s, c3 = math.sqrt(2.0 / math.pi), 0.044715
    th = np.tanh(s * (x + c3 * x**3))
    du = s * (1.0 + 3.0 * c3 * x**2)
    erf = np.vectorize(math.erf)
    exact = 0.5 * (1.0 + erf(x / math.sqrt(2.0))) + x * np.exp(
        -0.5 * x**2
    ) / math.sqrt(2.0 * math.pi)
    bugs = {
        "dinp": [
            (
                dout * exact,
                "it is the derivative of the exact (erf) GELU, "
                "Phi(x) + x phi(x); this layer is the tanh approximation: "
                "differentiate 0.5 x (1 + tanh(u)), "
                "u = sqrt(2/pi) (x + 0.044715 x^3)",
            ),
            (
                dout * 0.5 * (1.0 + th),
                "it lacks the second term of the product rule: "
                "0.5 x (1 + tanh(u)) has two factors that depend on x, and "
                "yours holds the first factor's part only",
            ),
            (
                dout * (0.5 * (1.0 + th) + 0.5 * x * (1.0 - th**2)),
                "it lacks the chain rule's du/dx: tanh'(u) is a slope in u, "
                "and u depends on x",
            ),
            (
                dout
                * (
                    0.5 * (1.0 + th)
                    + 0.5 * x * (1.0 - th**2) * s * (1.0 + c3 * x**2)
                ),
                "its du/dx lacks a factor 3: the derivative of x^3 is 3 x^2",
            ),
            (
                dout * (0.5 * (1.0 + th) + 0.5 * x * (1.0 - th) * du),
                "tanh'(u) = 1 - tanh(u)^2 (squared)",
            ),
            (
                0.5 * (1.0 + th) + 0.5 * x * (1.0 - th**2) * du,
                "it is the local derivative alone: multiply it by dout "
                "(the chain rule)",
            ),
        ]
    }
    return LayerCase(
        buffers=random_buffers(rng, dinp=(B, T, C4)),
        dout=dout,
        cache=cache,
        expected={"dinp": right},
        shapes=f"shapes: dinp and dout (B, T, 4C) = {(B, T, C4)}",
        label=label_at(B=B, T=T, C=C),
        bugs=bugs,
    )


def _check_gelu(fn) -> None:
    todo = what_to_write(fn, "(dinp, dout, cache)")
    rng = np.random.default_rng(4)
    cases = [_gelu_case(rng, *s) for s in LAYER_SHAPES]
    run_layer_check(fn, cases, todo)


def check_gelu_backward(fn, *, exercise: int) -> Verdict:
    """fn(dinp, dout, cache), like `layers.gelu_backward` (the tanh GELU):
    it must add dinp into its buffer."""
    return _run_layer_check("gelu", fn, exercise)


# ---- softmax + cross-entropy -------------------------------------------------


def _crossentropy_case(rng, B: int, T: int, V: int) -> LayerCase:
    logits = 2.0 * rng.standard_normal((B, T, V))
    targets = rng.integers(0, V, size=(B, T))
    dloss = 0.7  # not 1: a backward must use it
    _, cache = crossentropy_softmax_forward(logits.copy(), targets)

    def forward(logits, targets):
        import torch.nn.functional as F

        return F.cross_entropy(logits.reshape(B * T, V), targets.reshape(-1))

    right = torch_vjp(forward, {"logits": logits, "targets": targets}, dloss)
    probs = cache[0]
    onehot = np.eye(V)[targets]
    # `dlogits[:, :, targets] -= ...` takes, at every position, the columns
    # of all B*T targets
    every_target = np.zeros(V)
    every_target[np.unique(targets)] = 1.0
    bugs = {
        "dlogits": [
            (
                (probs - every_target) * dloss / (B * T),
                "the one-hot part is subtracted at every target of the "
                "batch at each position: `dlogits[:, :, targets]` picks all "
                "B*T target columns for every (b, t). Index each position "
                "with its own target: `dlogits[np.arange(B)[:, None], "
                "np.arange(T), targets]`",
            ),
            (
                (probs - onehot) * dloss,
                "it is not divided by B*T: the loss is the mean over the "
                "B*T positions",
            ),
            (
                (probs - onehot) * dloss / B,
                "it is divided by B only: the loss is the mean over all "
                "B*T positions",
            ),
            (
                (probs - onehot) * dloss / T,
                "it is divided by T only: the loss is the mean over all "
                "B*T positions",
            ),
            (
                probs * dloss / (B * T),
                "it lacks the - onehot(targets) part: subtract "
                "dloss / (B*T) at each position's target",
            ),
            (
                probs * dloss / (B * T) - onehot,
                "the one-hot part is not scaled: both parts are multiplied "
                "by dloss / (B*T)",
            ),
            (
                (probs - onehot) / (B * T),
                "it ignores dloss: multiply by it (the chain rule; dloss is "
                "1 only for the loss itself, here it is 0.7)",
            ),
        ]
    }
    return LayerCase(
        buffers=random_buffers(rng, dlogits=(B, T, V)),
        dout=dloss,
        cache=cache,
        expected={"dlogits": right["logits"]},
        shapes=f"shapes: dlogits (B, T, V) = {(B, T, V)}, dloss a float "
        f"({dloss}), targets (B, T) = {(B, T)}",
        label=label_at(B=B, T=T, V=V),
        bugs=bugs,
    )


def _check_crossentropy(fn) -> None:
    todo = what_to_write(fn, "(dlogits, dloss, cache)")
    rng = np.random.default_rng(5)
    cases = [_crossentropy_case(rng, *s) for s in LAYER_SHAPES]
    run_layer_check(fn, cases, todo)


def check_crossentropy_softmax_backward(fn, *, exercise: int) -> Verdict:
    """fn(dlogits, dloss, cache), like `layers.crossentropy_softmax_backward`:
    it must add dlogits into its buffer."""
    return _run_layer_check("crossentropy", fn, exercise)


# ---- attention ---------------------------------------------------------------


def _attention_dinp(
    inp,
    dout,
    n_head,
    *,
    mask=True,
    softmax_term=True,
    scale=True,
    heads="right",
    dv_transpose=True,
    dk_transpose=True,
):
    """dinp of causal attention, and of its classic wrong versions: without
    the mask in the recomputed weights, without the softmax VJP's
    -sum(datt * att) term, without 1/sqrt(hs), with the heads split or
    merged without the transpose (heads="split" or "merge"), with att in
    place of att^T for dv, with ds in place of ds^T for dk."""
    B, T, C3 = inp.shape
    C = C3 // 3
    hs = C // n_head

    def split(x, right=True):  # (B, T, C) -> (B, NH, T, hs)
        if right:
            return x.reshape(B, T, n_head, hs).transpose(0, 2, 1, 3)
        return x.reshape(B, n_head, T, hs)

    def merge(x, right=True):  # (B, NH, T, hs) -> (B, T, C)
        if right:
            return x.transpose(0, 2, 1, 3).reshape(B, T, C)
        return x.reshape(B, T, C)

    q, k, v = (split(x) for x in np.split(inp, 3, axis=-1))
    s = q @ k.swapaxes(-1, -2) / math.sqrt(hs)
    if mask:
        s = s + np.triu(np.full((T, T), -np.inf), k=1)
    att = np.exp(s - s.max(axis=-1, keepdims=True))
    att /= att.sum(axis=-1, keepdims=True)
    dy = split(dout, heads != "split")
    dv = (att.swapaxes(-1, -2) if dv_transpose else att) @ dy
    datt = dy @ v.swapaxes(-1, -2)
    if softmax_term:
        ds = att * (datt - (datt * att).sum(axis=-1, keepdims=True))
    else:
        ds = att * datt
    if scale:
        ds = ds / math.sqrt(hs)
    dq = ds @ k
    dk = (ds.swapaxes(-1, -2) if dk_transpose else ds) @ q
    return np.concatenate(
        [merge(d, heads != "merge") for d in (dq, dk, dv)], axis=-1
    )


def _attention_case(rng, B: int, T: int, NH: int, hs: int) -> LayerCase:
    C = NH * hs
    inp = rng.standard_normal((B, T, 3 * C))
    dout = rng.standard_normal((B, T, C))
    _, cache = attention_forward(inp, NH)

    def forward(inp):
        from ..gpt.reference import torch_attention

        return torch_attention(inp, NH)

    right = torch_vjp(forward, {"inp": inp}, dout)["inp"]
    heads = (
        "it splits or merges the heads in the wrong order: (B, T, C) -> "
        "reshape (B, T, NH, hs) -> transpose (B, NH, T, hs), and back with "
        "the inverse transpose, then reshape"
    )
    variants = [
        (
            {"mask": False},
            "it matches attention without the causal mask: a position t "
            "never looks at t2 > t, so those weights are 0 and so is their "
            "gradient (use the cached att, or mask the recomputed scores)",
        ),
        (
            {"softmax_term": False},
            "it lacks the - sum_j(datt * att) term of the softmax's VJP "
            "(the row's dot product)",
        ),
        (
            {"scale": False},
            "it lacks the 1/sqrt(hs) of the scores s = q k^T / sqrt(hs), in "
            "dq and in dk",
        ),
        ({"heads": "split"}, heads),
        ({"heads": "merge"}, heads),
        ({"dv_transpose": False}, "dv = att^T dy: att transposed"),
        ({"dk_transpose": False}, "dk = ds^T q / sqrt(hs): ds transposed"),
    ]
    bugs = {
        "dinp": [
            (_attention_dinp(inp, dout, NH, **flags), what)
            for flags, what in variants
        ]
    }
    return LayerCase(
        buffers=random_buffers(rng, dinp=(B, T, 3 * C)),
        dout=dout,
        cache=cache,
        expected={"dinp": right},
        shapes=f"shapes: dinp (B, T, 3C) = {(B, T, 3 * C)}, dout (B, T, C) = "
        f"{(B, T, C)}, att (B, NH, T, T) = {(B, NH, T, T)}, n_head = {NH}",
        label=label_at(B=B, T=T, NH=NH, hs=hs),
        bugs=bugs,
    )


def _check_attention(fn) -> None:
    todo = what_to_write(fn, "(dinp, dout, cache)")
    rng = np.random.default_rng(6)
    cases = [
        _attention_case(rng, *s)
        for s in [(2, 4, 2, 3), (1, 5, 3, 2), (3, 1, 2, 2)]
    ]
    run_layer_check(fn, cases, todo, detail=wrong_thirds)


def check_attention_backward(fn, *, exercise: int) -> Verdict:
    """fn(dinp, dout, cache), like `layers.attention_backward` (causal,
    multi-head, on the qkv matmul's output): it must add dinp (B, T, 3C)."""
    return _run_layer_check("attention", fn, exercise)


# ---- encoder: token and position embeddings ----------------------------------


def _encoder_case(rng, inp, V: int, maxT: int, C: int) -> LayerCase:
    B, T = inp.shape
    wte, wpe = rng.standard_normal((V, C)), rng.standard_normal((maxT, C))
    dout = rng.standard_normal((B, T, C))
    _, cache = encoder_forward(wte, wpe, inp)

    def forward(wte, wpe, inp):
        return wte[inp] + wpe[:T]

    right = torch_vjp(forward, {"wte": wte, "wpe": wpe, "inp": inp}, dout)
    buffers = random_buffers(rng, dwte=(V, C), dwpe=(maxT, C))
    last_row = np.zeros((V, C))
    last_row[inp] += dout  # what a buffered fancy-index add keeps
    assigned = buffers["dwte"].copy()
    assigned[inp] = dout  # what dwte[inp] = dout does
    wpe_first, wpe_mean = np.zeros((maxT, C)), np.zeros((maxT, C))
    wpe_first[:T], wpe_mean[:T] = dout[0], dout.mean(axis=0)
    bugs = {
        "dwte": [
            (
                last_row,
                "with repeated tokens it keeps one contribution per row: "
                "dwte[idx] += dout is a buffered fancy-index add, so a token "
                "seen k times gets only one of its k rows of dout; use "
                "np.add.at(dwte, idx, dout)",
            ),
            (
                assigned - buffers["dwte"],
                "it assigns the rows (dwte[idx] = dout): a row must collect "
                "the gradient already in it and one dout[b, t] for every "
                "time its token occurs; use np.add.at(dwte, idx, dout)",
            ),
        ],
        "dwpe": [
            (
                wpe_first,
                "it takes the first sequence only: wpe[t] is used by every "
                "sequence of the batch, so sum dout over b",
            ),
            (wpe_mean, "it averages over the batch: sum dout over b"),
        ],
    }
    return LayerCase(
        buffers=buffers,
        dout=dout,
        cache=cache,
        expected={"dwte": right["wte"], "dwpe": right["wpe"]},
        shapes=f"shapes: dwte (V, C) = {(V, C)}, dwpe (maxT, C) = "
        f"{(maxT, C)}, dout (B, T, C) = {(B, T, C)}, inp (B, T) = {(B, T)}",
        label=label_at(B=B, T=T, C=C),
        bugs=bugs,
    )


def _check_encoder(fn) -> None:
    todo = what_to_write(fn, "(dwte, dwpe, dout, cache)")
    rng = np.random.default_rng(7)
    cases = [
        # token 1 four times, 3 twice; T shorter than wpe
        _encoder_case(rng, np.array([[1, 3, 1, 1], [3, 0, 1, 5]]), 7, 6, 3),
        # one sequence, T = maxT, token 2 three times
        _encoder_case(rng, np.array([[2, 4, 2, 0, 2]]), 5, 5, 4),
        # T = 1: every sequence reads the same row of wpe; token 3 twice
        _encoder_case(rng, np.array([[3], [1], [3]]), 4, 3, 2),
    ]
    run_layer_check(fn, cases, todo)


def check_encoder_backward(fn, *, exercise: int) -> Verdict:
    """fn(dwte, dwpe, dout, cache), like `layers.encoder_backward`: it must add
    the embeddings' gradients into the buffers (the cache is inp (B, T); its
    tokens repeat, and T is shorter than wpe)."""
    return _run_layer_check("encoder", fn, exercise)


# ---- matmul ------------------------------------------------------------------


def _matmul_case(
    rng, B: int, T: int, C: int, OC: int, with_bias: bool, label: str
) -> LayerCase:
    inp = rng.standard_normal((B, T, C))
    weight = rng.standard_normal((OC, C))
    bias = rng.standard_normal(OC) if with_bias else None
    dout = rng.standard_normal((B, T, OC))
    _, cache = matmul_forward(inp, weight, bias)

    def forward(inp, weight, bias=None):
        import torch.nn.functional as F

        return F.linear(inp, weight, bias)

    inputs = {"inp": inp, "weight": weight}
    if with_bias:
        inputs["bias"] = bias
    grads = torch_vjp(forward, inputs, dout)
    inp2, dout2 = inp.reshape(-1, C), dout.reshape(-1, OC)
    bugs = {
        "dinp": [
            (
                dout @ weight.T,
                "it multiplies dout by weight^T, the forward's own factor; "
                "the backward multiplies by its transpose (only a square "
                "weight lets the shapes fit)",
            )
        ]
        if C == OC
        else [],
        "dweight": [
            (
                inp2.T @ dout2,
                "it is transposed: dweight has the shape of weight, (OC, C) "
                "(only a square weight lets the transposed one fit)",
            )
        ]
        if C == OC
        else [],
        "dbias": [
            (
                dout2.mean(axis=0),
                "it averages over the positions: sum dout over B and T",
            )
        ],
    }
    bugs["dweight"].append(
        (
            dout[0].T @ inp[0],
            "it sums over the first sequence only: sum over all B*T positions",
        )
    )
    buffers = random_buffers(rng, dinp=(B, T, C), dweight=(OC, C), dbias=(OC,))
    expected = {"dinp": grads["inp"], "dweight": grads["weight"]}
    if with_bias:
        expected["dbias"] = grads["bias"]
    else:
        buffers["dbias"] = None
    return LayerCase(
        buffers=buffers,
        dout=dout,
        cache=cache,
        expected=expected,
        shapes=f"shapes: dinp (B, T, C) = {(B, T, C)}, dweight (OC, C) = "
        f"{(OC, C)}, dbias (OC,) = {(OC,)}"
        + ("" if with_bias else " or None")
        + f", dout (B, T, OC) = {(B, T, OC)}",
        label=f"{label}, {label_at(B=B, T=T, C=C, OC=OC)}",
        on_error=""
        if with_bias
        else "skip a buffer that is None: `if dbias is not None: dbias += ...`",
        bugs=bugs,
    )


def _check_matmul(fn) -> None:
    todo = what_to_write(fn, "(dinp, dweight, dbias, dout, cache)")
    rng = np.random.default_rng(8)
    cases = [
        _matmul_case(rng, 2, 3, 4, 4, True, "with a square weight"),
        _matmul_case(rng, 3, 1, 4, 5, True, "with a weight (OC, C)"),
        _matmul_case(
            rng,
            1,
            4,
            6,
            3,
            False,
            "with dbias=None (no bias, as the LM head)",
        ),
    ]
    run_layer_check(fn, cases, todo)


def check_matmul_backward(fn, *, exercise: int) -> Verdict:
    """fn(dinp, dweight, dbias, dout, cache), like `layers.matmul_backward`
    (out = inp @ weight^T + bias, weight (OC, C)): it must add the three
    gradients, and skip dbias when it is None (a matmul without bias, like
    the LM head)."""
    return _run_layer_check("matmul", fn, exercise)


#: Each layer's check, raising NotYet or NotAttempted as `run_check`
#: expects, by layer.
_LAYER_CHECKS = {
    "layernorm": _check_layernorm,
    "rmsnorm": _check_rmsnorm,
    "gelu": _check_gelu,
    "crossentropy": _check_crossentropy,
    "attention": _check_attention,
    "encoder": _check_encoder,
    "matmul": _check_matmul,
}


# ---- the whole model ---------------------------------------------------------


def _capstone_model():
    """A 2-layer float64 model with every parameter random (no ones or zeros
    that would hide a bug), a batch whose tokens repeat, T < block_size."""
    config = GPTConfig(vocab_size=11, block_size=6, n_layer=2, n_head=2, n_embd=8)
    rng = np.random.default_rng(9)
    params = init_params(config, seed=9, dtype=np.float64)
    for name, p in params.items():
        if name in ("ln1w", "ln2w", "lnfw"):
            p[...] = 1.0 + 0.3 * rng.standard_normal(p.shape)
        elif p.ndim == 1 or name.endswith("b"):
            p[...] = 0.3 * rng.standard_normal(p.shape)
        else:
            fan_in = p.shape[-1]
            p[...] = rng.standard_normal(p.shape) / math.sqrt(fan_in)
    idx = rng.integers(0, config.vocab_size, size=(2, 5))
    targets = rng.integers(0, config.vocab_size, size=(2, 5))
    return config, params, idx, targets


def _backward_order(config: GPTConfig) -> list[tuple[str, int | None]]:
    """(parameter, block) in the order the backward computes them: the final
    layernorm, the blocks from the last down to the first (each from its MLP
    to its first layernorm), then the embeddings."""
    order = [("lnfw", None), ("lnfb", None)]
    # (ln1w, ln1b, qkvw, qkvb, ...) backward, each weight before its bias
    pairs = [BLOCK_PARAMETERS[i : i + 2] for i in range(0, 12, 2)]
    for l in reversed(range(config.n_layer)):
        order += [(name, l) for pair in reversed(pairs) for name in pair]
    return order + [("wpe", None), ("wte", None)]


def _wte_parts(params, config, idx, targets):
    """PyTorch's wte gradient split into the LM head's and the embedding's."""
    import torch

    from ..gpt.reference import torch_gpt_loss

    tp = {n: torch.tensor(p, requires_grad=True) for n, p in params.items()}
    tp["lm_head"] = torch.tensor(params["wte"], requires_grad=True)
    torch_gpt_loss(
        tp, config, torch.as_tensor(idx), torch.as_tensor(targets)
    ).backward()
    return tp["lm_head"].grad.numpy(), tp["wte"].grad.numpy()


#: Each layer's backward by its number of arguments: its cache is the last.
_ARGUMENTS = {
    "matmul": 5,
    "gelu": 3,
    "crossentropy": 3,
    "layernorm": 5,
    "encoder": 4,
    "attention": 3,
}


def _layer_caches(cache, config: GPTConfig) -> dict[int, tuple]:
    """Every layer cache of a `gpt_forward` cache, for `readers_calls_with`:
    id -> (the cache, (its layer, how the reader reaches it), the number of
    its layer's backward's arguments)."""
    top = {
        "loss": "crossentropy",
        "lm_head": "matmul",
        "lnf": "layernorm",
        "encoder": "encoder",
    }
    block = {
        "ln1": "layernorm",
        "qkv": "matmul",
        "att": "attention",
        "attproj": "matmul",
        "ln2": "layernorm",
        "fc": "matmul",
        "gelu": "gelu",
        "fcproj": "matmul",
    }
    found = [(cache[k], layer, f'cache["{k}"]') for k, layer in top.items()]
    for l in range(config.n_layer):
        c = cache["blocks"][l]
        found += [
            (c[k], layer, f'cache["blocks"][{l}]["{k}"]')
            for k, layer in block.items()
        ]
    return {
        id(obj): (obj, (layer, reach), _ARGUMENTS[layer])
        for obj, layer, reach in found
    }


#: The layers by the names the capstone's hints give them.
_LAYER_NAMES = {
    "matmul": "matmul",
    "gelu": "GELU",
    "crossentropy": "softmax cross-entropy",
    "layernorm": "layernorm",
    "encoder": "embeddings",
    "attention": "attention",
    "rmsnorm": "RMSNorm",
}


def _blame_a_layer(calls, capstone) -> tuple[str, str, str]:
    """What to tell of the first of the reader's layers, in the order the
    capstone called them, that is miswired, still a stub or fails its own
    exercise's check (run quietly): (the hint, the layer function's name,
    "miswired", "stub" or "fails"); ("", "", "") when every one passes.

    A call's layer is known by the cache it was given (its exercise by the
    number the chapter gave that layer's check).  A function given the
    cache of another layer than its own (the layer whose check it ran
    earlier, or else the one it was first called for) is miswired."""
    cap = getattr(capstone, "__name__", "your gpt_backward")
    first_layer: dict[int, str] = {}
    tried: set[int] = set()
    for call in calls:
        fn, (layer, reach) = call.function, call.about
        if fn is None:
            continue
        name = getattr(fn, "__name__", "function")
        own = _LAYER_OF.get(name) or first_layer.setdefault(id(fn), layer)
        if own != layer:
            text = (
                f"{cap} passes {reach}, a {_LAYER_NAMES[layer]}'s cache, to "
                f"your {name}, your {_LAYER_NAMES[own]} backward: look at "
                "that call"
            )
            return text, name, "miswired"
        if id(fn) in tried:
            continue
        tried.add(id(fn))
        number = _EXERCISE_OF.get(layer)
        ex = f"exercise {number}" if number is not None else "its own exercise"
        yours = f"your {name}, which {cap} calls first with {reach},"
        try:
            _LAYER_CHECKS[layer](fn)
        except NotAttempted:
            text = f"{yours} is still a stub: write it in {ex} first"
            return text, name, "stub"
        except NotYet as error:
            text = f"{yours} does not pass {ex} yet: {error}. Fix it there first"
            return text, name, "fails"
    return "", "", ""


def _check_gpt(fn) -> None:
    """The capstone's check: the reader's model backward against PyTorch's
    autograd; when it fails, the first of the reader's layers it called
    that is miswired or fails its own exercise is named
    (`_blame_a_layer`)."""
    todo = what_to_write(fn, "(params, config, cache) from your layers")
    config, params, idx, targets = _capstone_model()
    _, cache = gpt_forward(params, config, idx, targets)
    before = {n: p.copy() for n, p in params.items()}
    try:
        with readers_calls_with(_layer_caches(cache, config)) as calls:
            grads = attempt(fn, params, config, cache, todo=todo)
        return _compare_gpt_grads(grads, params, before, config, idx, targets)
    except (NotAttempted, NotYet) as error:
        blame, blamed, kind = _blame_a_layer(calls, fn)
        if not blame:
            raise
        if isinstance(error, NotAttempted):
            raise NotYet(blame) from None
        if isinstance(error, _WrongGradient):
            if kind == "fails":
                blame += (
                    ": the gradients after its first call inherit its error "
                    "(the first wrong one going back from the loss: "
                    f"{error.first})"
                )
            raise NotYet(blame) from None
        # the reader's code raised: say what, unless the layer named did
        inside = error.where and error.where[-1].startswith(f"in {blamed},")
        text = blame if inside else f"{blame}; and then {error}"
        raise NotYet(text, where=error.where) from None


class _WrongGradient(NotYet):
    """A gradient of the capstone differs from PyTorch's; `first` names the
    first going back from the loss."""

    def __init__(self, hint: str, first: str):
        super().__init__(hint)
        self.first = first


def _compare_gpt_grads(grads, params, before, config, idx, targets):
    """NotYet at the first thing wrong with the reader's gradients (their
    form, then each against PyTorch's, in the order the backward computes
    them); the table of every relative error when all are right."""
    from ..gpt.reference import torch_forward_backward

    if not isinstance(grads, dict):
        raise NotYet(
            "return a dict of gradients, one per parameter (like "
            f"params), not a {type(grads).__name__}"
        )
    missing = [n for n in params if n not in grads]
    if missing:
        raise NotYet(
            f"return one gradient per parameter: {', '.join(missing)} "
            "missing from your dict"
        )
    for name, p in params.items():
        g = grads[name]
        if not isinstance(g, np.ndarray) or g.shape != p.shape:
            got = g.shape if isinstance(g, np.ndarray) else type(g).__name__
            raise NotYet(
                f"grads[{name!r}] must be an array of the shape of "
                f"params[{name!r}], {p.shape}; got {got}"
            )
        if not np.isfinite(g).all():
            raise NotYet(f"grads[{name!r}] holds nan or inf")
    changed = [n for n in params if not np.array_equal(params[n], before[n])]
    if changed:
        raise NotYet(
            f"your gpt_backward changed params[{changed[0]!r}] in place: "
            "a backward reads the parameters and leaves them as they are"
        )
    _, right = torch_forward_backward(params, config, idx, targets)
    wrong = []
    for name, block in _backward_order(config):
        ours, theirs = grads[name], right[name]
        if block is not None:
            ours, theirs = ours[block], theirs[block]
        error = relative_error(ours, theirs)
        if error >= GPT_TOL:
            wrong.append((name, block, error))
    if not wrong:
        return CheckTable(
            "the gradients vs PyTorch's autograd (float64)",
            [compare_arrays(n, grads[n], right[n], GPT_TOL) for n in params],
        )
    name, block, error = wrong[0]
    where = (
        f"grads[{name!r}][{block}] (block {block})"
        if block is not None
        else f"grads[{name!r}]"
    )
    first = f"{where}, largest relative error {error:.1e}"
    text = (
        f"{where} is wrong: largest relative error {error:.1e} "
        f"(tolerance {GPT_TOL:.0e})"
    )
    if name == "wte":
        head, embedding = _wte_parts(params, config, idx, targets)
        if relative_error(grads["wte"], head) < GPT_TOL:
            text += (
                "; it holds the LM head's part only: add the embedding's "
                "(encoder_backward)"
            )
        elif relative_error(grads["wte"], embedding) < GPT_TOL:
            text += (
                "; it holds the embedding's part only: add the LM "
                "head's (the matmul backward of logits = lnf @ wte^T)"
            )
    elif len(wrong) > 1:
        text += (
            f"; it is the first wrong gradient going back from the loss "
            f"(the {len(wrong) - 1} wrong after it may only inherit its "
            "error): look at the backward calls between it and the "
            "gradient computed just before it"
        )
    raise _WrongGradient(text, first)


def check_gpt_backward(fn, *, exercise: int) -> Verdict:
    """fn(params, config, cache) -> a dict of gradients, one per parameter,
    like `model.gpt_backward`: compared with PyTorch's autograd on a whole
    2-layer model in float64 (`cache` from the book's `gpt_forward`).  When
    it passes, a table of every parameter's relative error follows the
    verdict.  When it fails and one of the reader's layers that fn calls
    is still a stub or fails its own exercise's check, the hint names that
    layer first."""
    return run_check(exercise, _check_gpt, fn)


# ---- self-checks -------------------------------------------------------------

#: The chapter's self-check questions, shown by `widgets.self_check`.
SELF_CHECKS = {
    "wte-used-twice": Choice(
        "The token embedding wte is used twice: by the encoder (wte[idx]) and by "
        "the tied LM head (logits = h @ wte.T). What must its gradient be?",
        choices=[
            "the LM head's part only: it comes last",
            "the sum of both parts",
            "the mean of both parts",
            "the encoder's part only: wte is its parameter",
        ],
        answer=1,
        hint="One array used in two places: what did chapter 1 do with a value "
        "used twice?",
        explanation="Both uses contribute, and the contributions add (+=): "
        "the head's matmul weight gradient (exercise 1's matmul backward) and "
        "the encoder's scatter-add (exercise 5); the capstone, exercise 7, "
        "adds both into one buffer.",
    ),
    "gpt2-small-parameters": Number(
        "GPT-2 small has n_layer = 12, C = 768, V = 50257 and block size 1024. "
        "How many parameters does it have? (Use 12C² + 13C per block, the "
        "embeddings and the final layernorm.)",
        answer=12 * (12 * 768**2 + 13 * 768) + 50257 * 768 + 1024 * 768 + 2 * 768,
        hint="Per block 12C² + 13C; then V·C for wte (tied with the LM head), "
        "T·C for wpe and 2C for the final layernorm.",
        explanation="12 · 7,087,872 + 38,597,376 + 786,432 + 1,536 = "
        "124,439,808: GPT-2 small's 124M (chapter 9 runs it).",
    ),
}
