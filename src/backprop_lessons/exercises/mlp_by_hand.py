"""Checks for the exercises of "An MLP by hand" (chapter 5).

    check_mlp_intermediates(fn)      fn(model, Y): every gradient of the
                                     backward, one line each (Backprop Ninja)
    check_batchnorm_backward(fn)     fn(dinp, dweight, dbias, dout, cache),
                                     like `gpt.layers.batchnorm_backward`
    check_mlp_backward(fn)           fn(model, Y): a fixed backward of
                                     ThreeLayerMLP, every parameter
    check_input_gradient(fn)         fn(model, Y): dL/dX of the cached batch
    check_tanh_ratio(fn)             fn(): the per-layer ratio of a tanh net
                                     and whether the gradient vanishes

Every answer is a function of the reader's that the check calls, so that a
line of theirs that raises is quoted in the verdict and never stops a
notebook's Run All.  The MLP checks run the reader's function on models and
batches of their own (held out: shapes the page does not use, one with
square weights, where a transpose keeps its shape, one with a single
example and a hidden layer of width 1) and compare with what PyTorch's
autograd keeps for the same arrays in float64 (`retain_grad()`; PyTorch is
imported when a check runs).  `check_mlp_intermediates` prints a table of
the eleven gradients, as Karpathy's `cmp` does in "Becoming a Backprop
Ninja", and names the first that differs; when it matches a classic slip
(the 1/B of the mean left out, a transpose, the sigmoid's slope as H
alone, ...) the hint says which.  `check_batchnorm_backward` runs on
`layer_checks`, as chapter 6's layers do: random non-zero buffers, several
(B, C) shapes, one with B = 2, PyTorch's `batch_norm` in training mode as
the reference, and batch normalization's classic slips recognised (the
path through the mean or the variance left out, the unbiased variance,
layernorm's axis, the statistics taken as constants as at evaluation time,
`=` for `+=`).  When a check recognises no slip, its hint points to the
exercise's Hint 3 instead of printing the formula.

Each check prints "Exercise N: ..." and returns a `Verdict` (see
`checking`).  `SELF_CHECKS` holds the chapter's self-check questions
(`questions`).
"""

from __future__ import annotations

import re
import traceback

import numpy as np

from ..deep_mlp import layer_gradient_norms, per_layer_ratio
from ..gpt.layers import BATCHNORM_EPS, batchnorm_backward, batchnorm_forward
from ..gradcheck import close, scaled_difference
from ..mlp3 import ThreeLayerMLP
from ..numerics import one_hot, sigmoid
from .checking import (
    AUTOGRAD,
    NotAttempted,
    NotYet,
    Verdict,
    attempt,
    require_filled,
    run_check,
)
from .layer_checks import (
    SEE_HINT_3,
    LayerCase,
    label_at,
    random_buffers,
    run_layer_check,
    torch_vjp,
    what_to_write,
)
from .questions import Choice, Number

#: What the backwards the reader writes here may not call: the book's own
#: backward of the model (it returns every gradient), and PyTorch's autograd.
BY_HAND = (ThreeLayerMLP.backward, AUTOGRAD)

__all__ = [
    "INTERMEDIATES",
    "check_mlp_intermediates",
    "check_batchnorm_backward",
    "check_mlp_backward",
    "check_input_gradient",
    "check_tanh_ratio",
    "SELF_CHECKS",
]

#: What a hint says when the check recognises no slip.

# The gradients of the backward, in the order it computes them: name ->
# (the array of the forward it belongs to, its shape in the legend).
INTERMEDIATES = {
    "dZ3": ("Z3", "(B, d3)"),
    "dW3": ("W3", "(d2, d3)"),
    "db3": ("b3", "(d3,)"),
    "dH2": ("H2", "(B, d2)"),
    "dZ2": ("Z2", "(B, d2)"),
    "dW2": ("W2", "(d1, d2)"),
    "db2": ("b2", "(d2,)"),
    "dH1": ("H1", "(B, d1)"),
    "dZ1": ("Z1", "(B, d1)"),
    "dW1": ("W1", "(d0, d1)"),
    "db1": ("b1", "(d1,)"),
}
# Relative to the larger of 1 and the largest entry (`gradcheck.close`):
# float64 NumPy and PyTorch agree to about 1e-16 here; the nearest slip
# (a factor B + 1 for B in a batch of 8) is off by more than 1e-4.
INTERMEDIATES_TOL = 1e-10

