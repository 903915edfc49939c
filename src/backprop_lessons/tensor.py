"""The NumPy reverse-mode engine: one `Tensor` per array.

A `Tensor` holds an ndarray (`data`), the gradient of the final output with
respect to it (`grad`, None until `backward()` reaches it), the tensors it
was computed from (`_children`), the backward rule of the operation that made
it (`_backward`) and the arrays that rule needs (`_saved`).  Every backward
rule is a vector-Jacobian product (VJP):

    rule(g, saved, needs) -> one gradient per input (or None)

`g` is d(root)/d(output) with the output's shape; each returned gradient has
its input's shape (the shape-check rule, enforced by `backward`); `needs`
says which inputs want a gradient (PyTorch's `ctx.needs_input_grad`), so a
rule may skip work for inputs that are constants, such as a data batch.

Design, as in `scalar.py`: the rules are plain functions (static methods next
to their forward) that receive the saved arrays; no rule closes over its
output tensor.  Every reference points from a tensor to its inputs, so a
graph is freed by reference counting alone, with no reference cycle per node
for Python's cyclic garbage collector to trace.  The walk is the scalar
engine's iterative `topological_order` (`graph_order`: it only reads
`_children`).

Each rule is written once, in operations that arrays and Tensors share
(`*`, `@`, `.sum`, `.reshape`, `unbroadcast`, ...), and runs two ways.
`backward()` runs it on ndarrays: fast, and its gradients are plain arrays
outside any graph.  `grad(..., create_graph=True)` runs the same rule on
Tensors: the incoming gradient is a Tensor, and so is every saved value
that comes from the graph (an input, or the output itself: a forward
passes `OUTPUT` for that), so the backward is recorded like a forward and
its gradients can be differentiated again (Hessian-vector products,
gradient penalties).  Saved values that are constants for the derivative
(shapes, axes, relu's mask) stay constants both ways.

Semantics follow PyTorch: leaf gradients accumulate (`backward()` twice
doubles them; call `zero_grad`), intermediate gradients are recomputed on
every call, and broadcasting follows NumPy.  One difference: `transpose`
follows NumPy (`transpose(*axes)` permutes all axes, `.T` reverses them),
not `torch.transpose(dim0, dim1)`.

In-place changes are caught as PyTorch catches them: `t.data` is a property,
and writing the array back (`t.data -= lr * t.grad`) bumps `t._version`; a
backward rule whose saved array was changed since its forward raises
PyTorch's "modified by an inplace operation" RuntimeError.  Writes through
an element or a view (`t.data[0] = 1`, `v = t.data; v += 1`) never reach the
property and are not seen: a checksum per saved array would catch them, at
a cost on every operation that this engine does not pay.  inf and nan are
values, as in PyTorch (log(0) = -inf, no NumPy warnings).

Shape legend used in the comments: `(...)` any shape; `B` batch, `C`
classes; `(..., m, n)` a stack of m x n matrices.

What this module is not: a fast or complete library.  It is meant to be read.
It imports NumPy, the shared array formulas of `numerics`, the checks of
`validate` and the graph walk of `graph_order`, nothing else.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Iterable
from typing import NamedTuple

import numpy as np

from . import numerics, validate
from .graph_order import topological_order

__all__ = [
    "Tensor",
    "OUTPUT",
    "Recorded",
    "unbroadcast",
    "broadcast_to",
    "index_add",
    "softmax",
    "log_softmax",
    "cross_entropy",
    "zero_grad",
    "grad",
]


# ---- helpers ----------------------------------------------------------------


def unbroadcast(grad, shape: tuple):
    """Sum `grad` back down to `shape`, undoing NumPy broadcasting.

    grad: (broadcast shape), shape: the input's shape -> (shape).  An array
    or a Tensor (the sum and the reshape are then recorded).
    Broadcasting copies an input along two kinds of axes: *inserted* leading
    axes (a (D,) bias added to (B, D)) and *stretched* size-1 axes ((B, 1)
    against (B, D)).  An input used k times along an axis gets the sum of the
    k gradients, so both kinds are summed away.
    """
    shape = tuple(shape)
    if grad.shape == shape:
        return grad
    validate.broadcast_source("unbroadcast", "a gradient", shape, grad.shape)
    extra = grad.ndim - len(shape)  # number of inserted leading axes
    stretched = tuple(
        extra + i
        for i, n in enumerate(shape)
        if n == 1 and grad.shape[extra + i] != 1
    )
    # (1,..,1, shape)
    summed = grad.sum(axis=tuple(range(extra)) + stretched, keepdims=True)
    return summed.reshape(shape)


def _broadcasting(ufunc, a: Tensor, b: Tensor, symbol: str, name: str):
    """ufunc(a.data, b.data) with NumPy broadcasting; if the shapes do not
    broadcast, the ValueError of `validate.broadcast_shape` ("add: (3, 4) +
    (5,): ...").
    Checking only on failure keeps the common case free of a second shape
    computation."""
    try:
        return ufunc(a.data, b.data)
    except ValueError:
        what = f"{name}: {a.shape} {symbol} {b.shape}"
        validate.broadcast_shape(what, a.shape, b.shape)
        raise


def _as_real_array(op: str, name: str, data) -> np.ndarray:
    """`data` (numbers, nested lists of numbers, an ndarray) as a new float64
    array (float32 stays float32), or a TypeError naming `op` and `name`.

    The checks are `validate.real_array`'s; a bool array is accepted (a
    mask), a lone bool is not.
    """
    if isinstance(data, Tensor):
        data = data.data
    arr = validate.real_array(op, name, data, bool_arrays=True)
    # float64 by default; float32 is kept as is (a copy: the tensor owns it)
    dtype = np.float32 if arr.dtype == np.float32 else np.float64
    return np.array(arr, dtype=dtype)


# IEEE arithmetic without NumPy's warnings: inf and nan are results here, as
# in PyTorch (which never warns about them), not accidents to report.
# How many in-place writes through `Tensor.data` happened so far, in any
# tensor.  A node notes it at creation (`_versions[0]`); while it is
# unchanged, `backward` knows no saved array changed and skips the check.
_WRITES = [0]


def _ieee() -> np.errstate:
    return np.errstate(divide="ignore", invalid="ignore", over="ignore")


def _power(x: np.ndarray, k: float) -> np.ndarray:
    """x ** k as PyTorch computes it: k = 0.5 is sqrt(x) and k = -0.5 is
    1 / sqrt(x), which differ from C's pow at -0.0 and -inf (sqrt(-inf) is
    nan, 1 / sqrt(-0.0) is -inf)."""
    if k == 0.5:
        return np.sqrt(x)
    if k == -0.5:
        return 1 / np.sqrt(x)
    return x**k


#: In a forward's `saved`: "the output itself" (its array for `backward`,
#: the output Tensor for `grad(create_graph=True)`).
OUTPUT = object()


class Recorded(NamedTuple):
    """In a forward's `saved`: a value the forward computed on the way, as
    `array` for `backward`, and as a Tensor made again from the inputs by
    `tensor()` for `grad(create_graph=True)` (cross-entropy's
    log-probabilities: the array is saved, the Tensor is recorded only when
    the backward is)."""

    array: np.ndarray
    tensor: Callable[[], Tensor]


def _result(data, inputs: tuple, backward, saved: tuple, op: str) -> Tensor:
    """A new tensor made by `op`; it records its inputs (and their versions,
    see `_check_versions`) only if one of them needs a gradient.

    `saved` holds what the backward rule needs: constants (shapes, axes,
    masks), input Tensors, `OUTPUT` and `Recorded` values.  The rule of
    `backward` gets their arrays (`_saved`); the Tensors and recipes are
    kept (`_links`) for `grad(create_graph=True)`."""
    out = Tensor.__new__(Tensor)
    out._data = data if type(data) is np.ndarray else np.asarray(data)
    # A view (reshape, transpose, a slice) shares its base's version
    # counter, as in PyTorch: writing to either is a write to both.
    base = inputs[0] if len(inputs) == 1 else None
    if base is not None and np.may_share_memory(out._data, base._data):
        out._counter = base._counter
    else:
        out._counter = [0]
    out.grad = None
    out._op = op
    for t in inputs:  # (a loop, not any(): this runs once per operation)
        if t.requires_grad:
            break
    else:  # a constant: nothing to differentiate, so keep nothing alive
        out.requires_grad = False
        out._children, out._backward, out._saved = (), None, ()
        out._links, out._versions = None, ()
        return out
    out.requires_grad = True
    out._children, out._backward = inputs, backward
    # the arrays of the inputs, the output and the Recorded values; a
    # plain loop: this runs once per operation (a comprehension and any()
    # cost 1 us more, 5% of a small MLP's step)
    arrays, linked = [], False
    for s in saved:
        kind = type(s)
        if kind is Tensor:
            arrays.append(s._data)
            linked = True
        elif s is OUTPUT:
            arrays.append(out._data)
            linked = True
        elif kind is Recorded:
            arrays.append(s.array)
            linked = True
        else:
            arrays.append(s)
    out._links = saved if linked else None
    saved = tuple(arrays) if linked else saved
    out._saved = saved
    versions = [t._counter[0] for t in inputs]  # each input's _version
    out._versions = (_WRITES[0], *versions, out._counter[0])
    return out


def _describe(t: Tensor) -> str:
    """A tensor in an error message, worded as PyTorch's:
    "[Tensor (2, 3) float64], which is output of exp"."""
    made = f"output of {t._op}" if t._op else "a leaf"
    return f"[Tensor {t.shape} {t.dtype}], which is {made},"


def _links_as_tensors(node: Tensor) -> tuple:
    """What `node`'s rule gets in `grad(create_graph=True)`: its saved values
    with the inputs and the output as Tensors, and `Recorded` values made
    again from the inputs (which must be as the forward saw them)."""
    if any(type(s) is Recorded for s in node._links):
        for t, expected in zip(node._children, node._versions[1:]):
            if t._version != expected:
                raise RuntimeError(_modified(t, expected, node))
    return tuple(
        node if s is OUTPUT else s.tensor() if type(s) is Recorded else s
        for s in node._links
    )


def _modified(t: Tensor, expected: int, node: Tensor) -> str:
    """PyTorch's message for a saved array changed in place."""
    return (
        "one of the variables needed for gradient computation has been "
        f"modified by an inplace operation: {_describe(t)} is at "
        f"version {t._version}; expected version {expected} instead "
        f"(saved for the backward of {node._op}). Hint: run the "
        "forward pass again after changing .data, or change it out "
        "of place (t.data = t.data - 1)"
    )


