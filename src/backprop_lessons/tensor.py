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
engine's iterative `topological_order` (it only reads `_children`).

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
It imports NumPy, the shared array formulas of `numerics` and the scalar
engine's graph walk, nothing else.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable

import numpy as np

from . import numerics
from .scalar import topological_order

__all__ = [
    "Tensor",
    "unbroadcast",
    "softmax",
    "log_softmax",
    "cross_entropy",
    "zero_grad",
    "grad",
]


# ---- helpers ----------------------------------------------------------------


def unbroadcast(grad: np.ndarray, shape: tuple) -> np.ndarray:
    """Sum `grad` back down to `shape`, undoing NumPy broadcasting.

    grad: (broadcast shape), shape: the input's shape -> (shape).
    Broadcasting copies an input along two kinds of axes: *inserted* leading
    axes (a (D,) bias added to (B, D)) and *stretched* size-1 axes ((B, 1)
    against (B, D)).  An input used k times along an axis gets the sum of the
    k gradients, so both kinds are summed away.
    """
    shape = tuple(shape)
    if grad.shape == shape:
        return grad
    numerics.broadcast_source("unbroadcast", "a gradient", shape, grad.shape)
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
    broadcast, the ValueError of `numerics.broadcast_shape` ("add: (3, 4) +
    (5,): ...").
    Checking only on failure keeps the common case free of a second shape
    computation."""
    try:
        return ufunc(a.data, b.data)
    except ValueError:
        what = f"{name}: {a.shape} {symbol} {b.shape}"
        numerics.broadcast_shape(what, a.shape, b.shape)
        raise


def _as_real_array(op: str, name: str, data) -> np.ndarray:
    """`data` (numbers, nested lists of numbers, an ndarray) as a new float64
    array (float32 stays float32), or a TypeError naming `op` and `name`.

    The checks are `numerics.real_array`'s; a bool array is accepted (a
    mask), a lone bool is not.
    """
    if isinstance(data, Tensor):
        data = data.data
    arr = numerics.real_array(op, name, data, bool_arrays=True)
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


def _result(data, inputs: tuple, backward, saved: tuple, op: str) -> Tensor:
    """A new tensor made by `op`; it records its inputs (and their versions,
    see `_check_versions`) only if one of them needs a gradient."""
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
    if any(t.requires_grad for t in inputs):
        out.requires_grad = True
        out._children, out._backward, out._saved = inputs, backward, saved
        out._versions = (_WRITES[0], *[t._version for t in (*inputs, out)])
    else:  # a constant: nothing to differentiate, so keep nothing alive
        out.requires_grad = False
        out._children, out._backward, out._saved = (), None, ()
        out._versions = ()
    return out


def _describe(t: Tensor) -> str:
    """A tensor in an error message, worded as PyTorch's:
    "[Tensor (2, 3) float64], which is output of exp"."""
    made = f"output of {t._op}" if t._op else "a leaf"
    return f"[Tensor {t.shape} {t.dtype}], which is {made},"


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
            raise RuntimeError(
                "one of the variables needed for gradient computation has been "
                f"modified by an inplace operation: {_describe(t)} is at "
                f"version {t._version}; expected version {expected} instead "
                f"(saved for the backward of {node._op}). Hint: run the "
                "forward pass again after changing .data, or change it out "
                "of place (t.data = t.data - 1)"
            )


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
        "_op",
    )
    # make `ndarray @ Tensor` etc. call our reflected operators
    __array_ufunc__ = None

    def __init__(self, data, requires_grad: bool = False):
        self._data = _as_real_array("Tensor", "data", data)
        self._counter = [0]  # shared with views (see _result)
        self._versions = ()
        self.grad = None
        self.requires_grad = numerics.flag(
            "Tensor", "requires_grad", requires_grad
        )
        self._children, self._backward, self._saved, self._op = (), None, (), ""

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
        numerics.same_shape(
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
        """`x` as a Tensor; a Python number takes this tensor's dtype."""
        if isinstance(x, Tensor):
            return x
        if isinstance(x, numbers.Real) and not isinstance(x, (bool, np.bool_)):
            return Tensor(np.asarray(x, dtype=self.data.dtype))
        if isinstance(x, np.ndarray) and x.dtype.kind in "fiu":
            return Tensor(x)
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
        numerics.matmul_shapes("matmul", a.shape, b.shape)
        return _result(a @ b, (self, other), Tensor.matmul_backward, (a, b), "@")

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
        saved = (self.data, other.data)
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
        saved = (self.data, other.data)
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
        return _result(out, (self,), Tensor.pow_backward, (x, k), f"**{k:g}")

    @staticmethod
    def pow_backward(g, saved, needs):
        """VJP of x ** k: g * k x^(k-1); for k = 0 the derivative is 0, also at
        x = 0 where the formula would give 0 * inf = nan (as PyTorch)."""
        x, k = saved
        if k == 0:
            return (np.zeros_like(g * x),)
        return (g * (k * _power(x, k - 1)),)

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
        return _result(e, (self,), Tensor.exp_backward, (e,), "exp")

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
        return _result(out, (self,), Tensor.log_backward, (x,), "log")

    @staticmethod
    def log_backward(g, saved, needs):
        """VJP of log(x): g / x."""
        (x,) = saved
        return (g / x,)

    def tanh(self) -> Tensor:
        t = np.tanh(self.data)
        return _result(t, (self,), Tensor.tanh_backward, (t,), "tanh")

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
        0, as in PyTorch)."""
        (on,) = saved
        return (g * on,)

    def sigmoid(self) -> Tensor:
        s = numerics.sigmoid(self.data)
        return _result(s, (self,), Tensor.sigmoid_backward, (s,), "sigmoid")

    @staticmethod
    def sigmoid_backward(g, saved, needs):
        """VJP of sigmoid(x): g * s (1 - s), using the saved output s."""
        (s,) = saved
        return (g * (s * (1 - s)),)

    # ---- reductions ---------------------------------------------------------

    def sum(self, axis=None, keepdims: bool = False) -> Tensor:
        """Sum over `axis` (None: all).  (...) -> the shape without (or with
        1 at) those axes."""
        axes = numerics.axes("sum", axis, self.ndim)
        keepdims = numerics.flag("sum", "keepdims", keepdims)
        out = self.data.sum(axis=axes, keepdims=keepdims)
        saved = (self.shape, axes, keepdims)
        return _result(out, (self,), Tensor.sum_backward, saved, "sum")

    @staticmethod
    def sum_backward(g, saved, needs):
        """VJP of a sum: every summed entry gets the same g, copied back along
        the summed axes."""
        in_shape, axes, keepdims = saved
        if not keepdims:
            g = np.expand_dims(g, axes)  # put back the summed axes with size 1
        return (np.broadcast_to(g, in_shape),)  # (in_shape), a read-only view

    def mean(self, axis=None, keepdims: bool = False) -> Tensor:
        """Mean over `axis` (None: all); shapes as in `sum`."""
        axes = numerics.axes("mean", axis, self.ndim)
        keepdims = numerics.flag("mean", "keepdims", keepdims)
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
        axes = numerics.axes("max", axis, self.ndim)
        keepdims = numerics.flag("max", "keepdims", keepdims)
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
        x, m, axes, keepdims = saved
        if not keepdims:
            g = np.expand_dims(g, axes)
        hit = x == m  # (...) where the max was taken
        return (hit * (g / hit.sum(axis=axes, keepdims=True)),)

    # ---- shape operations ---------------------------------------------------

    def reshape(self, *shape) -> Tensor:
        """The same entries in a new shape: t.reshape(2, 3) or
        t.reshape((2, 3)); -1 allowed."""
        shape = numerics.int_args("reshape", "shape", shape)
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
        axes = numerics.int_args("transpose", "axes", axes)
        if not axes:
            axes = tuple(reversed(range(n)))
        if sorted(a % n if -n <= a < n else a for a in axes) != list(range(n)):
            raise ValueError(
                f"transpose: {axes} is not a permutation of the axes of a tensor "
                f"of shape {self.shape}"
            )
        axes = tuple(a % n for a in axes)
        out = self.data.transpose(axes)
        return _result(out, (self,), Tensor.transpose_backward, (axes,), "T")

    @staticmethod
    def transpose_backward(g, saved, needs):
        """VJP of a transpose: transpose g by the inverse permutation."""
        (axes,) = saved
        return (g.transpose(np.argsort(axes)),)

    @property
    def T(self) -> Tensor:
        return self.transpose()

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
        saved = (self.shape, self.data.dtype, index)
        return _result(
            np.array(out), (self,), Tensor.getitem_backward, saved, "index"
        )

    @staticmethod
    def getitem_backward(g, saved, needs):
        """VJP of indexing: scatter-add g into zeros.  np.add.at adds once per
        occurrence, so an entry picked twice (x[[0, 0]]) gets both gradients;
        `zeros[index] += g` would not."""
        in_shape, dtype, index = saved
        gx = np.zeros(in_shape, dtype=dtype)  # (in_shape)
        np.add.at(gx, index, g)
        return (gx,)

    # ---- softmax family -----------------------------------------------------

    def softmax(self, axis: int = -1) -> Tensor:
        """exp(x) / sum(exp(x)) along `axis`, computed with the max subtracted
        (no overflow)."""
        ax = numerics.one_axis("softmax", axis, self.shape)
        with _ieee():  # softmax([inf, 1]) = [nan, nan], as PyTorch
            s = numerics.softmax(self.data, ax)
        return _result(s, (self,), Tensor.softmax_backward, (s, ax), "softmax")

    @staticmethod
    def softmax_backward(g, saved, needs):
        """VJP of softmax.  Its Jacobian along the axis is diag(s) - s s^T, so
        g^T J = s * (g - (g . s)): no Jacobian is ever built."""
        s, ax = saved
        return (s * (g - (g * s).sum(axis=ax, keepdims=True)),)

    def log_softmax(self, axis: int = -1) -> Tensor:
        """x - logsumexp(x) along `axis`, with the max subtracted first
        (stable)."""
        ax = numerics.one_axis("log_softmax", axis, self.shape)
        with _ieee():
            out = numerics.log_softmax(self.data, ax)
        backward = Tensor.log_softmax_backward
        return _result(out, (self,), backward, (out, ax), "log_softmax")

    @staticmethod
    def log_softmax_backward(g, saved, needs):
        """VJP of log_softmax: g - softmax(x) * sum(g) along the axis
        (softmax = exp(output))."""
        out, ax = saved
        return (g - np.exp(out) * g.sum(axis=ax, keepdims=True),)

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
    return numerics.same_shape(op, name, seed, output.shape, "the output")


def _accumulate(node: Tensor, g: np.ndarray, op: str) -> None:
    """node.grad += g, checking the shape-check rule: a gradient has its
    tensor's shape."""
    numerics.gradient_shape(op, g, node.data.shape)
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
    t = numerics.integer_array(
        "cross_entropy", "targets", t, "class indices", whole_floats=True
    )
    if t.shape != (B,):
        raise ValueError(
            f"cross_entropy: logits {z.shape} need targets of shape ({B},), "
            f"got {t.shape}"
        )
    numerics.below("cross_entropy", "targets", t, C)
    with _ieee():
        logp = numerics.log_softmax(z, axis=1)  # (B, C)
        loss = -logp[np.arange(B), t].mean()  # ()
    out = np.asarray(loss, dtype=z.dtype)
    return _result(
        out, (logits,), cross_entropy_backward, (logp, t), "cross_entropy"
    )


