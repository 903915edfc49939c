"""The order a backward pass walks a graph in, shared by both reverse-mode
engines: `scalar.Value` and `tensor.Tensor` nodes both hold their inputs in
`_children`, and that is all the walk reads.

    topological_order(root)   every node `root` depends on, each after all
                              of its inputs; `root` last

An iterative depth-first search with an explicit stack, so a graph of any
depth works without touching Python's recursion limit (chapter 2).  It
imports nothing, so neither engine loads the other to walk its graph.
"""

from __future__ import annotations

__all__ = ["topological_order", "check_node"]


def check_node(op: str, node, name: str = "root") -> None:
    """A TypeError unless `node` is a graph node (a Value or a Tensor)."""
    if not hasattr(node, "_children"):
        raise TypeError(
            f"{op}: {name} must be a Value, got {type(node).__name__} "
            f"{node!r:.40}"
        )


def topological_order(root) -> list:
    """All values `root` depends on, each after all of its inputs; `root` is last.

    A node reached by several paths is listed once.  Inputs are visited left
    to right, so the order equals that of the textbook recursive version.
    """
    check_node("topological_order", root)
    order = []
    visited = set()  # nodes hash by identity (no __eq__ is defined)
    stack = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        if children_done:
            order.append(node)
            continue
        if node in visited:
            continue
        visited.add(node)
        stack.append((node, True))
        for child in reversed(node._children):
            if child not in visited:
                stack.append((child, False))
    return order