def _check_versions(node: Tensor) -> None:
    """Raise PyTorch's RuntimeError if an array `node`'s backward rule saved was
    modified in place after the forward pass (as `torch.Tensor._version`).

    Every in-place write through `t.data` (`t.data -= lr * g`, which assigns
    the same array back) bumps `t._version`; `_result` noted the inputs'
    versions and the output's in `_versions[1:]` (after the count of writes,
    `_WRITES`, at that moment); a view shares its base's counter, so a write
    to the base is seen through the view.  Only a tensor whose
    array the rule actually saved (it shares memory with one of `_saved`)
    makes this an error: `x + 1` saves shapes, so changing `x` afterwards is
    harmless.
    """
    pairs = zip((*node._children, node), node._versions[1:])
    for t, expected in pairs:
        if t._version != expected and _saves(node._saved, t._data):
            raise RuntimeError(_modified(t, expected, node))


def _saves(saved: tuple, arr: np.ndarray) -> bool:
    """Whether an array in `saved` may share memory with `arr`."""
    return any(
        isinstance(s, np.ndarray) and np.may_share_memory(s, arr) for s in saved
    )


class Tensor:
    """An ndarray in a computation graph: `data`, `grad` and how it was made.

    >>> x = Tensor([[1.0, 2.0]], requires_grad=True)  # (1, 2)
    >>> w = Tensor([[3.0], [4.0]], requires_grad=True)  # (2, 1)
    >>> y = (x @ w).sum(); y.backward()
    >>> y.item(), x.grad.tolist(), w.grad.tolist()
    (11.0, [[3.0, 4.0]], [[1.0], [2.0]])
    """

    __slots__ = (
        "_data",
        "_counter",
        "_versions",
        "grad",
        "requires_grad",
        "_children",
        "_backward",
        "_saved",
        "_links",
        "_op",
    )
    # make `ndarray @ Tensor` etc. call our reflected operators
    __array_ufunc__ = None

    def __init__(self, data, requires_grad: bool = False):
        self._data = _as_real_array("Tensor", "data", data)
        self._counter = [0]  # shared with views (see _result)
        self._versions = ()
        self.grad = None
        self.requires_grad = validate.flag(
            "Tensor", "requires_grad", requires_grad
        )
        self._children, self._backward, self._saved, self._op = (), None, (), ""
        self._links = None

    # ---- data and its version -----------------------------------------------

    @property
    def _version(self) -> int:
        """In-place writes so far to this tensor's array (or its base's)."""
        return self._counter[0]

    @property
    def data(self) -> np.ndarray:
        """The array.  Write to it out of place (`t.data = t.data - 1`) or with
        an augmented assignment (`t.data -= 1`, which bumps the version);
        writes through an element (`t.data[0] = 1`) or a NumPy view are not
        seen by the version counter."""
        return self._data

    @data.setter
    def data(self, value) -> None:
        if value is self._data:  # t.data -= x: the array changed in place
            self._counter[0] += 1
            _WRITES[0] += 1
            return
        arr = _as_real_array("Tensor.data", "value", value)
        validate.same_shape(
            "Tensor.data", "the new array", arr, self.shape, "the tensor"
        )
        self._data = arr.astype(self._data.dtype, copy=False)

    # ---- basics -------------------------------------------------------------

    @property
    def shape(self) -> tuple:
        return self.data.shape

    @property
    def ndim(self) -> int:
        return self.data.ndim

    @property
    def size(self) -> int:
        return self.data.size

    @property
    def dtype(self):
        return self.data.dtype

    def item(self) -> float:
        """The value of a one-element tensor as a Python float."""
        if self.data.size != 1:
            raise ValueError(
                "item: only a one-element tensor converts to a number, "
                f"shape is {self.shape}"
            )
        return float(self.data.reshape(()))

    def numpy(self) -> np.ndarray:
        return self.data

    def detach(self) -> Tensor:
        """The same data as a new leaf that does not require a gradient."""
        return Tensor(self.data)

    def __repr__(self) -> str:
        body = np.array2string(
            self.data, precision=4, separator=", ", prefix="Tensor("
        )
        extra = ", dtype=float32" if self.data.dtype == np.float32 else ""
        extra += ", requires_grad=True" if self.requires_grad else ""
        return f"Tensor({body}{extra})"

    def __len__(self) -> int:
        return len(self.data)

    def _other(self, x, op: str) -> Tensor:
        """`x` as a Tensor; a Python number, an integer array or a boolean
        array (a mask) takes this tensor's dtype."""
        if isinstance(x, Tensor):
            return x
        if isinstance(x, numbers.Real) and not isinstance(x, (bool, np.bool_)):
            return Tensor(np.asarray(x, dtype=self.data.dtype))
        if isinstance(x, np.bool_):  # a one-entry mask (relu of a 0-d tensor)
            x = np.asarray(x)
        if isinstance(x, np.ndarray) and x.dtype.kind == "f":
            return Tensor(x)
        if isinstance(x, np.ndarray) and x.dtype.kind in "biu":
            return Tensor(x.astype(self.data.dtype))
        what = f"dtype {x.dtype}" if isinstance(x, np.ndarray) else repr(x)
        raise TypeError(
            f"{op}: expected a Tensor, an ndarray or a number, "
            f"got {type(x).__name__} ({what[:60]})"
        )

    # ---- matmul -------------------------------------------------------------

    def __matmul__(self, other) -> Tensor:
        """A @ B for (m, n) @ (n, k) -> (m, k), or stacks
        (..., m, n) @ (..., n, k)."""
        other = self._other(other, "matmul")
        a, b = self.data, other.data
        validate.matmul_shapes("matmul", a.shape, b.shape)
        saved = (self, other)
        return _result(a @ b, (self, other), Tensor.matmul_backward, saved, "@")

    @staticmethod
    def matmul_backward(g, saved, needs):
        """VJP of Z = A @ B.  Index form: Z_ik = sum_j A_ij B_jk, so
        dL/dA_ij = sum_k G_ik B_jk = (G B^T)_ij and
        dL/dB_jk = sum_i A_ij G_ik = (A^T G)_jk.
        g: (..., m, k), A: (..., m, n), B: (..., n, k)
        -> dA (..., m, n), dB (..., n, k)."""
        a, b = saved
        # (..., m, n)
        da = unbroadcast(g @ b.swapaxes(-1, -2), a.shape) if needs[0] else None
        # (..., n, k)
        db = unbroadcast(a.swapaxes(-1, -2) @ g, b.shape) if needs[1] else None
        return da, db

    def __rmatmul__(self, other) -> Tensor:
        return self._other(other, "matmul") @ self

    # ---- elementwise binary operations (with broadcasting) ------------------

    def __add__(self, other) -> Tensor:
        other = self._other(other, "add")
        out = _broadcasting(np.add, self, other, "+", "add")
        shapes = (self.shape, other.shape)
        return _result(out, (self, other), Tensor.add_backward, shapes, "+")

    @staticmethod
    def add_backward(g, saved, needs):
        """VJP of a + b: both sides get g, summed over the axes broadcasting
        added."""
        a_shape, b_shape = saved
        da = unbroadcast(g, a_shape) if needs[0] else None
        db = unbroadcast(g, b_shape) if needs[1] else None
        return da, db

    def __sub__(self, other) -> Tensor:
        other = self._other(other, "sub")
        out = _broadcasting(np.subtract, self, other, "-", "sub")
        shapes = (self.shape, other.shape)
        return _result(out, (self, other), Tensor.sub_backward, shapes, "-")

    @staticmethod
    def sub_backward(g, saved, needs):
        """VJP of a - b: a gets g, b gets -g (each unbroadcast to its shape)."""
        a_shape, b_shape = saved
        da = unbroadcast(g, a_shape) if needs[0] else None
        db = unbroadcast(-g, b_shape) if needs[1] else None
        return da, db

    def __mul__(self, other) -> Tensor:
        other = self._other(other, "mul")
        out = _broadcasting(np.multiply, self, other, "*", "mul")
        saved = (self, other)
        return _result(out, (self, other), Tensor.mul_backward, saved, "*")

    @staticmethod
    def mul_backward(g, saved, needs):
        """VJP of a * b: a diagonal Jacobian, so elementwise products: g*b and
        g*a."""
        a, b = saved
        da = unbroadcast(g * b, a.shape) if needs[0] else None
        db = unbroadcast(g * a, b.shape) if needs[1] else None
        return da, db

    def __truediv__(self, other) -> Tensor:
        other = self._other(other, "div")
        with _ieee():  # 1 / 0 = inf and 0 / 0 = nan, as PyTorch
            out = _broadcasting(np.divide, self, other, "/", "div")
        saved = (self, other)
        return _result(out, (self, other), Tensor.div_backward, saved, "/")

    @staticmethod
    def div_backward(g, saved, needs):
        """VJP of a / b: d/da = 1/b, d/db = -a/b^2, elementwise."""
        a, b = saved
        da = unbroadcast(g / b, a.shape) if needs[0] else None
        # -g a / b^2 as PyTorch orders it, (a / b) / b: b * b overflows
        # for |b| > 1e154, where a / b / b is still a number
        db = unbroadcast(-g * (a / b) / b, b.shape) if needs[1] else None
        return da, db

    def __radd__(self, other) -> Tensor:
        return self._other(other, "add") + self

    def __rsub__(self, other) -> Tensor:
        return self._other(other, "sub") - self

    def __rmul__(self, other) -> Tensor:
        return self._other(other, "mul") * self

    def __rtruediv__(self, other) -> Tensor:
        return self._other(other, "div") / self

    # ---- elementwise unary operations (diagonal Jacobians) ------------------
    # Each VJP is g times the elementwise derivative; shapes stay (...).

    def __pow__(self, k) -> Tensor:
        if not isinstance(k, numbers.Real) or isinstance(k, bool):
            raise TypeError(
                "pow: only a number exponent is supported (int or float), "
                f"got {type(k).__name__}; "
                "write (k * x.log()).exp() for a tensor exponent"
            )
        x = self.data
        with _ieee():  # 0 ** -1 = inf, (-8) ** 0.5 = nan, as PyTorch
            out = _power(x, k)
        return _result(out, (self,), Tensor.pow_backward, (self, k), f"**{k:g}")

    @staticmethod
    def pow_backward(g, saved, needs):
        """VJP of x ** k: g * k x^(k-1); for k = 0 the derivative is 0, also at
        x = 0 where the formula would give 0 * inf = nan (as PyTorch)."""
        x, k = saved
        if k == 0:
            return (_zeros_like(g),)
        return (g * (k * _pow(x, k - 1)),)

    def __rpow__(self, base):
        raise TypeError(
            "pow: a tensor exponent is not supported; "
            "write (x * log(base)).exp() for base ** x"
        )

    def __neg__(self) -> Tensor:
        return _result(-self.data, (self,), Tensor.neg_backward, (), "neg")

    @staticmethod
    def neg_backward(g, saved, needs):
        """VJP of -x: -g."""
        return (-g,)

    def exp(self) -> Tensor:
        with _ieee():  # exp(710) = inf, as PyTorch
            e = np.exp(self.data)
        return _result(e, (self,), Tensor.exp_backward, (OUTPUT,), "exp")

    @staticmethod
    def exp_backward(g, saved, needs):
        """VJP of exp(x): g * exp(x), using the saved output."""
        (e,) = saved
        return (g * e,)

    def log(self) -> Tensor:
        """ln x, as PyTorch: log(0) = -inf and log(x < 0) = nan (no error and
        no warning; the scalar engine raises instead, see `Value.log`)."""
        x = self.data
        with _ieee():
            out = np.log(x)
        return _result(out, (self,), Tensor.log_backward, (self,), "log")

    @staticmethod
    def log_backward(g, saved, needs):
        """VJP of log(x): g / x."""
        (x,) = saved
        return (g / x,)

    def tanh(self) -> Tensor:
        t = np.tanh(self.data)
        return _result(t, (self,), Tensor.tanh_backward, (OUTPUT,), "tanh")

    @staticmethod
    def tanh_backward(g, saved, needs):
        """VJP of tanh(x): g * (1 - tanh(x)^2), using the saved output."""
        (t,) = saved
        return (g * (1 - t * t),)

    def relu(self) -> Tensor:
        x = self.data
        out = np.maximum(x, 0)  # relu(x) = max(x, 0); a NaN stays NaN
        on = out != 0  # x > 0, and True at NaN (PyTorch passes g through)
        return _result(out, (self,), Tensor.relu_backward, (on,), "relu")

    @staticmethod
    def relu_backward(g, saved, needs):
        """VJP of relu(x): g where x > 0 (or NaN), else 0 (the kink at 0 gets
        0, as in PyTorch).  The mask is a constant: relu'' = 0 almost
        everywhere."""
        (on,) = saved
        return (g * on,)

    def sigmoid(self) -> Tensor:
        s = numerics.sigmoid(self.data)
        return _result(s, (self,), Tensor.sigmoid_backward, (OUTPUT,), "sigmoid")

    @staticmethod
    def sigmoid_backward(g, saved, needs):
        """VJP of sigmoid(x): g * s (1 - s), using the saved output s."""
        (s,) = saved
        return (g * (s * (1 - s)),)

    # ---- reductions ---------------------------------------------------------

    def sum(self, axis=None, keepdims: bool = False) -> Tensor:
        """Sum over `axis` (None: all).  (...) -> the shape without (or with
        1 at) those axes."""
        axes = validate.axes("sum", axis, self.ndim)
        keepdims = validate.flag("sum", "keepdims", keepdims)
        out = self.data.sum(axis=axes, keepdims=keepdims)
        saved = (self.shape, axes, keepdims)
        return _result(out, (self,), Tensor.sum_backward, saved, "sum")

    @staticmethod
    def sum_backward(g, saved, needs):
        """VJP of a sum: every summed entry gets the same g, copied back along
        the summed axes."""
        in_shape, axes, keepdims = saved
        if not keepdims:
            g = g.reshape(_kept(g.shape, axes))  # the summed axes back, size 1
        return (broadcast_to(g, in_shape),)  # (in_shape)

    def mean(self, axis=None, keepdims: bool = False) -> Tensor:
        """Mean over `axis` (None: all); shapes as in `sum`."""
        axes = validate.axes("mean", axis, self.ndim)
        keepdims = validate.flag("mean", "keepdims", keepdims)
        count = int(np.prod([self.shape[a] for a in axes]))
        out = self.data.mean(axis=axes, keepdims=keepdims)
        saved = (self.shape, axes, keepdims, count)
        return _result(out, (self,), Tensor.mean_backward, saved, "mean")

    @staticmethod
    def mean_backward(g, saved, needs):
        """VJP of a mean: the sum's VJP divided by the number of entries
        averaged."""
        in_shape, axes, keepdims, count = saved
        (gx,) = Tensor.sum_backward(g, (in_shape, axes, keepdims), needs)
        return (gx / count,)

    def max(self, axis=None, keepdims: bool = False) -> Tensor:
        """Maximum over `axis` (None: all).  Ties share the gradient equally
        (like torch.amax)."""
        axes = validate.axes("max", axis, self.ndim)
        keepdims = validate.flag("max", "keepdims", keepdims)
        if self.size == 0:
            raise ValueError(f"max: the tensor of shape {self.shape} is empty")
        m = self.data.max(axis=axes, keepdims=True)  # (... with 1s at axes)
        out = m if keepdims else np.squeeze(m, axis=axes)
        saved = (self.data, m, axes, keepdims)
        return _result(out, (self,), Tensor.max_backward, saved, "max")

    @staticmethod
    def max_backward(g, saved, needs):
        """VJP of max: g goes to the entries equal to the maximum, split among
        ties."""
        x, m, axes, keepdims = saved  # arrays: the choice of max is a constant
        if not keepdims:
            g = g.reshape(_kept(g.shape, axes))
        hit = x == m  # (...) where the max was taken
        return (hit * (g / hit.sum(axis=axes, keepdims=True)),)

    # ---- shape operations ---------------------------------------------------

    def reshape(self, *shape) -> Tensor:
        """The same entries in a new shape: t.reshape(2, 3) or
        t.reshape((2, 3)); -1 allowed."""
        shape = validate.int_args("reshape", "shape", shape)
        try:
            out = self.data.reshape(shape)
        except ValueError:
            raise ValueError(
                f"reshape: cannot reshape {self.shape} ({self.size} entries) "
                f"into {tuple(shape)}"
            ) from None
        saved = (self.shape,)
        return _result(out, (self,), Tensor.reshape_backward, saved, "reshape")

    @staticmethod
    def reshape_backward(g, saved, needs):
        """VJP of reshape: reshape g back to the input's shape."""
        (in_shape,) = saved
        return (g.reshape(in_shape),)

    def transpose(self, *axes) -> Tensor:
        """Permute the axes as NumPy does: no argument reverses them; else a
        permutation."""
        n = self.ndim
        axes = validate.int_args("transpose", "axes", axes)
        if not axes:
            axes = tuple(reversed(range(n)))
        axes = validate.permutation("transpose", axes, self.shape)
        out = self.data.transpose(axes)
        return _result(out, (self,), Tensor.transpose_backward, (axes,), "T")

    @staticmethod
    def transpose_backward(g, saved, needs):
        """VJP of a transpose: transpose g by the inverse permutation."""
        (axes,) = saved
        return (g.transpose(tuple(int(a) for a in np.argsort(axes))),)

    @property
    def T(self) -> Tensor:
        return self.transpose()

    def swapaxes(self, axis1: int, axis2: int) -> Tensor:
        """The tensor with two axes exchanged, as NumPy's `swapaxes`:
        `swapaxes(-1, -2)` transposes a stack of matrices."""
        a1 = validate.one_axis("swapaxes", axis1, self.shape)
        a2 = validate.one_axis("swapaxes", axis2, self.shape)
        axes = list(range(self.ndim))
        axes[a1], axes[a2] = a2, a1
        return self.transpose(axes)

    def __getitem__(self, index) -> Tensor:
        """NumPy indexing: slices, integers, integer arrays, masks."""
        if isinstance(index, Tensor) or (
            isinstance(index, tuple) and any(isinstance(i, Tensor) for i in index)
        ):
            raise TypeError(
                "index: a Tensor cannot index (Tensors hold floats); "
                "use an int, a slice, an integer ndarray or a boolean mask"
            )
        try:
            out = self.data[index]
        except IndexError as e:
            # a float, a string...: the wrong kind of index, not out of range
            kind = TypeError if "integer" in str(e) else IndexError
            raise kind(f"index: {e} (tensor shape {self.shape})") from None
        saved = (self.shape, index)
        return _result(
            np.array(out), (self,), Tensor.getitem_backward, saved, "index"
        )

    @staticmethod
    def getitem_backward(g, saved, needs):
        """VJP of indexing: scatter-add g into zeros (`index_add`), once per
        occurrence, so an entry picked twice (x[[0, 0]]) gets both gradients;
        `zeros[index] += g` would not."""
        in_shape, index = saved
        return (index_add(g, in_shape, index),)

    # ---- softmax family -----------------------------------------------------

    def softmax(self, axis: int = -1) -> Tensor:
        """exp(x) / sum(exp(x)) along `axis`, computed with the max subtracted
        (no overflow)."""
        ax = validate.one_axis("softmax", axis, self.shape)
        with _ieee():  # softmax([inf, 1]) = [nan, nan], as PyTorch
            s = numerics.softmax(self.data, ax)
        saved = (OUTPUT, ax)
        return _result(s, (self,), Tensor.softmax_backward, saved, "softmax")

    @staticmethod
    def softmax_backward(g, saved, needs):
        """VJP of softmax.  Its Jacobian along the axis is diag(s) - s s^T, so
        g^T J = s * (g - (g . s)): no Jacobian is ever built."""
        s, ax = saved
        return (s * (g - (g * s).sum(axis=ax, keepdims=True)),)

    def log_softmax(self, axis: int = -1) -> Tensor:
        """x - logsumexp(x) along `axis`, with the max subtracted first
        (stable)."""
        ax = validate.one_axis("log_softmax", axis, self.shape)
        with _ieee():
            out = numerics.log_softmax(self.data, ax)
        backward = Tensor.log_softmax_backward
        return _result(out, (self,), backward, (OUTPUT, ax), "log_softmax")

    @staticmethod
    def log_softmax_backward(g, saved, needs):
        """VJP of log_softmax: g - softmax(x) * sum(g) along the axis
        (softmax = exp(output))."""
        out, ax = saved
        return (g - _exp(out) * g.sum(axis=ax, keepdims=True),)

    # ---- the backward pass --------------------------------------------------

    def backward(self, grad=None) -> None:
        """Fill in `grad` of every tensor this one depends on: d(self)/d(tensor).

        `grad` is the seed d(root)/d(self); it may be omitted only for a
        one-element tensor (a loss), where it is 1.  Like PyTorch (and the
        scalar engine), leaf gradients accumulate - `backward()` twice doubles
        them - while gradients of intermediate tensors are recomputed.
        """
        seed = _seed("backward", "this tensor", self, "grad", grad)
        order = topological_order(self)
        for node in order:
            if node._children:
                node.grad = None  # intermediate: recomputed from zero
        _accumulate(self, seed, "seed")
        with _ieee():  # inf and nan are values here, as in PyTorch
            for node in reversed(order):
                if not node._children or node.grad is None:
                    continue
                children = node._children
                needs = tuple(c.requires_grad for c in children)
                if node._versions[0] != _WRITES[0]:  # a write since forward
                    _check_versions(node)
                grads = node._backward(node.grad, node._saved, needs)
                for child, g, need in zip(children, grads, needs):
                    if need:
                        _accumulate(child, g, node._op)

    def zero_grad(self) -> None:
        """Forget the gradient (set it to None), before the next backward pass."""
        self.grad = None


