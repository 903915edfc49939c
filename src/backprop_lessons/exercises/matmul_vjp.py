"""Checks for the exercises of "The matmul VJP" (chapter 4).

    check_matmul_vjp(matmul_vjp)                 dX, dW of Z = X @ W
    check_shared_weight_vjp(shared_weight_vjp)   X (B, T, n) @ W (n, k)
    check_linear_backward(linear_backward)       dX, dW, db of X @ W + b
    check_logsumexp_vjp(logsumexp_vjp)           stable for logits near 1000
    check_unbroadcast(my_unbroadcast)            sum a gradient back to a shape

    book_matmul_vjp(G, X, W)     the book's matmul VJP in exercise 1's form

Reference gradients come from PyTorch autograd in float64 (imported when a
check runs) or from centered differences (`gradcheck`).  Each check prints
"Exercise N: ..." and returns a `Verdict` (see `checking`).

`SELF_CHECKS` holds the chapter's self-check questions (`questions`).
"""

from __future__ import annotations

import numpy as np

from ..gradcheck import close, numerical_param_gradients
from ..tensor import Tensor, unbroadcast
from .checking import NotYet, Verdict, attempt, mismatched, run_check
from .questions import Choice, Number

__all__ = [
    "check_matmul_vjp",
    "check_shared_weight_vjp",
    "check_linear_backward",
    "check_logsumexp_vjp",
    "check_unbroadcast",
    "book_matmul_vjp",
    "SELF_CHECKS",
]

TOL = 1e-10  # float64 rounding of a few dozen terms, with a wide margin


def _pair(result, names: str):
    if not (isinstance(result, tuple) and len(result) == len(names.split(", "))):
        raise NotYet(f"return the tuple ({names})")
    return result


def book_matmul_vjp(G, X, W):
    """(dX, dW) of Z = X @ W in exercise 1's form: the Tensor engine's own
    rule, `Tensor.matmul_backward`.  The chapter's later cells fall back on
    it until the reader's `matmul_vjp` passes."""
    return Tensor.matmul_backward(G, (X, W), (True, True))


def check_matmul_vjp(matmul_vjp, *, exercise: int) -> Verdict:
    """matmul_vjp(G, X, W) -> (dX, dW) for Z = X @ W, compared with PyTorch
    in float64 on a non-square W (a wrong product fails on its shape) and on
    a square one (where only the values can tell)."""
    import torch

    def check(matmul_vjp):
        todo = "write matmul_vjp(G, X, W) and run its cell"
        rng = np.random.default_rng(9)
        for m, n, k in ((3, 4, 2), (3, 3, 3)):
            X = rng.standard_normal((m, n))
            W = rng.standard_normal((n, k))
            G = rng.standard_normal((m, k))
            result = attempt(matmul_vjp, G, X, W, todo=todo)
            dX, dW = _pair(result, "dX, dW")
            for name, mine, like in (("dX", dX, X), ("dW", dW, W)):
                if np.shape(mine) != like.shape:
                    raise NotYet(
                        f"with X {X.shape} and W {W.shape}, {name} should "
                        f"have the shape of {name[1:]}, {like.shape}; got "
                        f"{np.shape(mine)}"
                    )
            x = torch.tensor(X, requires_grad=True)
            w = torch.tensor(W, requires_grad=True)
            ((x @ w) * torch.tensor(G)).sum().backward()
            for name, mine, ref in (("dX", dX, x.grad), ("dW", dW, w.grad)):
                if not close(mine, ref.numpy(), TOL):
                    raise NotYet(
                        f"with X {X.shape} and W {W.shape}, {name} has the "
                        "right shape but wrong values: write one entry as a "
                        "sum over the entries of Z it touches"
                    )

    return run_check(exercise, check, matmul_vjp)


def check_shared_weight_vjp(shared_weight_vjp, *, exercise: int) -> Verdict:
    """shared_weight_vjp(G, X, W) -> (dX, dW) for Z = X @ W with X (B, T, n)
    and one W (n, k), compared with PyTorch."""
    import torch

    def check(shared_weight_vjp):
        todo = "write shared_weight_vjp(G, X, W) and run its cell"
        rng = np.random.default_rng(10)
        X = rng.standard_normal((2, 3, 4))  # (B, T, n)
        W = rng.standard_normal((4, 5))  # (n, k)
        G = rng.standard_normal((2, 3, 5))  # (B, T, k)
        result = attempt(shared_weight_vjp, G, X, W, todo=todo)
        dX, dW = _pair(result, "dX, dW")
        if np.shape(dX) != X.shape or np.shape(dW) != W.shape:
            raise NotYet(
                f"dX should be {X.shape} and dW {W.shape}, "
                f"got {np.shape(dX)} and {np.shape(dW)}"
            )
        x = torch.tensor(X, requires_grad=True)
        w = torch.tensor(W, requires_grad=True)
        ((x @ w) * torch.tensor(G)).sum().backward()
        for name, mine, ref in (("dX", dX, x.grad), ("dW", dW, w.grad)):
            if not close(mine, ref.numpy(), TOL):
                raise NotYet(
                    f"{name} has the right shape but wrong values: W is used "
                    "once per (b, t) position, so its gradient sums over them"
                )

    return run_check(exercise, check, shared_weight_vjp)


