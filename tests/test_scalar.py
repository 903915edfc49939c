"""Tests of the scalar engine `backprop_lessons.scalar` against PyTorch (float64).

`check_op` runs one function on `Value`s and on float64 tensors and compares
first the forward value, then every input's gradient; each operation's test
is then one line in `OPERATIONS`.
"""

from __future__ import annotations

import functools
import math
import sys

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from backprop_lessons.gradcheck import relative_error
from backprop_lessons.scalar import Value, topological_order, zero_grad
from strategies import OPERATIONS as OPERATIONS_IN_GRAPHS
from strategies import (
    evaluate_graph,
    exponents,
    expression_graphs,
    floats,
    nonzero_floats,
    positive_floats,
)

FORWARD_TOL = 1e-13
GRAD_TOL = 1e-12


#: |a - b| / max(|a|, |b|, floor): relative, but absolute near zero
rel_err = functools.partial(relative_error, floor=1e-6)


def torch_reference(fn, xs):
    """fn on float64 leaf tensors: (output value, gradients)."""
    ts = [torch.tensor(x, dtype=torch.float64, requires_grad=True) for x in xs]
    out = fn(*ts)
    out.backward()
    return out.item(), [t.grad.item() if t.grad is not None else 0.0 for t in ts]


def check_op(fn, *xs, forward_tol=FORWARD_TOL, grad_tol=GRAD_TOL):
    """Compare `fn` on Values with `fn` on float64 tensors: type, forward, then
    gradients."""
    values = [Value(x) for x in xs]
    out = fn(*values)
    assert type(out) is Value and type(out.data) is float
    out.backward()
    expected, expected_grads = torch_reference(fn, xs)
    assert rel_err(out.data, expected) < forward_tol, (
        f"forward: ours {out.data!r}, torch {expected!r} at {xs}"
    )
    for k, (v, g) in enumerate(zip(values, expected_grads)):
        assert rel_err(v.grad, g) < grad_tol, (
            f"d/dx{k}: ours {v.grad!r}, torch {g!r} at {xs}"
        )


# ---- every operation, one line each ------------------------------------------


def op(fn, *strategies, grad_tol=GRAD_TOL):
    """One row of the table: the function, a strategy per argument, a
    tolerance."""
    return fn, strategies, grad_tol


# Where a derivative is computed as 1 - y^2 or y(1 - y) from a saturated
# output y, a one-ulp difference between libm's and PyTorch's tanh/sigmoid
# is amplified by 1 / (1 - y^2): the "_wide" rows need a looser tolerance.
x, y = floats(), floats()
OPERATIONS = {
    "add": op(lambda a, b: a + b, x, y),
    "sub": op(lambda a, b: a - b, x, y),
    "mul": op(lambda a, b: a * b, x, y),
    "div": op(lambda a, b: a / b, x, nonzero_floats()),
    "neg": op(lambda a: -a, x),
    "pow_int": op(lambda a: a**3, x),
    "pow_square": op(lambda a: a**2, x),
    "pow_neg_int": op(lambda a: a**-2, nonzero_floats()),
    "pow_frac": op(lambda a: a**0.5, positive_floats()),
    "pow_any": op(lambda a, k: a**k, positive_floats(), exponents()),
    "exp": op(lambda a: a.exp(), floats(20.0)),
    "log": op(lambda a: a.log(), positive_floats(1e-3, 1e3)),
    "relu": op(lambda a: a.relu(), x),
    "tanh": op(lambda a: a.tanh(), floats(3.0)),
    "tanh_wide": op(lambda a: a.tanh(), floats(30.0), grad_tol=1e-9),
    "sigmoid": op(lambda a: a.sigmoid(), floats(6.0)),
    "sigmoid_wide": op(lambda a: a.sigmoid(), floats(50.0), grad_tol=1e-9),
    "add_number": op(lambda a, c: a + c, x, y),
    "radd": op(lambda a, c: c + a, x, y),
    "sub_number": op(lambda a, c: a - c, x, y),
    "rsub": op(lambda a, c: c - a, x, y),
    "mul_number": op(lambda a, c: a * c, x, y),
    "rmul": op(lambda a, c: c * a, x, y),
    "div_number": op(lambda a, c: a / c, x, nonzero_floats()),
    "rdiv": op(lambda a, c: c / a, nonzero_floats(), y),
    "int_number": op(lambda a: 3 * a - 1, x),
    "same_twice": op(lambda a: a * a + a, x),
}
# Ops whose second argument is a Python number, not a Value (no gradient).
NUMBER_ARGS = {
    "pow_any",
    "add_number",
    "radd",
    "sub_number",
    "rsub",
    "mul_number",
    "rmul",
    "div_number",
    "rdiv",
}