#: The models and batches the MLP checks run the reader's function on:
#: (d0, d1, d2, d3), B and a seed.  A general one first (every dimension
#: different, so its diagnoses are the most telling); then square weights
#: W2 and W3 with B = d1 = d2 = d3, where a transpose, W for W^T or a sum
#: over the wrong axis keeps its shape; then a single example and a hidden
#: layer of width 1.
MLP_CASES = [((4, 5, 6, 3), 8, 11), ((3, 4, 4, 4), 4, 12), ((2, 3, 1, 2), 1, 13)]


def _model_and_batch(sizes, B: int, seed: int):
    """A ThreeLayerMLP of `sizes` with random non-zero biases, a batch X
    (B, d0) with one-hot labels Y (B, d3), and the forward run on it."""
    model = ThreeLayerMLP(*sizes, seed=seed)
    rng = np.random.default_rng(seed + 100)
    for name in ("b1", "b2", "b3"):  # away from the zero initial biases
        model.params[name][:] = 0.5 * rng.standard_normal(
            model.params[name].shape
        )
    X = rng.standard_normal((B, sizes[0]))
    Y = one_hot(rng.integers(0, sizes[3], size=B), sizes[3])
    model.forward(X)
    return model, X, Y


def _torch_gradients(model: ThreeLayerMLP, X, Y) -> dict[str, np.ndarray]:
    """The model's forward in PyTorch float64, with `retain_grad()` on every
    array the backward passes through; name -> its gradient: the eleven of
    INTERMEDIATES and dX, the gradient for the inputs."""
    import torch

    t = {
        n: torch.tensor(p, dtype=torch.float64, requires_grad=True)
        for n, p in model.params.items()
    }
    a = {"X": torch.tensor(X, dtype=torch.float64, requires_grad=True)}
    a["Z1"] = a["X"] @ t["W1"] + t["b1"]
    a["H1"] = torch.sigmoid(a["Z1"])
    a["Z2"] = a["H1"] @ t["W2"] + t["b2"]
    a["H2"] = torch.sigmoid(a["Z2"])
    a["Z3"] = a["H2"] @ t["W3"] + t["b3"]
    for name in ("Z1", "H1", "Z2", "H2", "Z3"):
        a[name].retain_grad()
    Y_t = torch.tensor(Y, dtype=torch.float64)
    loss = -(Y_t * torch.log_softmax(a["Z3"], dim=1)).sum() / X.shape[0]
    loss.backward()
    a.update(t)
    grads = {name: a[of].grad.numpy() for name, (of, _) in INTERMEDIATES.items()}
    grads["dX"] = a["X"].grad.numpy()
    return grads


def _fits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape


def _mlp_slips(name: str, model: ThreeLayerMLP, Y, right: dict) -> list:
    """The classic slips of the gradient `name`, each (what it computes,
    what is wrong), built from the right gradients above it (the first wrong
    gradient is the one diagnosed, so every one above it is right)."""
    c, p = model.cache, model.params
    B = c["X"].shape[0]
    H = {"0": c["X"], "1": c["H1"], "2": c["H2"]}
    layer = name[-1]
    if name == "dZ3":
        Y_hat = c["Y_hat"]
        slips = [
            (Y_hat - Y, "it lacks the 1/B of the mean over the batch"),
            ((Y_hat - Y) / B**2, "it divides by B twice"),
            (
                Y_hat * (1 - Y_hat) / B,
                "it is softmax's diagonal slope alone: with the cross-entropy "
                "the two derivatives combine (look at the worked example's "
                "slopes beside its probabilities and labels)",
            ),
            (Y_hat / B, "it leaves out the labels Y"),
        ]
        if Y.shape[1] != B:
            slips.append(
                (
                    (Y_hat - Y) / Y.shape[1],
                    "it divides by the number of classes d3; the mean runs "
                    "over the B examples",
                )
            )
        return slips
    delta = right[f"dZ{layer}"]
    if name.startswith("dW"):
        below, above = H[str(int(layer) - 1)], c.get(f"H{layer}")
        slips = [
            (delta.T @ below, "it is the transpose of the right one"),
            (
                below.T @ delta / B,
                "it divides by B again: the 1/B of the mean is in dZ3 already",
            ),
        ]
        if above is not None:
            slips.append(
                (
                    above.T @ delta,
                    f"it uses the layer's output H{layer}; W{layer} multiplies "
                    "the layer's input",
                )
            )
            slips.append(
                (
                    below.T @ right[f"dH{layer}"],
                    f"it uses the gradient at H{layer}, before the sigmoid's "
                    f"slope; W{layer} makes Z{layer}",
                )
            )
        return slips
    if name.startswith("db"):
        slips = [
            (
                delta.mean(axis=0),
                "it averages over the batch: every example adds its own share",
            ),
            (delta.sum(axis=1), "it sums over the wrong axis"),
        ]
        if f"dH{layer}" in right:
            slips.append(
                (
                    right[f"dH{layer}"].sum(axis=0),
                    f"it sums the gradient at H{layer}, before the sigmoid's "
                    "slope",
                )
            )
        return slips
    if name.startswith("dH"):
        W, up = p[f"W{int(layer) + 1}"], right[f"dZ{int(layer) + 1}"]
        if W.shape[0] != W.shape[1]:
            return []
        return [
            (
                up @ W,
                f"it uses W{int(layer) + 1} without its transpose (the shapes "
                "fit only because the weight is square)",
            ),
        ]
    h, dh = H[layer], right[f"dH{layer}"]
    s = sigmoid(h)
    return [
        (
            dh * h,
            f"it multiplies by H{layer} alone: not the sigmoid's slope",
        ),
        (dh * (1 - h), f"it multiplies by (1 - H{layer}) alone"),
        (
            dh,
            "it passes the gradient through unchanged: the sigmoid's slope "
            "is missing",
        ),
        (
            h * (1 - h),
            f"it is the sigmoid's slope alone: it must multiply the gradient "
            f"arriving from above, dH{layer}",
        ),
        (
            dh * s * (1 - s),
            f"it applies the sigmoid to H{layer}, which is sigmoid(Z{layer}) "
            "already",
        ),
    ]


def _what_is_wrong(name, ours, right_value, slips) -> str:
    """The slip `ours` matches, or an empty string."""
    for wrong, what in slips:
        if _fits(wrong, right_value) and close(ours, wrong, INTERMEDIATES_TOL):
            return what
    if close(ours, -right_value, INTERMEDIATES_TOL):
        return "it has the wrong sign"
    return ""


def _row(name: str, shape: str, diff: str, close_: str) -> str:
    return f"{name:<5} {shape:<8} {diff:<17} {close_}"


def _where(sizes, B) -> str:
    d0, d1, d2, d3 = sizes
    return f"B = {B}, d0 = {d0}, d1 = {d1}, d2 = {d2}, d3 = {d3}"


def _compare_intermediates(written, right, model, Y, where: str):
    """The table of the reader's gradients against `right`, and the hint of
    the first that differs (None when every written one is right)."""
    rows, first_wrong = [], None
    for number, (name, (of, legend)) in enumerate(INTERMEDIATES.items()):
        if name not in written:
            rows.append(_row(name, "-", "(not written)", "-"))
            continue
        try:
            ours = np.asarray(written[name], dtype=np.float64)
        except (TypeError, ValueError):
            ours = None
        if ours is None or ours.shape != right[name].shape:
            got = "not an array" if ours is None else str(ours.shape)
            rows.append(_row(name, got, "wrong shape", "no"))
            first_wrong = first_wrong or (
                f"{name} has shape {got}; it must be {legend} = "
                f"{right[name].shape}, the shape of {of} ({where})"
            )
            continue
        ok = close(ours, right[name], INTERMEDIATES_TOL)
        if ok:
            text = f"< {INTERMEDIATES_TOL:.0e}"
        elif np.isfinite(ours).all():
            diff = scaled_difference(ours, right[name])
            text = f"{diff:.1e} > {INTERMEDIATES_TOL:.0e}"
        else:
            text = "nan or inf"
        rows.append(_row(name, str(ours.shape), text, "yes" if ok else "no"))
        if ok or first_wrong is not None:
            continue
        above = any(n in written for n in list(INTERMEDIATES)[:number])
        what = _what_is_wrong(
            name, ours, right[name], _mlp_slips(name, model, Y, right)
        )
        if not what:
            own = "look at its own line" if above else "look at its line"
            what = f"{'the ones above it are right, so ' if above else ''}{own}; "
            what += SEE_HINT_3
        first_wrong = (
            f"{name} is the first that differs from PyTorch's at {where} "
            f"(largest difference {text}): {what}"
        )
    head = _row("name", "shape", "max diff", "close")
    table = "\n".join(
        [
            f"the gradients vs PyTorch's retained .grad (float64), at {where}",
            head,
            "-" * len(head),
            *rows,
        ]
    )
    return table, first_wrong


