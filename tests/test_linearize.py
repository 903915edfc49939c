"""Tests of `backprop_lessons.linearize`: reverse mode as the transpose of
forward mode.

The VJP that linearize-then-transpose builds (with no VJP rule) must equal
the Tensor engine's backward (hand-written VJP rules) and PyTorch's, on
random expression graphs; the linear program must be J (its run is chapter
3's JVP); and the dot-product test <J v, u> = <v, J^T u> holds exactly in
exact arithmetic, so to round-off here.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from backprop_lessons import forward_mode as fm
from backprop_lessons.gradcheck import dot_product_test, relative_error
from backprop_lessons.linearize import (
    LinearProgram,
    LinearVar,
    linearize,
    transpose,
    vjp,
)
from backprop_lessons.tensor import Tensor
from strategies import evaluate_graph, expression_graphs


def two_outputs(x):
    a, b, c = x
    h = (a * b + 1.0).tanh()
    return [
        h * a - b / 2.0,
        (h * h).exp() + c.log() - b.sigmoid(),
        (a - c).relu(),
    ]


XS = [0.5, 2.0, 1.5]


def test_the_program_is_the_jacobian():
    _, program = linearize(two_outputs, XS)
    J = fm.jacobian_forward(two_outputs, XS)
    for j in range(3):
        e = [1.0 if i == j else 0.0 for i in range(3)]
        assert program(e) == pytest.approx([row[j] for row in J], rel=1e-14)


def test_vjp_matches_the_tensor_engines_backward_and_torch():
    u = [1.0, -2.0, 0.5]
    out, ct = vjp(two_outputs, XS, u)
    xs = [Tensor(np.array(x), requires_grad=True) for x in XS]
    ys = two_outputs(xs)
    loss = ys[0] * u[0] + ys[1] * u[1] + ys[2] * u[2]
    loss.backward()
    assert relative_error(ct, [x.grad for x in xs]) < 1e-14
    assert out == pytest.approx([y.item() for y in ys], rel=1e-14)
    tx = torch.tensor(XS, dtype=torch.float64, requires_grad=True)
    ty = torch.stack(two_outputs(list(tx)))
    (ref,) = torch.autograd.grad(ty, tx, torch.tensor(u, dtype=torch.float64))
    assert relative_error(ct, ref.numpy()) < 1e-14


@given(expression_graphs())
def test_vjp_equals_tensor_backward_on_random_graphs(graph):
    xs = list(graph.inputs)
    out, (ct) = vjp(lambda v: evaluate_graph(graph, v), xs, 1.0)
    ts = [Tensor(np.array(x), requires_grad=True) for x in xs]
    y = evaluate_graph(graph, ts)
    if not isinstance(y, Tensor) or not y.requires_grad:
        return
    y.backward()
    ours = np.array(ct)
    theirs = np.array([t.grad if t.grad is not None else 0.0 for t in ts])
    assert relative_error(ours, theirs) < 1e-12
    assert out == pytest.approx(y.item(), rel=1e-12)


@given(expression_graphs(), st.integers(0, 1000))
def test_dot_product_test_holds_on_random_graphs(graph, seed):
    xs = list(graph.inputs)
    _, program = linearize(lambda v: evaluate_graph(graph, v), xs)
    row = dot_product_test(
        lambda vs: np.array(program([float(v) for v in vs[0]])),
        lambda u: [np.array(program.transpose()(float(u)))],
        [(len(xs),)],
        seed=seed,
        tol=1e-12,
    )
    assert row.passed, str(row)


def test_the_program_prints_as_a_jaxpr():
    _, program = linearize(lambda x: x[0] * x[1] + x[0], [2.0, 3.0])
    text = str(program)
    assert text.splitlines()[0] == "{ lambda a b ."
    assert "scale a 3" in text and "scale b 2" in text and "add" in text
    assert text.endswith("}")
    assert program([1.0, 0.0]) == 4.0 and program([0.0, 1.0]) == 2.0
    assert transpose(program)(1.0) == [4.0, 2.0]


def test_constant_outputs_and_forward_mode_functions():
    out, ct = vjp(lambda x: [fm.tanh(x[0]), 3.0], [0.2], [1.0, 1.0])
    assert out[1] == 3.0
    assert ct == pytest.approx([1 - np.tanh(0.2) ** 2], rel=1e-15)


def test_count_operations_counts_the_tangent_rules():
    with fm.count_operations() as ops:
        linearize(two_outputs, XS)
    assert ops.evaluations == 1 and ops.tangent_rules == ops.primitives > 0


def test_nonlinear_tangent_operations_are_errors():
    program = LinearProgram(2)
    a, b = LinearVar(program, 0), LinearVar(program, 1)
    with pytest.raises(TypeError, match="tangent times a tangent"):
        a * b
    with pytest.raises(TypeError, match="plus the constant"):
        a + 1.0
    with pytest.raises(TypeError, match="dividing by a tangent"):
        a / b
    assert a + 0.0 is a and (a * 0.0) == 0.0


def test_bad_arguments_are_named():
    with pytest.raises(TypeError, match="linearize: f must be a function"):
        linearize(3, [1.0])
    with pytest.raises(ValueError, match="linearize: primals"):
        linearize(lambda x: x, [])
    with pytest.raises(
        TypeError, match="transpose: program must be a LinearProgram"
    ):
        transpose(lambda u: u)
    _, program = linearize(lambda x: x[0] * x[1], [1.0, 2.0])
    with pytest.raises(ValueError, match="2 tangents expected, got 1"):
        program([1.0])
