"""Tests of `backprop_lessons.forward_mode`: dual numbers, JVPs/VJPs,
Jacobians, counting.

Every test function is written once against a namespace of unary functions
(`fm` for floats, Duals and Values; `torch` for tensors), so the same formula
is differentiated by forward mode, reverse mode, finite differences and
PyTorch (float64).
"""

from __future__ import annotations

import functools
import math
from types import SimpleNamespace

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from backprop_lessons import forward_mode as fm
from backprop_lessons.forward_mode import (
    Dual,
    count_operations,
    count_primitives,
    finite_difference_jacobian,
    jacobian_forward,
    jacobian_reverse,
    jvp,
    jvp_rules,
    vjp,
)
from backprop_lessons.gradcheck import relative_error
from backprop_lessons.scalar import Value, topological_order

EXACT_TOL = 1e-12  # forward vs reverse vs torch: both exact up to rounding
CENTERED_TOL = 1e-7  # centered differences, eps = 1e-6: O(eps^2) + O(1e-16 / eps)

TORCH = SimpleNamespace(
    exp=torch.exp,
    log=torch.log,
    tanh=torch.tanh,
    sigmoid=torch.sigmoid,
    relu=torch.relu,
)


rel_err = functools.partial(relative_error, floor=1e-6)


def max_rel_err(A, B, floor: float = 1e-6) -> float:
    """The largest relative error of any one entry (stricter than one error
    over the whole matrix)."""
    assert len(A) == len(B) and all(len(a) == len(b) for a, b in zip(A, B))
    return max(
        relative_error(a, b, floor)
        for ra, rb in zip(A, B)
        for a, b in zip(ra, rb)
    )


# ---- test functions: (name, f(xs, ops), point) --------------------------------


def mixed(xs, ops):
    x, y, z = xs
    return (
        ops.tanh(x * y)
        + ops.exp(z) / y
        - ops.log(x * x + 1) * ops.sigmoid(z)
        + 3 / (y - 4)
    )


def chain(xs, ops):
    total = 0
    for a, b in zip(xs, xs[1:]):
        total = total + ops.tanh(a * b) + ops.relu(a - 0.1) * b**2
    return total


def powers(xs, ops):
    x, y = xs
    return x**3 - 2 * x**-2 + y**0.5 - 1 / y + (1 - x) * y


def neuron_layer(xs, ops):
    """Three tanh neurons of fixed weights: 4 inputs -> 3 outputs."""
    w = [[0.5, -1.0, 0.3, 0.8], [-0.2, 0.4, 1.1, -0.7], [0.9, 0.1, -0.6, 0.2]]
    return [
        ops.tanh(sum(wi * xi for wi, xi in zip(row, xs)) + 0.1 * k)
        for k, row in enumerate(w)
    ]


def curve(xs, ops):
    """2 inputs -> 7 outputs: a*t + b squashed, for 7 values of t."""
    a, b = xs
    return [
        ops.sigmoid(a * t + b) * ops.exp(-a * a * t)
        for t in (-1.5, -1, -0.5, 0, 0.5, 1, 1.5)
    ]


def softmax_like(xs, ops):
    es = [ops.exp(x) for x in xs]
    total = sum(es)
    return [e / total for e in es]


FUNCTIONS = [
    ("mixed", mixed, [0.7, 1.3, -0.4]),
    ("chain", chain, [0.3, -0.8, 1.2, 0.5, 0.9, -1.1]),
    ("powers", powers, [1.4, 2.5]),
    ("neuron_layer", neuron_layer, [0.2, -0.5, 1.0, 0.4]),
    ("curve", curve, [0.8, -0.3]),
    ("softmax_like", softmax_like, [0.1, 1.2, -0.7, 0.4]),
]
IDS = [name for name, _, _ in FUNCTIONS]


def on_numbers(f):
    return lambda xs: f(xs, fm)


def on_torch(f):
    def g(x):
        out = f(list(x.unbind()), TORCH)
        return torch.stack(out) if isinstance(out, list) else out

    return g


# ---- forward, reverse and finite differences agree ----------------------------


@pytest.mark.parametrize("name,f,xs", FUNCTIONS, ids=IDS)
def test_forward_equals_reverse(name, f, xs):
    J_fwd = jacobian_forward(on_numbers(f), xs)
    J_rev = jacobian_reverse(on_numbers(f), xs)
    assert max_rel_err(J_fwd, J_rev) < EXACT_TOL


@pytest.mark.parametrize("name,f,xs", FUNCTIONS, ids=IDS)
def test_centered_differences_agree(name, f, xs):
    J_fd = finite_difference_jacobian(on_numbers(f), xs, eps=1e-6)
    assert max_rel_err(J_fd, jacobian_forward(on_numbers(f), xs)) < CENTERED_TOL


