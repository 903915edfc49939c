"""Computation graphs of scalar `Value`s drawn with graphviz.

One record per value (label | data | grad) and one small node per operation
between a value and its inputs.  Node names come from the topological order
(`v0`, `v1`, ...), never from `id()`, so the same graph always gives the same
SVG text - which is what lets nbval compare drawings across runs.
"""

from __future__ import annotations

import functools
from typing import Iterable

import graphviz

from ..scalar import Value, topological_order

__all__ = ["draw_graph", "require_dot"]

_INSTALL_HINT = (
    "graphviz's `dot` program was not found. Install graphviz: "
    "`apt-get install graphviz` (Debian/Ubuntu), `brew install graphviz` (macOS), "
    "or `conda install graphviz`; Colab has it already."
)

HIGHLIGHT = "#ffd54f"   # the node being processed
RECEIVED = "#c8e6c9"    # a node whose gradient has been updated


@functools.lru_cache(maxsize=1)
def require_dot() -> tuple[int, ...]:
    """Return graphviz's version, or raise RuntimeError saying how to install it."""
    try:
        return graphviz.version()
    except graphviz.ExecutableNotFound:
        raise RuntimeError(_INSTALL_HINT) from None


def _fmt(x: float, digits: int) -> str:
    s = f"{x:.{digits}f}"
    return "0." + "0" * digits if s == "-0." + "0" * digits else s  # no "-0.0000"


def draw_graph(root: Value, *, rankdir: str = "LR", show_grad: bool = True,
               digits: int = 4, highlight: Value | None = None,
               marked: Iterable[Value] = (), order: list[Value] | None = None) -> graphviz.Digraph:
    """Draw the graph that produced `root`.

    highlight: one value to fill in yellow (e.g. the node a stepper is at).
    marked:    values to fill in green (e.g. those that received gradient).
    order:     a precomputed `topological_order(root)`, to save recomputing it.
    """
    require_dot()
    if rankdir not in ("LR", "TB", "RL", "BT"):
        raise ValueError(f"draw_graph: rankdir must be LR, TB, RL or BT, got {rankdir!r}")
    order = order if order is not None else topological_order(root)
    name = {id(v): f"v{i}" for i, v in enumerate(order)}
    marked_ids = {id(v) for v in marked}
    dot = graphviz.Digraph(graph_attr={"rankdir": rankdir, "bgcolor": "transparent"},
                           node_attr={"fontname": "Helvetica", "fontsize": "11"},
                           edge_attr={"color": "#555555"})
    for v in order:
        n = name[id(v)]
        fields = [v.label or " ", f"data {_fmt(v.data, digits)}"]
        if show_grad:
            fields.append(f"grad {_fmt(v.grad, digits)}")
        style = {}
        if highlight is not None and v is highlight:
            style = {"style": "filled", "fillcolor": HIGHLIGHT}
        elif id(v) in marked_ids:
            style = {"style": "filled", "fillcolor": RECEIVED}
        dot.node(n, "{ " + " | ".join(fields) + " }", shape="record", **style)
        if v._op:
            dot.node(n + "_op", v._op, shape="ellipse", fontsize="10")
            dot.edge(n + "_op", n)
            for child in v._children:
                dot.edge(name[id(child)], n + "_op")
    return dot
