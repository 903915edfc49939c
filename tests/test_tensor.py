"""Tests of the NumPy Tensor engine (`backprop_lessons.tensor`).

Every operation is checked against PyTorch in float64 by one helper,
`check_op`: shape, dtype, forward values, then the gradients of the random
projection sum(out * dout) for every input.  Relative errors are measured
with `relative_error` (difference relative to the arrays' scale).

Second derivatives, `grad(..., create_graph=True)`, follow: every
Hessian-vector product is compared with PyTorch's double backward in
float64 (relative error < 1e-10).  The graphs are random: a seeded
generator (`random_graph`) builds a chain of the engine's operations whose
second operands are leaves of their own with broadcast shapes (inserted and
stretched axes, on either side), so mixed second derivatives (d^2 / da db)
are checked too.  The same program runs on both engines (`Ops`).  Hypothesis
draws the seeds and chain lengths; the seeded loops add many more graphs.
"""

from __future__ import annotations

import gc

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from backprop_lessons import tensor as T
from backprop_lessons.gradcheck import (
    compare_with_torch,
    gradcheck,
    relative_error,
)
from backprop_lessons.tensor import (
    Tensor,
    cross_entropy,
    grad,
    log_softmax,
    softmax,
    unbroadcast,
    zero_grad,
)
from strategies import evaluate_graph, expression_graphs
from tensor_strategies import (
    broadcast_pairs,
    chain_operands,
    matmul_shapes,
    op_chains,
    random_array,
    run_chain,
    seeds,
)

# ---- the operations and their first derivatives ------------------------------


FWD_TOL = 1e-12  # forward values, relative to the output's scale
GRAD_TOL = 1e-12  # gradients, relative to each gradient's scale


def check_op(
    f, *shapes, torch_f=None, low=None, seed=0, fwd_tol=FWD_TOL, grad_tol=GRAD_TOL
):
    """Run `f` on Tensors and `torch_f` (default `f`) on torch float64 tensors
    from the same
    random arrays (uniform in [low, low + 2] if `low` is given, else standard
    normal);
    compare shape, dtype, values and the gradients of sum(out * dout)."""
    arrays = [random_array(s, seed + i, low) for i, s in enumerate(shapes)]
    ours = [Tensor(a, requires_grad=True) for a in arrays]
    theirs = [torch.tensor(a, requires_grad=True) for a in arrays]
    out, ref = f(*ours), (torch_f or f)(*theirs)
    assert out.shape == tuple(ref.shape), (out.shape, tuple(ref.shape))
    assert out.data.dtype == np.float64
    assert relative_error(out.data, ref.detach().numpy()) < fwd_tol
    dout = np.random.default_rng(seed + 100).standard_normal(out.shape)
    out.backward(dout)
    (ref * torch.from_numpy(dout)).sum().backward()
    for i, (t, r) in enumerate(zip(ours, theirs)):
        assert t.grad is not None and t.grad.shape == t.shape, f"input {i}"
        err = relative_error(t.grad, r.grad.numpy())
        assert err < grad_tol, f"input {i}: gradient relative error {err:.2e}"


# ---- one line per operation ----------------------------------------------------


def test_matmul():
    check_op(lambda a, b: a @ b, (3, 4), (4, 5))


def test_matmul_batched():
    check_op(lambda a, b: a @ b, (2, 3, 4), (2, 4, 5))


def test_matmul_batch_broadcast():
    check_op(lambda a, b: a @ b, (2, 1, 3, 4), (5, 4, 2))


def test_matmul_shared_weight():
    check_op(lambda a, b: a @ b, (2, 3, 4), (4, 5))


def test_add_broadcast():
    check_op(lambda a, b: a + b, (4, 3), (3,))


def test_sub_broadcast():
    check_op(lambda a, b: a - b, (4, 1), (1, 3))


def test_mul_broadcast():
    check_op(lambda a, b: a * b, (2, 1, 3), (4, 1))


def test_div_broadcast():
    check_op(lambda a, b: a / b, (2, 3), (3,), low=0.5)


def test_number_left():
    check_op(lambda a: 2.0 - a * 3 + 1 / (a * a + 1), (3, 2))


def test_pow():
    check_op(lambda a: a**3 + a**-1.5, (3, 2), low=0.5)


def test_neg():
    check_op(lambda a: -a, (2, 3))


def test_exp():
    check_op(lambda a: a.exp(), (2, 3))


def test_log():
    check_op(lambda a: a.log(), (2, 3), low=0.1)


def test_tanh():
    check_op(lambda a: a.tanh(), (2, 3))


def test_relu():
    check_op(lambda a: a.relu(), (4, 5))


def test_sigmoid():
    check_op(lambda a: (a * 10).sigmoid(), (4, 5))


def test_sum_all():
    check_op(lambda a: a.sum(), (2, 3))


def test_sum_axis():
    check_op(lambda a: a.sum(1), (2, 3, 4))


def test_sum_axes_keepdims():
    check_op(lambda a: a.sum((0, 2), keepdims=True), (2, 3, 4))


def test_mean_axis():
    check_op(lambda a: a.mean(-1), (2, 3, 4))


def test_mean_all():
    check_op(lambda a: a.mean(), (2, 3))


def test_max_axis():
    check_op(lambda a: a.max(1), (3, 5), torch_f=lambda a: a.amax(1))


def test_max_keepdims():
    check_op(
        lambda a: a.max(0, keepdims=True),
        (3, 5),
        torch_f=lambda a: a.amax(0, keepdim=True),
    )


def test_max_all():
    check_op(lambda a: a.max(), (3, 5), torch_f=lambda a: a.amax())


def test_reshape():
    check_op(lambda a: a.reshape(3, -1) * 2, (2, 3, 2))


def test_transpose_2d():
    check_op(lambda a: a.T * 2, (2, 3))