def check_mlp_intermediates(fn, *, exercise: int) -> Verdict:
    """fn(model, Y) -> the reader's gradients by name (dZ3, dW3, db3, dH2,
    dZ2, dW2, db2, dH1, dZ1, dW1, db1; see INTERMEDIATES), each an array or
    `...` while not written yet, computed from `model.cache` (X, H1, H2,
    Y_hat of the last forward) and `model.params` for the one-hot labels Y
    (B, d3).  It runs on the models and batches of MLP_CASES; each gradient
    is compared with PyTorch's retained gradient of the same array.  A table
    of them all is printed for the first case with a wrong gradient (the
    first case when all are right), then the verdict, which names the first
    gradient that differs."""

    def check(fn):
        todo = what_to_write(fn, "(model, Y): replace each ... with its gradient")
        tables = []
        for sizes, B, seed in MLP_CASES:
            model, X, Y = _model_and_batch(sizes, B, seed)
            right = _torch_gradients(model, X, Y)
            try:
                grads = attempt(fn, model, Y, todo=todo)
            except NotYet as error:
                unwritten = _unwritten_in_failing_line(error.__cause__)
                if unwritten:
                    raise NotYet(
                        f"the line that raised uses {unwritten}, still written "
                        "as ...: write the gradients in order, from the top",
                        where=error.where,
                    ) from None
                if isinstance(error.__cause__, ValueError):  # shapes that
                    raise NotYet(  # do not fit a matmul or a broadcast
                        f"{error} (at {_where(sizes, B)}; the shapes in Hint 2 "
                        "say what each gradient is made of)",
                        where=error.where,
                    ) from None
                raise
            grads = _named_gradients(grads, todo)
            table, wrong = _compare_intermediates(
                grads, right, model, Y, _where(sizes, B)
            )
            tables.append(table)
            if wrong:
                print(table)
                raise NotYet(wrong)
            missing = [n for n in INTERMEDIATES if n not in grads]
            if missing:
                print(table)
                raise NotYet(
                    f"the {len(grads)} written so far are right; still to "
                    f"write: {', '.join(missing)}"
                )
        print(tables[0])

    return run_check(exercise, check, fn, refuse=BY_HAND)


def _unwritten_in_failing_line(error) -> str:
    """The gradients (by INTERMEDIATES' names) still `...` that the line
    where `error` was raised uses, "dZ3 and dH2"; "" when none.  The frame
    is found by its locals: the reader's function is the one that binds
    such names."""
    found, tb = "", getattr(error, "__traceback__", None)
    while tb is not None:
        line = traceback.extract_tb(tb, limit=1)[0].line or ""
        unwritten = [
            n
            for n, v in tb.tb_frame.f_locals.items()
            if n in INTERMEDIATES and v is Ellipsis
        ]
        names = [n for n in unwritten if re.search(rf"\b{n}\b", line)]
        found = " and ".join(names) or found
        tb = tb.tb_next
    return found


def _named_gradients(grads, todo: str) -> dict:
    """The reader's dict without the names still written as `...`;
    NotAttempted when none is written."""
    if not isinstance(grads, dict):
        raise NotYet(
            "return a dict of your gradients by name, e.g. "
            "dict(dZ3=dZ3, dW3=dW3, ...)"
        )
    unknown = [n for n in grads if n not in INTERMEDIATES]
    if unknown:
        raise NotYet(
            f"unknown name {unknown[0]!r}: the gradients are "
            f"{', '.join(INTERMEDIATES)}"
        )
    written = {
        n: g for n, g in grads.items() if g is not None and g is not Ellipsis
    }
    if not written:
        raise NotAttempted(todo)
    return written


# ---- batch normalization -----------------------------------------------------

#: The (B, C) shapes the batch-norm check runs the reader's backward on: a
#: general one first (its diagnoses are the most telling), then a batch of
#: two (where xhat is +-1 in every channel and the right dinp nearly
#: vanishes), a single channel, and a square one (B = C, where a sum or a
#: mean over the wrong axis keeps its shape).
BATCHNORM_SHAPES = [(6, 4), (2, 3), (5, 1), (4, 4)]

