"""Checks for the exercises of "Derivatives of derivatives and function
transforms" (chapter 11).

    check_hvp(hvp)                          H v by reverse over reverse
    check_clipped_mean_gradient(fn)         DP-SGD's clipped gradient, vmap

`check_hvp` judges on the Tensor engine (its reference is the engine's own
double backward, to float64 rounding; finite differences of the gradient
tell a wrong answer's kind); the second check runs on PyTorch and compares
with a Python loop over the examples.  Both exercises are about autograd
itself, so what each refuses is decided apart (see each check): the first
asks for the Tensor engine's reverse over reverse and refuses finite
differences, the book's scalar HVPs and PyTorch; the second asks for
`torch.func` and refuses nothing.  Each check prints "Exercise N: ..." and
returns a `Verdict` (see `checking`).

`SELF_CHECKS` holds the chapter's self-check questions (`questions`).
"""

from __future__ import annotations

import numpy as np

from .. import higher_order as scalar_hvps
from ..gradcheck import close, directional_derivative, numerical_gradient
from ..tensor import Tensor, cross_entropy, grad
from .checking import AUTOGRAD, NotYet, Verdict, attempt, run_check
from .questions import Choice, Number

__all__ = [
    "check_hvp",
    "check_clipped_mean_gradient",
    "tiny_mlp_loss",
    "SELF_CHECKS",
]


def tiny_mlp_loss(params, X, y):
    """Mean cross-entropy of a one-hidden-layer tanh MLP on the Tensor engine:
    params = [W1 (D, H), b1 (H,), W2 (H, C), b2 (C,)] Tensors."""
    W1, b1, W2, b2 = params
    return cross_entropy((Tensor(X) @ W1 + b1).tanh() @ W2 + b2, y)


def _problem(seed: int):
    rng = np.random.default_rng(seed)
    X, y = rng.standard_normal((6, 3)), rng.integers(0, 4, 6)
    arrays = [
        rng.standard_normal((3, 5)) / 2,
        rng.standard_normal(5) / 4,
        rng.standard_normal((5, 4)) / 2,
        rng.standard_normal(4) / 4,
    ]
    vs = [rng.standard_normal(a.shape) for a in arrays]
    return X, y, arrays, vs


def _gradient(loss_fn, arrays):
    params = [Tensor(a, requires_grad=True) for a in arrays]
    return [g.data for g in grad(loss_fn(params), params)]


def _exact_hvp(loss_fn, arrays, vs):
    """H v by the engine's reverse over reverse: the check's reference."""
    params = [Tensor(a, requires_grad=True) for a in arrays]
    gs = grad(loss_fn(params), params, create_graph=True)
    dot = sum((g * Tensor(v)).sum() for g, v in zip(gs, vs))
    return [h.data for h in grad(dot, params)]


#: what hvp may not call: finite differences (the check's own kind of
#: reference, which passes no test of reverse over reverse), the book's
#: scalar HVPs, and PyTorch's autograd (the exercise is the Tensor
#: engine's double backward)
_HVP_REFUSED = (
    directional_derivative,
    numerical_gradient,
    scalar_hvps.hvp_forward_over_reverse,
    scalar_hvps.hvp_reverse_over_reverse,
    AUTOGRAD,
)


def check_hvp(hvp, *, exercise: int) -> Verdict:
    """hvp(loss_fn, arrays, vs) -> a list of arrays H v (one per parameter),
    with H the Hessian of loss_fn(params) at `arrays`: checked against the
    engine's own reverse over reverse to 1e-10 (finite differences agree to
    only about 1e-8), at two problems drawn here.

    The exercise is autograd's, the Tensor engine's `grad(...,
    create_graph=True)`, which stays allowed; refused (`_HVP_REFUSED`):
    finite differences of the gradient, the book's scalar HVPs and
    PyTorch's autograd, each an HVP that is not the engine's double
    backward."""

    def check(hvp):
        todo = "write hvp(loss_fn, arrays, vs) and run its cell"
        for seed in (0, 5):
            X, y, arrays, vs = _problem(seed)

            def loss_fn(params, X=X, y=y):
                return tiny_mlp_loss(params, X, y)

            out = attempt(hvp, loss_fn, arrays, vs, todo=todo)
            out = [o.data if isinstance(o, Tensor) else o for o in out]
            if len(out) != len(arrays):
                raise NotYet(f"return one array per parameter ({len(arrays)})")
            g = _gradient(loss_fn, arrays)
            if all(close(o, gi, 1e-9) for o, gi in zip(out, g)):
                raise NotYet(
                    "that is the gradient itself: differentiate <gradient, v> "
                    "a second time (the first grad needs create_graph=True)"
                )
            for o, a in zip(out, arrays):
                if np.shape(o) != a.shape:
                    raise NotYet(
                        f"H v has each parameter's shape: got {np.shape(o)}, "
                        f"expected {a.shape}"
                    )
            exact = _exact_hvp(loss_fn, arrays, vs)
            if all(close(o, r, 1e-10) for o, r in zip(out, exact)):
                continue
            # H v: the gradient's change along v, by centered differences
            flat = directional_derivative(
                lambda moved, loss_fn=loss_fn: np.concatenate(
                    [g.ravel() for g in _gradient(loss_fn, moved)]
                ),
                arrays,
                vs,
                eps=1e-5,
            )
            numeric = np.split(flat, np.cumsum([a.size for a in arrays])[:-1])
            if all(
                close(o, r.reshape(o.shape), 1e-6) for o, r in zip(out, numeric)
            ):
                raise NotYet(
                    "H v is only about right, as finite differences give it: "
                    "take it exactly, by the engine's reverse over reverse"
                )
            raise NotYet(
                "H v differs from reverse over reverse: take grad of "
                "sum_i (g_i * v_i).sum() with respect to the same parameters"
            )

    return run_check(exercise, check, hvp, refuse=_HVP_REFUSED)


