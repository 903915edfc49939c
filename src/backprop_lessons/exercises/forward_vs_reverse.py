"""Checks for the exercises of "Forward mode vs reverse mode" (chapter 3).

    check_jvp_rule(rule)                           a fixed sigmoid JVP rule
    check_directional_derivative(directional_derivative)   J v in one pass
    check_passes_per_step(passes_per_step)         passes per gradient, by method

The counts come from `forward_mode.count_operations` (or from calling f
itself), so they are exact.  Each check names what an answer may not call
(`checking.run_check`'s `refuse=`: the book's own sigmoid rule, the counter,
PyTorch's autograd; see each check) and prints no number the reader is
asked to find: a wrong answer is told by its slip, checked again on inputs
drawn here.  Each prints "Exercise N: ..." and returns a `Verdict` (see
`checking`).

`SELF_CHECKS` holds the chapter's self-check questions (`questions`).
"""

from __future__ import annotations

import contextlib
import numbers

import numpy as np

from .. import forward_mode as fm
from ..forward_mode import (
    Dual,
    count_operations,
    exp,
    finite_difference_jacobian,
    jacobian_forward,
    jacobian_reverse,
    log,
    sigmoid,
    tanh,
)
from ..gradcheck import close, numerical_gradient
from ..scalar import Value
from .checking import (
    AUTOGRAD,
    NotYet,
    Verdict,
    attempt,
    readers_code,
    run_check,
)
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
    """rule((x,), (x_dot,)) -> (sigmoid(x), its tangent): full Jacobians and
    values of a function with sigmoid inside other operations must equal
    reverse mode's, at three points, and a zero tangent must give a zero
    tangent.

    Refused (`_JVP_REFUSED`): the book's sigmoid rule (`sigmoid_jvp`, also
    reached through a Dual's sigmoid), reverse mode's sigmoid derivative
    (`Value.sigmoid`) and PyTorch's autograd: the rule's tangent is the
    exercise, by hand."""

    def g(xs):
        x, y = xs
        return [sigmoid(3 * x * y) + sigmoid(x) * y, sigmoid(-y / x) * 2]

    def check(rule):
        todo = "write the fixed rule and run its cell"
        out = attempt(rule, (0.3,), (1.0,), todo=todo)
        if not (isinstance(out, tuple) and len(out) == 2):
            raise NotYet("a JVP rule returns a pair (output, output tangent)")
        for point in ([0.3, 0.8], [-1.2, 0.5], [2.1, -1.7]):
            with _installed("sigmoid", rule), readers_code(todo):
                J = jacobian_forward(g, point)
                values, zero_dot = fm.jvp(g, point, [0.0, 0.0])
            J_ref = jacobian_reverse(g, point)
            for row, row_ref in zip(J, J_ref):
                for a, b in zip(row, row_ref):
                    if not close(a, b, 1e-12):
                        raise NotYet(
                            "the Jacobian differs from reverse mode: the chain "
                            "rule multiplies the local derivative by x_dot"
                        )
            if not all(close(a, b, 1e-12) for a, b in zip(values, g(point))):
                raise NotYet(
                    "the Jacobian is right, but the rule's first output is "
                    "not sigmoid(x)"
                )
            if any(d != 0.0 for d in zero_dot):
                raise NotYet("a zero tangent must give a zero output tangent")

    return run_check(exercise, check, rule, refuse=_JVP_REFUSED)


#: what a sigmoid rule may not call: the book's rule and reverse mode's
#: sigmoid, and PyTorch's autograd
_JVP_REFUSED = (fm.sigmoid_jvp, Value.sigmoid, AUTOGRAD)


def _second(xs):
    """A second scalar function of four inputs for the held-out cases."""
    a, b, c, d = xs
    return exp(a * b) * tanh(c - d) + log(1 + d * d) / (2 + sigmoid(a))


def check_directional_derivative(
    directional_derivative, *, exercise: int
) -> Verdict:
    """directional_derivative(f, xs, v) must return grad f . v with exactly
    one pass of f, on Duals: checked on two functions at points and
    directions drawn here (none printed), against reverse mode's gradient.

    Counted by calling f itself: one pass on Duals (through `jvp` or by
    hand) is right; a pass on Values is reverse mode (a forward and a
    backward pass); more passes on floats are finite differences.
    PyTorch's autograd is refused (`AUTOGRAD`): the rate is forward mode's,
    and `jvp` is the chapter's own tool for it."""

    def check(directional_derivative):
        todo = "write directional_derivative(f, xs, v) and run its cell"
        rng = np.random.default_rng(3)
        cases = [(bump, 3, [0.4, -0.9, 1.1]), (bump, 3, None), (_second, 4, None)]
        for function, n, point in cases:
            xs = point or [float(x) for x in rng.uniform(0.3, 1.5, n)]
            v = [float(d) for d in rng.standard_normal(n)]
            passes = []

            def f(inputs, function=function, passes=passes):
                passes.append(type(inputs[0]))
                return function(inputs)

            rate = attempt(directional_derivative, f, xs, v, todo=todo)
            (grad,) = jacobian_reverse(function, xs)
            expected = sum(g * d for g, d in zip(grad, v))
            _judge_rate(rate, expected, function(xs), passes)

    return run_check(exercise, check, directional_derivative, refuse=(AUTOGRAD,))