_UNBIASED = (
    "it uses the unbiased variance (divided by B - 1, Bessel's correction); "
    "the forward normalizes with the biased one, divided by B (the cache's "
    "rstd), as PyTorch does in training"
)
_LAYERNORM_AXIS = (
    "it normalizes over the C channels of each example, layernorm's axis; "
    "batch norm's mean and variance run over the B examples of each channel"
)
_AVERAGES = "it averages over the B examples: every example adds its own share"
_OVER_RSTD = "its xhat divides by rstd, which is 1/sqrt(var + eps) already"
_CONSTANT_STATISTICS = (
    "it treats the mean and the variance as constants, as the running "
    "estimates are at evaluation time; in training they are this batch's own "
    "statistics, which every x of the channel moves (the paths through the "
    "mean and the variance are missing)"
)


def _mean_b(a: np.ndarray) -> np.ndarray:
    """The mean over the B examples of each channel, kept as (1, C)."""
    return a.mean(axis=0, keepdims=True)


def _normalized(inp, axis: int, ddof: int = 0):
    """xhat and rstd of inp normalized over `axis` (ddof=1: the unbiased
    variance)."""
    mean = inp.mean(axis=axis, keepdims=True)
    var = ((inp - mean) ** 2).sum(axis=axis, keepdims=True) / (
        inp.shape[axis] - ddof
    )
    rstd = 1.0 / np.sqrt(var + BATCHNORM_EPS)
    return (inp - mean) * rstd, rstd


def _norm_dinp(g, xhat, rstd, axis: int) -> np.ndarray:
    """rstd * (g - mean(g) - xhat * mean(g * xhat)), the means over `axis`:
    the gradient of a normalization over that axis."""
    mean_g = g.mean(axis=axis, keepdims=True)
    return rstd * (g - mean_g - xhat * (g * xhat).mean(axis=axis, keepdims=True))


def _batchnorm_slips(inp, weight, mean, rstd, dout) -> dict:
    """Batch normalization's classic slips, gradient by gradient."""
    B, C = inp.shape
    xhat = (inp - mean) * rstd
    g = dout * weight
    sum_g, sum_gx = (
        g.sum(axis=0, keepdims=True),
        (g * xhat).sum(axis=0, keepdims=True),
    )
    xhat_u, rstd_u = _normalized(inp, axis=0, ddof=1)
    xhat_c, rstd_c = _normalized(inp, axis=1)  # layernorm's axis
    over_rstd = (inp - mean) / rstd
    dinp = [
        (
            rstd * (g - xhat * _mean_b(g * xhat)),
            "it lacks the path through the mean: each x of a channel moves "
            "the batch's mean, and the mean moves every output of the channel",
        ),
        (
            rstd * (g - _mean_b(g)),
            "it lacks the path through the variance: each x of a channel "
            "moves the batch's variance, and with it every output's rstd",
        ),
        (rstd * g, _CONSTANT_STATISTICS),
        (
            g / np.sqrt(1.0 + BATCHNORM_EPS),
            "it uses running statistics (their starting values, mean 0 and "
            "variance 1) where training normalizes with the batch's own, the "
            "cache's mean and rstd",
        ),
        (
            g,
            "it passes g = dout * weight through unchanged: the factor rstd "
            "and the paths through the batch's mean and variance are missing",
        ),
        (_norm_dinp(g, xhat_u, rstd_u, axis=0), _UNBIASED),
        (rstd * (g - _mean_b(g) - xhat * sum_gx / (B - 1)), _UNBIASED),
        (  # the exact backward of a forward with the unbiased variance
            rstd_u
            * (
                g
                - _mean_b(g)
                - xhat_u * (g * xhat_u).sum(axis=0, keepdims=True) / (B - 1)
            ),
            _UNBIASED,
        ),
        (_norm_dinp(g, xhat, rstd, axis=1), _LAYERNORM_AXIS),
        (_norm_dinp(g, xhat_c, rstd_c, axis=1), _LAYERNORM_AXIS),
        (
            rstd * (g - sum_g - xhat * sum_gx),
            "it sums over the B examples where the mean and the variance "
            "average: its paths through them are B times too large",
        ),
        (
            g - _mean_b(g) - xhat * _mean_b(g * xhat),
            "it lacks the factor rstd = 1/sqrt(var + eps) in front",
        ),
        (
            _norm_dinp(dout, xhat, rstd, axis=0),
            "it uses dout where the gradient at xhat belongs: xhat reaches "
            "the output through the weight",
        ),
        (
            rstd * (g - _mean_b(g) + xhat * _mean_b(g * xhat)),
            "its path through the variance has the wrong sign",
        ),
        (
            rstd * (g + _mean_b(g) - xhat * _mean_b(g * xhat)),
            "its path through the mean has the wrong sign",
        ),
        (
            _norm_dinp(g, over_rstd, rstd, axis=0),
            _OVER_RSTD,
        ),
        (
            _norm_dinp(g, inp * rstd, rstd, axis=0),
            "its xhat leaves out the mean: x is centred by the batch's mean "
            "before it is scaled",
        ),
    ]
    dweight = [
        (
            (dout * inp).sum(axis=0),
            "it multiplies dout by the input x; the weight multiplies xhat",
        ),
        (
            dout.sum(axis=0),
            "it is dbias's sum: the weight multiplies xhat",
        ),
        ((dout * xhat_u).sum(axis=0), _UNBIASED),
        ((dout * xhat_c).sum(axis=0), _LAYERNORM_AXIS),
        (
            (dout * xhat).mean(axis=0),
            _AVERAGES,
        ),
        (
            (dout * over_rstd).sum(axis=0),
            _OVER_RSTD,
        ),
        (
            (dout * (inp - mean)).sum(axis=0),
            "its xhat leaves out rstd: x - mean is scaled to make xhat",
        ),
    ]
    dbias = [
        (
            (dout * xhat).sum(axis=0),
            "it is dweight's sum: the bias is added, so it receives dout alone",
        ),
        (
            dout.mean(axis=0),
            _AVERAGES,
        ),
        (
            (dout * weight).sum(axis=0),
            "it multiplies by the weight: the bias is added after the weight, "
            "so it receives dout alone",
        ),
    ]
    if B == C:  # a sum over the wrong axis keeps its shape
        channels = (
            "it sums over the C channels of each example; a channel's {} is "
            "used by the B examples of the batch"
        )
        dweight.append(((dout * xhat).sum(axis=1), channels.format("weight")))
        dbias.append((dout.sum(axis=1), channels.format("bias")))
    return {"dinp": dinp, "dweight": dweight, "dbias": dbias}


