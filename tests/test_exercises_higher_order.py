"""Chapter 11's checks against gaming.  The Hessian-vector product is the
Tensor engine's reverse over reverse: finite differences of the gradient
(the book's `directional_derivative`, directly or bound at import, or
written by hand, which only the tight tolerance tells), the book's scalar
HVPs and PyTorch's autograd are not.  DP-SGD's clipped gradient is
`torch.func`'s exercise: PyTorch's autograd stays allowed."""

from __future__ import annotations

import numpy as np
import pytest

from backprop_lessons import gradcheck
from backprop_lessons.exercises import higher_order as E
from backprop_lessons.gradcheck import directional_derivative as bound
from backprop_lessons.tensor import Tensor, grad
from verdicts import refused


def hvp(loss_fn, arrays, vs):
    params = [Tensor(a, requires_grad=True) for a in arrays]
    gs = grad(loss_fn(params), params, create_graph=True)
    dot = sum((g * Tensor(v)).sum() for g, v in zip(gs, vs))
    return [h.data for h in grad(dot, params)]


def _gradient(loss_fn, moved):
    params = [Tensor(a, requires_grad=True) for a in moved]
    return [g.data for g in grad(loss_fn(params), params)]


def _split(flat, arrays):
    parts = np.split(flat, np.cumsum([a.size for a in arrays])[:-1])
    return [p.reshape(a.shape) for p, a in zip(parts, arrays)]


def by_differences(loss_fn, arrays, vs):  # the book's, called directly
    flat = gradcheck.directional_derivative(
        lambda m: np.concatenate([g.ravel() for g in _gradient(loss_fn, m)]),
        arrays,
        vs,
        eps=1e-5,
    )
    return _split(flat, arrays)


def by_bound_differences(loss_fn, arrays, vs):  # bound at import
    flat = bound(
        lambda m: np.concatenate([g.ravel() for g in _gradient(loss_fn, m)]),
        arrays,
        vs,
    )
    return _split(flat, arrays)


def by_hand_differences(loss_fn, arrays, vs, eps=1e-5):
    plus = _gradient(loss_fn, [a + eps * v for a, v in zip(arrays, vs)])
    minus = _gradient(loss_fn, [a - eps * v for a, v in zip(arrays, vs)])
    return [(p - m) / (2 * eps) for p, m in zip(plus, minus)]


def by_torch(loss_fn, arrays, vs):  # PyTorch's HVP of a copy of the loss
    torch = pytest.importorskip("torch")
    X, y = loss_fn.__defaults__  # the check's problem, read off loss_fn

    def loss(*params):
        W1, b1, W2, b2 = params
        z = torch.tanh(torch.tensor(X) @ W1 + b1) @ W2 + b2
        return torch.nn.functional.cross_entropy(z, torch.tensor(y))

    _, out = torch.autograd.functional.hvp(
        loss,
        tuple(torch.tensor(a) for a in arrays),
        tuple(torch.tensor(v) for v in vs),
    )
    return [o.numpy() for o in out]


@pytest.mark.parametrize(
    "answer, called",
    [
        (by_differences, "backprop_lessons.gradcheck.directional_derivative"),
        (by_bound_differences, "backprop_lessons.gradcheck.directional_derivat"),
        (by_torch, "torch.autograd.functional.hvp, PyTorch's autograd"),
    ],
)
def test_the_hvp_is_the_engines_double_backward(answer, called, capsys):
    assert E.check_hvp(hvp, exercise=1).correct
    refused(E.check_hvp(answer, exercise=1), called)


def test_finite_differences_by_hand_are_only_about_right(capsys):
    verdict = E.check_hvp(by_hand_differences, exercise=1)
    assert verdict.status == "not yet"
    assert "only about right, as finite differences give it" in verdict.hint


def test_the_book_scalar_hvps_are_refused(capsys):
    from backprop_lessons.higher_order import hvp_reverse_over_reverse

    def scalar(loss_fn, arrays, vs):  # a method of the engine's own, flat
        flat = np.concatenate([a.ravel() for a in arrays])
        hvp_reverse_over_reverse(lambda xs: xs[0] * xs[0], [1.0], [1.0])
        return _split(flat, arrays)

    refused(
        E.check_hvp(scalar, exercise=1),
        "backprop_lessons.higher_order.hvp_reverse_over_reverse",
    )


def test_clipping_may_use_torch_func(capsys):
    torch = pytest.importorskip("torch")
    from torch.func import grad as func_grad
    from torch.func import vmap

    def clipped(loss_one, params, X, y, C):
        g = vmap(func_grad(loss_one), in_dims=(None, 0, 0))(params, X, y)
        sq = sum((v.reshape(len(X), -1) ** 2).sum(1) for v in g.values())
        scale = torch.clamp(C / sq.sqrt(), max=1.0)
        return {
            k: (v * scale.reshape(-1, *[1] * (v.ndim - 1))).mean(0)
            for k, v in g.items()
        }

    assert E.check_clipped_mean_gradient(clipped, exercise=2).correct
