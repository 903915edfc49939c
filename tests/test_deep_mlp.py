"""Tests of the deep MLP used for the vanishing-gradient experiment
(`deep_mlp`)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from backprop_lessons.deep_mlp import (
    DeepMLP,
    layer_gradient_norms,
    layer_profile,
    per_layer_ratio,
)
from backprop_lessons.gradcheck import (
    compare_gradients,
    numerical_param_gradients,
)

TORCH_ACT = {"sigmoid": torch.sigmoid, "tanh": torch.tanh, "relu": torch.relu}


def torch_grads(model, X, y):
    """The same network in PyTorch float64; autograd gradients by name."""
    t = {k: torch.tensor(v, requires_grad=True) for k, v in model.params.items()}
    H = torch.tensor(X)
    for l in range(1, model.depth + 1):
        A = TORCH_ACT[model.activation](H @ t[f"W{l}"] + t[f"b{l}"])
        H = H + A if model.residual else A
    F.cross_entropy(H @ t["W_out"] + t["b_out"], torch.tensor(y)).backward()
    return {k: v.grad.numpy() for k, v in t.items()}


@pytest.mark.parametrize("activation", ["sigmoid", "tanh", "relu"])
@pytest.mark.parametrize("residual", [False, True])
def test_gradients_match_torch(activation, residual):
    model = DeepMLP(
        6,
        5,
        n_classes=4,
        activation=activation,
        init="he",
        residual=residual,
        seed=3,
    )
    rng = np.random.default_rng(0)
    for name in model.params:
        if name.startswith("b"):
            model.params[name][:] = 0.3 * rng.standard_normal(
                model.params[name].shape
            )
    X, y = rng.standard_normal((8, 6)), rng.integers(0, 4, size=8)
    model.forward(X)
    grads = model.backward(y)
    assert list(grads) == list(model.params)
    report = compare_gradients(grads, torch_grads(model, X, y), tol=1e-12)
    assert report.passed, str(report)


def test_gradients_match_numerical():
    model = DeepMLP(
        4, 3, n_classes=3, activation="tanh", seed=1
    )  # sigmoid: W1 grads ~1e-4, noise-limited
    rng = np.random.default_rng(1)
    X, y = rng.standard_normal((5, 4)), rng.integers(0, 3, size=5)
    model.forward(X)
    grads = model.backward(y)

    def loss_fn():
        model.forward(X)
        return model.loss(y)

    assert compare_gradients(
        grads, numerical_param_gradients(loss_fn, model.params), tol=1e-7
    ).passed


def test_sigmoid_vanishes_relu_he_does_not():
    sigmoid_norms = layer_gradient_norms(
        depth=15, width=32, activation="sigmoid", seed=0
    )
    relu_norms = layer_gradient_norms(
        depth=15, width=32, activation="relu", init="he", seed=0
    )
    assert sigmoid_norms.shape == relu_norms.shape == (15,)
    assert per_layer_ratio(sigmoid_norms) < 0.3  # sigmoid' <= 1/4
    assert sigmoid_norms[0] < 1e-6 * sigmoid_norms[-1]
    assert 0.8 < per_layer_ratio(relu_norms) < 1.25
    np.testing.assert_array_equal(
        sigmoid_norms, layer_gradient_norms(depth=15, width=32, seed=0)
    )


def test_the_residual_signal_does_not_decay_the_stream_grows():
    """Chapter 5's residual sigmoid network (20 layers of 64, seed 0): the
    signal dL/dH_l arriving at each layer keeps its size (1.005 per layer);
    the 0.90 of ||dW_l|| comes from the forward, where each layer adds
    sigmoid(Z) > 0 to the stream: its RMS grows about tenfold upward and
    sigmoid' falls to about 0.06 at the top."""
    residual = layer_profile(residual=True)
    assert per_layer_ratio(residual["dH"]) == pytest.approx(1.005, abs=5e-4)
    assert per_layer_ratio(residual["dW"]) == pytest.approx(0.90, abs=5e-3)
    assert 8 < residual["H_in"][-1] / residual["H_in"][0] < 12
    assert residual["slope"][0] > 0.2 and residual["slope"][-1] < 0.07
    plain = layer_profile()
    assert per_layer_ratio(plain["dH"]) == pytest.approx(0.24, abs=5e-3)
    np.testing.assert_array_equal(plain["dW"], layer_gradient_norms())


def test_backward_keeps_the_signal_at_every_layer():
    model = DeepMLP(8, 3, 4, "tanh", seed=0)
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((5, 8)), rng.integers(0, 4, size=5)
    model.forward(X)
    grads = model.backward(y)
    dHs = model.cache["dHs"]
    assert len(dHs) == 3 and all(d.shape == (5, 8) for d in dHs)
    # the bias gradient is the signal through the activation, summed
    act_grad = 1 - model.cache["As"][0] ** 2
    np.testing.assert_allclose(grads["b1"], (dHs[0] * act_grad).sum(axis=0))


def test_per_layer_ratio_of_a_geometric_sequence():
    assert per_layer_ratio(5.0 * 0.25 ** np.arange(10)[::-1]) == pytest.approx(
        0.25, rel=1e-12
    )
    assert per_layer_ratio(np.ones(4)) == pytest.approx(1.0)
    with pytest.raises(
        ValueError, match="per_layer_ratio: need at least 2 positive norms"
    ):
        per_layer_ratio([1.0, 0.0])


def test_errors():
    with pytest.raises(ValueError, match=r"DeepMLP: activation must be one of"):
        DeepMLP(4, 2, activation="gelu")
    with pytest.raises(ValueError, match=r"DeepMLP: init must be one of"):
        DeepMLP(4, 2, init="zeros")
    with pytest.raises(
        ValueError, match=r"DeepMLP: depth must be a positive int, got 0"
    ):
        DeepMLP(4, 0)
    model = DeepMLP(4, 2, n_classes=3)
    with pytest.raises(
        RuntimeError, match=r"DeepMLP.backward: call forward\(X\) first"
    ):
        model.backward(np.array([0]))
    with pytest.raises(
        ValueError, match=r"DeepMLP.forward: X must have shape \(B, 4\)"
    ):
        model.forward(np.zeros((2, 3)))
    model.forward(np.zeros((2, 4)))
    with pytest.raises(
        ValueError, match=r"DeepMLP.backward: need 2 integer labels"
    ):
        model.backward(np.array([0, 1, 2]))
    with pytest.raises(ValueError, match=r"one_hot: labels must lie in \[0, 3\)"):
        model.backward(np.array([0, 3]))
