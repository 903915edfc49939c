"""NaN, inf, -0.0 and huge values through every op of both engines, against
PyTorch float64: values and gradients, with NaN == NaN.

The inputs come from `strategies.special_floats` (and `special_arrays`).
The scalar engine raises where PyTorch returns inf or nan at log(0),
exp(710) and 0 ** -1 (a teaching choice of chapter 1): those draws are
skipped for `Value` by `value_or_raise`, and `test_value_raises_name_the_op`
pins that each such raise names its operation.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from backprop_lessons.scalar import Value
from backprop_lessons.tensor import Tensor, cross_entropy
from strategies import special_floats
from tensor_strategies import special_arrays

# inf - inf in add/sub/mul makes a nan with NumPy's RuntimeWarning (the
# engine silences warnings only in div, log, exp, pow and backward).
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

UNARY = ("exp", "log", "tanh", "sigmoid", "relu", "neg")
EXPONENTS = (0, 1, 2, 3, -1, -2, 0.5, -0.5, 2.5)
BINARY = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
}


def same(ours, theirs, rtol: float = 1e-9) -> None:
    """Equal up to rtol, NaN equal to NaN, infinities equal with their sign."""
    ours, theirs = np.asarray(ours, float), np.asarray(theirs, float)
    np.testing.assert_allclose(
        ours, theirs, rtol=rtol, atol=1e-15, equal_nan=True
    )


def torch_unary(name: str, x):
    return -x if name == "neg" else getattr(x, name)()


def ours_unary(name: str, x):
    return -x if name == "neg" else getattr(x, name)()


# ---- the Tensor engine: no raises, PyTorch's values ---------------------------


@pytest.mark.parametrize("name", UNARY)
@given(x=special_arrays())
def test_tensor_unary(name, x):
    t = torch.tensor(x, requires_grad=True)
    ty = torch_unary(name, t)
    ty.sum().backward()
    ours = Tensor(x, requires_grad=True)
    y = ours_unary(name, ours)
    y.sum().backward()
    same(y.data, ty.detach())
    same(ours.grad, t.grad)


@pytest.mark.parametrize("k", EXPONENTS)
@given(x=special_arrays())
def test_tensor_pow(k, x):
    t = torch.tensor(x, requires_grad=True)
    (t**k).sum().backward()
    ours = Tensor(x, requires_grad=True)
    y = ours**k
    y.sum().backward()
    same(y.data, (t.detach() ** k))
    same(ours.grad, t.grad)


@pytest.mark.parametrize("name", sorted(BINARY))
@given(data=st.data())
def test_tensor_binary(name, data):
    a = data.draw(special_arrays(1, 1, 4))
    b = data.draw(special_arrays(1, 1, 4).filter(lambda b: True))
    b = np.resize(b, a.shape)  # same length: broadcasting is tested elsewhere
    ta, tb = (torch.tensor(v, requires_grad=True) for v in (a, b))
    ty = BINARY[name](ta, tb)
    ty.sum().backward()
    oa, ob = (Tensor(v, requires_grad=True) for v in (a, b))
    y = BINARY[name](oa, ob)
    y.sum().backward()
    same(y.data, ty.detach())
    same(oa.grad, ta.grad)
    same(ob.grad, tb.grad)


REDUCTIONS = {
    "sum": (lambda x: x.sum(axis=-1), lambda t: t.sum(dim=-1)),
    "mean": (lambda x: x.mean(axis=-1), lambda t: t.mean(dim=-1)),
    "max": (lambda x: x.max(axis=-1), lambda t: t.amax(dim=-1)),
    "softmax": (lambda x: x.softmax(-1), lambda t: t.softmax(-1)),
    "log_softmax": (lambda x: x.log_softmax(-1), lambda t: t.log_softmax(-1)),
}


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
@given(x=special_arrays(), seed=st.integers(0, 2**16))
def test_tensor_reductions(name, x, seed):
    ours_op, torch_op = REDUCTIONS[name]
    t = torch.tensor(x, requires_grad=True)
    ty = torch_op(t)
    dout = np.random.default_rng(seed).standard_normal(tuple(ty.shape))
    (ty * torch.tensor(dout)).sum().backward()
    ours = Tensor(x, requires_grad=True)
    y = ours_op(ours)
    (y * dout).sum().backward()
    same(y.data, ty.detach())
    same(ours.grad, t.grad)


@given(x=special_arrays(2, 2, 4), seed=st.integers(0, 2**16))
def test_tensor_cross_entropy(x, seed):
    targets = np.random.default_rng(seed).integers(0, x.shape[1], x.shape[0])
    t = torch.tensor(x, requires_grad=True)
    torch.nn.functional.cross_entropy(t, torch.tensor(targets)).backward()
    ours = Tensor(x, requires_grad=True)
    loss = cross_entropy(ours, targets)
    loss.backward()
    tl = torch.nn.functional.cross_entropy(t.detach(), torch.tensor(targets))
    same(loss.data, tl)
    same(ours.grad, t.grad)


def test_tensor_relu_keeps_the_nan_of_the_issue():
    """Issue 16, case 1: the NaN must not be hidden behind relu's 0."""
    x = Tensor([1.0, 2.0], requires_grad=True)
    loss = (x * np.array([np.nan, 1.0])).relu().sum()
    loss.backward()
    assert math.isnan(loss.item())
    same(x.grad, [np.nan, 1.0])


def test_tensor_pow_zero_has_zero_gradient_at_zero():
    """Issue 16, case 6: d(x^0)/dx = 0, also at x = 0 (0 * inf would be nan)."""
    x = Tensor([0.0, 2.0], requires_grad=True)
    (x**0).sum().backward()
    assert x.grad.tolist() == [0.0, 0.0]


