"""Chapter 4's checks against gaming: every exercise is a gradient by hand,
so each refuses the book's rule for it (called directly, through a name
bound at import, through the Tensor engine's methods), the Tensor engine's
backward and PyTorch's gradient; and `unbroadcast` for `my_unbroadcast`."""

from __future__ import annotations

import numpy as np
import pytest

from backprop_lessons.exercises import matmul_vjp as E
from backprop_lessons.gpt import layers
from backprop_lessons.tensor import Tensor
from backprop_lessons.tensor import unbroadcast as bound_unbroadcast
from verdicts import refused

torch = pytest.importorskip("torch")


def by_the_rule(G, X, W):  # the Tensor engine's rule, called directly
    return Tensor.matmul_backward(G, (X, W), (True, True))


def by_the_layer(G, X, W):  # the GPT layer's backward
    dX, dW = np.zeros_like(X), np.zeros_like(W)
    layers.matmul_backward(dX, dW, None, G, (X, W))
    return dX, dW


def by_the_engine(G, X, W):  # a method: the engine's backward
    x, w = Tensor(X, requires_grad=True), Tensor(W, requires_grad=True)
    (x @ w).backward(G)
    return x.grad, w.grad


def by_torch(G, X, W):  # PyTorch's gradient returned
    x = torch.tensor(X, requires_grad=True)
    w = torch.tensor(W, requires_grad=True)
    return tuple(
        g.numpy() for g in torch.autograd.grad(x @ w, (x, w), torch.tensor(G))
    )


@pytest.mark.parametrize(
    "check",
    [E.check_matmul_vjp, E.check_shared_weight_vjp],
    ids=lambda c: c.__name__,
)
@pytest.mark.parametrize(
    "answer, called",
    [
        (by_the_rule, "backprop_lessons.tensor.Tensor.matmul_backward"),
        (
            lambda G, X, W: E.book_matmul_vjp(G, X, W),
            "backprop_lessons.exercises.matmul_vjp.book_matmul_vjp",
        ),
        (by_the_engine, "backprop_lessons.tensor.Tensor.backward"),
        (by_torch, "torch.autograd.grad, PyTorch's autograd"),
    ],
)
def test_the_matmul_vjp_may_not_be_borrowed(check, answer, called, capsys):
    refused(check(answer, exercise=1), called)


def test_the_gpt_layers_matmul_backward_is_refused_too(capsys):
    refused(
        E.check_matmul_vjp(by_the_layer, exercise=1),
        "backprop_lessons.gpt.layers.matmul_backward",
    )


def test_the_linear_backward_may_not_be_borrowed(capsys):
    def linear(G, X, W):
        dX, dW = E.book_matmul_vjp(G, X, W)
        return dX, dW, G.sum(axis=0)

    def linear_by_torch(G, X, W):
        dX, dW = by_torch(G, X, W)
        return dX, dW, G.sum(axis=0)

    assert E.check_linear_backward(
        lambda G, X, W: (G @ W.T, X.T @ G, G.sum(axis=0)), exercise=3
    ).correct
    refused(E.check_linear_backward(linear, exercise=3), "backprop_lessons.")
    refused(
        E.check_linear_backward(linear_by_torch, exercise=3), "torch.autograd"
    )


def test_logsumexp_may_not_borrow_a_stable_softmax(capsys):
    from backprop_lessons.numerics import softmax as bound_softmax

    def by_tensor_softmax(g, z):  # a method of the engine's
        return g[:, None] * Tensor(z).softmax(-1).data

    def by_torch_logsumexp(g, z):
        zt = torch.tensor(z, requires_grad=True)
        torch.logsumexp(zt, -1).backward(torch.tensor(g))
        return zt.grad.numpy()

    refused(
        E.check_logsumexp_vjp(
            lambda g, z: g[:, None] * bound_softmax(z), exercise=4
        ),
        "backprop_lessons.numerics.softmax",
    )
    refused(
        E.check_logsumexp_vjp(by_tensor_softmax, exercise=4),
        "backprop_lessons.tensor.Tensor.softmax",
    )
    refused(
        E.check_logsumexp_vjp(by_torch_logsumexp, exercise=4),
        "Tensor.backward, PyTorch's autograd",
    )


def test_my_unbroadcast_may_not_call_unbroadcast(capsys):
    def by_the_engine(grad, shape):  # a Tensor's add sums through it
        t = Tensor(np.zeros(shape), requires_grad=True)
        (t + Tensor(np.zeros(grad.shape))).backward(grad)
        return t.grad

    refused(
        E.check_unbroadcast(bound_unbroadcast, exercise=5),
        "backprop_lessons.tensor.unbroadcast",
        quoted=False,  # the book's function itself: no line of the reader's
    )
    refused(
        E.check_unbroadcast(lambda g, s: bound_unbroadcast(g, s), exercise=5),
        "backprop_lessons.tensor.unbroadcast",
    )
    refused(E.check_unbroadcast(by_the_engine, exercise=5), "backprop_lessons.")


def test_my_unbroadcast_meets_a_gradient_with_an_axis_of_one(capsys):
    """The held-out (3, 1, 2, 5) gradient: an answer that sums every axis
    of size 1 in the target, whether or not the gradient's is 1 too, is
    right; one that assumes the (2, 3, 4) of the first cases is not."""

    def fitted(grad, shape):
        if grad.shape != (2, 3, 4):
            return np.zeros(shape)
        return bound_unbroadcast_copy(grad, shape)

    assert E.check_unbroadcast(bound_unbroadcast_copy, exercise=5).correct
    verdict = E.check_unbroadcast(fitted, exercise=5)
    assert verdict.status == "not yet" and "(3, 1, 2, 5)" in verdict.hint


def bound_unbroadcast_copy(grad, shape):
    """The chapter's solution, written here."""
    while grad.ndim > len(shape):
        grad = grad.sum(axis=0)
    for axis, size in enumerate(shape):
        if size == 1 and grad.shape[axis] != 1:
            grad = grad.sum(axis=axis, keepdims=True)
    return grad