def test_transpose_perm():
    check_op(
        lambda a: a.transpose(2, 0, 1) * 2,
        (2, 3, 4),
        torch_f=lambda a: a.permute(2, 0, 1) * 2,
    )


def test_index_slice():
    check_op(lambda a: a[1:, ::2] * 2, (3, 4))


def test_index_rows_repeated():
    check_op(lambda a: a[[0, 2, 0, 0]] * 2, (3, 4))


def test_index_pairs():
    check_op(lambda a: a[[0, 1, 1], [2, 0, 0]] * 2, (3, 4))


def test_softmax():
    check_op(lambda a: a.softmax(-1), (3, 5))


def test_softmax_axis0():
    check_op(lambda a: softmax(a, 0), (3, 5), torch_f=lambda a: a.softmax(0))


def test_log_softmax():
    check_op(
        lambda a: log_softmax(a, 1), (3, 5), torch_f=lambda a: a.log_softmax(1)
    )


def test_cross_entropy():
    check_op(
        lambda z: cross_entropy(z, [1, 0, 4]),
        (3, 5),
        torch_f=lambda z: F.cross_entropy(z, torch.tensor([1, 0, 4])),
    )


def test_mlp_chain():
    check_op(
        lambda x, w, b: ((x @ w + b).tanh() @ w.T).sigmoid().mean(0),
        (6, 3),
        (3, 3),
        (3,),
    )


def test_value_used_twice():
    check_op(lambda a: a * a + a.exp() * a, (2, 3))


# ---- property tests against PyTorch --------------------------------------------


@settings(max_examples=40, deadline=None)
@given(broadcast_pairs(), seeds, st.sampled_from(["+", "-", "*", "/"]))
def test_broadcasting_binary_ops(shapes, seed, op):
    fns = {
        "+": lambda a, b: a + b,
        "-": lambda a, b: a - b,
        "*": lambda a, b: a * b,
        "/": lambda a, b: a / (b * b + 0.5),
    }
    check_op(fns[op], *shapes, seed=seed)


@settings(max_examples=30, deadline=None)
@given(matmul_shapes(), seeds)
def test_matmul_shapes(shapes, seed):
    check_op(lambda a, b: a @ b, *shapes, seed=seed)


@settings(max_examples=40, deadline=None)
@given(op_chains(), seeds)
def test_op_chains(chain, seed):
    shape, steps, op_seed = chain
    x = random_array(shape, seed)
    ours, theirs = (
        Tensor(x, requires_grad=True),
        torch.tensor(x, requires_grad=True),
    )
    out = run_chain(ours, steps, chain_operands(op_seed), "tensor")
    ref = run_chain(theirs, steps, chain_operands(op_seed), "torch")
    assert relative_error(out.data, ref.detach().numpy()) < 1e-12
    out.sum().backward()
    ref.sum().backward()
    # floor 1: a gradient that is 0 in exact arithmetic (sum of a softmax) is
    # round-off on both sides, compared absolutely
    assert relative_error(ours.grad, theirs.grad.numpy(), floor=1.0) < 1e-12


@settings(max_examples=20, deadline=None)
@given(expression_graphs())
def test_scalar_expression_graphs_on_0d_tensors(graph):
    ours = [Tensor(x, requires_grad=True) for x in graph.inputs]
    theirs = [
        torch.tensor(x, dtype=torch.float64, requires_grad=True)
        for x in graph.inputs
    ]
    out, ref = evaluate_graph(graph, ours), evaluate_graph(graph, theirs)
    out.backward()
    ref.backward()
    assert abs(out.item() - ref.item()) <= 1e-12 * max(1.0, abs(ref.item()))
    for t, r in zip(ours, theirs):
        g = 0.0 if t.grad is None else float(t.grad)
        rg = 0.0 if r.grad is None else r.grad.item()
        assert abs(g - rg) <= 1e-11 * max(1.0, abs(rg))


# ---- numerical gradient checks -------------------------------------------------


@pytest.mark.parametrize(
    "name,f,shapes",
    [
        ("matmul", lambda a, b: a @ b, [(3, 4), (4, 2)]),
        ("bias", lambda a, b: (a + b).tanh(), [(3, 4), (4,)]),
        ("softmax", lambda a: a.softmax(0), [(3, 4)]),
        ("max", lambda a: a.max(1), [(3, 4)]),
        ("index", lambda a: a[[0, 0, 2]].sigmoid(), [(3, 2)]),
        ("cross_entropy", lambda z: cross_entropy(z, [2, 0, 2]), [(3, 4)]),
    ],
)
def test_numerical_gradients(name, f, shapes):
    report = gradcheck(f, [random_array(s, i) for i, s in enumerate(shapes)])
    assert report.passed, str(report)
    assert report.max_rel_error < 1e-7


def test_gradcheck_catches_a_wrong_backward():
    def bad_backward(
        g, saved, needs
    ):  # the transpose forgotten in dX = G W^T: x is (2, 2)
        a, b = saved
        return g @ b, a.swapaxes(-1, -2) @ g

    original = Tensor.matmul_backward
    try:
        Tensor.matmul_backward = staticmethod(bad_backward)
        report = gradcheck(
            lambda a, b: a @ b,
            {"X": random_array((2, 2), 1), "W": random_array((2, 2), 2)},
        )
    finally:
        Tensor.matmul_backward = staticmethod(original)
    assert not report["X"].passed and report["W"].passed
    assert "FAIL" in str(report) and "PASS" in str(report)


def test_compare_with_torch_table():
    report = compare_with_torch(
        lambda x, w: (x @ w).relu().sum(1),
        {"x": random_array((4, 3), 0), "w": random_array((3, 2), 1)},
    )
    assert report.passed and [r.name for r in report.rows] == [
        "output",
        "grad x",
        "grad w",
    ]
    assert "grad w" in str(report)


