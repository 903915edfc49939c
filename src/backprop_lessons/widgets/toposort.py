"""`TopoSortStepper`: the depth-first search that orders a graph for backward.

The frames replay `topological_order` (the package's iterative DFS with an
explicit stack) one stack pop at a time.  A stack entry is either "visit x"
(expand x: mark it visited, then come back to emit it after its inputs) or
"emit x" (all of x's inputs are in the order, so x goes next).  The frames
end with exactly the order `topological_order(root)` returns.
"""

from __future__ import annotations

from ..scalar import Value, topological_order
from ..viz.graph import HIGHLIGHT, RECEIVED
from .stepper import (
    FrameStepper,
    check_digits,
    check_size,
    chips,
    draw_frame,
    esc,
    legend_html,
    value_names,
)
from .text import plain_text

__all__ = ["TopoSortStepper", "toposort_frames"]

VISITED = "#bbdefb"  # visited, waiting for its inputs to be emitted

_LEGEND = [
    (HIGHLIGHT, "popped from the stack now"),
    (VISITED, "visited, not yet in the order"),
    (RECEIVED, "in the order"),
]


def _draw(root, order, names, current, visited, emitted, digits) -> str:
    """SVG of the graph without gradients; colours as in the legend."""
    fills = {id(v): VISITED for v in order if id(v) in visited}
    fills.update({id(v): RECEIVED for v in order if id(v) in emitted})
    op_fills = {}
    if current is not None:
        fills[id(current)] = op_fills[id(current)] = HIGHLIGHT
    return draw_frame(
        root, order, names, fills=fills, op_fills=op_fills, digits=digits
    )


def toposort_frames(root: Value, digits: int = 4) -> list[dict]:
    """All frames of the iterative DFS from `root` (see the module docstring);
    values drawn with `digits` decimals."""
    if not isinstance(root, Value):
        raise TypeError(
            "TopoSortStepper: expected a Value as the root, got "
            f"{type(root).__name__}"
        )
    final = topological_order(root)  # only for the drawing's layout and names
    check_size(final, "TopoSortStepper")
    digits = check_digits(digits, "TopoSortStepper")
    names = value_names(final)

    order: list[Value] = []
    visited: set[int] = set()
    stack: list[tuple[Value, bool]] = [(root, False)]
    frames = []

    def frame(caption, html, node=None, action="start"):
        entry = [f"{'emit' if d else 'visit'} {names[id(v)]}" for v, d in stack]
        seen = [esc(names[id(v)]) for v in final if id(v) in visited]
        numbered = [
            f"<small>{i}</small> " + esc(names[id(v)])
            for i, v in enumerate(order)
        ]
        state = (
            f'<div class="bl-row"><span class="bl-key">stack</span>'
            f"{chips([esc(e) for e in entry], 'bl-stack', 'empty: done')}"
            f'<span class="bl-note">top is on the right</span></div>'
            f'<div class="bl-row"><span class="bl-key">visited</span>'
            f"{chips(seen)}</div>"
            f'<div class="bl-row"><span class="bl-key">order</span>'
            f"{chips(numbered, 'bl-order')}</div>"
        )
        emitted = {id(v) for v in order}
        return {
            "caption": caption,
            "html": html + state,
            "svg": _draw(root, final, names, node, visited, emitted, digits),
            "node": None if node is None else names[id(node)],
            "action": action,
            "stack": entry,
            "visited": [names[id(v)] for v in final if id(v) in visited],
            "order": [names[id(v)] for v in order],
        }

    r = esc(names[id(root)])
    frames.append(
        frame(
            f"Start: the stack holds one entry, visit {r}.",
            "<p>Pop an entry, act on it, repeat until the stack is empty.</p>",
        )
    )
    k = 0
    while stack:
        node, children_done = stack.pop()
        k += 1
        n = esc(names[id(node)])
        if children_done:
            order.append(node)
            caption = (
                f"Pop {k}: emit {n}. Its inputs are all in the order already, "
                f"so {n} takes position {len(order) - 1}."
            )
            if not stack:
                caption += " The stack is empty: the order is complete."
            frames.append(frame(caption, "", node, "emit"))
        elif id(node) in visited:
            frames.append(
                frame(
                    f"Pop {k}: skip {n}, already visited (reached by another "
                    "path).",
                    "<p>The visited set is what lists a shared value once.</p>",
                    node,
                    "skip",
                )
            )
        else:
            visited.add(id(node))
            stack.append((node, True))
            pushed = [c for c in reversed(node._children) if id(c) not in visited]
            for child in pushed:
                stack.append((child, False))
            if node._children:
                what = (
                    ", ".join(f"visit {esc(names[id(c)])}" for c in pushed)
                    or "nothing"
                )
                then = (
                    f"its unvisited inputs: {what}"
                    if pushed
                    else "no inputs: all visited"
                )
                detail = (
                    f"push emit {n} (to come back after its inputs), then {then}."
                )
            else:
                detail = f"push emit {n}; it is a leaf, with no inputs to visit."
            frames.append(
                frame(
                    f"Pop {k}: visit {n}. Mark it visited; {detail}",
                    "",
                    node,
                    "visit",
                )
            )
    if order != final:  # the frames must replay the package's algorithm exactly
        raise RuntimeError(
            "TopoSortStepper: the replayed DFS differs from topological_order"
        )
    return frames


class TopoSortStepper(FrameStepper):
    """Step through the depth-first search that builds
    `topological_order(root)`."""

    def __init__(self, root: Value, *, digits: int = 4, **kwargs):
        frames = toposort_frames(root, digits)
        self._n_values = len(frames[-1]["order"])
        kwargs.setdefault("title", "Topological sort by depth-first search")
        super().__init__(frames=frames, legend=legend_html(_LEGEND), **kwargs)

    def __repr__(self) -> str:
        graph = f"a graph of {self._n_values} values"
        return plain_text(f"TopoSortStepper({self.steps} steps on {graph})")
