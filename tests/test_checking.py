"""exercises/checking.py: what a check may refuse an answer to call.

A check names the book's own implementation of what the exercise asks for,
and AUTOGRAD where the exercise asks for a gradient by hand; the reader's
code that calls one gets "not yet", naming what it called and quoting the
reader's line, however it was reached (a name bound at import, a method, a
try/except Exception around it).  The check's own code may call them.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest
import torch

from backprop_lessons.exercises.checking import (
    AUTOGRAD,
    NotYet,
    attempt,
    run_check,
)
from backprop_lessons.gpt import layers
from backprop_lessons.gpt.layers import gelu_backward
from backprop_lessons.scalar import Value

TODO = "write f and run its cell"


def _gelu_case():
    rng = np.random.default_rng(0)
    inp = rng.standard_normal((2, 3))
    dout = rng.standard_normal((2, 3))
    return layers.gelu_forward(inp)[1], dout


def check_gelu(fn, *, exercise=1):
    """A toy check in the form of the chapters': the reference is the
    book's own gelu_backward, called by the check itself (allowed)."""

    def check(fn):
        cache, dout = _gelu_case()
        want = np.zeros_like(dout)
        layers.gelu_backward(want, dout, cache)
        got = np.zeros_like(dout)
        attempt(fn, got, dout, cache, todo=TODO, may_return_none=True)
        if not np.allclose(got, want):
            raise NotYet("wrong gradient")

    return run_check(exercise, check, fn, refuse=(layers.gelu_backward,))


def test_calling_the_books_version_is_refused_and_named(capsys):
    def mine(dinp, dout, cache):
        gelu_backward(dinp, dout, cache)  # bound at import

    verdict = check_gelu(mine)
    assert verdict.status == "not yet"
    assert verdict.hint.startswith(
        "your code called backprop_lessons.gpt.layers.gelu_backward, the "
        "book's own version"
    )
    (line,) = verdict.where
    assert line.startswith("in mine, line ")
    assert line.endswith(": gelu_backward(dinp, dout, cache) # bound at import")
    assert sys.getprofile() is None


def test_an_except_exception_does_not_swallow_the_refusal(capsys):
    def mine(dinp, dout, cache):
        try:  # noqa: SIM105 (as a reader may write it)
            layers.gelu_backward(dinp, dout, cache)
        except Exception:
            pass

    assert "gelu_backward" in check_gelu(mine).hint


def test_the_checks_own_calls_and_a_right_answer_pass(capsys):
    def mine(dinp, dout, cache):
        inp, _ = cache
        c = np.sqrt(2 / np.pi)
        t = np.tanh(c * (inp + 0.044715 * inp**3))
        du = c * (1 + 3 * 0.044715 * inp**2)
        dinp += dout * (0.5 * (1 + t) + 0.5 * inp * (1 - t**2) * du)

    assert check_gelu(mine).correct
    assert sys.getprofile() is None


def _square_check(fn):
    def check(fn):
        x = torch.tensor([1.5, -2.0], dtype=torch.float64)
        got = attempt(fn, x, todo=TODO)
        want = 2 * x  # d/dx of sum(x**2)
        if not torch.allclose(torch.as_tensor(got), want):
            raise NotYet("wrong gradient")
        # the check itself may use autograd
        y = x.clone().requires_grad_(True)
        (y**2).sum().backward()

    return run_check(1, check, fn, refuse=(AUTOGRAD,))


@pytest.mark.parametrize(
    "fn, called",
    [
        (
            lambda x: torch.autograd.grad((x.requires_grad_() ** 2).sum(), x)[0],
            "torch.autograd.grad",
        ),
        (
            lambda x: (
                ((y := x.clone().requires_grad_()) ** 2).sum().backward()
                or y.grad
            ),
            "Tensor.backward",
        ),
        (lambda x: torch.func.grad(lambda z: (z**2).sum())(x), "torch.func.grad"),
    ],
)
def test_autograd_is_refused_where_the_gradient_is_by_hand(fn, called, capsys):
    verdict = _square_check(fn)
    assert verdict.status == "not yet"
    assert verdict.hint.startswith(
        f"your code called {called}, PyTorch's autograd"
    )
    assert sys.getprofile() is None


def test_by_hand_passes_and_nothing_is_refused_without_refuse(capsys):
    assert _square_check(lambda x: 2 * x).correct

    def check(fn):
        attempt(fn, todo=TODO)

    # no refuse=: the same call is the reader's own business
    assert run_check(1, check, lambda: layers.gelu_backward).correct


def test_a_method_of_the_book_can_be_refused(capsys):
    def check(fn):
        a, b = Value(2.0), Value(-3.0)
        out = attempt(fn, a, b, todo=TODO)
        if out.data != -6.0:
            raise NotYet("wrong product")

    verdict = run_check(1, check, lambda a, b: a * b, refuse=(Value.__mul__,))
    assert verdict.status == "not yet"
    assert "backprop_lessons.scalar.Value.__mul__" in verdict.hint
    assert run_check(
        1,
        check,
        lambda a, b: Value(a.data * b.data, "", (a, b), (b.data, a.data)),
        refuse=(Value.__mul__,),
    ).correct