def check_clipped_mean_gradient(
    clipped_mean_gradient, *, exercise: int
) -> Verdict:
    """clipped_mean_gradient(loss_one, params, X, y, C) -> a dict name ->
    tensor: the sum over the batch of each example's gradient, scaled so
    that its norm (over all parameters together) is at most C, divided by
    the batch size.  DP-SGD's update without its noise, which DP-SGD adds
    to the sum before the division (Abadi et al. 2016).

    Nothing is refused: the exercise is `torch.func`'s per-example
    gradients (PyTorch's autograd is its tool), and the package has no
    per-example clipping of its own."""
    import torch  # this check runs on PyTorch

    def check(fn):
        todo = "write clipped_mean_gradient(...) and run its cell"
        g = torch.Generator().manual_seed(0)
        params = {
            "w": torch.randn(3, 2, generator=g, dtype=torch.float64),
            "b": torch.randn(2, generator=g, dtype=torch.float64),
        }
        X = torch.randn(8, 3, generator=g, dtype=torch.float64)
        y = torch.randint(0, 2, (8,), generator=g)

        def loss_one(p, x, t):
            z = x @ p["w"] + p["b"]
            return torch.nn.functional.cross_entropy(z[None], t[None])

        C = 0.5
        out = attempt(fn, loss_one, params, X, y, C, todo=todo)
        if not isinstance(out, dict) or set(out) != set(params):
            raise NotYet(f"return a dict with the keys {sorted(params)}")
        total = {k: torch.zeros_like(v) for k, v in params.items()}
        for i in range(len(X)):  # the loop vmap replaces
            p = {k: v.clone().requires_grad_(True) for k, v in params.items()}
            gs = torch.autograd.grad(loss_one(p, X[i], y[i]), list(p.values()))
            norm = torch.sqrt(sum((gi**2).sum() for gi in gs))
            scale = min(1.0, C / float(norm))
            for k, gi in zip(p, gs):
                total[k] += gi * scale / len(X)
        plain = {k: torch.zeros_like(v) for k, v in params.items()}
        for i in range(len(X)):
            p = {k: v.clone().requires_grad_(True) for k, v in params.items()}
            gs = torch.autograd.grad(loss_one(p, X[i], y[i]), list(p.values()))
            for k, gi in zip(p, gs):
                plain[k] += gi / len(X)
        ours = {
            k: np.asarray(torch.as_tensor(v).detach()) for k, v in out.items()
        }
        if all(close(ours[k], plain[k].numpy(), 1e-10) for k in params):
            raise NotYet(
                "that is the plain mean gradient: scale each example's "
                "gradient by min(1, C / its norm) before averaging"
            )
        if not all(close(ours[k], total[k].numpy(), 1e-10) for k in params):
            raise NotYet(
                "the clipped mean differs from a loop over the examples: the "
                "norm of an example's gradient is over all parameters "
                "together, sqrt(sum_k |g_k|^2)"
            )

    return run_check(exercise, check, clipped_mean_gradient)


# ---- self-checks -------------------------------------------------------------

#: The chapter's self-check questions, shown by `widgets.self_check`.
SELF_CHECKS = {
    "hvps-for-a-hessian": Number(
        "A model has P = 1,000 parameters. How many Hessian-vector products "
        "give its full Hessian?",
        answer=1000,
        hint="One HVP gives one column, H e_i.",
        explanation="One per column: 1,000 HVPs, each a small constant times a "
        "gradient, for 1,000,000 entries.",
    ),
    "clip-per-example": Choice(
        "DP-SGD clips each example's gradient before summing them. Why can it "
        "not clip the gradient of the mean loss instead?",
        [
            "The mean gradient is a sum over examples: one example's share of it "
            "cannot be recovered, so its influence cannot be bounded",
            "The mean gradient is too expensive to compute",
            "Clipping the mean gradient changes its direction",
        ],
        answer=0,
        hint="What does DP-SGD bound: the whole gradient, or each example's "
        "contribution to it?",
        explanation="The guarantee bounds what any one example can change, so "
        "each example's gradient is clipped on its own; the sum "
        "mixes them irreversibly. Per-example gradients (vmap) "
        "make that possible in one batched pass.",
    ),
}