def cross_entropy_backward(g, saved, needs):
    """VJP of the mean cross-entropy: g * (p - y) / B, with p = softmax(logits),
    y one-hot."""
    logp, t = saved
    p = np.exp(logp)  # (B, C)
    p[np.arange(len(t)), t] -= 1  # p - y
    return (p * (g / len(t)),)


def zero_grad(tensors: Iterable[Tensor]) -> None:
    """Set `grad = None` on every given tensor (call it between training
    steps)."""
    for t in tensors:
        _tensor("zero_grad", t, "every item of tensors").grad = None


def _tensor(op: str, x, name: str = "x") -> Tensor:
    """`x` if it is a Tensor, else a TypeError naming `op`."""
    return numerics.instance_of(op, name, x, Tensor, _WRAP)


_WRAP = " (wrap an array as Tensor(array))"  # the hint of every Tensor check


# ---- gradients as tensors: grad() and double backward ------------------------
# `backward` runs the rules above on ndarrays: fast, but the gradients it
# makes are plain arrays, outside any graph, so they cannot be differentiated
# again.  `grad(..., create_graph=True)` runs a second set of rules written
# with Tensor operations.  Each one takes the incoming gradient as a Tensor
# and the node it differentiates (its inputs are `node._children`, its output
# is `node` itself), so every operation of the backward pass is recorded like
# a forward operation, and the gradients it returns have a graph of their
# own: differentiate them again and you get second derivatives
# (Hessian-vector products, gradient penalties).  The table is keyed by the
# array rule, so an operation without a Tensor rule is a clear error.