# ---- unbroadcast ---------------------------------------------------------------


def test_unbroadcast_inserted_leading_axes():
    g = random_array((2, 3, 4), 0)
    np.testing.assert_allclose(unbroadcast(g, (4,)), g.sum((0, 1)))


def test_unbroadcast_stretched_axes():
    g = random_array((3, 4), 0)
    np.testing.assert_allclose(unbroadcast(g, (3, 1)), g.sum(1, keepdims=True))
    np.testing.assert_allclose(unbroadcast(g, (1, 1)), g.sum(keepdims=True))


def test_unbroadcast_both():
    g = random_array((5, 3, 4), 0)
    np.testing.assert_allclose(
        unbroadcast(g, (3, 1)), g.sum((0, 2)).reshape(3, 1)
    )
    np.testing.assert_allclose(unbroadcast(g, ()), g.sum())


def test_unbroadcast_same_shape_is_identity():
    g = random_array((2, 3), 0)
    assert unbroadcast(g, (2, 3)) is g


def test_bias_gradient_is_summed_over_batch():
    x, b = Tensor(np.ones((5, 3))), Tensor(np.zeros(3), requires_grad=True)
    (x + b).sum().backward()
    np.testing.assert_array_equal(b.grad, [5.0, 5.0, 5.0])


# ---- indexing: scatter-add -----------------------------------------------------


def test_index_repeated_rows_scatter_add():
    emb = Tensor(np.arange(8.0).reshape(4, 2), requires_grad=True)
    emb[np.array([1, 3, 1, 1])].sum().backward()
    np.testing.assert_array_equal(emb.grad, [[0, 0], [3, 3], [0, 0], [1, 1]])


def test_index_boolean_mask():
    x = Tensor(np.array([-1.0, 2.0, -3.0, 4.0]), requires_grad=True)
    x[x.data > 0].sum().backward()
    np.testing.assert_array_equal(x.grad, [0, 1, 0, 1])


# ---- cross-entropy stability ---------------------------------------------------


def test_cross_entropy_huge_logits():
    z = np.array([[1000.0, 0.0, -1000.0], [-5e4, 5e4, 0.0]])
    ours = Tensor(z, requires_grad=True)
    loss = cross_entropy(ours, [1, 1])
    loss.backward()
    ref = torch.tensor(z, requires_grad=True)
    F.cross_entropy(ref, torch.tensor([1, 1])).backward()
    assert np.isfinite(loss.item()) and abs(loss.item() - 500.0) < 1e-9
    np.testing.assert_allclose(ours.grad, ref.grad.numpy(), atol=1e-15)


def test_softmax_huge_logits_finite():
    s = Tensor([[1000.0, 1000.0, -1000.0]]).softmax()
    np.testing.assert_allclose(s.data, [[0.5, 0.5, 0.0]])
    assert np.isfinite(Tensor([1e4, 0.0]).log_softmax().data).all()


def test_sigmoid_extremes():
    s = Tensor([-800.0, 0.0, 800.0]).sigmoid()
    np.testing.assert_array_equal(s.data, [0.0, 0.5, 1.0])


# ---- backward semantics --------------------------------------------------------


def test_backward_twice_doubles_leaf_grads():
    w = Tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    h = (w * w).sum(0)
    y = h.sum()
    y.backward()
    first_w, first_h = w.grad.copy(), h.grad.copy()
    y.backward()
    np.testing.assert_array_equal(w.grad, 2 * first_w)  # leaves accumulate
    np.testing.assert_array_equal(h.grad, first_h)  # intermediates are recomputed
    zero_grad([w])
    assert w.grad is None
    y.backward()
    np.testing.assert_array_equal(w.grad, first_w)


def test_zero_grad_method():
    w = Tensor([1.0, 2.0], requires_grad=True)
    (w * 3).sum().backward()
    w.zero_grad()
    assert w.grad is None


def test_leaf_grad_is_writable_and_owned():
    w = Tensor(np.ones((2, 3)), requires_grad=True)
    w.sum().backward()  # sum's VJP returns a read-only broadcast view
    w.grad *= 0.5  # the leaf's gradient is its own array
    np.testing.assert_array_equal(w.grad, np.full((2, 3), 0.5))


def test_constants_get_no_grad():
    x, w = Tensor(np.ones((2, 3))), Tensor(np.ones((3, 1)), requires_grad=True)
    y = (x @ w).sum()
    y.backward()
    assert x.grad is None and w.grad is not None
    assert not (x * 2).requires_grad and (x @ w).requires_grad


def test_backward_with_explicit_grad():
    x = Tensor([1.0, 2.0, 3.0], requires_grad=True)
    (x * x).backward(np.array([1.0, 0.0, -1.0]))
    np.testing.assert_array_equal(x.grad, [2.0, 0.0, -6.0])


def test_float32_stays_float32():
    x = Tensor(np.ones((2, 3), dtype=np.float32), requires_grad=True)
    w = Tensor(np.ones((3, 2), dtype=np.float32), requires_grad=True)
    y = ((x @ w).tanh() * 2 + 1).sigmoid().sum()
    assert y.dtype == np.float32
    y.backward()
    assert x.grad.dtype == np.float32 and w.grad.dtype == np.float32
    assert Tensor([1, 2]).dtype == np.float64


def test_reflected_operators_with_ndarrays_and_numbers():
    x = Tensor([[1.0, 2.0]], requires_grad=True)
    y = np.array([[2.0], [3.0]])
    out = (np.ones((1, 2)) * x) @ y + 1 - (2 / x) * 3
    out.sum().backward()
    # out is (1, 2): x @ y (1, 1) is broadcast to both entries, so it counts twice
    np.testing.assert_allclose(x.grad, [[2 * 2.0 + 6 / 1.0, 2 * 3.0 + 6 / 4.0]])