def _seed(op: str, who: str, output: Tensor, name: str, grad) -> np.ndarray:
    """d(root)/d(output), where a backward pass starts: `grad` (an array of
    the output's shape) or, for a one-element output (a loss), 1."""
    if not output.requires_grad:
        raise RuntimeError(
            f"{op}: {who} does not require a gradient (none of the tensors "
            "it was computed from has requires_grad=True)"
        )
    if grad is None:
        if output.size != 1:
            raise RuntimeError(
                f"{op}: the output has shape {output.shape}, not a single "
                f"number; pass {name}= (an array of that shape) or reduce it "
                "first, e.g. y.sum()"
            )
        return np.ones_like(output.data)
    seed = _as_real_array(op, name, grad).astype(output.dtype, copy=False)
    return validate.same_shape(op, name, seed, output.shape, "the output")


def _accumulate(node: Tensor, g: np.ndarray, op: str) -> None:
    """node.grad += g, checking the shape-check rule: a gradient has its
    tensor's shape."""
    validate.gradient_shape(op, g, node.data.shape)
    if node.grad is None:
        # A leaf owns a fresh, writable copy; an intermediate may share it
        # (it is never written in place).
        node.grad = g.astype(node.data.dtype, copy=not node._children)
    else:
        # out of place: g may be a view of another tensor's gradient
        node.grad = node.grad + g


