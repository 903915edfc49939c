"""Tests of the hand-derived three-layer MLP (`backprop_lessons.mlp3`).

The backward pass is compared with PyTorch autograd in float64 (relative error
below 1e-12 per parameter), with centered differences (below 1e-7) and, when
chapter 4's Tensor engine is importable, with that engine.  Relative errors
are `relative_error`: the largest difference relative to the arrays' scale.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from backprop_lessons.data.spirals import spirals
from backprop_lessons.gradcheck import (
    compare_gradients,
    numerical_param_gradients,
    relative_error,
)
from backprop_lessons.mlp3 import ThreeLayerMLP, accuracy, sgd_step, train
from backprop_lessons.numerics import one_hot, softmax

NAMES = ["W1", "b1", "W2", "b2", "W3", "b3"]
TORCH_TOL = 1e-12
NUMERIC_TOL = 1e-7


def make_batch(model, B, seed=1):
    """Random inputs (B, d0) and labels (B,), seeded."""
    rng = np.random.default_rng(seed)
    return rng.standard_normal((B, model.d0)), rng.integers(0, model.d3, size=B)


def randomize_biases(model, seed=2):
    """Non-zero biases, so their gradients are checked away from the initial
    zeros."""
    rng = np.random.default_rng(seed)
    for name in ("b1", "b2", "b3"):
        model.params[name][:] = 0.5 * rng.standard_normal(
            model.params[name].shape
        )


def torch_loss_and_grads(params, X, Y):
    """The same network in PyTorch float64: loss and autograd gradients, by name.

    Y is integer labels (B,) or rows of probabilities (B, K); F.cross_entropy
    takes both."""
    t = {
        k: torch.tensor(v, dtype=torch.float64, requires_grad=True)
        for k, v in params.items()
    }
    Xt = torch.tensor(X, dtype=torch.float64)
    H1 = torch.sigmoid(Xt @ t["W1"] + t["b1"])
    H2 = torch.sigmoid(H1 @ t["W2"] + t["b2"])
    logits = H2 @ t["W3"] + t["b3"]
    target = (
        torch.tensor(Y)
        if np.asarray(Y).ndim == 1
        else torch.tensor(Y, dtype=torch.float64)
    )
    loss = F.cross_entropy(logits, target)
    loss.backward()
    probs = torch.softmax(logits, dim=1).detach().numpy()
    return loss.item(), probs, {k: v.grad.numpy() for k, v in t.items()}


# ---- shapes and construction ---------------------------------------------------


def test_param_table_and_shapes():
    model = ThreeLayerMLP(4, 5, 6, 3, seed=0)
    assert list(model.params) == NAMES
    expected = {
        "W1": (4, 5),
        "b1": (5,),
        "W2": (5, 6),
        "b2": (6,),
        "W3": (6, 3),
        "b3": (3,),
    }
    assert model.param_shapes() == expected
    assert {k: v.shape for k, v in model.params.items()} == expected
    assert all(v.dtype == np.float64 for v in model.params.values())
    assert model.num_params() == 4 * 5 + 5 + 5 * 6 + 6 + 6 * 3 + 3
    assert (
        repr(model) == "ThreeLayerMLP(4 -> 5 -> 6 -> 3, 82 parameters, float64)"
    )


def test_forward_and_gradient_shapes():
    model = ThreeLayerMLP(4, 5, 6, 3, seed=0)
    X, y = make_batch(model, 7)
    P = model.forward(X)
    assert P.shape == (7, 3)
    np.testing.assert_allclose(P.sum(axis=1), 1.0, rtol=0, atol=1e-15)
    grads = model.backward(y)
    assert list(grads) == NAMES
    for name in NAMES:
        assert grads[name].shape == model.params[name].shape, name
        assert grads[name].dtype == np.float64


# ---- gradients: PyTorch, numerical, Tensor engine ------------------------------


@pytest.mark.parametrize(
    "dims,B,seed",
    [
        ((4, 5, 6, 3), 7, 0),
        ((2, 16, 8, 3), 32, 1),
        ((3, 2, 2, 2), 1, 2),
        ((5, 7, 3, 4), 10, 3),
    ],
)
def test_gradients_match_torch(dims, B, seed):
    model = ThreeLayerMLP(*dims, seed=seed)
    randomize_biases(model, seed)
    X, y = make_batch(model, B, seed + 10)
    P = model.forward(X)
    loss = model.loss(y)
    grads = model.backward(y)
    ref_loss, ref_P, ref_grads = torch_loss_and_grads(model.params, X, y)
    assert abs(loss - ref_loss) <= TORCH_TOL * abs(ref_loss)
    assert relative_error(P, ref_P) < TORCH_TOL
    report = compare_gradients(grads, ref_grads, tol=TORCH_TOL)
    assert report.passed, str(report)


def test_one_hot_and_soft_targets_match_torch():
    model = ThreeLayerMLP(3, 4, 5, 3, seed=4)
    randomize_biases(model)
    X, y = make_batch(model, 6)
    model.forward(X)
    by_label = model.backward(y)
    by_one_hot = model.backward(one_hot(y, 3))
    for name in NAMES:
        np.testing.assert_array_equal(by_label[name], by_one_hot[name])
    # rows of probabilities
    soft = softmax(np.random.default_rng(5).standard_normal((6, 3)))
    loss = model.loss(soft)
    grads = model.backward(soft)
    ref_loss, _, ref_grads = torch_loss_and_grads(model.params, X, soft)
    assert abs(loss - ref_loss) <= TORCH_TOL * abs(ref_loss)
    assert compare_gradients(grads, ref_grads, tol=TORCH_TOL).passed


@pytest.mark.parametrize("seed", [0, 1])
def test_gradients_match_numerical(seed):
    model = ThreeLayerMLP(3, 4, 5, 3, seed=seed)
    randomize_biases(model, seed)
    X, y = make_batch(model, 8, seed + 20)
    model.forward(X)
    grads = model.backward(y)

    def loss_fn():
        model.forward(X)
        return model.loss(y)

    numeric = numerical_param_gradients(loss_fn, model.params, eps=1e-6)
    report = compare_gradients(grads, numeric, tol=NUMERIC_TOL)
    assert report.passed, str(report)
    assert report.max_rel_error > 0  # a real comparison, not the same array twice


def test_gradients_match_tensor_engine():
    tensor = pytest.importorskip("backprop_lessons.tensor")
    if not all(hasattr(tensor, n) for n in ("Tensor", "cross_entropy")):
        pytest.skip("backprop_lessons.tensor lacks Tensor or cross_entropy")
    Tensor = tensor.Tensor
    model = ThreeLayerMLP(4, 6, 5, 3, seed=7)
    randomize_biases(model)
    X, y = make_batch(model, 9)
    model.forward(X)
    loss = model.loss(y)
    grads = model.backward(y)
    t = {k: Tensor(v.copy(), requires_grad=True) for k, v in model.params.items()}
    H1 = (Tensor(X) @ t["W1"] + t["b1"]).sigmoid()
    H2 = (H1 @ t["W2"] + t["b2"]).sigmoid()
    out = tensor.cross_entropy(H2 @ t["W3"] + t["b3"], y)
    out.backward()
    assert abs(loss - out.item()) <= 1e-12 * abs(loss)
    report = compare_gradients(
        grads, {k: v.grad for k, v in t.items()}, tol=TORCH_TOL
    )
    assert report.passed, str(report)


def test_float32_close_to_float64():
    m64 = ThreeLayerMLP(3, 8, 8, 3, seed=0)
    m32 = ThreeLayerMLP(3, 8, 8, 3, seed=0, dtype=np.float32)
    assert all(v.dtype == np.float32 for v in m32.params.values())
    X, y = make_batch(m64, 16)
    _, g64 = m64.loss_and_grads(X, y)
    P32 = m32.forward(X)
    assert P32.dtype == np.float32
    g32 = m32.backward(y)
    assert all(g.dtype == np.float32 for g in g32.values())
    assert compare_gradients(g32, g64, tol=1e-5).passed


# ---- numerical stability -------------------------------------------------------


def test_huge_inputs_give_finite_loss_and_gradients():
    model = ThreeLayerMLP(3, 4, 4, 3, seed=0)
    model.params["W3"] *= 1e4  # logits of order 1e4
    X, y = make_batch(model, 5)
    with np.errstate(
        over="raise", divide="raise", invalid="raise"
    ):  # underflow to 0 is fine
        loss, grads = model.loss_and_grads(1e6 * X, y)
    assert np.isfinite(loss)
    assert all(np.all(np.isfinite(g)) for g in grads.values())


# ---- errors --------------------------------------------------------------------


@pytest.mark.parametrize(
    "X,match",
    [
        (np.zeros(3), r"forward: X must have shape \(B, 3\), got \(3,\)"),
        (np.zeros((4, 2)), r"forward: X must have shape \(B, 3\), got \(4, 2\)"),
        (np.zeros((2, 3, 1)), r"forward: X must have shape \(B, 3\)"),
        (np.zeros((0, 3)), r"forward: X is an empty batch"),
    ],
)
def test_forward_rejects_bad_inputs(X, match):
    with pytest.raises(ValueError, match=match):
        ThreeLayerMLP(3, 4, 4, 3).forward(X)


@pytest.mark.parametrize(
    "Y,match",
    [
        (
            np.array([0, 1, 3, 2]),
            r"backward: labels must lie in \[0, 3\), got values from 0 to 3",
        ),
        (
            np.array([0, -1, 2, 2]),
            r"backward: labels must lie in \[0, 3\), got values from -1 to 2",
        ),
        (np.array([0, 1, 2]), r"backward: 3 labels for 4 rows"),
        (
            np.array([0.0, 1.0, 2.0, 1.0]),
            r"labels must be a 1-D array of integer classes",
        ),
        (
            np.zeros((4, 2)),
            r"backward: Y must be integer labels \(4,\) or one-hot rows "
            r"\(4, 3\), got shape \(4, 2\)",
        ),
        (np.zeros((4, 3)), r"each row of Y must be a probability distribution"),
        (
            -np.eye(3)[[0, 1, 2, 0]] + 2 * np.eye(3)[[1, 2, 0, 1]],
            r"each row of Y must be a probability",
        ),
    ],
)
def test_backward_rejects_bad_labels(Y, match):
    model = ThreeLayerMLP(3, 4, 4, 3)
    model.forward(np.ones((4, 3)))
    with pytest.raises(ValueError, match=match):
        model.backward(Y)


def test_loss_checks_labels_too():
    model = ThreeLayerMLP(3, 4, 4, 3)
    model.forward(np.ones((2, 3)))
    with pytest.raises(
        ValueError, match=r"ThreeLayerMLP.loss: labels must lie in \[0, 3\)"
    ):
        model.loss(np.array([0, 5]))


@pytest.mark.parametrize("method", ["backward", "loss"])
def test_backward_or_loss_before_forward(method):
    model = ThreeLayerMLP(3, 4, 4, 3)
    with pytest.raises(
        RuntimeError, match=rf"ThreeLayerMLP.{method}: call forward\(X\) first"
    ):
        getattr(model, method)(np.array([0, 1]))


@pytest.mark.parametrize(
    "args,kwargs,match",
    [
        ((0, 4, 4, 3), {}, r"d0 must be a positive int, got 0"),
        ((3, 4.0, 4, 3), {}, r"d1 must be a positive int, got 4.0"),
        ((3, 4, 4, 1), {}, r"d3 must be an int of at least 2, got 1"),
        ((3, 4, True, 3), {}, r"d2 must be a positive int, got True"),
        (
            (3, 4, 4, 3),
            {"dtype": np.int64},
            r"dtype must be a float type, got int64",
        ),
    ],
)
def test_constructor_rejects_bad_arguments(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        ThreeLayerMLP(*args, **kwargs)


def test_sgd_step_checks_shapes():
    params = {"W": np.zeros((2, 2))}
    with pytest.raises(
        ValueError,
        match=r"sgd_step: gradient W has shape \(2,\), the parameter \(2, 2\)",
    ):
        sgd_step(params, {"W": np.zeros(2)}, 0.1)


# ---- determinism and purity ----------------------------------------------------


def test_same_seed_same_parameters_other_seed_different():
    a, b, c = (ThreeLayerMLP(3, 4, 5, 3, seed=s) for s in (11, 11, 12))
    for name in NAMES:
        np.testing.assert_array_equal(a.params[name], b.params[name])
    assert not np.array_equal(a.params["W1"], c.params["W1"])


def test_backward_is_pure():
    model = ThreeLayerMLP(3, 4, 5, 3, seed=0)
    X, y = make_batch(model, 6)
    model.forward(X)
    before = {k: v.copy() for k, v in model.params.items()}
    first, second = model.backward(y), model.backward(y)
    for name in NAMES:
        np.testing.assert_array_equal(first[name], second[name])
        np.testing.assert_array_equal(model.params[name], before[name])


# ---- training ------------------------------------------------------------------


def test_training_on_spirals_learns_and_is_deterministic():
    X, y = spirals(50, 3, 0.2, seed=0)
    runs = []
    for _ in range(2):
        model = ThreeLayerMLP(2, 16, 16, 3, seed=0)
        history = train(model, X, y, epochs=150, lr=1.0, batch_size=16, seed=0)
        runs.append((history, model))
    (h1, m1), (h2, m2) = runs
    assert h1 == h2
    assert h1["loss"][-1] < 0.5 * h1["loss"][0]
    assert h1["accuracy"][-1] > 0.8
    assert accuracy(m1, X, y) == h1["accuracy"][-1]
    with pytest.raises(
        ValueError, match=r"train: batch_size must lie in \[1, 150\], got 0"
    ):
        train(m1, X, y, batch_size=0)