def test_deep_chain_has_no_recursion_limit():
    x = Tensor([0.5], requires_grad=True)
    y = x
    for _ in range(5000):
        y = y * 1.0
    y.sum().backward()
    np.testing.assert_array_equal(x.grad, [1.0])


def test_graph_makes_no_reference_cycles():
    gc.collect()
    gc.disable()
    try:
        x = Tensor(random_array((8, 4), 0), requires_grad=True)
        w = Tensor(random_array((4, 3), 1), requires_grad=True)
        loss = cross_entropy((x @ w).tanh() * 2, np.arange(8) % 3)
        loss.backward()
        del x, w, loss
        assert gc.collect() == 0  # everything was freed by reference counting
    finally:
        gc.enable()


def test_repr_is_stable():
    assert (
        repr(Tensor([1.0, 2.5], requires_grad=True))
        == "Tensor([1. , 2.5], requires_grad=True)"
    )


# ---- error messages ------------------------------------------------------------


@pytest.mark.parametrize(
    "make,error,message",
    [
        (
            lambda: Tensor(np.ones((3, 4))) @ Tensor(np.ones((5, 2))),
            ValueError,
            r"matmul: \(3, 4\) @ \(5, 2\): inner dimensions 4 and 5 differ",
        ),
        (
            lambda: Tensor(np.ones((2, 3, 4))) @ Tensor(np.ones((5, 4, 2))),
            ValueError,
            r"matmul: \(2, 3, 4\) @ \(5, 4, 2\): "
            r"batch dimensions \(2,\) and \(5,\)",
        ),
        (
            lambda: Tensor(np.ones(3)) @ Tensor(np.ones((3, 2))),
            ValueError,
            r"matmul: \(3,\) @ \(3, 2\)",
        ),
        (
            lambda: Tensor(np.ones((3, 4))) + Tensor(np.ones(5)),
            ValueError,
            r"add: \(3, 4\) \+ \(5,\): shapes do not broadcast",
        ),
        (
            lambda: Tensor(np.ones((3, 4))) - Tensor(np.ones(5)),
            ValueError,
            r"sub: \(3, 4\) - \(5,\)",
        ),
        (
            lambda: Tensor(np.ones((3, 4))) * Tensor(np.ones(5)),
            ValueError,
            r"mul: \(3, 4\) \* \(5,\)",
        ),
        (
            lambda: Tensor(np.ones((3, 4))) / Tensor(np.ones(5)),
            ValueError,
            r"div: \(3, 4\) / \(5,\)",
        ),
        (
            lambda: Tensor([1.0]) + "a",
            TypeError,
            r"add: expected a Tensor, an ndarray or a number, got str",
        ),
        (
            lambda: Tensor([1.0]) ** Tensor([2.0]),
            TypeError,
            r"pow: only a number exponent",
        ),
        (
            lambda: 2 ** Tensor([2.0]),
            TypeError,
            r"pow: a tensor exponent is not supported",
        ),
        (
            lambda: Tensor(np.ones((2, 3))).reshape(4, 2),
            ValueError,
            r"reshape: cannot reshape \(2, 3\) \(6 entries\) into \(4, 2\)",
        ),
        (
            lambda: Tensor(np.ones((2, 3))).transpose(0, 0),
            ValueError,
            r"transpose: \(0, 0\) is not a permutation",
        ),
        (
            lambda: Tensor(np.ones((2, 3))).sum(2),
            ValueError,
            r"sum: axis 2 is out of range",
        ),
        (
            lambda: Tensor(np.ones((2, 3))).max((1, 1)),
            ValueError,
            r"max: repeated axis",
        ),
        (
            lambda: Tensor(np.zeros(0)).max(),
            ValueError,
            r"max: the tensor of shape \(0,\) is empty",
        ),
        (
            lambda: Tensor(np.ones((2, 3)))[5],
            IndexError,
            r"index: .*tensor shape \(2, 3\)",
        ),
        (
            lambda: Tensor(np.ones(3)).item(),
            ValueError,
            r"item: only a one-element tensor",
        ),
        (
            lambda: Tensor(np.ones((2, 3)), requires_grad=True).backward(),
            RuntimeError,
            r"backward: the output has shape \(2, 3\), not a single number; "
            r"pass grad=",
        ),
        (
            lambda: Tensor(np.ones(2)).sum().backward(),
            RuntimeError,
            r"backward: this tensor does not require a gradient",
        ),
        (
            lambda: Tensor(np.ones(2), requires_grad=True).backward(np.ones(3)),
            ValueError,
            r"backward: grad has shape \(3,\) but the output has shape \(2,\)",
        ),
        (
            lambda: cross_entropy(Tensor(np.ones(3)), [0]),
            ValueError,
            r"cross_entropy: logits must be \(B, C\)",
        ),
        (
            lambda: cross_entropy(Tensor(np.ones((2, 3))), [0]),
            ValueError,
            r"cross_entropy: logits \(2, 3\) need targets of shape \(2,\), "
            r"got \(1,\)",
        ),
        (
            lambda: cross_entropy(Tensor(np.ones((2, 3))), [0, 3]),
            ValueError,
            r"cross_entropy: targets must lie in \[0, 3\)",
        ),
        (
            lambda: cross_entropy(Tensor(np.ones((2, 3))), [0.5, 1]),
            TypeError,
            r"cross_entropy: targets must be integer",
        ),
        (
            lambda: unbroadcast(np.ones((3, 4)), (5,)),
            ValueError,
            r"unbroadcast: a gradient of shape \(3, 4\) cannot come from "
            r"broadcasting shape \(5,\)",
        ),
    ],
)
def test_error_messages(make, error, message):
    with pytest.raises(error, match=message):
        make()


