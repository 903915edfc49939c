"""Checks for the exercises of "Debugging a backward pass" (chapter 7).

    check_softmax_function(SoftmaxFixed)   a torch.autograd.Function softmax
    check_linear_function(LinearFixed)     y = x W^T + b as a Function
    check_accumulate(accumulate)           gradient accumulation over chunks

The Functions' backwards are called directly with cotangents drawn by the
check and compared with PyTorch's VJPs in float64, then
`torch.autograd.gradcheck` runs them through `apply`.  A backward is
written by hand, so PyTorch's autograd and the book's rules for the same
products are refused inside it (`run_check`'s `refuse=`); accumulation is
autograd's own business, and refuses nothing.  Each check prints "Exercise
N: ..." and returns a `Verdict` (see `checking`).

`SELF_CHECKS` holds the chapter's self-check questions (`questions`).
"""

from __future__ import annotations

from .checking import (
    AUTOGRAD,
    NotAttempted,
    NotYet,
    Verdict,
    attempt,
    readers_code,
    run_check,
    where_it_raised,
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


def _backward_by_hand(function, inputs, cotangent, todo: str):
    """The reader's Function run by hand, outside autograd: its forward
    under no_grad with a ctx of ours, then its backward with `cotangent`
    (inside `readers_code`, so that a stub shows as such and a refused call
    is named).  Returns the forward's output and the backward's gradients
    (a tuple, one per input)."""
    import torch

    ctx = _Context()
    with torch.no_grad(), readers_code(todo):
        out = function.forward(ctx, *inputs)
    grads = attempt(function.backward, ctx, cotangent, todo=todo)
    return out, grads if isinstance(grads, tuple) else (grads,)


def _passes_gradcheck(function, *inputs) -> bool:
    """torch.autograd.gradcheck of function.apply: outside `readers_code`
    (gradcheck's own autograd calls are not the reader's), the reader's
    errors quoted all the same."""
    import torch

    try:
        return torch.autograd.gradcheck(
            function.apply, inputs, raise_exception=False
        )
    except Exception as error:
        raise NotYet(
            f"your code raised {type(error).__name__}: {error}",
            where=where_it_raised(error),
        ) from error


def _vjp(forward, inputs, cotangent):
    """The gradients of sum(forward(*inputs) * cotangent), by PyTorch's
    autograd (the check's own reference)."""
    import torch

    leaves = [x.detach().clone().requires_grad_(True) for x in inputs]
    return torch.autograd.grad(forward(*leaves), leaves, cotangent)


def _by_hand_refused() -> tuple:
    """What a Function's backward written by hand may not call: PyTorch's
    autograd, and the book's rules for the same products (the Tensor
    engine's and the GPT layers')."""
    from ..gpt import layers
    from ..tensor import Tensor, grad

    return (
        AUTOGRAD,
        Tensor.backward,
        grad,
        Tensor.softmax_backward,
        Tensor.matmul_backward,
        layers.matmul_backward,
    )


def check_softmax_function(function, *, exercise: int) -> Verdict:
    """function: a torch.autograd.Function whose forward is a row softmax of
    z (B, K); its backward, called directly with cotangents drawn here, must
    give PyTorch's softmax VJP, and the Function must pass gradcheck.

    The backward is written by hand: PyTorch's autograd (`AUTOGRAD`) and
    the book's softmax rule (`Tensor.softmax_backward`) are refused inside
    it.  gradcheck itself runs outside the refusal, after the backward
    passed its direct calls."""
    import torch

    def check(function):
        todo = "write the backward of SoftmaxFixed and run its cell"
        g = torch.Generator().manual_seed(0)
        for shape in ((3, 4), (1, 5), (2, 1)):
            z = torch.randn(*shape, dtype=torch.float64, generator=g)
            w = torch.randn(*shape, dtype=torch.float64, generator=g)
            out, grads = _backward_by_hand(function, (z,), w, todo)
            with readers_code(todo):
                same = torch.allclose(out, torch.softmax(z, dim=-1))
            if not same:
                raise NotYet(
                    "the forward is no longer a softmax over the last axis"
                )
            (want,) = _vjp(lambda z: torch.softmax(z, dim=-1), (z,), w)
            if not _all_close(grads[:1], (want,)):
                raise NotYet(
                    f"with z of shape {tuple(shape)} the backward disagrees "
                    "with the softmax's VJP: the softmax Jacobian is not "
                    "diagonal, dp_i/dz_j = p_i (delta_ij - p_j)"
                )
        z = torch.randn(3, 4, dtype=torch.float64, generator=g)
        if not _passes_gradcheck(function, z.requires_grad_(True)):
            raise NotYet(
                "its backward is right when called directly, but gradcheck "
                "through apply disagrees: save in forward what backward reads"
            )

    return run_check(exercise, check, function, refuse=_by_hand_refused())


def _all_close(got, want) -> bool:
    import torch

    return len(got) >= len(want) and all(
        isinstance(a, torch.Tensor)
        and a.shape == b.shape
        and torch.allclose(a, b, rtol=1e-10, atol=1e-12)
        for a, b in zip(got, want)
    )


def check_linear_function(function, *, exercise: int) -> Verdict:
    """function: a torch.autograd.Function for y = x W^T + b; its backward,
    called directly with cotangents drawn here, must give PyTorch's
    gradients with a square W and with a (2, 3) one, and the Function must
    pass gradcheck.  Refused inside the backward: PyTorch's autograd and the
    book's matmul rules (`Tensor.matmul_backward`, `layers.matmul_backward`)."""
    import torch

    def check(function):
        todo = "write the backward of LinearFixed and run its cell"
        g = torch.Generator().manual_seed(1)
        for fan_out in (3, 2):
            x, w, b = (
                torch.randn(*shape, dtype=torch.float64, generator=g)
                for shape in ((4, 3), (fan_out, 3), (fan_out,))
            )
            dy = torch.randn(4, fan_out, dtype=torch.float64, generator=g)
            _, grads = _backward_by_hand(function, (x, w, b), dy, todo)
            want = _vjp(lambda x, w, b: x @ w.T + b, (x, w, b), dy)
            wrong = [
                name
                for name, got, right in zip(("dx", "dW", "db"), grads, want)
                if not _all_close((got,), (right,))
            ]
            if len(grads) < 3 or wrong:
                named = " and ".join(wrong) or "a gradient"
                raise NotYet(
                    f"with a ({fan_out}, 3) weight, {named} "
                    "disagrees with PyTorch's: dW_ij = sum_b dy_bi x_bj, of "
                    "shape (C_out, C_in); return one gradient per input"
                )
            inputs = [t.requires_grad_(True) for t in (x, w, b)]
            if not _passes_gradcheck(function, *inputs):
                raise NotYet(
                    f"with a ({fan_out}, 3) weight the backward is right when "
                    "called directly, but gradcheck through apply disagrees"
                )

    return run_check(exercise, check, function, refuse=_by_hand_refused())


def check_accumulate(accumulate, *, exercise: int) -> Verdict:
    """accumulate(model, x, y, micro_batches) must leave in every `.grad` the
    gradient of the MSE over the whole batch, whatever was there before,
    with forwards of one micro-batch each: for 6 micro-batches of 4
    examples and 3 of 5, on models and data drawn here (not the chapter's).

    Nothing is refused: the exercise is autograd's own accumulation (each
    micro-batch's `.backward()` adds into `.grad`), and the package has no
    function that does it for this model.  A forward over more than one
    micro-batch is told so (the exercise's memory budget)."""
    import torch
    import torch.nn.functional as F

    def check(accumulate):
        todo = "write accumulate(model, x, y, micro_batches) and run its cell"
        for seed, batch, micro in ((3, 24, 6), (4, 15, 3)):
            torch.manual_seed(seed)
            model = torch.nn.Sequential(
                torch.nn.Linear(3, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2)
            )
            x, y = torch.randn(batch, 3), torch.randn(batch, 2)
            model.zero_grad()
            F.mse_loss(model(x), y).backward()
            expected = [p.grad.clone() for p in model.parameters()]
            for p in model.parameters():
                p.grad = torch.full_like(p, 7.0)  # stale gradients that must go
            rows = []  # the examples each forward of the model ran on
            hook = model.register_forward_pre_hook(
                lambda module, args, rows=rows: rows.append(len(args[0]))
            )
            args = (model, x, y, micro)
            try:
                attempt(accumulate, *args, todo=todo, may_return_none=True)
            finally:
                hook.remove()
            if any(p.grad is None for p in model.parameters()):
                raise NotYet(
                    "after your function a .grad is None: zero_grad() empties "
                    "them, and only a backward() fills them again (one per "
                    "micro-batch)"
                )
            if all(torch.all(p.grad == 7.0) for p in model.parameters()):
                raise NotAttempted(f"{todo} (so far no gradient changes)")
            if rows and max(rows) > batch // micro:
                raise NotYet(
                    f"a forward ran on {max(rows)} examples: with {micro} "
                    f"micro-batches of a batch of {batch}, each forward and "
                    "backward takes one micro-batch"
                )
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