@pytest.mark.parametrize("name,f,xs", FUNCTIONS, ids=IDS)
def test_finite_difference_orders(name, f, xs):
    """Halving eps divides the error by ~2 (one-sided) and ~4 (centered)."""
    exact = jacobian_reverse(on_numbers(f), xs)

    def error(eps, scheme):
        J = finite_difference_jacobian(on_numbers(f), xs, eps=eps, scheme=scheme)
        return max(abs(a - b) for ra, rb in zip(J, exact) for a, b in zip(ra, rb))

    one_sided = math.log2(error(2e-3, "one-sided") / error(1e-3, "one-sided"))
    centered = math.log2(error(2e-3, "centered") / error(1e-3, "centered"))
    assert one_sided == pytest.approx(1.0, abs=0.1)
    assert centered == pytest.approx(2.0, abs=0.1)


@pytest.mark.parametrize("name,f,xs", FUNCTIONS, ids=IDS)
def test_values_match_float_evaluation(name, f, xs):
    out_float = on_numbers(f)(xs)
    out_jvp, _ = jvp(on_numbers(f), xs, [1.0] * len(xs))
    out_vjp, _ = vjp(
        on_numbers(f),
        xs,
        [1.0] * (len(out_float) if isinstance(out_float, list) else 1),
    )

    # / is a * b**-1 on Duals and Values, a single division on floats:
    # last-bit differences
    def flat(o):
        return o if isinstance(o, list) else [o]

    assert max_rel_err([flat(out_jvp)], [flat(out_float)]) < 1e-13
    assert flat(out_jvp) == flat(out_vjp)


# ---- against PyTorch, float64 -----------------------------------------------


@pytest.mark.parametrize("name,f,xs", FUNCTIONS, ids=IDS)
def test_jvp_matches_torch(name, f, xs):
    v = [0.3, -1.2, 0.7, 0.5, -0.4, 1.1][: len(xs)]
    out, out_dot = jvp(on_numbers(f), xs, v)
    t_out, t_dot = torch.func.jvp(
        on_torch(f),
        (torch.tensor(xs, dtype=torch.float64),),
        (torch.tensor(v, dtype=torch.float64),),
    )
    out, out_dot = (out, out_dot) if isinstance(out, list) else ([out], [out_dot])
    assert max_rel_err([out], [t_out.reshape(-1).tolist()]) < EXACT_TOL
    assert max_rel_err([out_dot], [t_dot.reshape(-1).tolist()]) < EXACT_TOL


@pytest.mark.parametrize("name,f,xs", FUNCTIONS, ids=IDS)
def test_vjp_and_jacobian_match_torch(name, f, xs):
    x = torch.tensor(xs, dtype=torch.float64)
    J_torch = (
        torch.autograd.functional.jacobian(on_torch(f), x)
        .reshape(-1, len(xs))
        .tolist()
    )
    assert max_rel_err(jacobian_reverse(on_numbers(f), xs), J_torch) < EXACT_TOL
    u = [0.5 - 0.25 * i for i in range(len(J_torch))]
    out, x_bar = vjp(on_numbers(f), xs, u if len(u) > 1 else u[0])
    _, t_vjp = torch.func.vjp(on_torch(f), x)
    (t_bar,) = t_vjp(torch.tensor(u if len(u) > 1 else u[0], dtype=torch.float64))
    assert max_rel_err([x_bar], [t_bar.tolist()]) < EXACT_TOL


PRIMITIVES = [
    ("exp", lambda d: d.exp(), torch.exp, 0.6),
    ("log", lambda d: d.log(), torch.log, 1.7),
    ("tanh", lambda d: d.tanh(), torch.tanh, -0.8),
    ("sigmoid", lambda d: d.sigmoid(), torch.sigmoid, -2.5),
    ("sigmoid large", lambda d: d.sigmoid(), torch.sigmoid, 40.0),
    ("relu +", lambda d: d.relu(), torch.relu, 0.9),
    ("relu -", lambda d: d.relu(), torch.relu, -0.9),
    ("pow 3", lambda d: d**3, lambda t: t**3, -1.3),
    ("pow -1.5", lambda d: d**-1.5, lambda t: t**-1.5, 2.2),
    ("neg", lambda d: -d, lambda t: -t, 0.4),
    ("sub", lambda d: 2.5 - d - d * d, lambda t: 2.5 - t - t * t, 0.4),
    ("div", lambda d: (1 + d) / (d * 3), lambda t: (1 + t) / (t * 3), 0.4),
    ("rdiv", lambda d: 2 / d, lambda t: 2 / t, -0.7),
]


