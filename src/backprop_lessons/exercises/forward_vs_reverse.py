"""Checks for the exercises of "Forward mode vs reverse mode" (chapter 3).

    check_jvp_rule(rule)                           a fixed sigmoid JVP rule
    check_directional_derivative(directional_derivative)   J v in one pass
    check_passes_per_step(passes_per_step)         passes per gradient, by method

The counts come from `forward_mode.count_operations`, so they are exact.
Each check prints "Exercise N: ..." and returns a `Verdict` (see
`checking`).

`SELF_CHECKS` holds the chapter's self-check questions (`questions`).
"""

from __future__ import annotations

import contextlib

from .. import forward_mode as fm
from ..forward_mode import (
    count_operations,
    exp,
    finite_difference_jacobian,
    jacobian_forward,
    jacobian_reverse,
    log,
    sigmoid,
    tanh,
)
from ..gradcheck import close
from .checking import NotYet, Verdict, attempt, readers_code, run_check
from .questions import Choice, Number

__all__ = [
    "check_jvp_rule",
    "check_directional_derivative",
    "check_passes_per_step",
    "bump",
    "tanh_chain",
    "SELF_CHECKS",
]

METHODS = ("one-sided", "centered", "forward", "reverse")


def bump(xs):
    """A scalar function of three inputs (chapter 3's running example)."""
    x, y, z = xs
    return tanh(x * y) + exp(z) / y - log(x * x + 1) * sigmoid(z)


def tanh_chain(xs):
    """sum_i tanh(x_i x_{i+1}): a scalar function of P inputs with about 3P
    primitives."""
    total = 0.0
    for a, b in zip(xs, xs[1:]):
        total = total + tanh(a * b)
    return total


@contextlib.contextmanager
def _installed(name: str, rule):
    """jvp_rules[name] = rule inside the block, the package's rule after it."""
    saved = fm.jvp_rules[name]
    fm.jvp_rules[name] = rule
    try:
        yield
    finally:
        fm.jvp_rules[name] = saved


def check_jvp_rule(rule, *, exercise: int) -> Verdict:
    """rule((x,), (x_dot,)) -> (sigmoid(x), its tangent): full Jacobians of a
    function with sigmoid inside other operations must equal reverse mode,
    and a zero tangent must give a zero tangent."""

    def g(xs):
        x, y = xs
        return [sigmoid(3 * x * y) + sigmoid(x) * y, sigmoid(-y / x) * 2]

    def check(rule):
        todo = "write the fixed rule and run its cell"
        out = attempt(rule, (0.3,), (1.0,), todo=todo)
        if not (isinstance(out, tuple) and len(out) == 2):
            raise NotYet("a JVP rule returns a pair (output, output tangent)")
        for point in ([0.3, 0.8], [-1.2, 0.5]):
            with _installed("sigmoid", rule), readers_code(todo):
                J = jacobian_forward(g, point)
                _, zero_dot = fm.jvp(g, point, [0.0, 0.0])
            J_ref = jacobian_reverse(g, point)
            for row, row_ref in zip(J, J_ref):
                for a, b in zip(row, row_ref):
                    if not close(a, b, 1e-12):
                        raise NotYet(
                            "the Jacobian differs from reverse mode: the chain "
                            "rule multiplies the local derivative by x_dot"
                        )
            if any(d != 0.0 for d in zero_dot):
                raise NotYet("a zero tangent must give a zero output tangent")

    return run_check(exercise, check, rule)


def check_directional_derivative(
    directional_derivative, *, exercise: int
) -> Verdict:
    """directional_derivative(f, xs, v) must return grad f . v with exactly
    one pass of f."""

    def check(directional_derivative):
        todo = "write directional_derivative(f, xs, v) and run its cell"
        xs, v = [0.4, -0.9, 1.1], [1.0, 2.0, -0.5]
        with count_operations() as ops:
            rate = attempt(directional_derivative, bump, xs, v, todo=todo)
        (grad,) = jacobian_reverse(bump, xs)
        expected = sum(g * d for g, d in zip(grad, v))
        if ops.evaluations != 1:
            raise NotYet(
                f"{ops.evaluations} passes of f, expected 1: seed the inputs' "
                "tangents with v"
            )
        if not close(rate, expected, 1e-12, floor=0.0):
            raise NotYet(f"got {rate}, expected {expected}")

    return run_check(exercise, check, directional_derivative)


def check_passes_per_step(passes_per_step, *, exercise: int) -> Verdict:
    """passes_per_step(P, method) for the four methods, against the counts
    of real runs (a backward pass counts as one pass) and the 4,064-parameter
    totals of 500 steps."""

    def one_sided(f, xs):
        return finite_difference_jacobian(f, xs, scheme="one-sided")

    runs = {
        "one-sided": one_sided,
        "centered": finite_difference_jacobian,
        "forward": jacobian_forward,
        "reverse": jacobian_reverse,
    }

    def check(passes_per_step):
        todo = "write passes_per_step(P, method) and run its cell"
        for P in (3, 17):
            xs = [0.1 * k for k in range(1, P + 1)]
            for method, run in runs.items():
                formula = attempt(passes_per_step, P, method, todo=todo)
                with count_operations() as ops:
                    run(tanh_chain, xs)
                measured = ops.evaluations + (1 if method == "reverse" else 0)
                if formula != measured:
                    raise NotYet(
                        f"{method} with P = {P} took {measured} passes, "
                        f"the formula gives {formula!r}"
                    )
        if (
            500 * passes_per_step(4064, "one-sided") != 2_032_500
            or 500 * passes_per_step(4064, "reverse") != 1000
        ):
            raise NotYet("the 4,064-parameter totals do not match")

    return run_check(exercise, check, passes_per_step)


# ---- self-checks -------------------------------------------------------------

#: The chapter's self-check questions, shown by `widgets.self_check`.
SELF_CHECKS = {
    "passes-for-a-gradient": Number(
        "A loss has P = 1,000 inputs and one output. How many forward-mode "
        "(Dual) passes does its full gradient take?",
        answer=1000,
        hint="One forward-mode pass gives one JVP: the derivative along one "
        "direction.",
        explanation="Each pass seeds one input's tangent with 1 and gives one "
        "partial derivative, so 1,000 passes; reverse mode gets all "
        "of them from one forward and one backward pass.",
    ),
    "few-inputs-many-outputs": Choice(
        "A simulation maps 3 input parameters to 10,000 outputs, and you need "
        "its full Jacobian. Which gets it with the fewest passes?",
        choices=[
            "forward mode: one pass per input",
            "reverse mode: one backward pass per output",
            "centered finite differences: two passes per input",
        ],
        answer=0,
        hint="Count passes: one column of J per forward-mode pass, one row per "
        "reverse-mode pass.",
        explanation="Forward mode needs 3 passes (one per input), reverse mode "
        "10,000 (one per output), centered differences 6 and only "
        "approximate values: min(P, M) = 3 favours forward mode.",
    ),
}