def _judge_rate(rate, expected: float, value: float, passes: list) -> None:
    """NotYet naming what is wrong with a directional derivative `rate`
    computed with the passes of f in `passes` (the type of each pass's
    inputs)."""
    if Value in passes:
        raise NotYet(
            "that is reverse mode: a pass of f on Values, then a backward "
            "pass, two passes for the whole gradient; one forward-mode pass "
            "with the inputs' tangents seeded with v gives J v alone"
        )
    if len(passes) != 1:
        raise NotYet(
            f"{len(passes)} passes of f, expected 1: seed the inputs' "
            "tangents with v"
        )
    if isinstance(rate, Dual):
        raise NotYet("that is the output Dual: the rate is its tangent")
    if isinstance(rate, tuple) and len(rate) == 2:
        raise NotYet(
            "that is a pair: jvp returns (f's value, the rate); return the "
            "rate alone"
        )
    if not isinstance(rate, numbers.Real):
        raise NotYet(f"return one number, the rate; got {type(rate).__name__}")
    if close(rate, value, 1e-12, floor=0.0):
        raise NotYet("that is f's value at xs: the rate is the output's tangent")
    if not close(rate, expected, 1e-12, floor=0.0):
        raise NotYet(
            "the rate differs from grad f . v (reverse mode's gradient dotted "
            "with v): are the inputs' tangents exactly the entries of v?"
        )


#: what passes_per_step may not call: the counter and the runs it counts
#: (measuring the passes is the answer; the exercise asks for a formula)
_COUNTING = (
    fm.count_operations.__wrapped__,
    fm.count_primitives,
    finite_difference_jacobian,
    jacobian_forward,
    jacobian_reverse,
    numerical_gradient,
)

#: method -> [(a wrong formula, as a function of P; what it misses)]
_PASS_SLIPS = {
    "one-sided": [
        (lambda P: P, "one-sided differences also evaluate f once at x itself"),
        (
            lambda P: 2 * P,
            "that is centered differences' count: one-sided ones shift each "
            "input one way only",
        ),
    ],
    "centered": [
        (
            lambda P: P + 1,
            "that is one-sided differences' count: centered ones evaluate f "
            "at x + h e_j and at x - h e_j for every input",
        ),
        (lambda P: P, "centered differences take two passes per input"),
        (
            lambda P: 2 * P + 1,
            "centered differences never evaluate f at x itself",
        ),
    ],
    "forward": [
        (
            lambda P: P + 1,
            "forward mode needs no pass at x alone: each Dual pass carries "
            "the value too",
        ),
        (
            lambda P: 2 * P,
            "a forward-mode pass carries its tangent in the same pass: count "
            "passes, not operations",
        ),
        (
            lambda P: 1,
            "one forward-mode pass gives one directional derivative; the "
            "gradient has P entries",
        ),
    ],
    "reverse": [
        (lambda P: 1, "the backward pass counts as one pass too"),
        (
            lambda P: P,
            "reverse mode's passes do not grow with P: one backward pass "
            "gives every entry of the gradient",
        ),
        (
            lambda P: 2 * P,
            "reverse mode's passes do not grow with P: one backward pass "
            "gives every entry of the gradient",
        ),
    ],
}


def check_passes_per_step(passes_per_step, *, exercise: int) -> Verdict:
    """passes_per_step(P, method) for the four methods, against the counts
    of real runs (a backward pass counts as one pass) at P = 3, 17 and one
    more P drawn here, and the 4,064-parameter totals of 500 steps.  No
    count is printed: a wrong formula is told by its slip, or which way it
    is off.  Refused (`_COUNTING`): the counter and the runs it counts,
    since measuring the passes is the answer."""

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
        held_out = int(np.random.default_rng(4).integers(5, 12))
        for P in (3, 17, held_out):
            xs = [0.1 * k for k in range(1, P + 1)]
            for method, run in runs.items():
                formula = attempt(passes_per_step, P, method, todo=todo)
                with count_operations() as ops:
                    run(tanh_chain, xs)
                measured = ops.evaluations + (1 if method == "reverse" else 0)
                if formula != measured:
                    raise NotYet(_wrong_count(method, P, formula, measured))
        totals = [
            500 * attempt(passes_per_step, 4064, method, todo=todo)
            for method in ("one-sided", "reverse")
        ]
        if totals != [2_032_500, 1000]:
            raise NotYet("the 4,064-parameter totals do not match")

    return run_check(exercise, check, passes_per_step, refuse=_COUNTING)


def _wrong_count(method: str, P: int, formula, measured: int) -> str:
    """What is wrong with `formula` passes where a run took `measured`, in
    words (the count itself is the exercise's answer, never printed)."""
    said = f"for {method} with P = {P} your formula gives {formula!r}"
    if not isinstance(formula, numbers.Real) or isinstance(formula, bool):
        return f"{said}: return a number of passes"
    for wrong, hint in _PASS_SLIPS[method]:
        if formula == wrong(P):
            return f"{said}: {hint}"
    way = "more" if formula > measured else "fewer"
    return (
        f"{said}, {way} than a real run takes: count the passes over f for "
        "one gradient"
    )


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