# ---- functions --------------------------------------------------------------


def softmax(x: Tensor, axis: int = -1) -> Tensor:
    """Softmax of `x` along `axis` (see `Tensor.softmax`)."""
    return _tensor("softmax", x).softmax(axis)


def log_softmax(x: Tensor, axis: int = -1) -> Tensor:
    """Log-softmax of `x` along `axis` (see `Tensor.log_softmax`)."""
    return _tensor("log_softmax", x).log_softmax(axis)


def cross_entropy(logits: Tensor, targets) -> Tensor:
    """Mean over the batch of -log softmax(logits)[target].

    logits: (B, C), targets: (B,) integer classes in [0, C) -> a scalar ().
    Computed from log-softmax with the max subtracted, so huge logits are fine.
    """
    z = _tensor("cross_entropy", logits, "logits").data
    if z.ndim != 2:
        raise ValueError(
            f"cross_entropy: logits must be (B, C), got shape {z.shape}"
        )
    B, C = z.shape
    t = targets.data if isinstance(targets, Tensor) else targets
    t = validate.integer_array(
        "cross_entropy", "targets", t, "class indices", whole_floats=True
    )
    if t.shape != (B,):
        raise ValueError(
            f"cross_entropy: logits {z.shape} need targets of shape ({B},), "
            f"got {t.shape}"
        )
    validate.below("cross_entropy", "targets", t, C)
    with _ieee():
        logp = numerics.log_softmax(z, axis=1)  # (B, C)
        loss = -logp[np.arange(B), t].mean()  # ()
    out = np.asarray(loss, dtype=z.dtype)
    saved = (Recorded(logp, lambda: logits.log_softmax(1)), t)
    return _result(out, (logits,), cross_entropy_backward, saved, "cross_entropy")


