"""Computation graphs of scalar `Value`s drawn with graphviz.

One record per value (label | data | grad) and one small node per operation
between a value and its inputs.  Node names come from the topological order
(`v0`, `v1`, ...), never from `id()`, so the same graph always gives the same
SVG text - which is what lets nbval compare drawings across runs.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

import graphviz

from ..scalar import Value, topological_order

__all__ = ["draw_graph", "require_dot", "GraphDrawing"]

_INSTALL_HINT = (
    "graphviz's `dot` program was not found. Install graphviz: "
    "`apt-get install graphviz` (Debian/Ubuntu), `brew install graphviz` "
    "(macOS), "
    "or `conda install graphviz`; Colab has it already."
)

HIGHLIGHT = "#ffd54f"  # the node being processed
RECEIVED = "#c8e6c9"  # a node whose gradient has been updated


@functools.lru_cache(maxsize=1)
def require_dot() -> tuple[int, ...]:
    """Return graphviz's version, or raise RuntimeError saying how to install
    it."""
    try:
        return graphviz.version()
    except graphviz.ExecutableNotFound:
        raise RuntimeError(_INSTALL_HINT) from None


class GraphDrawing(graphviz.Digraph):
    """A `graphviz.Digraph` whose text form is stable.

    A plain `Digraph` shown as a notebook cell's result also carries the
    text/plain `<graphviz.graphs.Digraph at 0x7f...>`, a memory address that
    changes on every run and breaks nbval's comparison of stored outputs.
    This subclass only replaces that text; drawing is unchanged.
    """

    def __repr__(self) -> str:
        n_values = sum("shape=record" in line for line in self.body)
        return f"<computation graph: {n_values} values>"


def _escape(label: str) -> str:
    """Backslash the characters that structure a graphviz record label."""
    return re.sub(r"([|{}<>\\])", r"\\\1", label)


def _fmt(x: float, digits: int) -> str:
    s = f"{x:.{digits}f}"
    return "0." + "0" * digits if s == "-0." + "0" * digits else s  # no "-0.0000"


def _check_value(op: str, name: str, v) -> None:
    """A TypeError unless `v` is a scalar-engine `Value`."""
    if not isinstance(v, Value):
        hint = (
            " (draw_graph draws the scalar engine's graphs; a Tensor's graph "
            "is not drawn)"
            if type(v).__name__ == "Tensor"
            else ""
        )
        raise TypeError(
            f"{op}: {name} must be a Value, got {type(v).__name__}{hint}"
        )


def draw_graph(
    root: Value,
    *,
    rankdir: str = "LR",
    show_grad: bool = True,
    digits: int = 4,
    highlight: Value | None = None,
    marked: Iterable[Value] = (),
    order: list[Value] | None = None,
    compact: bool = False,
) -> GraphDrawing:
    """Draw the graph that produced `root`.

    highlight: one value to fill in yellow (e.g. the node a stepper is at).
    marked:    values to fill in green (e.g. those that received gradient).
    order:     a precomputed `topological_order(root)`, to save recomputing it.
    compact:   stack label, data and grad in each box (whatever the rankdir),
               with narrow boxes, tight spacing and small operation ovals, all
               text 11 points; a left-to-right drawing is then about half as
               wide and stays legible in the book's text column.
    """
    require_dot()
    _check_value("draw_graph", "root", root)
    if highlight is not None:
        _check_value("draw_graph", "highlight", highlight)
    if rankdir not in ("LR", "TB", "RL", "BT"):
        raise ValueError(
            f"draw_graph: rankdir must be LR, TB, RL or BT, got {rankdir!r}"
        )
    order = order if order is not None else topological_order(root)
    name = {id(v): f"v{i}" for i, v in enumerate(order)}
    marked_ids = {id(v) for v in marked}
    graph_attr = {"rankdir": rankdir, "bgcolor": "transparent"}
    edge_attr = {"color": "#555555"}
    op_attr = {"shape": "ellipse", "fontsize": "10"}
    record_attr = {}
    if compact:
        # Sized for the book's text column: an 11-value graph such as the
        # neuron of chapter 1 stays under 600 points wide, so its 11-point
        # text renders at 12 CSS px or more in a 688-px column.
        graph_attr.update(ranksep="0.2", nodesep="0.15")
        edge_attr.update(arrowsize="0.6")
        op_attr.update(margin="0.03,0.02", width="0", height="0", fontsize="11")
        record_attr.update(margin="0.06,0.04")
    # A record's fields run across the rank direction; braces turn them.
    # Stacked fields therefore need braces only when ranks run top to bottom.
    braces = not compact or rankdir in ("TB", "BT")
    dot = GraphDrawing(
        graph_attr=graph_attr,
        node_attr={"fontname": "Helvetica", "fontsize": "11"},
        edge_attr=edge_attr,
    )
    for v in order:
        n = name[id(v)]
        fields = [_escape(v.label) or " ", f"data {_fmt(v.data, digits)}"]
        if show_grad:
            fields.append(f"grad {_fmt(v.grad, digits)}")
        style = {}
        if highlight is not None and v is highlight:
            style = {"style": "filled", "fillcolor": HIGHLIGHT}
        elif id(v) in marked_ids:
            style = {"style": "filled", "fillcolor": RECEIVED}
        record = " | ".join(fields)
        dot.node(
            n,
            "{ " + record + " }" if braces else record,
            shape="record",
            **record_attr,
            **style,
        )
        if v._op:
            dot.node(n + "_op", v._op, **op_attr)
            dot.edge(n + "_op", n)
            for child in v._children:
                dot.edge(name[id(child)], n + "_op")
    return dot