@pytest.mark.parametrize("name", OPERATIONS)
@given(data=st.data())
def test_operation_matches_torch(name, data):
    fn, strategies, grad_tol = OPERATIONS[name]
    args = [data.draw(s, label=f"x{k}") for k, s in enumerate(strategies)]
    if name in NUMBER_ARGS:  # the number stays a Python number on both sides
        a, c = args
        check_op(lambda v: fn(v, c), a, grad_tol=grad_tol)
    else:
        check_op(fn, *args, grad_tol=grad_tol)


@pytest.mark.parametrize(
    "fn, x",
    [
        (lambda a: a.relu(), 0.0),  # the kink: derivative 0, as in PyTorch
        (lambda a: a.relu(), -0.0),
        (lambda a: a.tanh(), 1000.0),  # no overflow at large |x|
        (lambda a: a.tanh(), -1000.0),
        (lambda a: a.sigmoid(), -1000.0),
        (lambda a: a.sigmoid(), 1000.0),
        (lambda a: a.exp(), -1000.0),  # underflows to 0, gradient 0
        (lambda a: a**1, 0.0),
        (lambda a: a**2, 0.0),
        (lambda a: a**0, 2.0),
        (lambda a: a**0, 0.0),  # 0 ** 0 = 1, derivative 0
        (lambda a: a**0.5, 0.0),  # sqrt at 0: derivative +inf, as in PyTorch
        (lambda a: a**-1, 1e-300),  # finite value, derivative overflows to -inf
        (lambda a: a**-2, -1e-103),  # ... to +inf (sign of k x^(k-1))
        (lambda a: 1 / a, -1e-300),
    ],
    ids=[
        "relu0",
        "relu-0",
        "tanh+1000",
        "tanh-1000",
        "sigmoid-1000",
        "sigmoid+1000",
        "exp-1000",
        "pow1_at0",
        "pow2_at0",
        "pow0",
        "pow0_at0",
        "sqrt_at0",
        "inverse_tiny",
        "inverse_square_tiny",
        "rdiv_tiny",
    ],
)
def test_edge_points_match_torch(fn, x):
    check_op(fn, x)


def test_saturated_functions_have_exact_values_and_zero_gradients():
    for v, expected in [
        (Value(1000.0).tanh(), 1.0),
        (Value(-1000.0).tanh(), -1.0),
        (Value(1000.0).sigmoid(), 1.0),
        (Value(-1000.0).sigmoid(), 0.0),
    ]:
        a = v._children[0]
        v.backward()
        assert v.data == expected and a.grad == 0.0
        assert math.isfinite(v.data) and math.isfinite(a.grad)


# ---- random expression graphs --------------------------------------------------

# A gradient is a sum over paths.  Where the paths nearly cancel, the sum
# carries rounding noise of the size of the paths (~1e-16), not of the sum,
# and the two engines add the paths in different orders; so below
# |gradient| = 1e-3 the comparison becomes absolute (1e-15).
GRAPH_FLOOR = 1e-3


def test_random_expression_graphs_match_torch():
    """At least 200 random DAGs (reused nodes, mixed ops): all gradients match
    torch."""
    checked = []

    @settings(max_examples=220)
    @given(graph=expression_graphs())
    def check(graph):
        values = [Value(x) for x in graph.inputs]
        out = evaluate_graph(graph, values)
        out.backward()
        expected, expected_grads = torch_reference(
            lambda *ts: evaluate_graph(graph, list(ts)), graph.inputs
        )
        assert relative_error(out.data, expected, GRAPH_FLOOR) < GRAD_TOL, (
            out.data,
            expected,
        )
        for k, (v, g) in enumerate(zip(values, expected_grads)):
            assert relative_error(v.grad, g, GRAPH_FLOOR) < GRAD_TOL, (
                f"input {k}: ours {v.grad!r}, torch {g!r}"
            )
        checked.append(graph)

    check()
    assert len(checked) >= 200
    # The draws cover what the test claims: big graphs, reused nodes, every op.
    assert max(len(g) for g in checked) >= 20
    reused = [g for g in checked if _has_reused_node(g)]
    assert len(reused) >= len(checked) // 2
    assert {step[0] for g in checked for step in g.steps} == set(
        OPERATIONS_IN_GRAPHS
    )


