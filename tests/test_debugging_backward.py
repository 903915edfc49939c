"""Chapter 7's checks against gaming.  A Function's backward is written by
hand: PyTorch's autograd inside it is refused, and so are the book's rules
for the same products (called directly, through a name bound at import,
through the Tensor engine's method), while gradcheck, the check's own
autograd, still runs.  Accumulation is autograd's own business: nothing is
refused, but the check's model and data are its own, and a forward over
the whole batch is told so."""

from __future__ import annotations

import numpy as np
import pytest

from backprop_lessons.exercises import debugging_backward as E
from backprop_lessons.gpt import layers
from backprop_lessons.tensor import Tensor
from test_exercises import autograd_functions
from verdicts import refused

torch = pytest.importorskip("torch")
F = torch.nn.functional


Softmax = autograd_functions()[0]  # the right one, as chapter 7 writes it


class SoftmaxByAutograd(Softmax):  # PyTorch's gradient returned
    @staticmethod
    def backward(ctx, grad_p):
        (p,) = ctx.saved_tensors
        with torch.enable_grad():
            z = torch.log(p).detach().requires_grad_(True)
            (g,) = torch.autograd.grad(torch.softmax(z, -1), z, grad_p)
        return g


class SoftmaxByTheRule(Softmax):  # the Tensor engine's rule, called directly
    @staticmethod
    def backward(ctx, grad_p):
        (p,) = ctx.saved_tensors
        (g,) = Tensor.softmax_backward(grad_p.numpy(), (p.numpy(), -1), (True,))
        return torch.from_numpy(g)


class SoftmaxByTheEngine(Softmax):  # a method: the Tensor engine's backward
    @staticmethod
    def backward(ctx, grad_p):
        (p,) = ctx.saved_tensors
        z = Tensor(np.log(p.numpy()), requires_grad=True)
        z.softmax(-1).backward(grad_p.numpy())
        return torch.from_numpy(z.grad)


@pytest.mark.parametrize(
    "function, called",
    [
        (SoftmaxByAutograd, "torch.autograd.grad, PyTorch's autograd"),
        (SoftmaxByTheRule, "backprop_lessons.tensor.Tensor.softmax_backward"),
        (SoftmaxByTheEngine, "backprop_lessons.tensor.Tensor.backward"),
    ],
)
def test_a_softmax_backward_may_not_borrow_a_gradient(function, called, capsys):
    assert E.check_softmax_function(Softmax, exercise=1).correct
    refused(E.check_softmax_function(function, exercise=1), called)


class Linear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, b):
        ctx.save_for_backward(x, w)
        return x @ w.T + b

    @staticmethod
    def backward(ctx, dy):
        x, w = ctx.saved_tensors
        return dy @ w, dy.T @ x, dy.sum(dim=0)


class LinearByTheLayer(Linear):  # the GPT layer's backward, bound at import
    @staticmethod
    def backward(ctx, dy):
        x, w = ctx.saved_tensors
        dx, dw, db = np.zeros(x.shape), np.zeros(w.shape), np.zeros(w.shape[0])
        matmul_backward(dx, dw, db, dy.numpy(), (x.numpy(), w.numpy()))
        return torch.from_numpy(dx), torch.from_numpy(dw), torch.from_numpy(db)


matmul_backward = layers.matmul_backward


class LinearByAutograd(Linear):
    @staticmethod
    def backward(ctx, dy):
        x, w = ctx.saved_tensors
        return torch.autograd.functional.vjp(lambda x, w: x @ w.T, (x, w), dy)[
            1
        ] + (dy.sum(dim=0),)


@pytest.mark.parametrize(
    "function, called",
    [
        (LinearByTheLayer, "backprop_lessons.gpt.layers.matmul_backward"),
        (LinearByAutograd, "torch.autograd.functional.vjp, PyTorch's"),
    ],
)
def test_a_linear_backward_may_not_borrow_a_gradient(function, called, capsys):
    assert E.check_linear_function(Linear, exercise=2).correct
    refused(E.check_linear_function(function, exercise=2), called)


def test_a_wrong_backward_is_found_on_held_out_cotangents(capsys):
    class Transposed(Linear):  # the 2 AM bug's relative
        @staticmethod
        def backward(ctx, dy):
            x, w = ctx.saved_tensors
            return dy @ w, x.T @ dy, dy.sum(dim=0)

    verdict = E.check_linear_function(Transposed, exercise=2)
    assert verdict.status == "not yet" and "dW disagrees" in verdict.hint


def accumulate(model, x, y, micro_batches):
    model.zero_grad()
    for xb, yb in zip(x.chunk(micro_batches), y.chunk(micro_batches)):
        (F.mse_loss(model(xb), yb) / micro_batches).backward()


def test_accumulation_uses_autograd_on_micro_batches(capsys):
    assert E.check_accumulate(accumulate, exercise=3).correct

    def whole_batch(model, x, y, micro_batches):  # right gradients, one pass
        model.zero_grad()
        F.mse_loss(model(x), y).backward()

    verdict = E.check_accumulate(whole_batch, exercise=3)
    assert verdict.status == "not yet" and "a forward ran on 24" in verdict.hint


def test_accumulation_is_checked_on_data_of_its_own(capsys):
    """The chapter's model and data, the gradient computed from them and
    copied in, pass no longer: the check draws its own."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(3, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2)
    )
    x, y = torch.randn(24, 3), torch.randn(24, 2)
    F.mse_loss(model(x), y).backward()
    known = [p.grad.clone() for p in model.parameters()]

    def copied(model, x, y, micro_batches):
        for p, g in zip(model.parameters(), known):
            p.grad = g.clone()

    assert E.check_accumulate(copied, exercise=3).status == "not yet"
