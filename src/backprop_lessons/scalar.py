"""The scalar reverse-mode engine: one `Value` per number.

A `Value` holds a float (`data`), the derivative of the final output with
respect to it (`grad`), the values it was computed from (`_children`) and the
local derivative of itself with respect to each of them (`_local_grads`).
`backward()` walks the graph in reverse topological order and applies the
chain rule with one generic loop:

    child.grad += local_grad * node.grad

Why stored local gradients and not a `_backward` closure per node (as in
micrograd)?  A closure that refers to its own output node makes a reference
cycle for every node; Python's cyclic garbage collector then spends much of
a large graph's run time tracing those cycles.  Here every reference points
from a node to its inputs, so a graph is freed by reference counting alone.
Chapter 1 shows both designs side by side; chapter 2 measures the cost.

Local derivatives are taken at forward time and stored as numbers: changing
a value's `.data` after the forward pass changes neither the outputs nor any
gradient of the graph already built (PyTorch would raise, see `tensor.py`);
run the forward pass again to see the new value.  Where PyTorch returns inf
or nan (log(0), exp(710), 0 ** -1, x / 0) this engine raises an error that
names the operation: chapter 1 prefers a loud error to a silent inf.  NaN
inputs propagate as in PyTorch (relu(nan) is nan).

What this module is not: a tensor library (see `tensor.py`) or a fast one.
It exists to be read.  Its input checks are `numerics`' validators.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from .graph_order import check_node, topological_order
from .validate import (
    finite_quotient_domain,
    instance_of,
    positive_number,
    real_operand,
    real_power_domain,
)

__all__ = ["Value", "topological_order", "zero_grad", "float_sigmoid"]


# A real operand as a float (Value and Dual share it; numerics holds it).
as_float = real_operand


def _pow_local_grad(x: float, k: float) -> float:
    """d(x^k)/dx = k x^(k-1), with PyTorch's values where the float power fails.

    Python raises where the exact derivative is 0 or infinite: at x = 0 with
    k < 1 (0.0 ** negative) and when x^(k-1) overflows (x tiny, k < 1).
    """
    if k == 0.0:
        return 0.0  # x^0 = 1 is constant, also at x = 0
    try:
        return k * x ** (k - 1)
    except ZeroDivisionError:  # x = 0, 0 < k < 1: a vertical tangent
        # PyTorch takes x ** -0.5 as 1 / sqrt(x), which is -inf at x = -0.0
        return math.copysign(math.inf, x) if k == 0.5 else math.inf
    except OverflowError:  # the sign of k x^(k-1); x < 0 only with integer k
        odd = (k - 1) % 2 == 1
        return math.copysign(math.inf, k * (x if odd else 1.0))


def float_sigmoid(x: float) -> float:
    """1 / (1 + e^-x) for a Python float, in two branches so exp never overflows.

    The forward and JVP of sigmoid on scalars (`Value`, `forward_mode`) both
    use it; `numerics.sigmoid` is the same formula on arrays.
    """
    if x >= 0.0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)  # < 1
    return e / (1.0 + e)


class Value:
    """A scalar in a computation graph: `data`, `grad` and how it was made.

    >>> a = Value(2.0, label="a"); b = Value(-3.0, label="b")
    >>> f = (a * b + 10).relu(); f.backward()
    >>> f, a.grad, b.grad
    (Value(data=4.0, grad=1.0), -3.0, 2.0)
    """

    __slots__ = ("data", "grad", "label", "_children", "_local_grads", "_op")

    def __init__(
        self,
        data,
        label: str = "",
        _children: tuple = (),
        _local_grads: tuple = (),
        _op: str = "",
    ):
        if type(data) is not float:  # fast path: the engine itself passes floats
            data = as_float(data, "construction")
        if type(label) is not str:
            instance_of("Value", "label", label, str)
        self.data = data
        self.grad = 0.0
        self.label = label
        self._children = _children  # the Values this one was computed from
        self._local_grads = _local_grads  # d(self)/d(child), one per child
        self._op = _op  # the operation's symbol, for drawings

    def __repr__(self) -> str:
        extra = f", label={self.label!r}" if self.label else ""
        return f"Value(data={self.data!r}, grad={self.grad!r}{extra})"

    # ---- binary operations -------------------------------------------------
    # Each returns a new Value whose local gradients are the partial
    # derivatives of the operation, evaluated at the inputs' data.

    def __add__(self, other) -> Value:
        other = other if type(other) is Value else Value(as_float(other, "+"))
        # d(a+b)/da = 1, d(a+b)/db = 1: addition passes the gradient through.
        return Value(self.data + other.data, "", (self, other), (1.0, 1.0), "+")

    def __mul__(self, other) -> Value:
        other = other if type(other) is Value else Value(as_float(other, "*"))
        # d(ab)/da = b, d(ab)/db = a: each side gets the other's value.
        local_grads = (other.data, self.data)
        return Value(self.data * other.data, "", (self, other), local_grads, "*")

    def __pow__(self, k) -> Value:
        if isinstance(k, Value):
            raise TypeError(
                "Value **: only numeric exponents are supported (int or float), "
                f"got a Value (data={k.data!r}); "
                "write exp(k * log(x)) for x ** Value"
            )
        k = as_float(k, "**")
        x = self.data
        real_power_domain("Value **", x, k)
        try:
            y = x**k
        except OverflowError:
            raise OverflowError(
                f"Value **: {x!r} ** {k!r} overflows a float"
            ) from None
        return Value(y, "", (self,), (_pow_local_grad(x, k),), f"**{k:g}")

    def __neg__(self) -> Value:
        return self * -1.0

    def __sub__(self, other) -> Value:
        other = other if type(other) is Value else Value(as_float(other, "-"))
        return self + (-other)

    def __truediv__(self, other) -> Value:
        other = other if type(other) is Value else Value(as_float(other, "/"))
        finite_quotient_domain("Value /", self.data, other.data)  # b = 0, tiny b
        return self * other**-1

    def __radd__(self, other) -> Value:
        return self + other

    def __rmul__(self, other) -> Value:
        return self * other

    def __rsub__(self, other) -> Value:
        return Value(as_float(other, "-")) - self

    def __rtruediv__(self, other) -> Value:
        return Value(as_float(other, "/")) / self

    # ---- unary functions -----------------------------------------------------

    def exp(self) -> Value:
        try:
            e = math.exp(self.data)
        except OverflowError:
            raise OverflowError(
                f"Value exp: exp({self.data!r}) overflows a float"
            ) from None
        return Value(e, "", (self,), (e,), "exp")  # d(e^x)/dx = e^x

    def log(self) -> Value:
        x = positive_number("Value log", "log", self.data)
        # d(ln x)/dx = 1/x
        return Value(math.log(x), "", (self,), (1.0 / x,), "log")

    def relu(self) -> Value:
        # The kink at 0 gets derivative 0, as in PyTorch; NaN stays NaN (with
        # slope 1, as PyTorch), so a NaN is never hidden behind a 0.
        on = not self.data <= 0.0
        y, slope = (self.data, 1.0) if on else (0.0, 0.0)
        return Value(y, "", (self,), (slope,), "relu")

    def tanh(self) -> Value:
        # math.tanh (the C library's tanh) is accurate to within about an
        # ulp, not exact, and never overflows; the textbook formula
        # (e^{2x} - 1) / (e^{2x} + 1) overflows for x around 355.
        t = math.tanh(self.data)
        return Value(t, "", (self,), (1.0 - t * t,), "tanh")  # tanh' = 1 - tanh^2

    def sigmoid(self) -> Value:
        s = float_sigmoid(self.data)
        return Value(s, "", (self,), (s * (1.0 - s),), "sigmoid")  # s' = s(1 - s)

    # ---- the backward pass ---------------------------------------------------

    def backward(self) -> None:
        """Fill in `grad` of every Value this one depends on: d(self)/d(node).

        Like PyTorch: gradients of leaves (values with no children, such as
        parameters and inputs) *accumulate*, so calling `backward()` twice
        doubles them and training loops must call `zero_grad(params)` between
        steps.  Gradients of intermediate values are recomputed from zero on
        every call.
        """
        order = topological_order(self)
        for node in order:
            if node._children:
                node.grad = 0.0
        self.grad += 1.0  # the seed: d(self)/d(self) = 1
        for node in reversed(order):
            g = node.grad
            for child, local in zip(node._children, node._local_grads):
                child.grad += local * g  # += : a value used twice gets both parts


def zero_grad(values: Iterable[Value]) -> None:
    """Set `grad = 0.0` on every given value (call it between training steps)."""
    for v in values:
        if type(v) is not Value:
            check_node("zero_grad", v, "every item of values")
        v.grad = 0.0