def test_tensor_special_values_do_not_warn():
    """inf and nan are results here, as in PyTorch, not NumPy warnings."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        x = Tensor([0.0, -1.0, 710.0], requires_grad=True)
        for op in (Tensor.log, Tensor.exp, lambda x: 1 / x, lambda x: x**-1):
            op(x).sum().backward()


# ---- the scalar engine: PyTorch's values, or a raise that names the op --------


def value_or_raise(fn):
    """fn(); on one of the engine's deliberate raises, skip the draw."""
    try:
        return fn()
    except (ZeroDivisionError, OverflowError, ValueError) as e:
        assert str(e).startswith("Value "), str(e)
        return None


def torch_scalar(fn, *xs):
    ts = [torch.tensor(x, dtype=torch.float64, requires_grad=True) for x in xs]
    y = fn(*ts)
    y.backward()
    return y.item(), [t.grad.item() for t in ts]


@pytest.mark.parametrize("name", UNARY)
@given(x=special_floats())
def test_value_unary(name, x):
    v = Value(x)
    y = value_or_raise(lambda: ours_unary(name, v))
    if y is None:
        return
    y.backward()
    ty, (tg,) = torch_scalar(lambda t: torch_unary(name, t), x)
    same(y.data, ty)
    same(v.grad, tg)


@pytest.mark.parametrize("k", EXPONENTS)
@given(x=special_floats())
def test_value_pow(k, x):
    v = Value(x)
    y = value_or_raise(lambda: v**k)
    if y is None:
        return
    y.backward()
    ty, (tg,) = torch_scalar(lambda t: t**k, x)
    same(y.data, ty)
    same(v.grad, tg)


@pytest.mark.parametrize("name", sorted(BINARY))
@given(a=special_floats(), b=special_floats())
def test_value_binary(name, a, b):
    va, vb = Value(a), Value(b)
    y = value_or_raise(lambda: BINARY[name](va, vb))
    if y is None:
        return
    y.backward()
    ty, (ga, gb) = torch_scalar(BINARY[name], a, b)
    same(y.data, ty)
    same(va.grad, ga)
    # The one divergence: a / b is a * b**-1 on Values (micrograd's way, and
    # what chapters 1-2 count as nodes), so b's gradient is a * -b**-2, whose
    # b**-2 overflows or underflows once |b| leaves [1e-154, 1e154] (inf * 0
    # = nan, or a tiny a times inf) where PyTorch divides a / b / b.
    if not (name == "div" and not 1e-154 < abs(b) < 1e154):
        same(vb.grad, gb)


def test_value_relu_keeps_nan():
    """Issue 16, case 1 for Value: relu(nan) is nan, with PyTorch's slope 1."""
    x = Value(1.0)
    y = (x * math.nan).relu()
    y.backward()
    assert math.isnan(y.data) and math.isnan(x.grad)


@pytest.mark.parametrize(
    "make, error, message",
    [
        (lambda: Value(0.0).log(), ValueError, r"^Value log: .* got 0\.0"),
        (lambda: Value(-1.0).log(), ValueError, r"^Value log: .* got -1\.0"),
        (lambda: Value(710.0).exp(), OverflowError, r"^Value exp: exp\(710\.0\)"),
        (
            lambda: Value(0.0) ** -1,
            ZeroDivisionError,
            r"^Value \*\*: 0\.0 \*\* -1",
        ),
        (lambda: Value(1e200) ** 2, OverflowError, r"^Value \*\*: .* overflows"),
        (lambda: Value(-8.0) ** 0.5, ValueError, r"^Value \*\*: .* not a real"),
        (lambda: Value(3.0) / 0.0, ZeroDivisionError, r"^Value /: division"),
        (lambda: Value(3.0) / Value(1e-310), OverflowError, r"^Value /: 3\.0 /"),
    ],
)
def test_value_raises_name_the_op(make, error, message):
    """Where PyTorch returns inf or nan the scalar engine raises (chapter 1's
    teaching choice); each message starts with the operation's name."""
    with pytest.raises(error, match=message):
        make()


def test_relu_of_nan_is_nan_with_slope_1_in_every_engine():
    """One rule for relu everywhere, PyTorch's: relu(nan) is nan, and the
    gradient (or tangent) passes through it with slope 1."""
    from backprop_lessons import microgpt
    from backprop_lessons.forward_mode import Dual
    from backprop_lessons.microgpt import numpy_twin

    expected = torch.relu(torch.tensor(math.nan, requires_grad=True))
    expected.backward()  # PyTorch: nan, and slope 1 at nan
    x = Value(math.nan)
    v = x.relu()
    v.backward()
    assert math.isnan(v.data) and x.grad == 1.0
    d = Dual(math.nan, 1.0).relu()
    assert math.isnan(d.value) and d.tangent == 1.0
    t = Tensor(np.array([math.nan, -1.0, 2.0]), requires_grad=True)
    tr = t.relu()
    tr.sum().backward()
    assert np.isnan(tr.data[0]) and list(tr.data[1:]) == [0.0, 2.0]
    assert list(t.grad) == [1.0, 0.0, 1.0]
    assert math.isnan(microgpt.model._relu(math.nan))  # microgpt on floats
    out, cache = numpy_twin.relu_forward(np.array([math.nan, -1.0, 2.0]))
    assert np.isnan(out[0])
    dinp = np.zeros(3)
    numpy_twin.relu_backward(dinp, np.ones(3), cache)  # the NumPy twin
    assert list(dinp) == [1.0, 0.0, 1.0]