def test_wrong_gradient_shape_is_caught_by_backward():
    def transposed_backward(
        g, saved, needs
    ):  # returns W G^T, the transpose of G W^T
        a, b = saved
        return (b @ g.swapaxes(-1, -2) if needs[0] else None), None

    original = Tensor.matmul_backward
    try:
        Tensor.matmul_backward = staticmethod(transposed_backward)
        x = Tensor(np.ones((2, 3)), requires_grad=True)
        with pytest.raises(
            RuntimeError,
            match=r"backward of @: a gradient of shape \(3, 2\) for an input "
            r"of shape \(2, 3\)",
        ):
            (x @ Tensor(np.ones((3, 4)))).sum().backward()
    finally:
        Tensor.matmul_backward = staticmethod(original)


# ---- second derivatives: grad(..., create_graph=True) ------------------------


HVP_TOL = 1e-10


class Ops:
    """The operations of one engine under one set of names."""

    def __init__(self, lib: str):
        self.lib = lib

    def leaf(self, a):
        if self.lib == "tensor":
            return Tensor(a, requires_grad=True)
        return torch.tensor(a, requires_grad=True)

    def const(self, a):
        return Tensor(a) if self.lib == "tensor" else torch.tensor(a)

    def grad(self, out, inputs, create_graph=False):
        if self.lib == "tensor":
            return grad(out, inputs, create_graph=create_graph)
        return list(
            torch.autograd.grad(
                out,
                inputs,
                create_graph=create_graph,
                allow_unused=True,
                materialize_grads=True,
            )
        )

    def amax(self, x, axis, keepdims):
        if self.lib == "tensor":
            return x.max(axis, keepdims=keepdims)
        return torch.amax(x, dim=axis, keepdim=keepdims)

    def permute(self, x, axes):
        return x.transpose(axes) if self.lib == "tensor" else x.permute(axes)

    def sum(self, x, axis, keepdims):
        if self.lib == "tensor":
            return x.sum(axis, keepdims=keepdims)
        return x.sum(dim=axis, keepdim=keepdims)

    def mean(self, x, axis, keepdims):
        if self.lib == "tensor":
            return x.mean(axis, keepdims=keepdims)
        return x.mean(dim=axis, keepdim=keepdims)

    def softmax(self, x, axis):
        return x.softmax(axis) if self.lib == "tensor" else torch.softmax(x, axis)

    def log_softmax(self, x, axis):
        if self.lib == "tensor":
            return x.log_softmax(axis)
        return torch.log_softmax(x, axis)

    def index(self, x, index):
        return x[index] if self.lib == "tensor" else x[torch.from_numpy(index)]

    def T(self, x):
        return x.T if self.lib == "tensor" else x.mT

    def cross_entropy(self, z, y):
        if self.lib == "tensor":
            return cross_entropy(z, y)
        return torch.nn.functional.cross_entropy(z, torch.tensor(y))


UNARY = (
    "tanh",
    "sigmoid",
    "exp_tanh",
    "log_sq",
    "relu",
    "neg",
    "pow_tanh2",
    "pow_sqrt",
    "pow_m05",
    "pow_m15",
    "pow3",
    "pow1",
    "pow0",
    "sum_axis",
    "sum_all",
    "mean_axis",
    "max_axis",
    "reshape",
    "transpose",
    "index",
    "softmax",
    "log_softmax",
    "square",
)
BINARY = ("add", "sub", "rsub", "mul", "div", "rdiv", "matmul")


def operand_shape(rng, shape: tuple) -> tuple:
    """A shape that broadcasts with `shape`: leading axes dropped, some axes
    stretched to 1, sometimes a new leading axis (then `shape` is broadcast)."""
    drop = int(rng.integers(0, len(shape) + 1))
    kept = tuple(1 if rng.random() < 0.3 else n for n in shape[drop:])
    if rng.random() < 0.2 and len(shape) < 3:
        kept = (2,) + tuple(shape)
        if shape and rng.random() < 0.5:
            kept = (2,) + tuple(shape[:-1]) + (1,)
    return kept


