"""Checks for the exercises of "Debugging a backward pass" (chapter 7).

    check_softmax_function(SoftmaxFixed)   a torch.autograd.Function softmax
    check_linear_function(LinearFixed)     y = x W^T + b as a Function
    check_accumulate(accumulate)           gradient accumulation over chunks

PyTorch's `torch.autograd.gradcheck` (float64) judges the Functions.  Each
check prints "Exercise N: ..." and returns a `Verdict` (see `checking`).

`SELF_CHECKS` holds the chapter's self-check questions (`questions`).
"""

from __future__ import annotations

from .checking import (
    NotAttempted,
    NotYet,
    Verdict,
    attempt,
    readers_code,
    run_check,
)
from .questions import Choice, Number

__all__ = [
    "check_softmax_function",
    "check_linear_function",
    "check_accumulate",
    "SELF_CHECKS",
]


class _Context:
    """The little of autograd's ctx that these Functions use."""

    def save_for_backward(self, *tensors):
        self.saved_tensors = tensors


def _check_backward_written(function, *inputs, todo: str):
    """Run function's forward and backward by hand, outside autograd, so a
    stub backward (NotImplementedError, `...` or None) shows as such."""
    import torch

    ctx = _Context()
    with torch.no_grad(), readers_code(todo):
        out = function.forward(ctx, *inputs)
    attempt(function.backward, ctx, torch.ones_like(out), todo=todo)


def _passes_gradcheck(function, *inputs) -> bool:
    import torch

    return torch.autograd.gradcheck(function.apply, inputs, raise_exception=False)


def check_softmax_function(function, *, exercise: int) -> Verdict:
    """function: a torch.autograd.Function whose forward is a row softmax of
    z (B, K); its backward must pass gradcheck."""
    import torch

    def check(function):
        todo = "write the backward of SoftmaxFixed and run its cell"
        z = torch.randn(
            3, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(0)
        )
        z.requires_grad_(True)
        _check_backward_written(function, z, todo=todo)
        with readers_code(todo):
            same_forward = torch.allclose(
                function.apply(z), torch.softmax(z, dim=-1)
            )
            passes = _passes_gradcheck(function, z)
        if not same_forward:
            raise NotYet("the forward is no longer a softmax over the last axis")
        if not passes:
            raise NotYet(
                "gradcheck disagrees: the softmax Jacobian is not diagonal, "
                "dp_i/dz_j = p_i (delta_ij - p_j)"
            )

    return run_check(exercise, check, function)


def check_linear_function(function, *, exercise: int) -> Verdict:
    """function: a torch.autograd.Function for y = x W^T + b; its backward
    must pass gradcheck with a square W and with a (2, 3) one."""
    import torch

    def check(function):
        todo = "write the backward of LinearFixed and run its cell"
        g = torch.Generator().manual_seed(1)
        for fan_out in (3, 2):
            x, w, b = (
                torch.randn(
                    *shape, dtype=torch.float64, generator=g
                ).requires_grad_()
                for shape in ((4, 3), (fan_out, 3), (fan_out,))
            )
            _check_backward_written(function, x, w, b, todo=todo)
            with readers_code(todo):
                passes = _passes_gradcheck(function, x, w, b)
            if not passes:
                raise NotYet(
                    f"gradcheck disagrees with a ({fan_out}, 3) weight: "
                    "dW_ij = sum_b dy_bi x_bj, of shape (C_out, C_in)"
                )

    return run_check(exercise, check, function)


def check_accumulate(accumulate, *, exercise: int) -> Verdict:
    """accumulate(model, x, y, micro_batches) must leave in every `.grad` the
    gradient of the MSE over the whole batch, whatever was there before."""
    import torch
    import torch.nn.functional as F

    def check(accumulate):
        todo = "write accumulate(model, x, y, micro_batches) and run its cell"
        torch.manual_seed(0)
        model = torch.nn.Sequential(
            torch.nn.Linear(3, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2)
        )
        x, y = torch.randn(24, 3), torch.randn(24, 2)
        model.zero_grad()
        F.mse_loss(model(x), y).backward()
        expected = [p.grad.clone() for p in model.parameters()]
        for p in model.parameters():
            p.grad = torch.full_like(p, 7.0)  # stale gradients that must go
        attempt(accumulate, model, x, y, 6, todo=todo, may_return_none=True)
        if any(p.grad is None for p in model.parameters()):
            raise NotYet(
                "after your function a .grad is None: zero_grad() empties "
                "them, and only a backward() fills them again (one per "
                "micro-batch)"
            )
        if all(torch.all(p.grad == 7.0) for p in model.parameters()):
            raise NotAttempted(f"{todo} (so far no gradient changes)")
        for p, g in zip(model.parameters(), expected):
            if not torch.allclose(p.grad, g, rtol=1e-5, atol=1e-7):
                raise NotYet(
                    "the gradients differ from the full batch's: zero them "
                    "first, and divide each micro-batch's mean loss by the "
                    "number of micro-batches"
                )

    return run_check(exercise, check, accumulate)


# ---- self-checks -------------------------------------------------------------

#: The chapter's self-check questions, shown by `widgets.self_check`.
SELF_CHECKS = {
    "gradcheck-at-identity": Choice(
        "The 2 AM bug uses dy @ W.T where dy @ W is right. Why does gradcheck "
        "at W = I (the mixer's initial value) miss it?",
        choices=[
            "At the identity W.T equals W, so the wrong formula gives the "
            "right numbers",
            "gradcheck only compares float32 gradients",
            "The identity matrix has a zero gradient",
            "gradcheck never checks the input's gradient",
        ],
        answer=0,
        hint="Compare W and W.T when W is the identity (or any symmetric "
        "matrix).",
        explanation="A symmetric W equals its transpose, so dy @ W.T = dy @ W "
        "there: the bug is invisible until W stops being symmetric. "
        "Check at a random W.",
    ),
    "forgotten-zero-grad": Number(
        "A training loop forgets zero_grad. A weight's true gradient is 0.5 at "
        "each of three steps. What does its .grad hold after the third "
        "backward?",
        answer=1.5,
        hint="backward adds into .grad; nothing resets it between steps.",
        explanation="0.5 + 0.5 + 0.5 = 1.5: the optimizer sees the sum of all "
        "gradients so far, three times the one it should use.",
    ),
}