def _batchnorm_case(rng, B: int, C: int) -> LayerCase:
    inp = 2.0 * rng.standard_normal((B, C)) + 3.0 * rng.standard_normal((1, C))
    weight = 1.0 + 0.5 * rng.standard_normal(C)
    bias = 0.5 * rng.standard_normal(C)
    dout = rng.standard_normal((B, C))
    _, cache = batchnorm_forward(inp, weight, bias)

    def forward(inp, weight, bias):
        import torch.nn.functional as F

        return F.batch_norm(
            inp, None, None, weight, bias, training=True, eps=BATCHNORM_EPS
        )

    grads = torch_vjp(forward, {"inp": inp, "weight": weight, "bias": bias}, dout)
    _, _, mean, rstd = cache
    return LayerCase(
        buffers=random_buffers(rng, dinp=(B, C), dweight=(C,), dbias=(C,)),
        dout=dout,
        cache=cache,
        expected={f"d{name}": grad for name, grad in grads.items()},
        shapes=f"shapes: dinp and dout (B, C) = {(B, C)}, dweight and dbias "
        f"(C,) = {(C,)}, mean and rstd (1, C) = {(1, C)}",
        label=label_at(B=B, C=C),
        bugs=_batchnorm_slips(inp, weight, mean, rstd, dout),
    )


def check_batchnorm_backward(fn, *, exercise: int) -> Verdict:
    """fn(dinp, dweight, dbias, dout, cache), like
    `gpt.layers.batchnorm_backward`: cache = (inp, weight, mean, rstd) from
    `batchnorm_forward`, inp (B, C) normalized over the B examples of each
    channel (training mode), mean and rstd (1, C); it must add the three
    gradients into the buffers.  Graded against PyTorch's
    `F.batch_norm(training=True)` in float64 on BATCHNORM_SHAPES."""

    def check(fn):
        todo = what_to_write(fn, "(dinp, dweight, dbias, dout, cache)")
        rng = np.random.default_rng(5)
        cases = [_batchnorm_case(rng, B, C) for B, C in BATCHNORM_SHAPES]
        run_layer_check(fn, cases, todo)

    return run_check(exercise, check, fn, refuse=(batchnorm_backward, AUTOGRAD))