def cross_entropy_backward(g, saved, needs):
    """VJP of the mean cross-entropy: g * (p - y) / B, with p = softmax(logits)
    = exp(log_softmax(logits)), y one-hot."""
    logp, t = saved  # (B, C) log-probabilities, (B,) classes
    y = np.zeros(logp.shape, dtype=logp.dtype)  # (B, C) one-hot, a constant
    y[np.arange(len(t)), t] = 1
    return ((_exp(logp) - y) * (g / len(t)),)


def zero_grad(tensors: Iterable[Tensor]) -> None:
    """Set `grad = None` on every given tensor (call it between training
    steps)."""
    for t in tensors:
        _tensor("zero_grad", t, "every item of tensors").grad = None


def _tensor(op: str, x, name: str = "x") -> Tensor:
    """`x` if it is a Tensor, else a TypeError naming `op`."""
    return validate.instance_of(op, name, x, Tensor, _WRAP)


_WRAP = " (wrap an array as Tensor(array))"  # the hint of every Tensor check


# ---- what the rules use, on arrays and on Tensors alike ------------------------
# A rule runs on ndarrays in `backward` and on Tensors in
# `grad(create_graph=True)`.  Most of what it does reads the same both ways
# (`g * b`, `g @ b.swapaxes(-1, -2)`, `.sum`, `.reshape`, `unbroadcast`);
# these few helpers are the rest.


