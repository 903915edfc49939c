"""Checks for the exercises of "An MLP by hand" (chapter 5).

    check_mlp_intermediates(grads, model, X, Y)
                                           every gradient of the backward,
                                           one line each (Backprop Ninja)
    check_mlp_backward(backward_fn)        a fixed backward of ThreeLayerMLP
    check_input_gradient(input_gradient)   dL/dX of the cached batch
    check_tanh_ratio(answer)               the per-layer ratio of a tanh net

`check_mlp_intermediates` compares each of the reader's gradients, in the
order of the backward, with the `.grad` that PyTorch retains for the same
array in float64 (PyTorch is imported when it runs), and prints a table of
them all, as Karpathy's `cmp` does in "Becoming a Backprop Ninja".  The
other checks compare with centered differences (`gradcheck`) on a small
model with non-zero biases.  Each check prints "Exercise N: ..." and
returns a `Verdict` (see `checking`).

`SELF_CHECKS` holds the chapter's self-check questions (`questions`).
"""

from __future__ import annotations

import numpy as np

from ..deep_mlp import layer_gradient_norms, per_layer_ratio
from ..gradcheck import close, numerical_param_gradients, scaled_difference
from ..mlp3 import ThreeLayerMLP
from ..numerics import one_hot
from .checking import (
    NotAttempted,
    NotYet,
    Verdict,
    attempt,
    mismatched,
    require_filled,
    run_check,
)
from .questions import Choice, Number

__all__ = [
    "INTERMEDIATES",
    "check_mlp_intermediates",
    "check_mlp_backward",
    "check_input_gradient",
    "check_tanh_ratio",
    "SELF_CHECKS",
]

TOL = 1e-6  # centered differences agree to about 1e-9 here

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
# Relative to the largest entry (as `gradcheck.close`): float64 NumPy and
# PyTorch agree to about 1e-16 here; a wrong formula is off by 1e-2 or more.
INTERMEDIATES_TOL = 1e-10


def _torch_intermediates(model: ThreeLayerMLP, X, Y) -> dict[str, np.ndarray]:
    """The model's forward in PyTorch float64, with `retain_grad()` on every
    array the backward passes through; name -> its gradient (dZ3, dW3, ...)."""
    import torch

    t = {
        n: torch.tensor(p, dtype=torch.float64, requires_grad=True)
        for n, p in model.params.items()
    }
    a = {"X": torch.tensor(X, dtype=torch.float64)}
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
    return {name: a[of].grad.numpy() for name, (of, _) in INTERMEDIATES.items()}


def _intermediate_row(name: str, shape: str, diff: str, close_: str) -> str:
    return f"{name:<5} {shape:<8} {diff:<17} {close_}"


