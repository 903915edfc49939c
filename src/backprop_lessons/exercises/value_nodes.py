"""Checks for the exercises of "Scalar Value nodes" (chapter 1).

    check_softplus(softplus)        softplus(v) as one new Value node
    check_divide(divide)            a / b as one node, gradients included
    check_hand_gradients(answer)    dh/da and dh/db of h = a*b + b**2, by hand

Each prints "Exercise N: ..." and returns a `Verdict` (see `checking`).
Gradients are compared with centered differences (`gradcheck`).

`SELF_CHECKS` holds the chapter's self-check questions (`questions`).
"""

from __future__ import annotations

import math

from ..gradcheck import numerical_gradient
from ..scalar import Value
from .checking import (
    NotYet,
    Verdict,
    attempt,
    readers_code,
    require_filled,
    run_check,
)
from .questions import Number

__all__ = [
    "check_softplus",
    "check_divide",
    "check_hand_gradients",
    "SELF_CHECKS",
]


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9)


def check_softplus(softplus, *, exercise: int) -> Verdict:
    """softplus(v) must return one new Value whose only input is v, with
    value ln(1 + e^x) and a gradient that matches centered differences, also
    at x = 800, where e^x overflows a float (so the formula must not form
    e^x there)."""

    def check(softplus):
        todo = "write softplus(v) and run its cell"
        for x in (-3.0, 0.0, 2.5, 800.0):
            v = Value(x, label="x")
            out = attempt(softplus, v, todo=todo)
            if not isinstance(out, Value) or list(out._children) != [v]:
                raise NotYet("return one new Value whose only input is v")
            expected = max(x, 0.0) + math.log1p(math.exp(-abs(x)))
            if not math.isclose(out.data, expected, rel_tol=1e-12):
                raise NotYet(
                    f"softplus({x}) should be {expected:.6f}, got {out.data:.6f}"
                )
            out.backward()
            with readers_code(todo):
                (numeric,) = numerical_gradient(
                    lambda xs: softplus(Value(xs[0])).data, [x]
                )
            if not _close(v.grad, numeric):
                raise NotYet(
                    f"at x = {x} the gradient is {v.grad:.6f}, a finite "
                    f"difference gives {numeric:.6f}: check the local derivative"
                )

    return run_check(exercise, check, softplus)


def check_divide(divide, *, exercise: int) -> Verdict:
    """divide(a, b) on two Values must give a / b and gradients that match
    centered differences, at three points."""

    def check(divide):
        todo = "write a fixed divide(a, b) and run its cell"
        for point in ([3.0, 2.0], [-1.5, 0.5], [2.0, -4.0]):
            a, b = Value(point[0], label="a"), Value(point[1], label="b")
            out = attempt(divide, a, b, todo=todo)
            if not isinstance(out, Value):
                raise NotYet(
                    f"divide must return a Value, got {type(out).__name__}"
                )
            if not math.isclose(out.data, point[0] / point[1], rel_tol=1e-12):
                raise NotYet(
                    f"divide({point[0]}, {point[1]}) should be "
                    f"{point[0] / point[1]}, got {out.data}"
                )
            out.backward()
            with readers_code(todo):
                numeric = numerical_gradient(
                    lambda xs: divide(Value(xs[0]), Value(xs[1])).data, point
                )
            for name, node, slope in (("a", a, numeric[0]), ("b", b, numeric[1])):
                if not _close(node.grad, slope):
                    raise NotYet(
                        f"at a = {point[0]}, b = {point[1]}: d/d{name} is "
                        f"{node.grad:.6f}, a finite difference gives {slope:.6f}"
                    )

    return run_check(exercise, check, divide)


def check_hand_gradients(answer, *, exercise: int) -> Verdict:
    """`answer` = {"a": dh/da, "b": dh/db} for h = a*b + b**2 at a = -2,
    b = 3, compared with the engine's gradients."""

    def check(answer):
        todo = 'fill in answer = {"a": ..., "b": ...} with your two numbers'
        answer = require_filled(answer, todo)
        if not isinstance(answer, dict) or set(answer) != {"a", "b"}:
            raise NotYet('answer must be a dict with the keys "a" and "b"')
        a, b = Value(-2.0, label="a"), Value(3.0, label="b")
        (a * b + b**2).backward()
        if not math.isclose(float(answer["a"]), a.grad, abs_tol=1e-9):
            raise NotYet(
                f"dh/da is not {answer['a']!r}: the product sends b to a"
            )
        if not math.isclose(float(answer["b"]), b.grad, abs_tol=1e-9):
            raise NotYet(
                f"dh/db is not {answer['b']!r}: b is used twice, so it gets "
                "a contribution from the product and one from the square"
            )

    return run_check(exercise, check, answer)


# ---- self-checks -------------------------------------------------------------

#: The chapter's self-check questions, shown by `widgets.self_check`.
SELF_CHECKS = {
    "relu-blocks-gradient": Number(
        "For f = relu(a*b + d) at a = 2, b = -3, d = 3, what is ∂f/∂a?",
        answer=0,
        hint="Compute a*b + d first: which side of zero is it on?",
        explanation="a*b + d = -3 < 0, so relu passes no gradient: ∂f/∂a = 0 "
        "(and so are ∂f/∂b and ∂f/∂d).",
    ),
    "backward-twice": Number(
        "x = Value(3.0); y = x * x; then y.backward() is called twice, with no "
        "zero_grad in between. What is x.grad?",
        answer=12,
        hint="One backward gives dy/dx = 2x. What does the second call add to?",
        explanation="Each backward adds 2x = 6 into x.grad: 6 + 6 = 12. Leaves "
        "accumulate across calls, as in PyTorch.",
    ),
}
