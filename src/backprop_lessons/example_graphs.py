"""The small graphs of `Value`s the chapters trace, built by name.

    relu_example()   f = relu(a*b + d) at a=2, b=-3, d=10: c=-6, e=4, f=4
    neuron_example() o = tanh(x1*w1 + x2*w2 + b), o about 0.7071
    chain(length)    x + 1 + 1 + ...: a graph `length` operations deep
    shared_input()   z = (x*2 + x) * x: one value used three times
    diamond()        w = z * y with z = y + x and y = x*2: y feeds two nodes
    used_twice()     f = a + a**2 with a = x + y: a is used twice

Every value carries a label, so orders and drawings read by name.
`is_topological(order, root)` says whether a list is a valid backward order
for the graph of `root`; `backward_in_order(order, root)` runs backward in a
given order (what chapter 2's exercises and checks need).
"""

from __future__ import annotations

from .graph_order import topological_order
from .scalar import Value

__all__ = [
    "relu_example",
    "neuron_example",
    "chain",
    "shared_input",
    "diamond",
    "used_twice",
    "is_topological",
    "backward_in_order",
]


def _labelled(value: Value, label: str) -> Value:
    value.label = label
    return value


def relu_example() -> Value:
    """f = relu(a*b + d) at a=2, b=-3, d=10 (chapter 1's worked example)."""
    a, b, d = (
        Value(2.0, label="a"),
        Value(-3.0, label="b"),
        Value(10.0, label="d"),
    )
    c = _labelled(a * b, "c")
    e = _labelled(c + d, "e")
    return _labelled(e.relu(), "f")


def neuron_example() -> Value:
    """o = tanh(x1*w1 + x2*w2 + b) with x1=2, x2=0, w1=-3, w2=1 and
    b = 6.8813735870195432, so that o is about 0.7071."""
    x1, x2 = Value(2.0, label="x1"), Value(0.0, label="x2")
    w1, w2 = Value(-3.0, label="w1"), Value(1.0, label="w2")
    b = Value(6.8813735870195432, label="b")
    x1w1 = _labelled(x1 * w1, "x1*w1")
    x2w2 = _labelled(x2 * w2, "x2*w2")
    s = _labelled(x1w1 + x2w2, "s")
    n = _labelled(s + b, "n")
    return _labelled(n.tanh(), "o")


def chain(length: int) -> Value:
    """x, x+1, (x+1)+1, ...: a graph `length` operations deep (x = 0)."""
    node = Value(0.0, label="x")
    for _ in range(length):
        node = node + 1.0
    return node


def shared_input() -> Value:
    """z = (x*2 + x) * x at x = 3: x is used three times."""
    x = Value(3.0, label="x")
    return _labelled((x * 2.0 + x) * x, "z")


def diamond() -> Value:
    """w = z * y, z = y + x, y = x * 2 at x = 1.5: y feeds both z and w."""
    x = Value(1.5, label="x")
    y = _labelled(x * 2.0, "y")
    z = _labelled(y + x, "z")
    return _labelled(z * y, "w")


def used_twice() -> Value:
    """f = a + s with s = a**2 and a = x + y, at x = 2, y = 1 (a = 3, f = 12).

    a feeds both s and f, so backward adds two contributions into a.grad,
    1 from f and 2a = 6 from s, before a may push its gradient 7 = 2a + 1
    on to x and y."""
    x, y = Value(2.0, label="x"), Value(1.0, label="y")
    a = _labelled(x + y, "a")
    s = _labelled(a**2, "s")
    return _labelled(a + s, "f")


def is_topological(order: list[Value], root: Value) -> bool:
    """Whether `order` lists every value reachable from `root` exactly once,
    each after all of its inputs."""
    position = {id(v): i for i, v in enumerate(order)}
    reachable = topological_order(root)
    return (
        len(order) == len(position) == len(reachable)
        and all(id(v) in position for v in reachable)
        and all(
            position[id(c)] < position[id(v)] for v in order for c in v._children
        )
    )


def backward_in_order(order: list[Value], root: Value) -> None:
    """Zero every gradient in `order`, seed the root, then apply the chain
    rule in reverse order (correct only if the order is topological)."""
    for node in order:
        node.grad = 0.0
    root.grad = 1.0  # seed: d root / d root = 1
    for node in reversed(order):
        for child, local in zip(node._children, node._local_grads):
            child.grad += local * node.grad
