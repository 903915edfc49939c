"""Pickling and deep copies of `Value` graphs of any depth, for the tests
that need them (the engine itself never copies a graph).

Registered with `copyreg`, which both `pickle` and `copy.deepcopy` consult:
a leaf pickles as its numbers; a computed value as its graph, the leaves
(real `Value`s, so a parameter pickled next to a loss stays one object) and
a flat table of the computed nodes in topological order, rebuilt in a loop
(no recursion, whatever the depth).
"""

from __future__ import annotations

import copyreg

from backprop_lessons.scalar import Value, topological_order


def _rebuild_leaf(data: float, grad: float, label: str) -> Value:
    v = Value(data, label)
    v.grad = grad
    return v


def _rebuild_graph(leaves: list, table: list) -> Value:
    """Rows in topological order, each a leaf's position in `leaves` or
    (data, grad, label, op, children, local gradients) with children as row
    numbers.  Returns the last row (the root)."""
    nodes: list[Value] = []
    for row in table:
        if isinstance(row, int):
            nodes.append(leaves[row])
            continue
        data, grad, label, op, children, local_grads = row
        v = Value(data, label, tuple(nodes[i] for i in children), local_grads, op)
        v.grad = grad
        nodes.append(v)
    return nodes[-1]


def reduce_value(value: Value):
    if not value._children:
        return (_rebuild_leaf, (value.data, value.grad, value.label))
    order = topological_order(value)
    index = {node: i for i, node in enumerate(order)}
    leaves = [node for node in order if not node._children]
    leaf_index = {leaf: i for i, leaf in enumerate(leaves)}
    table = [
        (
            node.data,
            node.grad,
            node.label,
            node._op,
            tuple(index[c] for c in node._children),
            node._local_grads,
        )
        if node._children
        else leaf_index[node]
        for node in order
    ]
    return (_rebuild_graph, (leaves, table))


def shallow_copy(value: Value) -> Value:
    """A new node with the same inputs (not a new graph)."""
    v = Value(
        value.data, value.label, value._children, value._local_grads, value._op
    )
    v.grad = value.grad
    return v


copyreg.pickle(Value, reduce_value)