def check_linear_backward(linear_backward, *, exercise: int) -> Verdict:
    """linear_backward(G, X, W) -> (dX, dW, db) for Y = X @ W + b, checked
    by centered differences on a square W, where the shapes cannot give a
    wrong formula away."""

    def check(linear_backward):
        todo = "write the fixed linear_backward(G, X, W) and run its cell"
        rng = np.random.default_rng(11)
        shapes = {"X": (4, 3), "W": (3, 3), "b": (3,)}
        inputs = {
            name: rng.standard_normal(shape) for name, shape in shapes.items()
        }
        G = rng.standard_normal((4, 3))  # (B, k)
        result = attempt(linear_backward, G, inputs["X"], inputs["W"], todo=todo)
        mine = dict(zip(("X", "W", "b"), _pair(result, "dX, dW, db")))

        def loss():  # L = sum(Y * G): its gradient is the VJP with G
            return float(((inputs["X"] @ inputs["W"] + inputs["b"]) * G).sum())

        numeric = numerical_param_gradients(loss, inputs)
        wrong = [f"d{name}" for name in mismatched(mine, numeric, 1e-6)]
        if wrong:
            raise NotYet(
                f"{' and '.join(wrong)} disagree with finite differences"
            )

    return run_check(exercise, check, linear_backward)


def check_logsumexp_vjp(logsumexp_vjp, *, exercise: int) -> Verdict:
    """logsumexp_vjp(g, z) -> (B, C): the VJP of log(sum(exp(z))) over the
    last axis, compared with PyTorch, also for logits near 1000."""
    import torch

    def check(logsumexp_vjp):
        todo = "write logsumexp_vjp(g, z) and run its cell"
        rng = np.random.default_rng(12)
        huge = np.array([[1000.0, 999.0, -1000.0], [0.0, 0.0, 0.0]])
        for z in (rng.standard_normal((3, 4)), huge):
            g = rng.standard_normal(z.shape[0])
            zt = torch.tensor(z, requires_grad=True)
            (torch.logsumexp(zt, dim=-1) * torch.tensor(g)).sum().backward()
            with np.errstate(all="ignore"):
                mine = np.asarray(attempt(logsumexp_vjp, g, z, todo=todo))
            if mine.shape != z.shape:
                raise NotYet(
                    f"the gradient should have shape {z.shape}, got {mine.shape}"
                )
            if not np.all(np.isfinite(mine)):
                raise NotYet(
                    "with logits near 1000 the result is not finite: subtract "
                    "the row maximum before exp"
                )
            if not close(mine, zt.grad.numpy(), TOL):
                raise NotYet("the values differ from PyTorch's gradient")

    return run_check(exercise, check, logsumexp_vjp)


def check_unbroadcast(my_unbroadcast, *, exercise: int) -> Verdict:
    """my_unbroadcast(grad, shape) must sum a (2, 3, 4) gradient back to
    seven shapes exactly as the package's `unbroadcast` does."""

    def check(my_unbroadcast):
        todo = "write my_unbroadcast(grad, shape) and run its cell"
        G = np.random.default_rng(13).standard_normal((2, 3, 4))
        for shape in [(2, 3, 4), (4,), (3, 1), (1, 4), (2, 1, 1), (1, 3, 1), ()]:
            mine = np.asarray(attempt(my_unbroadcast, G, shape, todo=todo))
            if mine.shape != shape:
                raise NotYet(f"(2, 3, 4) -> {shape} gives shape {mine.shape}")
            if not close(mine, unbroadcast(G, shape), TOL):
                raise NotYet(
                    f"(2, 3, 4) -> {shape} has the right shape, wrong sums"
                )

    return run_check(exercise, check, my_unbroadcast)


# ---- self-checks -------------------------------------------------------------

#: The chapter's self-check questions, shown by `widgets.self_check`.
SELF_CHECKS = {
    "weight-gradient-product": Choice(
        "Z = X @ W with X of shape (64, 100) and W of shape (100, 10). G = dL/dZ "
        "has shape (64, 10). Which product is dL/dW?",
        choices=["G @ W.T", "X.T @ G", "G.T @ X", "X @ G.T"],
        answer=1,
        hint="dL/dW has the shape of W, (100, 10): which product of X or X.T "
        "with G or G.T gives that shape?",
        explanation="X.T @ G is (100, 64) @ (64, 10) = (100, 10), the shape of "
        "W. G.T @ X has the transposed shape (10, 100); G @ W.T is dL/dX.",
    ),
    "broadcast-bias-gradient": Number(
        "A bias b of shape (3,) is added to an activation of shape (32, 10, 3). "
        "The upstream gradient is all ones. What is each entry of b's gradient?",
        answer=320,
        hint="Broadcasting copies b to every one of the 32 x 10 positions; its "
        "gradient sums over the copies.",
        explanation="unbroadcast sums the (32, 10, 3) gradient over the two "
        "leading axes: 32 * 10 = 320 ones per entry of b.",
    ),
}