def _has_reused_node(graph) -> bool:
    """True if some node feeds two steps, or the same step twice."""
    used = [i for step in graph.steps for i in _node_operands(step)]
    return len(used) != len(set(used))


def _node_operands(step: tuple) -> list[int]:
    op, i, *rest = step
    return [i, rest[0]] if op in ("add", "sub", "mul", "div") else [i]


# ---- graph structure -----------------------------------------------------------


def test_value_used_twice_gets_both_contributions():
    a = Value(3.0)
    b = a + a
    b.backward()
    assert a.grad == 2.0


def test_value_used_twice_at_two_levels():
    a = Value(3.0)
    b = a + a
    c = b + b
    c.backward()
    assert (c.data, b.grad, a.grad) == (12.0, 2.0, 4.0)


def test_worked_example_relu_of_affine():
    a, b, d = Value(2.0, "a"), Value(-3.0, "b"), Value(10.0, "d")
    e = a * b
    e.label = "e"
    c = e + d
    c.label = "c"
    f = c.relu()
    f.label = "f"
    f.backward()
    assert (e.data, c.data, f.data) == (-6.0, 4.0, 4.0)
    assert (a.grad, b.grad) == (-3.0, 2.0)
    assert (c.grad, d.grad, e.grad, f.grad) == (1.0, 1.0, 1.0, 1.0)


def test_deep_chain_without_raising_the_recursion_limit():
    default_limit = 1000  # CPython's default; the engine must not change it
    assert sys.getrecursionlimit() == default_limit
    x = Value(0.5)
    v = x
    for _ in range(100_000):
        v = v + x
    v.backward()
    assert sys.getrecursionlimit() == default_limit
    assert v.data == 0.5 * 100_001
    assert x.grad == 100_001.0
    assert len(topological_order(v)) == 100_001
    del v  # freeing a 100,000-deep chain must not crash either


def test_topological_order_puts_inputs_first_and_lists_each_node_once():
    a, b = Value(1.0), Value(2.0)
    c = a * b
    d = c + a
    e = d * c
    order = topological_order(e)
    assert order[-1] is e
    assert len(order) == len({id(v) for v in order}) == 5
    position = {id(v): i for i, v in enumerate(order)}
    for v in order:
        for child in v._children:
            assert position[id(child)] < position[id(v)]
    assert [v.data for v in order] == [1.0, 2.0, 2.0, 3.0, 6.0]  # left to right


def test_backward_twice_doubles_leaf_gradients_exactly():
    a, b = Value(1.5), Value(-0.7)
    h = (a * b).tanh()
    out = h * a + b.exp()
    out.backward()
    leaves1 = (a.grad, b.grad)
    inner1 = (h.grad, out.grad)
    out.backward()
    assert (a.grad, b.grad) == (2 * leaves1[0], 2 * leaves1[1])
    # Intermediate gradients are recomputed from zero, not accumulated.
    assert (h.grad, out.grad) == inner1
    zero_grad([a, b])
    assert (a.grad, b.grad) == (0.0, 0.0)
    out.backward()
    assert (a.grad, b.grad) == leaves1


def test_two_losses_sharing_a_subexpression_accumulate():
    a = Value(0.3)
    h = a.tanh()
    loss1, loss2 = h * 2.0, h * h
    loss1.backward()
    loss2.backward()
    expected = (2.0 + 2 * h.data) * (1 - h.data**2)
    assert a.grad == pytest.approx(expected, rel=1e-15)


def test_zero_grad_resets_every_given_value():
    vs = [Value(float(i)) for i in range(4)]
    (vs[0] * vs[1] + vs[2] * vs[3]).backward()
    assert any(v.grad for v in vs)
    zero_grad(vs)
    assert [v.grad for v in vs] == [0.0] * 4


