"""Tests of the NumPy Tensor engine (`backprop_lessons.tensor`).

Every operation is checked against PyTorch in float64 by one helper,
`check_op`: shape, dtype, forward values, then the gradients of the random
projection sum(out * dout) for every input.  Relative errors are measured
with `relative_error` (difference relative to the arrays' scale).
"""

from __future__ import annotations

import gc

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from backprop_lessons.gradcheck import (
    compare_with_torch,
    gradcheck,
    relative_error,
)
from backprop_lessons.tensor import (
    Tensor,
    cross_entropy,
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