def random_graph(seed: int, length: int):
    """(arrays, program): the start array and every operand (float64), and a
    function (ops, leaves) -> an output tensor, for either engine."""
    rng = np.random.default_rng(seed)
    ndim = int(rng.integers(1, 4))
    shape = tuple(int(n) for n in rng.integers(1, 4, ndim))
    arrays = [rng.standard_normal(shape)]
    steps = []
    cur = shape
    for _ in range(length):
        if rng.random() < 0.45:
            name = str(rng.choice(BINARY))
            if name == "matmul":
                if len(cur) < 2:
                    name = "add"
                else:
                    k = int(rng.integers(1, 4))
                    bshape = (cur[-1], k)
                    if rng.random() < 0.3:  # a batched right operand
                        bshape = (2,) + bshape if len(cur) == 2 else bshape
                    arrays.append(rng.standard_normal(bshape) / 2)
                    steps.append(("matmul", len(arrays) - 1, None))
                    cur = np.broadcast_shapes(cur[:-2], bshape[:-2]) + (
                        cur[-2],
                        k,
                    )
                    continue
            oshape = operand_shape(rng, cur)
            if name in ("div", "rdiv"):
                arrays.append(rng.uniform(0.5, 2.5, oshape))
            else:
                arrays.append(rng.standard_normal(oshape))
            steps.append((name, len(arrays) - 1, None))
            cur = np.broadcast_shapes(cur, oshape)
        else:
            name = str(rng.choice(UNARY))
            param = None
            if name in ("sum_axis", "mean_axis", "max_axis"):
                if not cur:
                    name = "tanh"
                else:
                    axis = int(rng.integers(0, len(cur)))
                    keep = bool(rng.random() < 0.5)
                    param = (axis, keep)
                    cur = (
                        cur[:axis] + (1,) + cur[axis + 1 :]
                        if keep
                        else cur[:axis] + cur[axis + 1 :]
                    )
            elif name == "sum_all":
                cur = ()
            elif name == "reshape":
                size = int(np.prod(cur))
                new = (size,) if rng.random() < 0.5 or size == 1 else (1, size)
                param = new
                cur = new
            elif name == "transpose":
                param = tuple(int(a) for a in rng.permutation(len(cur)))
                cur = tuple(cur[a] for a in param)
            elif name == "index":
                if not cur:
                    name = "tanh"
                else:  # an integer array along the last axis, with a repeat
                    idx = rng.integers(0, cur[-1], int(rng.integers(1, 4)))
                    idx = np.concatenate([idx, idx[:1]])
                    param = idx
                    cur = cur[:-1] + (len(idx),)
            elif name in ("softmax", "log_softmax") and not cur:
                name = "sigmoid"
            steps.append((name, None, param))

    def program(ops: Ops, leaves):
        x = leaves[0]
        for name, j, param in steps:
            o = leaves[j] if j is not None else None
            if name == "add":
                x = x + o
            elif name == "sub":
                x = x - o
            elif name == "rsub":
                x = o - x
            elif name == "mul":
                x = x * o
            elif name == "div":
                x = x / o
            elif name == "rdiv":
                x = o / (x * x + 1)
            elif name == "matmul":
                x = x @ o
            elif name == "tanh":
                x = x.tanh()
            elif name == "sigmoid":
                x = x.sigmoid()
            elif name == "exp_tanh":
                x = x.tanh().exp()
            elif name == "log_sq":
                x = (x * x + 1).log()
            elif name == "relu":
                x = x.relu() + x * 0.1
            elif name == "neg":
                x = -x
            elif name == "pow_tanh2":
                x = x.tanh() ** 2
            elif name == "pow_sqrt":
                x = (x * x + 1) ** 0.5
            elif name == "pow_m05":
                x = (x * x + 1) ** -0.5
            elif name == "pow_m15":
                x = (x * x + 1) ** -1.5
            elif name == "pow3":
                x = x.tanh() ** 3
            elif name == "pow1":
                x = x**1 * x
            elif name == "pow0":
                x = x**0 + x
            elif name == "square":
                x = x * x
            elif name == "sum_axis":
                x = ops.sum(x, *param)
            elif name == "sum_all":
                x = x.sum()
            elif name == "mean_axis":
                x = ops.mean(x, *param)
            elif name == "max_axis":
                x = ops.amax(x, *param)
            elif name == "reshape":
                x = x.reshape(param)
            elif name == "transpose":
                x = ops.permute(x, param)
            elif name == "index":
                x = (
                    x[..., param]
                    if ops.lib == "tensor"
                    else x[..., torch.from_numpy(param)]
                )
            elif name == "softmax":
                x = ops.softmax(x, -1)
            elif name == "log_softmax":
                x = ops.log_softmax(x, -1)
        return x

    return arrays, program


def relerr(a, b) -> float:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    assert a.shape == b.shape, (a.shape, b.shape)
    # the floor: a gradient that is 0 in exact arithmetic (softmax then sum)
    # is round-off in both engines, ~1e-16; 1e-10 of 1e-4 is 1e-14 absolute
    scale = max(np.abs(a).max(initial=0), np.abs(b).max(initial=0), 1e-4)
    return float(np.abs(a - b).max(initial=0)) / scale


def hvp(lib: str, arrays, program, seed: int):
    """(gradients, Hessian-vector products) of L = sum(out * w) with respect
    to every leaf, by grad of <grad L, v> (reverse over reverse)."""
    ops = Ops(lib)
    rng = np.random.default_rng(seed + 1)
    leaves = [ops.leaf(a) for a in arrays]
    out = program(ops, leaves)
    w = rng.standard_normal(tuple(out.shape))
    vs = [rng.standard_normal(a.shape) for a in arrays]
    loss = (out * ops.const(w)).sum()
    gs = ops.grad(loss, leaves, create_graph=True)
    dot = sum((g * ops.const(v)).sum() for g, v in zip(gs, vs))
    if not dot.requires_grad:  # a linear function: the Hessian is 0
        hs = [ops.const(np.zeros(a.shape)) for a in arrays]
    else:
        hs = ops.grad(dot, leaves)
    as_np = (
        (lambda t: t.data) if lib == "tensor" else (lambda t: t.detach().numpy())
    )
    return [as_np(g) for g in gs], [as_np(h) for h in hs]


def check_graph(seed: int, length: int) -> None:
    arrays, program = random_graph(seed, length)
    g1, h1 = hvp("tensor", arrays, program, seed)
    g2, h2 = hvp("torch", arrays, program, seed)
    assert_close(g1, g2)
    assert_close(h1, h2)


def assert_close(ours: list, theirs: list) -> None:
    """The gradient (or HVP) is one vector over all leaves: its relative
    error is measured on the concatenation, shapes checked leaf by leaf."""
    for a, b in zip(ours, theirs):
        assert np.shape(a) == np.shape(b), (np.shape(a), np.shape(b))
    flat = [np.concatenate([np.ravel(x) for x in xs]) for xs in (ours, theirs)]
    assert relerr(*flat) < HVP_TOL, relerr(*flat)


@pytest.mark.parametrize("seed", range(300))
def test_hvp_of_random_broadcast_chains_matches_torch(seed):
    check_graph(seed, 2 + seed % 7)


@settings(max_examples=60)
@given(st.integers(0, 2**32 - 1), st.integers(1, 10))
def test_hvp_of_hypothesis_chains_matches_torch(seed, length):
    check_graph(seed, length)


# ---- MLP cross-entropy graphs ------------------------------------------------