def check_mlp_intermediates(grads, model, X, Y, *, exercise: int) -> Verdict:
    """grads: the reader's gradients by name (dZ3, dW3, db3, dH2, dZ2, dW2,
    db2, dH1, dZ1, dW1, db1; see INTERMEDIATES), each an array, or `...`
    while not written yet.  Each is compared with PyTorch's retained
    gradient of the same array for `model` (a ThreeLayerMLP) on inputs X
    (B, d0) and labels Y (integers (B,) or one-hot (B, d3)); a table of all
    of them is printed, then the verdict, which names the first gradient
    that differs, with its largest difference."""
    if not isinstance(model, ThreeLayerMLP):
        raise TypeError(
            "check_mlp_intermediates: model must be a ThreeLayerMLP, got "
            f"{type(model).__name__}"
        )
    X = np.asarray(X, dtype=np.float64)
    kept = model.cache
    try:
        model.forward(X)  # checks X's shape
        Y = model._targets(Y, "check_mlp_intermediates")  # (B, d3) rows
    finally:
        model.cache = kept

    def check(grads):
        todo = "replace each ... with its gradient, in order, and run the cell"
        if not isinstance(grads, dict):
            raise NotYet(
                "pass a dict of your gradients by name, e.g. "
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
        right = _torch_intermediates(model, X, Y)
        rows, first_wrong = [], None
        for name, (_, legend) in INTERMEDIATES.items():
            if name not in written:
                rows.append(_intermediate_row(name, "-", "(not written)", "-"))
                continue
            try:
                ours = np.asarray(written[name], dtype=np.float64)
            except (TypeError, ValueError):
                ours = None
            if ours is None or ours.shape != right[name].shape:
                got = "not an array" if ours is None else str(ours.shape)
                rows.append(_intermediate_row(name, got, "wrong shape", "no"))
                first_wrong = first_wrong or (
                    f"{name} has shape {got}; it must be {legend} = "
                    f"{right[name].shape}, the shape of "
                    f"{INTERMEDIATES[name][0]}"
                )
                continue
            diff = scaled_difference(ours, right[name])
            ok = close(ours, right[name], INTERMEDIATES_TOL)
            text = (
                f"< {INTERMEDIATES_TOL:.0e}"
                if ok
                else f"{diff:.1e} > {INTERMEDIATES_TOL:.0e}"
            )
            if not np.isfinite(ours).all():
                ok, text = False, "nan or inf"
            rows.append(
                _intermediate_row(
                    name, str(ours.shape), text, "yes" if ok else "no"
                )
            )
            if not ok and first_wrong is None:
                above = (
                    "the ones you wrote above it are right, so look at its "
                    "own line"
                    if any(
                        n in written for n in list(INTERMEDIATES)[: len(rows) - 1]
                    )
                    else "look at its line"
                )
                first_wrong = (
                    f"{name} is the first that differs from PyTorch's: "
                    f"largest difference {text} (relative to its largest "
                    f"entry); {above}"
                )
        head = _intermediate_row("name", "shape", "max diff", "close")
        print("the gradients vs PyTorch's retained .grad (float64)")
        print("\n".join([head, "-" * len(head), *rows]))
        if first_wrong:
            raise NotYet(first_wrong)
        missing = [n for n in INTERMEDIATES if n not in written]
        if missing:
            raise NotYet(
                f"the {len(written)} written so far are right; still to "
                f"write: {', '.join(missing)}"
            )

    return run_check(exercise, check, grads)


def _model_and_batch(seed: int):
    """A 3 -> 5 -> 4 -> 3 model with random biases, and a batch of 6."""
    model = ThreeLayerMLP(3, 5, 4, 3, seed=seed)
    rng = np.random.default_rng(seed + 1)
    for name in ("b1", "b2", "b3"):  # check away from the zero initial biases
        model.params[name][:] = 0.5 * rng.standard_normal(
            model.params[name].shape
        )
    X, y = rng.standard_normal((6, 3)), rng.integers(0, 3, size=6)
    return model, X, one_hot(y, 3)


def check_mlp_backward(backward_fn, *, exercise: int) -> Verdict:
    """backward_fn(model, Y) -> a dict of gradients for every parameter,
    read from `model.cache` after `model.forward(X)`."""

    def check(backward_fn):
        todo = "write the fixed backward and run its cell"
        model, X, Y = _model_and_batch(seed=5)
        model.forward(X)
        grads = attempt(backward_fn, model, Y, todo=todo)
        if not isinstance(grads, dict) or set(grads) != set(model.params):
            raise NotYet(f"return a dict with the keys {list(model.params)}")

        def loss():
            model.forward(X)
            return model.loss(Y)

        numeric = numerical_param_gradients(loss, model.params)
        wrong = mismatched(grads, numeric, TOL)
        if wrong:
            raise NotYet(
                f"{', '.join(wrong)} disagree with finite differences: find the "
                "line of the backward that all of them depend on"
            )

    return run_check(exercise, check, backward_fn)


def check_input_gradient(input_gradient, *, exercise: int) -> Verdict:
    """input_gradient(model, Y) -> dL/dX (B, d0) for the cached batch."""

    def check(input_gradient):
        todo = "write input_gradient(model, Y) and run its cell"
        model, X, Y = _model_and_batch(seed=8)
        model.forward(X)
        dX = np.asarray(attempt(input_gradient, model, Y, todo=todo))
        if dX.shape != X.shape:
            raise NotYet(
                f"dX must have the shape of X, {X.shape}, got {dX.shape}"
            )
        inputs = {"X": X.copy()}

        def loss():
            model.forward(inputs["X"])
            return model.loss(Y)

        numeric = numerical_param_gradients(loss, inputs)["X"]
        if not close(dX, numeric, TOL):
            raise NotYet(
                "dX disagrees with finite differences: "
                "take one more step of the pattern, dX = delta1 W1^T"
            )

    return run_check(exercise, check, input_gradient)


def check_tanh_ratio(answer, *, exercise: int) -> Verdict:
    """answer = {"tanh_ratio": the measured per-layer ratio of a 20-layer
    tanh net (Xavier, width 64, seed 0), "vanishes": True or False}."""

    def check(answer):
        todo = 'fill in answer = {"tanh_ratio": ..., "vanishes": ...}'
        answer = require_filled(answer, todo)
        if not isinstance(answer, dict) or set(answer) != {
            "tanh_ratio",
            "vanishes",
        }:
            raise NotYet('answer must be a dict with "tanh_ratio" and "vanishes"')
        norms = layer_gradient_norms(
            depth=20, width=64, activation="tanh", init="xavier", seed=0
        )
        measured = per_layer_ratio(norms)
        if not np.isclose(float(answer["tanh_ratio"]), measured, rtol=1e-9):
            raise NotYet(
                "measure tanh_ratio with layer_gradient_norms(depth=20, "
                "width=64, activation='tanh', init='xavier', seed=0) and "
                "per_layer_ratio"
            )
        if answer["vanishes"] is not bool(measured < 0.5):
            raise NotYet(
                "look at the ratio again: does the gradient shrink "
                "geometrically toward the input?"
            )

    return run_check(exercise, check, answer)


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
}
