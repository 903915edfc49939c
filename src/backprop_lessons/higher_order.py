"""Chapter 1's design, with local derivatives that are numbers of any kind.

Chapter 1's `Value` stores, at each node, the local derivative of the node
with respect to each child, as a *float* computed during the forward pass.
A float has no history: the backward pass multiplies and adds floats, and
the gradient it returns is a float, so there is nothing to differentiate a
second time.  That is all that stops it.

`Node` is the same design with one change: the data, the local derivatives
and the gradients are numbers of whatever type the inputs are, computed
with that type's own operations (`forward_mode`'s functions dispatch on
it).  Then:

- inputs that are chapter 1's `Value`s make every local derivative, and so
  every gradient, a `Value` with a graph of its own: call `backward` on a
  gradient and you differentiate the backward pass (reverse over reverse);
- inputs that are chapter 3's `Dual`s (x, v) make every gradient a Dual
  whose tangent is the directional derivative of the gradient along v, the
  Hessian-vector product H v (forward over reverse), with no second graph.

`hvp_reverse_over_reverse` and `hvp_forward_over_reverse` are those two,
for functions of a list of numbers written as chapter 3's are (`+ - * / **`,
the methods or `forward_mode`'s `exp`, `log`, `tanh`, `sigmoid`, `relu`).
The Tensor engine does the same at the array level with
`tensor.grad(..., create_graph=True)`.

It imports only the standard library and the scalar and forward-mode engines.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Sequence

from . import forward_mode as fm
from .forward_mode import Dual
from .graph_order import topological_order
from .scalar import Value
from .validate import counts_match, number_or, real_numbers

__all__ = [
    "Node",
    "gradient",
    "hvp_forward_over_reverse",
    "hvp_reverse_over_reverse",
]


def _primal(x) -> float:
    """The float inside a float, a Dual or a Value (for relu's branch)."""
    while not isinstance(x, numbers.Real):
        x = x.value if isinstance(x, Dual) else x.data
    return float(x)


_NUMBERS = "number, a Dual or a Value"  # what a Node's data may be


class Node:
    """A scalar graph node as chapter 1's Value, generic in its number type.

    `data`, `grad` and the stored local derivatives `_local_grads` are
    floats, Duals or Values, whatever the inputs were; `backward` runs
    `child.grad = child.grad + local * node.grad` in that type.
    """

    __slots__ = ("data", "grad", "_children", "_local_grads", "_op")

    def __init__(self, data, children=(), local_grads=(), op: str = ""):
        number_or(
            "Node", "data", data, (Dual, Value), "number, a Dual or a Value"
        )
        self.data, self.grad = data, 0.0
        self._children, self._local_grads, self._op = children, local_grads, op

    def __repr__(self) -> str:
        return f"Node(data={self.data!r}, grad={self.grad!r})"

    @staticmethod
    def _lift(x) -> Node:
        return x if isinstance(x, Node) else Node(x)

    def __add__(self, other) -> Node:
        other = Node._lift(other)
        return Node(self.data + other.data, (self, other), (1.0, 1.0), "+")

    def __mul__(self, other) -> Node:
        other = Node._lift(other)
        local = (other.data, self.data)  # d(ab)/da = b, d(ab)/db = a
        return Node(self.data * other.data, (self, other), local, "*")

    def __pow__(self, k) -> Node:
        number_or("Node **", "the exponent", k)
        x = self.data
        return Node(x**k, (self,), (k * x ** (k - 1),), f"**{k:g}")

    def __neg__(self) -> Node:
        return self * -1.0

    def __sub__(self, other) -> Node:
        return self + (-Node._lift(other))

    def __truediv__(self, other) -> Node:
        return self * Node._lift(other) ** -1

    def __radd__(self, other) -> Node:
        return self + other

    def __rmul__(self, other) -> Node:
        return self * other

    def __rsub__(self, other) -> Node:
        return Node._lift(other) - self

    def __rtruediv__(self, other) -> Node:
        return Node._lift(other) / self

    # Each local derivative is written with the data's own operations, so
    # it is a Dual for Dual data and a Value (with a graph) for Value data.

    def exp(self) -> Node:
        e = fm.exp(self.data)
        return Node(e, (self,), (e,), "exp")

    def log(self) -> Node:
        x = self.data
        return Node(fm.log(x), (self,), (x**-1,), "log")

    def tanh(self) -> Node:
        t = fm.tanh(self.data)
        return Node(t, (self,), (1.0 - t * t,), "tanh")

    def sigmoid(self) -> Node:
        s = fm.sigmoid(self.data)
        return Node(s, (self,), (s * (1.0 - s),), "sigmoid")

    def relu(self) -> Node:
        on = _primal(self.data) > 0.0
        return Node(fm.relu(self.data), (self,), (1.0 if on else 0.0,), "relu")

    def backward(self) -> None:
        """Fill in `grad` of every node this one depends on (from 0, in the
        data's number type)."""
        order = topological_order(self)
        for node in order:
            node.grad = 0.0
        self.grad = 1.0
        for node in reversed(order):
            for child, local in zip(node._children, node._local_grads):
                child.grad = child.grad + local * node.grad


def _scalar_output(y, where: str) -> Node:
    if isinstance(y, Node):
        return y
    raise TypeError(
        f"{where}: f must return one number computed from its inputs, "
        f"got {type(y).__name__}"
    )


def gradient(f: Callable, xs: Sequence) -> list:
    """The gradient of the scalar f at xs, in the inputs' number type (floats,
    Duals or Values), by one backward pass over Nodes."""
    inputs = [Node(x) for x in xs]
    _scalar_output(f(inputs), "gradient").backward()
    return [x.grad for x in inputs]


def hvp_forward_over_reverse(
    f: Callable, xs: Sequence[float], v: Sequence[float]
):
    """(gradient, H v) of the scalar f at xs: one backward pass over Nodes
    whose numbers are Duals (x_i, v_i).  Each gradient entry comes out as a
    Dual: its value is the gradient, its tangent the entry of H v."""
    xs, v = (
        real_numbers("hvp_forward_over_reverse xs", xs),
        real_numbers("hvp_forward_over_reverse v", v),
    )
    counts_match("hvp_forward_over_reverse", xs, "inputs", v, "entries in v")
    grads = gradient(f, [Dual(x, t) for x, t in zip(xs, v)])
    grads = [g if isinstance(g, Dual) else Dual(g) for g in grads]
    return [g.value for g in grads], [g.tangent for g in grads]


def hvp_reverse_over_reverse(
    f: Callable, xs: Sequence[float], v: Sequence[float]
):
    """(gradient, H v) of the scalar f at xs: a backward pass over Nodes whose
    numbers are Values records the gradient as a graph of Values; a second
    backward pass, of <gradient, v>, gives H v."""
    xs, v = (
        real_numbers("hvp_reverse_over_reverse xs", xs),
        real_numbers("hvp_reverse_over_reverse v", v),
    )
    counts_match("hvp_reverse_over_reverse", xs, "inputs", v, "entries in v")
    leaves = [Value(x) for x in xs]
    grads = [g if isinstance(g, Value) else Value(g) for g in gradient(f, leaves)]
    dot = Value(0.0)
    for g, t in zip(grads, v):
        dot = dot + g * t
    dot.backward()
    return [g.data for g in grads], [x.grad for x in leaves]
