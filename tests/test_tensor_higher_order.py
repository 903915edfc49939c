"""Second derivatives on the Tensor engine: `grad(..., create_graph=True)`.

Every Hessian-vector product here is compared with PyTorch's double backward
in float64 (relative error < 1e-10).  The graphs are random: a seeded
generator (`random_graph`) builds a chain of the engine's operations whose
second operands are leaves of their own with broadcast shapes (inserted and
stretched axes, on either side), so mixed second derivatives (d^2 / da db)
are checked too.  The same program runs on both engines (`Ops`).  Hypothesis
draws the seeds and chain lengths; the seeded loops add many more graphs.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from backprop_lessons import tensor as T
from backprop_lessons.tensor import Tensor, cross_entropy, grad

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


def test_float32_stays_float32():
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