def test_repr_is_stable():
    assert repr(Value(2.0)) == "Value(data=2.0, grad=0.0)"
    assert repr(Value(-1, label="w")) == "Value(data=-1.0, grad=0.0, label='w')"
    v = Value(3.0) * 2
    v.backward()
    assert repr(v) == "Value(data=6.0, grad=1.0)"
    assert "0x" not in repr(v)


def test_numbers_become_floats():
    import numpy as np

    for number in (2, 2.0, np.float64(2.0), np.int64(2), np.float32(2.0)):
        v = Value(number)
        assert type(v.data) is float and v.data == 2.0


# ---- errors name the operation and the values ----------------------------------


@pytest.mark.parametrize(
    "make, error, words",
    [
        (lambda: Value("a"), TypeError, ["construction", "str", "'a'"]),
        (lambda: Value(None), TypeError, ["construction", "NoneType"]),
        (lambda: Value(True), TypeError, ["construction", "bool"]),
        (lambda: Value(1) + "x", TypeError, ["Value +", "str"]),
        (lambda: "x" + Value(1), TypeError, ["Value +", "str"]),
        (lambda: Value(1) - "x", TypeError, ["Value -", "str"]),
        (lambda: "x" - Value(1), TypeError, ["Value -", "str"]),
        (lambda: Value(1) * [2], TypeError, ["Value *", "list"]),
        (lambda: Value(1) / "x", TypeError, ["Value /", "str"]),
        (lambda: "x" / Value(1), TypeError, ["Value /", "str"]),
        (lambda: Value(1) + True, TypeError, ["Value +", "bool"]),
        (lambda: Value(2) ** True, TypeError, ["Value **", "bool"]),
        (lambda: Value(2) ** "3", TypeError, ["Value **", "str"]),
        (
            lambda: Value(2) ** Value(3),
            TypeError,
            ["Value **", "numeric exponents", "3.0"],
        ),
        (lambda: Value(0).log(), ValueError, ["Value log", "0.0"]),
        (lambda: Value(-1).log(), ValueError, ["Value log", "-1.0"]),
        (lambda: Value(1) / 0, ZeroDivisionError, ["Value /", "0.0"]),
        (lambda: Value(1) / Value(0.0), ZeroDivisionError, ["Value /", "0.0"]),
        (lambda: 1 / Value(0), ZeroDivisionError, ["Value /", "0.0"]),
        (lambda: Value(0) ** -1, ZeroDivisionError, ["Value **", "0.0"]),
        (
            lambda: Value(-8) ** (1 / 3),
            ValueError,
            ["Value **", "-8.0", "negative base"],
        ),
        (
            lambda: Value(-2) ** 0.5,
            ValueError,
            ["Value **", "-2.0", "integer exponent"],
        ),
        (lambda: Value(1000).exp(), OverflowError, ["Value exp", "1000.0"]),
        (lambda: Value(10) ** 400, OverflowError, ["Value **", "10.0", "400.0"]),
    ],
    ids=lambda p: None,
)
def test_bad_input_raises_a_clear_error(make, error, words):
    with pytest.raises(error) as info:
        make()
    for word in words:
        assert word in str(info.value), f"{word!r} not in {str(info.value)!r}"


def test_tanh_local_derivative_is_rounding_in_the_tail():
    """Chapter 1: 1 - t^2 from the rounded output t loses relative accuracy
    as t nears 1 and is exactly 0 once t rounds to 1, where the true
    derivative 4 e^{-2x} / (1 + e^{-2x})^2 is tiny but not 0."""

    def true_slope(x):
        e = math.exp(-2 * x)
        return 4 * e / (1 + e) ** 2

    def local(x):
        return Value(x).tanh()._local_grads[0]

    def error(x):  # relative to the true slope, however small (floor 0)
        return relative_error(local(x), true_slope(x), floor=0.0)

    assert error(5.0) < 1e-10
    assert error(15.0) > 1e-4
    assert Value(20.0).tanh().data == 1.0 and local(20.0) == 0.0
    assert 1e-17 < true_slope(20.0) < 2e-17