def broadcast_to(g, shape: tuple):
    """g copied along the axes where `shape` is larger (the VJP of a sum).
    An array becomes a read-only view; a Tensor is added to zeros, which
    broadcasts it and records it (the add's rule sums the copies back: the
    transpose of a copy)."""
    shape = tuple(shape)
    if g.shape == shape:
        return g
    if isinstance(g, Tensor):
        return g + Tensor(np.zeros(shape, dtype=g.dtype))
    return np.broadcast_to(g, shape)


def index_add(g, shape: tuple, index):
    """zeros(shape) with g added at `index`, once per occurrence (np.add.at):
    the VJP of indexing.  On a Tensor it is an operation of its own, whose
    VJP is indexing again, so indexing can be differentiated any number of
    times."""
    out = np.zeros(shape, dtype=g.dtype)  # (shape)
    np.add.at(out, index, g.data if isinstance(g, Tensor) else g)
    if isinstance(g, Tensor):
        return _result(out, (g,), _index_add_backward, (index,), "index_add")
    return out


def _index_add_backward(g, saved, needs):
    """VJP of index_add: pick the entries of g at the index."""
    (index,) = saved
    return (g[index],)


def _kept(shape: tuple, axes: tuple) -> tuple:
    """`shape` with size-1 axes put back at `axes` (a reduction's keepdims)."""
    full = list(shape)
    for a in sorted(axes):
        full.insert(a, 1)
    return tuple(full)