def mlp_program(seed: int):
    rng = np.random.default_rng(seed)
    batch, depth = int(rng.integers(1, 6)), int(rng.integers(1, 4))
    sizes = [int(n) for n in rng.integers(1, 5, depth + 1)]
    classes = int(rng.integers(2, 5))
    sizes.append(classes)
    X = rng.standard_normal((batch, sizes[0]))
    y = rng.integers(0, classes, batch)
    params = []
    for n, m in zip(sizes[:-1], sizes[1:]):
        params += [
            rng.standard_normal((n, m)) / np.sqrt(n),
            rng.standard_normal(m),
        ]
    acts = [str(rng.choice(["relu", "tanh", "sigmoid"])) for _ in range(depth)]
    loss_kind = str(rng.choice(["ce", "log_softmax", "softmax_mse"]))

    def program(ops: Ops, leaves):
        x = leaves[0]
        ps = leaves[1:]
        for i in range(depth + 1):
            x = x @ ps[2 * i] + ps[2 * i + 1]
            if i < depth:
                x = getattr(x, acts[i])()
        if loss_kind == "ce":
            return ops.cross_entropy(x, y)
        if loss_kind == "log_softmax":
            logp = ops.log_softmax(x, 1)
            idx = (np.arange(batch), y)
            if ops.lib == "torch":
                idx = tuple(torch.from_numpy(i) for i in idx)
            return -logp[idx].mean()
        onehot = np.eye(classes)[y]
        d = ops.softmax(x, -1) - ops.const(onehot)
        return (d * d).mean()

    return [X] + params, program


@pytest.mark.parametrize("seed", range(60))
def test_hvp_of_mlp_cross_entropy_matches_torch(seed):
    arrays, program = mlp_program(seed)
    g1, h1 = hvp("tensor", arrays, program, seed)
    g2, h2 = hvp("torch", arrays, program, seed)
    assert_close(g1, g2)
    assert_close(h1, h2)


@pytest.mark.parametrize("seed", range(10))
def test_gradient_penalty_matches_torch(seed):
    """Chapter 7's penalty: d/dparams of |d loss / d input|^2."""
    arrays, program = mlp_program(seed)
    results = []
    for lib in ("tensor", "torch"):
        ops = Ops(lib)
        leaves = [ops.leaf(a) for a in arrays]
        loss = program(ops, leaves)
        (gx,) = ops.grad(loss, [leaves[0]], create_graph=True)
        penalty = (gx * gx).sum()
        hs = ops.grad(penalty, leaves[1:])
        results.append([h.data if lib == "tensor" else h.numpy() for h in hs])
    assert_close(*results)


def test_third_derivative_matches_torch():
    x0 = np.array([0.3, -1.2, 0.7])
    out = []
    for lib in ("tensor", "torch"):
        ops = Ops(lib)
        x = ops.leaf(x0)
        y = ((x.tanh() * x.sigmoid()) / (x * x + 1) ** 0.5).sum()
        (g,) = ops.grad(y, [x], create_graph=True)
        (h,) = ops.grad(g.sum(), [x], create_graph=True)
        (t,) = ops.grad(h.sum(), [x])
        out.append(t.data if lib == "tensor" else t.numpy())
    assert relerr(*out) < HVP_TOL


# ---- grad without create_graph ------------------------------------------------


def test_grad_equals_backward_and_leaves_grad_alone():
    rng = np.random.default_rng(0)
    a = Tensor(rng.standard_normal((3, 4)), requires_grad=True)
    b = Tensor(rng.standard_normal((4,)), requires_grad=True)
    loss = ((a * b).tanh() @ Tensor(np.ones((4, 2)))).sum()
    ga, gb = grad(loss, [a, b])
    assert a.grad is None and b.grad is None
    assert not ga.requires_grad and not gb.requires_grad
    loss.backward()
    np.testing.assert_array_equal(ga.data, a.grad)
    np.testing.assert_array_equal(gb.data, b.grad)


def test_grad_of_one_tensor_and_unused_input():
    x = Tensor([1.0, 2.0], requires_grad=True)
    unused = Tensor([[5.0]], requires_grad=True)
    (gx, gu) = grad((x * x).sum(), [x, unused])
    assert gx.data.tolist() == [2.0, 4.0]
    assert gu.data.tolist() == [[0.0]]
    (only,) = grad((x * x).sum(), x)
    assert only.data.tolist() == [2.0, 4.0]


def test_grad_with_grad_output_is_a_vjp():
    rng = np.random.default_rng(1)
    a0, u = rng.standard_normal((3, 2)), rng.standard_normal((3, 2))
    a = Tensor(a0, requires_grad=True)
    (g,) = grad(a.tanh(), [a], grad_output=u)
    np.testing.assert_allclose(g.data, u * (1 - np.tanh(a0) ** 2), rtol=1e-14)


def test_create_graph_gradient_is_a_tensor_with_a_graph():
    x = Tensor([0.5], requires_grad=True)
    (g,) = grad((x**3).sum(), [x], create_graph=True)
    assert g.requires_grad
    (h,) = grad(g.sum(), [x])
    assert h.data.tolist() == pytest.approx([6 * 0.5])
    assert x.grad is None


def test_float32_stays_float32_in_second_derivatives():
    x = Tensor(np.ones(3, dtype=np.float32), requires_grad=True)
    (g,) = grad((x * x).sum(), [x], create_graph=True)
    (h,) = grad(g.sum(), [x])
    assert g.dtype == np.float32 and h.dtype == np.float32


# ---- errors -------------------------------------------------------------------


