"""Checks for the exercises of "An MLP by hand" (chapter 5).

    check_mlp_backward(backward_fn)        a fixed backward of ThreeLayerMLP
    check_input_gradient(input_gradient)   dL/dX of the cached batch
    check_tanh_ratio(answer)               the per-layer ratio of a tanh net

Gradients are compared with centered differences (`gradcheck`) on a small
model with non-zero biases.  Each check prints "Exercise N: ..." and
returns a `Verdict` (see `checking`).
"""

from __future__ import annotations

import numpy as np

from ..deep_mlp import layer_gradient_norms, per_layer_ratio
from ..gradcheck import numerical_param_gradients
from ..mlp3 import ThreeLayerMLP
from ..numerics import one_hot
from .checking import (
    NotYet,
    Verdict,
    attempt,
    close,
    mismatched,
    require_filled,
    run_check,
)

__all__ = ["check_mlp_backward", "check_input_gradient", "check_tanh_ratio"]

TOL = 1e-6  # centered differences agree to about 1e-9 here


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


def check_mlp_backward(backward_fn, exercise: int = 1) -> Verdict:
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


def check_input_gradient(input_gradient, exercise: int = 2) -> Verdict:
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


def check_tanh_ratio(answer, exercise: int = 3) -> Verdict:
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