@pytest.mark.parametrize(
    "name,dual_fn,torch_fn,x", PRIMITIVES, ids=[p[0] for p in PRIMITIVES]
)
def test_primitive_matches_torch(name, dual_fn, torch_fn, x):
    y = dual_fn(Dual(x, 1.0))
    t_y, t_dot = torch.func.jvp(
        torch_fn,
        (torch.tensor(x, dtype=torch.float64),),
        (torch.tensor(1.0, dtype=torch.float64),),
    )
    assert rel_err(y.value, t_y.item()) < EXACT_TOL
    assert rel_err(y.tangent, t_dot.item()) < EXACT_TOL


@given(st.floats(-5, 5), st.floats(-5, 5), st.floats(-3, 3))
def test_jvp_is_linear_in_the_tangent(a, b, s):
    f = on_numbers(mixed)
    xs, v = [1.1, 0.9, 0.2], [a, b, 0.5]
    _, d1 = jvp(f, xs, v)
    _, d2 = jvp(f, xs, [s * t for t in v])
    assert d2 == pytest.approx(s * d1, rel=1e-12, abs=1e-12)


def test_every_primitive_has_a_rule():
    assert set(jvp_rules) == {
        "add",
        "mul",
        "pow",
        "exp",
        "log",
        "relu",
        "tanh",
        "sigmoid",
    }


def test_unary_functions_on_floats_duals_and_values():
    for name in ("exp", "log", "tanh", "sigmoid", "relu"):
        fn = getattr(fm, name)
        assert fn(0.8) == fn(Dual(0.8)).value == fn(Value(0.8)).data
    assert fm.relu(-1.0) == 0.0 and fm.sigmoid(-800.0) == 0.0


# ---- counting -----------------------------------------------------------------


@pytest.mark.parametrize("name,f,xs", FUNCTIONS, ids=IDS)
def test_dual_primitives_equal_value_nodes(name, f, xs):
    """Dual and Value build - and / from the same primitives, so the counts
    agree."""
    outs = on_numbers(f)([Value(x) for x in xs])
    outs = outs if isinstance(outs, list) else [outs]
    nodes = {id(n): n for o in outs for n in topological_order(o)}
    assert count_primitives(on_numbers(f), xs) == sum(
        bool(n._children) for n in nodes.values()
    )


@pytest.mark.parametrize("name,f,xs", FUNCTIONS, ids=IDS)
def test_counts(name, f, xs):
    g, P = on_numbers(f), len(xs)
    N = count_primitives(g, xs)
    M = len(g(xs)) if isinstance(g(xs), list) else 1
    with count_operations() as fwd:
        jacobian_forward(g, xs)
    with count_operations() as rev:
        jacobian_reverse(g, xs)
    with count_operations() as cen:
        finite_difference_jacobian(g, xs)
    with count_operations() as one:
        finite_difference_jacobian(g, xs, scheme="one-sided")
    assert (fwd.evaluations, fwd.primitives, fwd.tangent_rules) == (
        P,
        P * N,
        P * N,
    )
    assert (rev.evaluations, rev.primitives, rev.tangent_rules) == (1, N, 0)
    assert (
        M <= rev.backward_steps <= 2 * N * M
    )  # each primitive has at most two inputs
    assert (cen.evaluations, cen.primitives) == (2 * P, 2 * P * N)
    assert (one.evaluations, one.primitives) == (P + 1, (P + 1) * N)


def test_reverse_cost_of_a_gradient_does_not_grow_with_inputs():
    """One backward step per edge: 2-3 forward passes' worth, whatever P is."""
    for P in (4, 16, 64):
        xs = [0.1 * ((i % 7) - 3) for i in range(P)]
        g = on_numbers(chain)
        with count_operations() as ops:
            jacobian_reverse(g, xs)
        assert 2.0 <= ops.operations / count_primitives(g, xs) <= 3.0


def test_vjp_counts_one_backward():
    g = on_numbers(curve)
    with count_operations() as ops:
        vjp(g, [0.8, -0.3], [1.0] * 7)
    assert (
        ops.evaluations == 1 and ops.tangent_rules == 0 and ops.backward_steps > 0
    )


def test_counting_blocks_nest_and_count_primitives_is_private():
    """An inner block's operations count in the outer block too; the probe
    pass of count_primitives counts in neither."""
    g = on_numbers(chain)
    xs = [0.3, -0.2, 0.5]
    with count_operations() as outer:
        jvp(g, xs, [1.0, 0.0, 0.0])
        with count_operations() as inner:
            jacobian_reverse(g, xs)
            N = count_primitives(g, xs)
    assert (inner.evaluations, inner.primitives, inner.tangent_rules) == (1, N, 0)
    assert outer.evaluations == 2
    assert outer.primitives == 2 * N and outer.tangent_rules == N
    assert outer.backward_steps == inner.backward_steps > 0


