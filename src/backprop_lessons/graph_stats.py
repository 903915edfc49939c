"""Counts over a graph of scalar `Value`s: what a forward pass built, what a
backward pass will do, and how many chain-rule paths backprop never walks.

    count_graph(root, params)   nodes by kind, and the backward's chain-rule
                                steps: a GraphCount
    count_paths(root, leaves)   the number of distinct paths from `root` down
                                to the given leaves (a Python int, exact)

Why paths: the chain rule written out is a sum over every path from the
loss to a parameter of the product of the local derivatives along it.  The
number of such paths grows with the product of the graph's fan-outs, while
backpropagation does one step per *edge*: each node's gradient is computed
once and then reused by every path through it.  `count_paths` counts what
the naive sum would multiply; `count_graph(...).backward_steps` what the
backward pass really does.

Counting only: nothing here changes a graph or its gradients.  Standard
library and the scalar engine only.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from .graph_order import topological_order
from .scalar import Value

__all__ = ["GraphCount", "count_graph", "count_paths"]


@dataclass(frozen=True)
class GraphCount:
    """The nodes of a graph by kind, and the chain-rule steps of its backward.

    parameters      leaves that are among the given parameters
    constants       the other leaves: numbers lifted to Values (e.g. the 0.5
                    of `0.5 * x`), made by the forward pass itself
    operations      nodes made by an operation (+, *, **, exp, log, relu...)
    backward_steps  `child.grad += local * node.grad`: one per edge
    """

    parameters: int
    constants: int
    operations: int
    backward_steps: int

    @property
    def nodes(self) -> int:
        """Every Value in the graph."""
        return self.parameters + self.constants + self.operations

    @property
    def created(self) -> int:
        """Values the forward pass created: operations and constants (the
        parameters existed before it)."""
        return self.constants + self.operations

    def __str__(self) -> str:
        rows = [
            ("parameters reached", self.parameters),
            ("constants created", self.constants),
            ("operations created", self.operations),
            ("nodes in the graph", self.nodes),
            ("nodes created by the forward", self.created),
            ("backward steps (one per edge)", self.backward_steps),
        ]
        return "\n".join(f"{label:<30} {n:>9,}" for label, n in rows)

    def _repr_pretty_(self, p, cycle) -> None:
        p.text(str(self))


def count_graph(root: Value, params: Iterable[Value] = ()) -> GraphCount:
    """Count the graph behind `root`; leaves in `params` count as parameters.

    A node reached by several paths is counted once (the graph, not the
    tree of its expansions); every edge of a node's `_children` is one step
    of `root.backward()`, also when a child appears twice (x * x).
    """
    if not isinstance(root, Value):
        raise TypeError(
            f"count_graph: root must be a Value, got {type(root).__name__}"
        )
    param_ids = {id(p) for p in params}
    parameters = constants = operations = steps = 0
    for node in topological_order(root):
        if node._children:
            operations += 1
            steps += len(node._children)
        elif id(node) in param_ids:
            parameters += 1
        else:
            constants += 1
    return GraphCount(parameters, constants, operations, steps)


def count_paths(root: Value, leaves: Iterable[Value]) -> int:
    """How many distinct paths lead from `root` down to any of `leaves`.

    paths(node) = sum over its inputs of paths(input), with paths(leaf) = 1
    for a given leaf and 0 for any other leaf; an input used twice (x * x)
    counts twice, as it does in the chain rule.  Computed once per node in
    topological order (the same reuse that makes backprop cheap), so the
    count itself is fast even when it has thousands of digits.
    """
    if not isinstance(root, Value):
        raise TypeError(
            f"count_paths: root must be a Value, got {type(root).__name__}"
        )
    targets = {id(v) for v in leaves}
    paths: dict[int, int] = {}
    for node in topological_order(root):  # inputs before the nodes using them
        if node._children:
            paths[id(node)] = sum(paths[id(c)] for c in node._children)
        else:
            paths[id(node)] = 1 if id(node) in targets else 0
    return paths[id(root)]
