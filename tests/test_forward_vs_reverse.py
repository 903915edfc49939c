"""Chapter 3's checks against gaming: what each refuses (the book's sigmoid
rule, called directly, through a name bound at import or a Dual's method;
reverse mode's sigmoid; PyTorch's gradient; the pass counter), and no
number the reader is asked to find in a hint, so that a table of the
printed values does not pass the cases drawn by the check."""

from __future__ import annotations

import math

import pytest

from backprop_lessons import forward_mode as fm
from backprop_lessons.exercises import forward_vs_reverse as E
from backprop_lessons.forward_mode import Dual, jacobian_reverse, jvp
from backprop_lessons.forward_mode import sigmoid_jvp as bound_rule
from backprop_lessons.scalar import Value
from verdicts import refused


def sigmoid_rule(primals, tangents):
    (x,), (x_dot,) = primals, tangents
    s = 1.0 / (1.0 + math.exp(-x))
    return s, s * (1.0 - s) * x_dot


def by_a_dual(primals, tangents):  # the book's rule through Dual.sigmoid
    out = fm.sigmoid(Dual(primals[0], tangents[0]))
    return out.value, out.tangent


def by_reverse_mode(primals, tangents):  # Value.sigmoid's derivative
    v = Value(primals[0])
    s = v.sigmoid()
    s.backward()
    return s.data, v.grad * tangents[0]


def by_torch(primals, tangents):  # PyTorch's gradient returned
    torch = pytest.importorskip("torch")
    x = torch.tensor(primals[0], dtype=torch.float64, requires_grad=True)
    s = torch.sigmoid(x)
    (g,) = torch.autograd.grad(s, x)
    return float(s), float(g) * tangents[0]


@pytest.mark.parametrize(
    "rule, called",
    [
        (lambda p, t: fm.sigmoid_jvp(p, t), "backprop_lessons.forward_mode."),
        (lambda p, t: bound_rule(p, t), "backprop_lessons.forward_mode."),
        (by_a_dual, "backprop_lessons.forward_mode.sigmoid_jvp"),
        (by_reverse_mode, "backprop_lessons.scalar.Value.sigmoid"),
        (by_torch, "torch.autograd.grad, PyTorch's autograd"),
    ],
)
def test_the_jvp_rule_may_not_borrow_a_derivative(rule, called, capsys):
    assert E.check_jvp_rule(sigmoid_rule, exercise=1).correct
    refused(E.check_jvp_rule(rule, exercise=1), called)
    assert fm.jvp_rules["sigmoid"] is fm.sigmoid_jvp  # put back


def test_a_directional_derivative_by_hand_seeded_duals_passes(capsys):
    def by_jvp(f, xs, v):
        return jvp(f, xs, v)[1]

    def by_hand(f, xs, v):
        return f([Dual(x, d) for x, d in zip(xs, v)]).tangent

    for right in (by_jvp, by_hand):
        assert E.check_directional_derivative(right, exercise=2).correct


@pytest.mark.parametrize(
    "wrong, words",
    [
        (
            lambda f, xs, v: sum(
                g * d for g, d in zip(jacobian_reverse(f, xs)[0], v)
            ),
            "that is reverse mode",
        ),
        (lambda f, xs, v: jvp(f, xs, v), "jvp returns (f's value, the rate)"),
        (lambda f, xs, v: jvp(f, xs, v)[0], "that is f's value"),
        (lambda f, xs, v: f([Dual(x, d) for x, d in zip(xs, v)]), "output Dual"),
        (lambda f, xs, v: 2 * jvp(f, xs, v)[1], "grad f . v"),
    ],
)
def test_a_wrong_directional_derivative_is_told_without_the_value(
    wrong, words, capsys
):
    verdict = E.check_directional_derivative(wrong, exercise=2)
    assert verdict.status == "not yet" and words in verdict.hint, verdict
    assert "expected" not in verdict.hint and "got " not in verdict.hint


def test_a_table_of_the_first_case_does_not_pass(capsys):
    """The old check printed the expected rate on a wrong answer: a table
    of it passed.  The check now draws more points and directions."""
    xs, v = [0.4, -0.9, 1.1], [1.0, 2.0, -0.5]
    (grad,) = jacobian_reverse(E.bump, xs)
    printed = sum(g * d for g, d in zip(grad, v))

    def table(f, xs, v):
        f([Dual(x, d) for x, d in zip(xs, v)])  # one pass, as counted
        return printed

    verdict = E.check_directional_derivative(table, exercise=2)
    assert verdict.status == "not yet", str(verdict)
    assert f"{printed}" not in verdict.hint


def test_directional_derivative_refuses_torch(capsys):
    torch = pytest.importorskip("torch")

    def by_torch(f, xs, v):
        x = torch.tensor(xs, dtype=torch.float64)
        return float(torch.func.jvp(lambda t: (t**2).sum(), (x,), (x,))[1])

    refused(
        E.check_directional_derivative(by_torch, exercise=2),
        "torch.func.jvp, PyTorch's autograd",
    )


def passes(P, method):
    return {"one-sided": P + 1, "centered": 2 * P, "forward": P, "reverse": 2}[
        method
    ]


def test_passes_per_step_may_not_count_them(capsys):
    from backprop_lessons.forward_mode import count_operations

    def counted(P, method):  # measures instead of a formula
        xs = [0.1 * k for k in range(1, P + 1)]
        with count_operations() as ops:
            fm.finite_difference_jacobian(E.tanh_chain, xs)
        return ops.evaluations

    def run_it(P, method):  # the package's run, its f's calls counted
        calls = []
        fm.jacobian_forward(
            lambda xs: calls.append(1) or E.tanh_chain(xs), [0.1] * P
        )
        return len(calls)

    assert E.check_passes_per_step(passes, exercise=3).correct
    refused(
        E.check_passes_per_step(counted, exercise=3),
        "backprop_lessons.forward_mode.count_operations",
    )
    refused(
        E.check_passes_per_step(run_it, exercise=3),
        "backprop_lessons.forward_mode.jacobian_forward",
    )


@pytest.mark.parametrize(
    "method, wrong, words",
    [
        ("one-sided", lambda P: P, "once at x itself"),
        ("centered", lambda P: P + 1, "one-sided differences' count"),
        ("forward", lambda P: 2 * P, "count passes, not operations"),
        ("reverse", lambda P: 1, "the backward pass counts as one pass"),
        ("reverse", lambda P: 4, "more than a real run takes"),
    ],
)
def test_a_wrong_count_is_told_by_its_slip_not_the_count(
    method, wrong, words, capsys
):
    def formula(P, m):
        return wrong(P) if m == method else passes(P, m)

    verdict = E.check_passes_per_step(formula, exercise=3)
    assert verdict.status == "not yet" and words in verdict.hint, verdict
    # the hint quotes the reader's own number, never the measured one
    P = 3
    assert f"gives {wrong(P)!r}" in verdict.hint
    assert f" {passes(P, method)} passes" not in verdict.hint


def test_a_table_of_the_printed_cases_does_not_pass(capsys):
    """A formula right at the P the chapter shows (3 and 17) and wrong
    elsewhere fails the P the check draws."""

    def table(P, method):
        return passes(P, method) if P in (3, 17, 4064) else 0

    assert E.check_passes_per_step(table, exercise=3).status == "not yet"