def test_counting_leaves_no_interpreter_behind_after_an_error():
    with pytest.raises(ZeroDivisionError), count_operations():
        jvp(lambda xs: 1.0 / xs[0], [0.0], [1.0])
    assert fm._interpreters == [fm._interpreters[0]]
    with count_operations() as ops:
        jvp(lambda xs: xs[0] * 2, [1.0], [1.0])
    assert ops.primitives == 1


def test_rules_are_pure_functions_that_never_count():
    """The counting happens around the rules: calling one directly counts
    nothing, even inside a counting block."""
    with count_operations() as ops:
        assert fm.jvp_rules["mul"]((2.0, 3.0), (1.0, 0.0)) == (6.0, 3.0)
    assert ops == fm.OperationCount()


# ---- errors --------------------------------------------------------------------


@pytest.mark.parametrize(
    "expr,exc,message",
    [
        (
            lambda: Dual(1.0) + "a",
            TypeError,
            r"Dual \+: expected a Dual or a real number, got str",
        ),
        (
            lambda: Dual(1.0) * None,
            TypeError,
            r"Dual \*: expected a Dual or a real number",
        ),
        (lambda: "a" - Dual(1.0), TypeError, r"Dual -: expected"),
        (lambda: Dual("x"), TypeError, r"Dual construction: expected"),
        (lambda: Dual(1.0, [1]), TypeError, r"Dual construction: expected"),
        (
            lambda: Dual(2.0) ** Dual(1.0),
            TypeError,
            r"Dual \*\*: only numeric exponents",
        ),
        (
            lambda: Dual(0.0) ** -1,
            ZeroDivisionError,
            r"Dual \*\*: 0.0 \*\* -1.0 is undefined",
        ),
        (
            lambda: Dual(-2.0) ** 0.5,
            ValueError,
            r"Dual \*\*: -2.0 \*\* 0.5 is not a real number",
        ),
        (
            lambda: Dual(1.0) / 0,
            ZeroDivisionError,
            r"Dual /: division of 1.0 by 0.0",
        ),
        (
            lambda: 1 / Dual(0.0),
            ZeroDivisionError,
            r"Dual /: division of 1.0 by 0.0",
        ),
        (
            lambda: Dual(0.0).log(),
            ValueError,
            r"Dual log: log is defined for positive numbers, got 0.0",
        ),
        (
            lambda: Dual(1000.0).exp(),
            OverflowError,
            r"Dual exp: exp\(1000.0\) overflows",
        ),
        (
            lambda: fm.log(-1.0),
            ValueError,
            r"log: log is defined for positive numbers, got -1.0",
        ),
        (lambda: fm.exp("a"), TypeError, r"Dual exp: expected"),
        (
            lambda: jvp(lambda xs: xs[0], [1.0, 2.0], [1.0]),
            ValueError,
            r"jvp: 2 primals but 1 tangents",
        ),
        (
            lambda: jvp(lambda xs: xs[0], [], []),
            ValueError,
            r"jvp primals: expected at least one input",
        ),
        (
            lambda: jvp(lambda xs: xs[0], [1.0, "b"], [1.0, 0.0]),
            TypeError,
            r"jvp primals: input 1 must be a real number",
        ),
        (
            lambda: jvp(lambda xs: "out", [1.0], [1.0]),
            TypeError,
            r"jvp: f must return a number or a non-empty list",
        ),
        (
            lambda: jacobian_forward(lambda xs: xs[0], 3.0),
            TypeError,
            r"jacobian_forward: expected a sequence",
        ),
        (
            lambda: jacobian_reverse(lambda xs: [], [1.0]),
            TypeError,
            r"jacobian_reverse: f must return",
        ),
        (
            lambda: vjp(lambda xs: [xs[0], xs[0]], [1.0], [1.0]),
            ValueError,
            r"vjp: f has 2 outputs but 1 cotangents",
        ),
        (
            lambda: finite_difference_jacobian(
                lambda xs: xs[0], [1.0], scheme="backward"
            ),
            ValueError,
            r"numerical_gradient: scheme must be one of \('centered', "
            r"'one-sided'\), got 'backward'",
        ),
        (
            lambda: finite_difference_jacobian(lambda xs: xs[0], [1.0], eps=0),
            ValueError,
            r"eps must be a positive number, got 0",
        ),
    ],
)
def test_errors(expr, exc, message):
    with pytest.raises(exc, match=message):
        expr()


def test_constant_outputs_have_zero_derivatives():
    def f(xs):
        return [xs[0] * 2, 5.0]

    assert jacobian_forward(f, [1.0]) == [[2.0], [0.0]]
    assert jacobian_reverse(f, [1.0]) == [[2.0], [0.0]]
    (d_first,), (d_constant,) = finite_difference_jacobian(f, [1.0])
    assert d_first == pytest.approx(2.0) and d_constant == 0.0