def _unbroadcast_t(g: Tensor, shape: tuple) -> Tensor:
    """`unbroadcast` with Tensor operations: sum, then reshape, both recorded."""
    shape = tuple(shape)
    if g.shape == shape:
        return g
    numerics.broadcast_source("unbroadcast", "a gradient", shape, g.shape)
    extra = g.ndim - len(shape)
    stretched = tuple(
        extra + i
        for i, n in enumerate(shape)
        if n == 1 and g.shape[extra + i] != 1
    )
    return g.sum(axis=tuple(range(extra)) + stretched, keepdims=True).reshape(
        shape
    )


def _broadcast_t(g: Tensor, shape: tuple) -> Tensor:
    """g broadcast to `shape`, recorded: adding a zero constant broadcasts it,
    and the add's rule sums the copies back (the transpose of a copy)."""
    if g.shape == tuple(shape):
        return g
    return g + Tensor(np.zeros(shape, dtype=g.dtype))


def _swap_last(t: Tensor) -> Tensor:
    """t with its last two axes swapped (a stack of matrix transposes)."""
    axes = list(range(t.ndim))
    axes[-2], axes[-1] = axes[-1], axes[-2]
    return t.transpose(tuple(axes))


def _index_add(g: Tensor, in_shape: tuple, index) -> Tensor:
    """zeros(in_shape) with g added at `index` (np.add.at), recorded: the
    backward of indexing as an operation of its own.  Its own VJP is indexing
    again, so indexing can be differentiated any number of times."""
    out = np.zeros(in_shape, dtype=g.dtype)
    np.add.at(out, index, g.data)
    return _result(out, (g,), _index_add_backward, (index,), "index_add")


