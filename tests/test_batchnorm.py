"""gpt.layers.batchnorm_forward / batchnorm_backward (chapter 5's batch
normalization, training mode): against PyTorch's own
`torch.nn.functional.batch_norm(training=True)` in float64, against centered
differences, the layer contract (`+=` into the buffers, None skips a
gradient), how it differs from layernorm, and the errors for bad input."""

from __future__ import annotations

import numpy as np
import pytest

from backprop_lessons.gpt.layers import (
    BATCHNORM_EPS,
    batchnorm_backward,
    batchnorm_forward,
    layernorm_forward,
)
from backprop_lessons.gradcheck import numerical_gradient, relative_error

torch = pytest.importorskip("torch")
F = torch.nn.functional

SHAPES = [(6, 4), (2, 3), (5, 1), (4, 4), (64, 16)]


def make_inputs(shape, seed=0):
    rng = np.random.default_rng(seed)
    B, C = shape
    x = 2.0 * rng.standard_normal(shape) + 3.0 * rng.standard_normal((1, C))
    weight = 1.0 + 0.5 * rng.standard_normal(C)
    bias = 0.5 * rng.standard_normal(C)
    dout = rng.standard_normal(shape)
    return x, weight, bias, dout


def ours(x, weight, bias, dout, eps=BATCHNORM_EPS):
    """Output and gradients of L = sum(out * dout) from the hand-written pair."""
    out, cache = batchnorm_forward(x, weight, bias, eps)
    grads = [np.zeros_like(x), np.zeros_like(weight), np.zeros_like(bias)]
    batchnorm_backward(*grads, dout, cache)
    return out, cache, grads


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("eps", [1e-5, 1e-1])
def test_matches_torch_batch_norm_in_float64(shape, eps):
    x, weight, bias, dout = make_inputs(shape, seed=sum(shape))
    out, cache, (dx, dw, db) = ours(x, weight, bias, dout, eps)

    tx, tw, tb = (torch.tensor(a, requires_grad=True) for a in (x, weight, bias))
    tout = F.batch_norm(tx, None, None, tw, tb, training=True, eps=eps)
    (tout * torch.tensor(dout)).sum().backward()

    assert out.shape == shape and out.dtype == np.float64
    assert cache[2].shape == cache[3].shape == (1, shape[1])  # mean, rstd
    assert relative_error(out, tout.detach().numpy()) < 1e-13
    for mine, theirs in ((dx, tx), (dw, tw), (db, tb)):
        assert relative_error(mine, theirs.grad.numpy(), floor=1.0) < 1e-12


def test_matches_centered_differences():
    x, weight, bias, dout = make_inputs((5, 3), seed=7)
    _, _, (dx, dw, db) = ours(x, weight, bias, dout)

    def loss(x_, w_, b_):
        return float((batchnorm_forward(x_, w_, b_)[0] * dout).sum())

    checks = [
        (dx, numerical_gradient(lambda a: loss(a, weight, bias), x.copy())),
        (dw, numerical_gradient(lambda a: loss(x, a, bias), weight.copy())),
        (db, numerical_gradient(lambda a: loss(x, weight, a), bias.copy())),
    ]
    for analytic, numeric in checks:
        assert relative_error(analytic, numeric) < 1e-8


def test_backward_adds_into_its_buffers_and_skips_none():
    x, weight, bias, dout = make_inputs((4, 3), seed=1)
    _, cache, fresh = ours(x, weight, bias, dout)
    prefilled = [np.full_like(g, 2.0) for g in fresh]
    batchnorm_backward(*prefilled, dout, cache)
    for a, b in zip(fresh, prefilled):
        np.testing.assert_allclose(b, 2.0 + a, rtol=0, atol=1e-14)
    only_dx = np.zeros_like(x)
    batchnorm_backward(only_dx, None, None, dout, cache)
    np.testing.assert_array_equal(only_dx, fresh[0])


def test_each_channel_is_normalized_over_the_batch_unlike_layernorm():
    x, _, _, _ = make_inputs((8, 5), seed=2)
    ones, zeros = np.ones(5), np.zeros(5)
    out, _ = batchnorm_forward(x, ones, zeros, eps=0.0)
    np.testing.assert_allclose(out.mean(axis=0), 0.0, atol=1e-14)
    np.testing.assert_allclose(out.var(axis=0), 1.0, rtol=1e-13)  # biased
    ln, _ = layernorm_forward(x[None], ones, zeros, eps=0.0)
    np.testing.assert_allclose(ln[0].mean(axis=1), 0.0, atol=1e-14)
    assert np.abs(out.mean(axis=1)).max() > 0.1  # not over the channels


def test_the_examples_of_a_batch_are_coupled():
    """Changing one example changes every output of its channel; the input
    gradient of each channel sums to zero over the batch."""
    x, weight, bias, dout = make_inputs((4, 2), seed=3)
    out, _, (dx, _, _) = ours(x, weight, bias, dout)
    moved = x.copy()
    moved[0, 0] += 1.0
    out2, _ = batchnorm_forward(moved, weight, bias)
    assert np.all(out2[:, 0] != out[:, 0]) and np.all(out2[:, 1] == out[:, 1])
    np.testing.assert_allclose(dx.sum(axis=0), 0.0, atol=1e-13)


def test_two_examples_give_plus_minus_one_and_almost_no_input_gradient():
    x = np.array([[3.0], [7.0]])
    out, _, (dx, _, _) = ours(
        x, np.ones(1), np.zeros(1), np.array([[1.0], [0.5]])
    )
    np.testing.assert_allclose(out.ravel(), [-1.0, 1.0], atol=1e-5)
    assert np.abs(dx).max() < 1e-5


@pytest.mark.parametrize(
    "args,match",
    [
        ((np.ones(3), np.ones(3), np.zeros(3)), r"inp must have shape \(B, C\)"),
        ((np.ones((1, 3)), np.ones(3), np.zeros(3)), r"B >= 2 .*got \(1, 3\)"),
        ((np.ones((4, 3)), np.ones(2), np.zeros(3)), r"weight must have shape"),
        (
            (np.ones((4, 3)), np.ones(3), np.zeros((1, 3))),
            r"bias must have shape",
        ),
    ],
)
def test_bad_input_names_the_operation(args, match):
    with pytest.raises(ValueError, match=rf"^batchnorm_forward: .*{match}"):
        batchnorm_forward(*args)
    with pytest.raises(TypeError, match=r"^batchnorm_forward: inp must be real"):
        batchnorm_forward([["a", "b"], ["c", "d"]], np.ones(2), np.zeros(2))