def _exp(x):
    return x.exp() if isinstance(x, Tensor) else np.exp(x)


def _pow(x, k: float):
    return x**k if isinstance(x, Tensor) else _power(x, k)


def _zeros_like(x):
    zeros = np.zeros(x.shape, dtype=x.dtype)
    return Tensor(zeros) if isinstance(x, Tensor) else zeros


def grad(output: Tensor, inputs, create_graph: bool = False, *, grad_output=None):
    """d(output)/d(input) for every tensor of `inputs`, as a list of Tensors,
    like `torch.autograd.grad`: no `.grad` is read or written.

    `output` is a one-element tensor (a loss), or any tensor together with
    `grad_output`, the seed d(root)/d(output) of its shape (then the result
    is a vector-Jacobian product).  `inputs` is a Tensor or a sequence of
    them.  An input the output does not depend on gets zeros (where PyTorch
    needs `allow_unused=True, materialize_grads=True`).

    create_graph=False: the rules run on arrays, as in `backward`; the
    gradients are new leaves.  create_graph=True: the same rules run on
    Tensors, every step is recorded, and each gradient is a tensor with a
    graph back to the inputs: `grad` of it gives second derivatives.
    """
    output = _tensor("grad", output, "output")
    single = isinstance(inputs, Tensor)
    inputs = [inputs] if single else list(inputs)
    for t in inputs:
        _tensor("grad", t, "every item of inputs")
    create_graph = validate.flag("grad", "create_graph", create_graph)
    seed = _seed("grad", "the output", output, "grad_output", grad_output)
    order = topological_order(output)
    # only nodes on a path to one of the inputs need a gradient
    wanted = {id(t) for t in inputs}
    leads = set()
    for node in order:  # children come before their parents
        if id(node) in wanted or any(id(c) in leads for c in node._children):
            leads.add(id(node))
    grads = {id(output): Tensor(seed) if create_graph else seed}
    with _ieee():
        for node in reversed(order):
            g = grads.get(id(node))
            if g is None or not node._children or id(node) not in leads:
                continue
            if node._versions[0] != _WRITES[0]:
                _check_versions(node)
            needs = tuple(
                c.requires_grad and id(c) in leads for c in node._children
            )
            saved = node._saved
            if create_graph and node._links is not None:
                saved = _links_as_tensors(node)  # the same rule, on Tensors
            parts = node._backward(g, saved, needs)
            for child, part, need in zip(node._children, parts, needs):
                if not need:
                    continue
                validate.gradient_shape(node._op, part, child.shape)
                old = grads.get(id(child))
                grads[id(child)] = part if old is None else old + part
    result = []
    for t in inputs:
        g = grads.get(id(t))
        if g is None:
            g = np.zeros(t.shape, dtype=t.dtype)
        if isinstance(g, Tensor):
            result.append(g)
        else:
            result.append(Tensor(np.array(g, dtype=t.dtype)))
    return result