def _index_add_backward(g, saved, needs):
    """VJP of index_add: pick the entries of g at the index."""
    (index,) = saved
    return (np.array(g[index]),)


_TENSOR_RULES: dict = {}  # array rule -> rule on Tensors, filled below


def rule_add(g, node, needs):
    a, b = node._children
    return (
        _unbroadcast_t(g, a.shape) if needs[0] else None,
        _unbroadcast_t(g, b.shape) if needs[1] else None,
    )


def rule_sub(g, node, needs):
    a, b = node._children
    return (
        _unbroadcast_t(g, a.shape) if needs[0] else None,
        _unbroadcast_t(-g, b.shape) if needs[1] else None,
    )


def rule_mul(g, node, needs):
    a, b = node._children
    return (
        _unbroadcast_t(g * b, a.shape) if needs[0] else None,
        _unbroadcast_t(g * a, b.shape) if needs[1] else None,
    )


def rule_div(g, node, needs):
    a, b = node._children
    return (
        _unbroadcast_t(g / b, a.shape) if needs[0] else None,
        _unbroadcast_t(-g * (a / b) / b, b.shape) if needs[1] else None,
    )


def rule_matmul(g, node, needs):
    a, b = node._children
    return (
        _unbroadcast_t(g @ _swap_last(b), a.shape) if needs[0] else None,
        _unbroadcast_t(_swap_last(a) @ g, b.shape) if needs[1] else None,
    )


def rule_pow(g, node, needs):
    (x,) = node._children
    _, k = node._saved
    if k == 0:
        return (g * Tensor(np.zeros(x.shape, dtype=x.dtype)),)
    return (g * (k * x ** (k - 1)),)


def rule_neg(g, node, needs):
    return (-g,)


def rule_exp(g, node, needs):
    return (g * node,)  # the output is exp(x): its graph leads back to x


def rule_log(g, node, needs):
    (x,) = node._children
    return (g / x,)


def rule_tanh(g, node, needs):
    return (g * (1 - node * node),)


def rule_sigmoid(g, node, needs):
    return (g * (node * (1 - node)),)


def rule_relu(g, node, needs):
    (on,) = node._saved  # a constant mask: relu'' = 0 almost everywhere
    return (g * Tensor(on.astype(g.dtype)),)


def rule_sum(g, node, needs):
    in_shape, axes, keepdims = node._saved
    if not keepdims:
        g = g.reshape(np.expand_dims(g.data, axes).shape)
    return (_broadcast_t(g, in_shape),)


def rule_mean(g, node, needs):
    in_shape, axes, keepdims, count = node._saved
    (gx,) = rule_sum(g, _Saved(node._children, (in_shape, axes, keepdims)), needs)
    return (gx / count,)


def rule_max(g, node, needs):
    x, m, axes, keepdims = node._saved
    if not keepdims:
        g = g.reshape(np.expand_dims(g.data, axes).shape)
    hit = x == m
    share = Tensor((hit / hit.sum(axis=axes, keepdims=True)).astype(g.dtype))
    return (_broadcast_t(g, x.shape) * share,)