# ---- find the bug, the input gradient, tanh ----------------------------------


def _parameter_gradients(right: dict) -> dict:
    """W1, b1, ... from the gradients by name dW1, db1, ..."""
    return {name[1:]: g for name, g in right.items() if name[1] in "Wb"}


def check_mlp_backward(backward_fn, *, exercise: int) -> Verdict:
    """backward_fn(model, Y) -> a dict of gradients for every parameter,
    read from `model.cache` after `model.forward(X)`, on the models and
    batches of MLP_CASES."""

    def check(backward_fn):
        todo = "write the fixed backward and run its cell"
        for sizes, B, seed in MLP_CASES:
            model, X, Y = _model_and_batch(sizes, B, seed)
            right = _parameter_gradients(_torch_gradients(model, X, Y))
            grads = attempt(backward_fn, model, Y, todo=todo)
            if not isinstance(grads, dict) or set(grads) != set(model.params):
                raise NotYet(f"return a dict with the keys {list(model.params)}")
            wrong = [
                n
                for n in model.params
                if not close(grads[n], right[n], INTERMEDIATES_TOL)
            ]
            if wrong:
                raise NotYet(
                    f"{', '.join(wrong)} disagree with PyTorch's gradients at "
                    f"{_where(sizes, B)}: find the line of the backward that "
                    f"{'all of them depend' if len(wrong) > 1 else 'it depends'}"
                    " on"
                )

    return run_check(exercise, check, backward_fn, refuse=BY_HAND)


#: The input gradient's check runs on a general model and on one whose first
#: weight is square (d0 = d1), where W1 for W1^T and a step too few keep the
#: shape of X.
INPUT_CASES = [((3, 5, 4, 3), 6, 21), ((4, 4, 3, 2), 5, 22)]


def _input_gradient_slips(model, right) -> list:
    """The classic slips of dL/dX, from the right gradients of the layers;
    those that keep X's shape only when W1 is square, on such a W1 only."""
    c, W1 = model.cache, model.params["W1"]
    slips = [
        (right["dH1"] @ W1.T, "it leaves out the first sigmoid's slope"),
        (
            right["dZ1"] @ W1.T * c["X"] * (1 - c["X"]),
            "it multiplies by a sigmoid's slope at the inputs: X enters the "
            "first layer as it is, with no sigmoid before it",
        ),
        (c["X"].shape[0] * right["dX"], "it lacks the 1/B of the mean"),
        (-right["dX"], "it has the wrong sign"),
    ]
    if W1.shape[0] == W1.shape[1]:
        slips += [
            (
                right["dZ1"] @ W1,
                "it uses W1 without its transpose (the shapes fit only "
                "because W1 is square here)",
            ),
            (
                right["dZ1"],
                "it stops at dZ1, the gradient at Z1: one step more, through "
                "the first layer's weight",
            ),
            (
                right["dH1"],
                "it stops at dH1: two steps more, through the first sigmoid "
                "and the first layer's weight",
            ),
        ]
    return slips


def check_input_gradient(input_gradient, *, exercise: int) -> Verdict:
    """input_gradient(model, Y) -> dL/dX (B, d0) for the cached batch, on
    the models and batches of INPUT_CASES."""

    def check(input_gradient):
        todo = "write input_gradient(model, Y) and run its cell"
        for sizes, B, seed in INPUT_CASES:
            model, X, Y = _model_and_batch(sizes, B, seed)
            right = _torch_gradients(model, X, Y)
            dX = attempt(input_gradient, model, Y, todo=todo)
            dX = np.asarray(dX, dtype=np.float64)
            if dX.shape != X.shape:
                raise NotYet(
                    f"dX must have the shape of X, (B, d0) = {X.shape}, got "
                    f"{dX.shape} ({_where(sizes, B)})"
                )
            if close(dX, right["dX"], INTERMEDIATES_TOL):
                continue
            what = next(
                (
                    text
                    for wrong, text in _input_gradient_slips(model, right)
                    if _fits(wrong, dX) and close(dX, wrong, INTERMEDIATES_TOL)
                ),
                SEE_HINT_3,
            )
            raise NotYet(
                f"dX disagrees with PyTorch's at {_where(sizes, B)} (largest "
                f"difference {scaled_difference(dX, right['dX']):.1e}): {what}"
            )

    return run_check(exercise, check, input_gradient, refuse=BY_HAND)


