"""gpt.layers.rmsnorm_forward / rmsnorm_backward: against PyTorch's own
`torch.nn.functional.rms_norm` in float64, against centered differences, and
the layer contract (`+=` into the buffers, None skips a gradient)."""

from __future__ import annotations

import numpy as np
import pytest

from backprop_lessons.gpt.layers import rmsnorm_backward, rmsnorm_forward
from backprop_lessons.gradcheck import numerical_gradient, relative_error

torch = pytest.importorskip("torch")
F = torch.nn.functional

SHAPES = [(2, 3, 8), (1, 5, 16), (4, 1, 3), (7, 16)]


rel_err = relative_error


def make_inputs(shape, with_weight, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape) * rng.uniform(0.1, 3.0)
    weight = rng.standard_normal(shape[-1]) if with_weight else None
    dout = rng.standard_normal(shape)
    return x, weight, dout


def ours(x, weight, dout, eps=1e-5):
    """Output and gradients of L = sum(out * dout) from the hand-written pair."""
    out, cache = rmsnorm_forward(x, weight, eps)
    dx = np.zeros_like(x)
    dw = np.zeros_like(weight) if weight is not None else None
    rmsnorm_backward(dx, dw, dout, cache)
    return out, dx, dw


@pytest.mark.parametrize(
    "with_weight", [True, False], ids=["weight", "no weight"]
)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("eps", [1e-5, 1e-2])
def test_matches_torch_rms_norm_in_float64(shape, with_weight, eps):
    x, weight, dout = make_inputs(shape, with_weight, seed=len(shape) + shape[-1])
    out, dx, dw = ours(x, weight, dout, eps)

    tx = torch.tensor(x, requires_grad=True)
    tw = torch.tensor(weight, requires_grad=True) if with_weight else None
    tout = F.rms_norm(tx, (shape[-1],), tw, eps)
    (tout * torch.tensor(dout)).sum().backward()

    assert out.shape == shape and out.dtype == np.float64
    assert rel_err(out, tout.detach().numpy()) < 1e-13
    assert rel_err(dx, tx.grad.numpy()) < 1e-12
    if with_weight:
        assert rel_err(dw, tw.grad.numpy()) < 1e-12


@pytest.mark.parametrize(
    "with_weight", [True, False], ids=["weight", "no weight"]
)
def test_matches_centered_differences(with_weight):
    x, weight, dout = make_inputs((2, 3, 5), with_weight, seed=7)
    _, dx, dw = ours(x, weight, dout)

    def loss(x_, w_):
        return float((rmsnorm_forward(x_, w_)[0] * dout).sum())

    num_dx = numerical_gradient(lambda x_: loss(x_, weight), x.copy())
    assert rel_err(dx, num_dx) < 1e-8
    if with_weight:
        num_dw = numerical_gradient(lambda w_: loss(x, w_), weight.copy())
        assert rel_err(dw, num_dw) < 1e-8


def test_output_has_unit_root_mean_square():
    x, _, _ = make_inputs((3, 4, 64), False, seed=1)
    out, _ = rmsnorm_forward(x, eps=0.0)
    np.testing.assert_allclose(np.sqrt((out**2).mean(axis=-1)), 1.0, rtol=1e-14)


def test_no_recentering_unlike_layernorm():
    """A constant row is left as a constant (+1 or -1), where layernorm gives
    0."""
    x = np.full((1, 1, 4), -3.0)
    out, _ = rmsnorm_forward(x, eps=0.0)
    np.testing.assert_allclose(out, -1.0)


def test_backward_accumulates_into_the_buffers():
    x, weight, dout = make_inputs((2, 3, 4), True, seed=3)
    _, dx, dw = ours(x, weight, dout)
    _, cache = rmsnorm_forward(x, weight)
    dx2, dw2 = np.ones_like(x), np.ones_like(weight)
    rmsnorm_backward(dx2, dw2, dout, cache)
    rmsnorm_backward(dx2, dw2, dout, cache)
    np.testing.assert_allclose(dx2, 1.0 + 2 * dx, rtol=1e-14, atol=1e-14)
    np.testing.assert_allclose(dw2, 1.0 + 2 * dw, rtol=1e-14, atol=1e-14)


def test_none_skips_a_gradient():
    x, weight, dout = make_inputs((2, 3, 4), True, seed=4)
    _, dx, dw = ours(x, weight, dout)
    _, cache = rmsnorm_forward(x, weight)
    only_dx = np.zeros_like(x)
    rmsnorm_backward(only_dx, None, dout, cache)
    only_dw = np.zeros_like(weight)
    rmsnorm_backward(None, only_dw, dout, cache)
    np.testing.assert_array_equal(only_dx, dx)
    np.testing.assert_array_equal(only_dw, dw)


def test_backward_leaves_dout_and_the_cache_unchanged():
    x, weight, dout = make_inputs((2, 3, 4), True, seed=5)
    _, cache = rmsnorm_forward(x, weight)
    saved = [a.copy() for a in (x, weight, cache[2], dout)]
    rmsnorm_backward(np.zeros_like(x), np.zeros_like(weight), dout, cache)
    for before, after in zip(saved, (x, weight, cache[2], dout)):
        np.testing.assert_array_equal(before, after)


def test_dweight_without_a_weight_is_an_error():
    x, _, dout = make_inputs((2, 3, 4), False)
    _, cache = rmsnorm_forward(x)
    with pytest.raises(
        ValueError, match="rmsnorm_backward: got a dweight buffer"
    ):
        rmsnorm_backward(np.zeros_like(x), np.zeros(4), dout, cache)