def test_errors_name_grad_and_what_was_expected():
    x = Tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(TypeError, match="grad: output must be a Tensor"):
        grad(np.ones(2), [x])
    with pytest.raises(TypeError, match="grad: every item of inputs"):
        grad(x.sum(), [x, 3.0])
    with pytest.raises(RuntimeError, match="grad: the output has shape"):
        grad(x * 2, [x])
    with pytest.raises(ValueError, match="grad: grad_output has shape"):
        grad(x * 2, [x], grad_output=np.ones(3))
    with pytest.raises(RuntimeError, match="grad: the output does not require"):
        grad(Tensor([1.0]).sum(), [x])
    with pytest.raises(TypeError, match="grad: create_graph must be"):
        grad(x.sum(), [x], create_graph="yes")


def test_a_new_operation_needs_one_rule_for_both_passes():
    """An operation's rule, written in operations arrays and Tensors share,
    serves backward() and grad(create_graph=True): there is no second
    table to fill in."""
    x = Tensor([1.0, 2.0], requires_grad=True)

    def cube_backward(g, saved, needs):
        (x,) = saved
        return (g * 3 * x * x,)

    y = T._result(x.data**3, (x,), cube_backward, (x,), "cube")
    (g,) = grad(y.sum(), [x])  # on arrays
    assert g.data.tolist() == [3.0, 12.0]
    (g,) = grad(y.sum(), [x], create_graph=True)  # the same rule on Tensors
    assert g.requires_grad and g.data.tolist() == [3.0, 12.0]
    (h,) = grad(g.sum(), [x])  # d/dx 3x^2 = 6x
    assert h.data.tolist() == [6.0, 12.0]


def _every_operation(x, w):
    """A scalar that uses every operation of the engine once."""
    z = (x @ w + w.sum(axis=0) - x.mean(axis=1, keepdims=True)) * x.max()
    z = (z / (x * x + 1.0)) ** 2 + (-z).exp() + z.tanh() + z.sigmoid()
    z = z.relu() + (z * z + 1.0).log() + z.softmax() + z.log_softmax(0)
    z = z.reshape(6).transpose()[[0, 2, 2]].reshape(1, 3).swapaxes(0, 1)
    return cross_entropy(z.T, [1]) + z.sum()


def test_grad_with_create_graph_runs_the_rules_of_backward():
    """Every backward rule of the engine runs in grad(create_graph=True),
    on Tensors: the rules are the same functions both ways."""
    rng = np.random.default_rng(0)
    x = Tensor(rng.standard_normal((2, 3)), requires_grad=True)
    w = Tensor(rng.standard_normal((3, 3)), requires_grad=True)
    out = _every_operation(x, w)
    ran = {}
    for node in T.topological_order(out):
        if node._backward is not None:
            rule = node._backward

            def spy(g, saved, needs, rule=rule, ran=ran):
                ran[rule] = type(g)
                return rule(g, saved, needs)

            node._backward = spy
    gx, gw = grad(out, [x, w], create_graph=True)
    ran = dict(ran)  # what the recorded backward ran, before the next pass
    (hx,) = grad((gx * gx).sum() + gw.sum(), [x])  # and differentiate again
    rules = {
        v.__func__ if isinstance(v, staticmethod) else v
        for k, v in {**vars(Tensor), **vars(T)}.items()
        if k.endswith("_backward") and callable(v)
    }
    rules.discard(T._index_add_backward)  # index_add's, made by grad itself
    assert rules <= set(ran), sorted(r.__name__ for r in rules - set(ran))
    assert set(ran.values()) == {Tensor}
    assert hx.shape == x.shape


def test_inplace_change_before_double_backward_is_caught():
    x = Tensor([1.0, 2.0], requires_grad=True)
    y = (x * x).sum()
    x.data -= 1.0
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        grad(y, [x], create_graph=True)
    z = Tensor([[1.0, 2.0]], requires_grad=True)
    loss = cross_entropy(z, [0])
    z.data -= 1.0
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        grad(loss, [z], create_graph=True)


# ---- the other forms of the operations ----------------------------------------

MASK = np.array([[True, False, True], [False, True, True]])
FORMS = [
    ("max all", lambda o, a: o.amax(a * a, None, False) * a, [(2, 3)]),
    ("mean all", lambda o, a: (a * a).mean() * a, [(2, 3)]),
    ("sum axes kept", lambda o, a: o.sum(a * a, (0, 2), True) * a, [(2, 3, 4)]),
    ("mask index", lambda o, a: o.index(a * a, MASK).tanh(), [(2, 3)]),
    ("slices", lambda o, a: (a * a)[:, 1:3].sigmoid() * a[:, :2], [(2, 3)]),
    ("int index", lambda o, a: (a * a)[1] * a, [(3, 2)]),
    ("softmax axis 0", lambda o, a: o.softmax(a * a, 0), [(3, 4)]),
    ("log_softmax axis 0", lambda o, a: o.log_softmax(a * a, 0), [(3, 4)]),
    (
        "batched matmul",
        lambda o, a, b: (a @ b).tanh() @ b,
        [(2, 1, 3, 3), (4, 3, 3)],
    ),
    ("transpose .T", lambda o, a, b: (o.T(a) @ b).exp(), [(3, 2), (3, 2)]),
    ("numbers on the left", lambda o, a: 2.0 / (a * a + 1) - 3.0 * a, [(3,)]),
    ("pow 2.5", lambda o, a: (a * a + 1) ** 2.5, [(3,)]),
    ("relu", lambda o, a: (a * a - 0.5).relu() * a, [(5,)]),
]


@pytest.mark.parametrize("name,f,shapes", FORMS, ids=[f[0] for f in FORMS])
def test_hvp_of_other_forms_matches_torch(name, f, shapes):
    rng = np.random.default_rng(7)
    arrays = [rng.standard_normal(s) for s in shapes]

    def program(ops, leaves):
        return f(ops, *leaves)

    g1, h1 = hvp("tensor", arrays, program, 7)
    g2, h2 = hvp("torch", arrays, program, 7)
    assert_close(g1, g2)
    assert_close(h1, h2)