#: What the tanh measurement uses; the message of a wrong ratio names it.
TANH_NETWORK = {
    "depth": 20,
    "width": 64,
    "activation": "tanh",
    "init": "xavier",
    "seed": 0,
}


def check_tanh_ratio(fn, *, exercise: int) -> Verdict:
    """fn() -> {"tanh_ratio": the measured per-layer ratio of a 20-layer
    tanh net (Xavier, width 64, seed 0), "vanishes": True or False}."""

    def check(fn):
        todo = "fill in tanh_ratio and vanishes in tanh_answer() and run the cell"
        answer = require_filled(attempt(fn, todo=todo), todo)
        if not isinstance(answer, dict) or set(answer) != {
            "tanh_ratio",
            "vanishes",
        }:
            raise NotYet('return a dict with "tanh_ratio" and "vanishes"')
        measured = per_layer_ratio(layer_gradient_norms(**TANH_NETWORK))
        try:
            ratio = float(answer["tanh_ratio"])
        except (TypeError, ValueError):
            raise NotYet(
                "tanh_ratio must be a number: per_layer_ratio's result"
            ) from None
        if not np.isclose(ratio, measured, rtol=1e-9):
            sigmoid_ratio = per_layer_ratio(
                layer_gradient_norms(**{**TANH_NETWORK, "activation": "sigmoid"})
            )
            what = (
                "that is the sigmoid network's ratio"
                if np.isclose(ratio, sigmoid_ratio, rtol=1e-9)
                else "it is not the ratio of that network"
            )
            raise NotYet(
                f"{what}: measure tanh_ratio with layer_gradient_norms(depth=20, "
                "width=64, activation='tanh', init='xavier', seed=0) and "
                "per_layer_ratio"
            )
        if not isinstance(answer["vanishes"], (bool, np.bool_)):
            raise NotYet("vanishes must be True or False")
        if bool(answer["vanishes"]) is not bool(measured < 0.5):
            raise NotYet(
                "look at the ratio again: does the gradient shrink "
                "geometrically toward the input?"
            )

    return run_check(exercise, check, fn)


# ---- self-checks -------------------------------------------------------------

#: The chapter's self-check questions, shown by `widgets.self_check`.
SELF_CHECKS = {
    "softmax-cross-entropy-gradient": Choice(
        "For softmax followed by mean cross-entropy over a batch of B rows, what "
        "is the gradient with respect to the logits Z3?",
        choices=["(Ŷ - Y) / B", "Ŷ - Y", "(Y - Ŷ) / B", "Ŷ (1 - Ŷ) / B"],
        answer=0,
        hint="The two derivatives combine into something simple; the mean over "
        "the batch contributes a factor.",
        explanation="Softmax and cross-entropy differentiate together to Ŷ - Y "
        "per row, and the mean over B rows divides by B: "
        "δ3 = (Ŷ - Y) / B.",
    ),
    "sigmoid-layers-shrink": Number(
        "The sigmoid's slope σ'(z) = σ(z)(1 - σ(z)) is at most 0.25. With unit "
        "weights, the gradient that comes back through 10 sigmoid layers is at "
        "most what fraction of the gradient that went in? (A number, to 3 "
        "significant digits.)",
        answer=0.25**10,
        rel_tolerance=5e-3,
        hint="Each layer multiplies the gradient by at most 0.25.",
        explanation="0.25 ** 10 ≈ 9.54e-7: ten sigmoid layers can shrink the "
        "gradient a million-fold, which is why the first layers of a "
        "deep sigmoid network barely learn.",
    ),
    "batchnorm-two-examples": Number(
        "Batch norm in training mode, one channel, a batch of B = 2 examples "
        "with x = (3, 7), weight 1, bias 0, and ε taken as 0. What is the "
        "output for the second example?",
        answer=1,
        hint="The mean is 5; the biased variance averages the two squared "
        "deviations.",
        explanation="mean 5, variance ((−2)² + 2²)/2 = 4, so the outputs are "
        "(−2/2, 2/2) = (−1, 1). With two examples the outputs are ±1 whatever "
        "x is: they carry only which example is larger, and the gradient for "
        "x all but vanishes (exactly 0 at ε = 0).",
    ),
}