def rule_reshape(g, node, needs):
    (in_shape,) = node._saved
    return (g.reshape(in_shape),)


def rule_transpose(g, node, needs):
    (axes,) = node._saved
    return (g.transpose(tuple(int(a) for a in np.argsort(axes))),)


def rule_index(g, node, needs):
    in_shape, _, index = node._saved
    return (_index_add(g, in_shape, index),)


def rule_index_add(g, node, needs):
    (index,) = node._saved
    return (g[index],)


def rule_softmax(g, node, needs):
    _, ax = node._saved
    s = node
    return (s * (g - (g * s).sum(axis=ax, keepdims=True)),)


def rule_log_softmax(g, node, needs):
    _, ax = node._saved
    return (g - node.exp() * g.sum(axis=ax, keepdims=True),)


def rule_cross_entropy(g, node, needs):
    (logits,) = node._children
    _, t = node._saved
    if logits._version != node._versions[1]:  # this rule reads logits.data
        _check_versions(_Saved((logits,), (logits.data,), node))
    onehot = np.zeros(logits.shape, dtype=logits.dtype)
    onehot[np.arange(len(t)), t] = 1
    return ((logits.softmax(1) - Tensor(onehot)) * (g / len(t)),)


class _Saved:
    """A stand-in node (children and saved values) for a rule that reuses
    another rule (mean reuses sum)."""

    def __init__(self, children, saved, like=None):
        self._children, self._saved = children, saved
        if like is not None:  # for _check_versions
            self._versions, self._op, self._version = like._versions, like._op, 0
            self._data = like.data


_TENSOR_RULES.update(
    {
        Tensor.add_backward: rule_add,
        Tensor.sub_backward: rule_sub,
        Tensor.mul_backward: rule_mul,
        Tensor.div_backward: rule_div,
        Tensor.matmul_backward: rule_matmul,
        Tensor.pow_backward: rule_pow,
        Tensor.neg_backward: rule_neg,
        Tensor.exp_backward: rule_exp,
        Tensor.log_backward: rule_log,
        Tensor.tanh_backward: rule_tanh,
        Tensor.sigmoid_backward: rule_sigmoid,
        Tensor.relu_backward: rule_relu,
        Tensor.sum_backward: rule_sum,
        Tensor.mean_backward: rule_mean,
        Tensor.max_backward: rule_max,
        Tensor.reshape_backward: rule_reshape,
        Tensor.transpose_backward: rule_transpose,
        Tensor.getitem_backward: rule_index,
        _index_add_backward: rule_index_add,
        Tensor.softmax_backward: rule_softmax,
        Tensor.log_softmax_backward: rule_log_softmax,
        cross_entropy_backward: rule_cross_entropy,
    }
)


def grad(output: Tensor, inputs, create_graph: bool = False, *, grad_output=None):
    """d(output)/d(input) for every tensor of `inputs`, as a list of Tensors,
    like `torch.autograd.grad`: no `.grad` is read or written.

    `output` is a one-element tensor (a loss), or any tensor together with
    `grad_output`, the seed d(root)/d(output) of its shape (then the result
    is a vector-Jacobian product).  `inputs` is a Tensor or a sequence of
    them.  An input the output does not depend on gets zeros (where PyTorch
    needs `allow_unused=True, materialize_grads=True`).

    create_graph=False: the array rules of `backward` run; the gradients are
    new leaves.  create_graph=True: the rules on Tensors run, every step is
    recorded, and each gradient is a tensor with a graph back to the inputs:
    `grad` of it gives second derivatives.
    """
    output = _tensor("grad", output, "output")
    single = isinstance(inputs, Tensor)
    inputs = [inputs] if single else list(inputs)
    for t in inputs:
        _tensor("grad", t, "every item of inputs")
    create_graph = numerics.flag("grad", "create_graph", create_graph)
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
            if create_graph:
                rule = _TENSOR_RULES.get(node._backward)
                if rule is None:
                    raise NotImplementedError(
                        f"grad(create_graph=True): the operation {node._op!r} "
                        "has no backward rule written with Tensor operations, "
                        "so its gradient cannot be differentiated again; use "
                        "create_graph=False or add a rule to _TENSOR_RULES"
                    )
                parts = rule(g, node, needs)
            else:
                parts = node._backward(g, node._saved, needs)
            for child, part, need in zip(node._children, parts, needs):
                if not need:
                    continue
                numerics.gradient_shape(node._op, part, child.shape)
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
