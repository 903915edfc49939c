"""One transformer block's backward pass as a dataflow drawing (chapter 6).

The gradient enters at the top (from the block above, or from the final
layernorm) and leaves at the bottom (to the block below, or to the
embeddings).  The residual stream's gradient runs down the left column; at
each residual addition it *forks*: one copy flows straight on, the other
goes back through the branch (MLP, then attention).  Where the branch
started (at its layernorm) the branch's gradient *joins* the stream again
by `+=`.  Each backward box names the parameter gradients it adds to.

The node names are fixed strings, so the drawing's SVG is the same on every
run (nbval compares it).
"""

from __future__ import annotations

from .graph import GraphDrawing, require_dot

__all__ = ["draw_block_backward", "BLOCK_BACKWARD_STEPS"]

STREAM = "#bbdefb"  # the residual stream's gradient
BRANCH = "#fff3c4"  # a layer's backward inside a branch
FORK_JOIN = "#ffd54f"  # where the stream's gradient forks and joins

#: The branch backwards in the order they run: (node name, label, what it
#: adds into).  MLP branch first (it is the block's last forward step).
BLOCK_BACKWARD_STEPS = (
    ("fcproj", "matmul backward (fcproj)", "dfcprojw, dfcprojb"),
    ("gelu", "gelu backward", ""),
    ("fc", "matmul backward (fc)", "dfcw, dfcb"),
    ("ln2", "layernorm backward (ln2)", "dln2w, dln2b"),
    ("attproj", "matmul backward (attproj)", "dattprojw, dattprojb"),
    ("att", "attention backward", ""),
    ("qkv", "matmul backward (qkv)", "dqkvw, dqkvb"),
    ("ln1", "layernorm backward (ln1)", "dln1w, dln1b"),
)


class BlockBackwardDrawing(GraphDrawing):
    """The drawing, with a stable text form (no memory address)."""

    def __repr__(self) -> str:
        return "<one block's backward dataflow: 2 forks, 2 joins>"


def draw_block_backward() -> BlockBackwardDrawing:
    """A graphviz drawing of one GPT block's backward dataflow.

    Left column: the residual stream's gradient dx, from the block's output
    (top) to its input (bottom).  Right column: the two branches, MLP then
    attention, each a chain of layer backwards.  A fork node sends dx both
    down the stream and into a branch; a join node adds the branch's result
    back into the stream (`+=`).
    """
    require_dot()
    dot = BlockBackwardDrawing(
        graph_attr={
            "rankdir": "TB",
            "bgcolor": "transparent",
            "ranksep": "0.18",
            "nodesep": "0.5",
        },
        node_attr={
            "fontname": "Helvetica",
            "fontsize": "11",
            "shape": "box",
            "style": "rounded,filled",
            "fillcolor": BRANCH,
            "margin": "0.1,0.04",
        },
        edge_attr={
            "color": "#555555",
            "arrowsize": "0.7",
            "fontname": "Helvetica",
            "fontsize": "11",
        },
    )
    stream = {"fillcolor": STREAM}
    junction = {"shape": "ellipse", "fillcolor": FORK_JOIN}
    dot.node(
        "out", "dx_out, from the block above\n(x_out = x_mid + mlp)", **stream
    )
    dot.node("fork2", "fork: dx goes both ways", **junction)
    dot.node("mid", "dx, the stream's\nown path", **stream)
    dot.node("join2", "join: dx_mid = copy + ln2's dinp", **junction)
    dot.node("fork1", "fork: dx goes both ways", **junction)
    dot.node("inp", "dx, the stream's\nown path", **stream)
    dot.node(
        "below", "dx_in, to the block below\n(x_mid = x_in + attention)", **stream
    )
    dot.node("join1", "join: dx_in = copy + ln1's dinp", **junction)
    for name, label, adds in BLOCK_BACKWARD_STEPS:
        text = f"{label}\n+= {adds}" if adds else label
        dot.node(name, text)

    dot.edge("out", "fork2")
    dot.edge("fork2", "mid", label=" copy")
    dot.edge("fork2", "fcproj", label=" copy")
    mlp = ("fcproj", "gelu", "fc", "ln2")
    att = ("attproj", "att", "qkv", "ln1")
    for branch in (mlp, att):
        for a, b in zip(branch, branch[1:], strict=False):
            dot.edge(a, b)
    dot.edge("mid", "join2")
    dot.edge("ln2", "join2")
    dot.edge("join2", "fork1")
    dot.edge("fork1", "inp", label=" copy")
    dot.edge("fork1", "attproj", label=" copy")
    dot.edge("inp", "join1")
    dot.edge("ln1", "join1")
    dot.edge("join1", "below")
    # keep the stream in one column, left of its branches
    with dot.subgraph() as s:
        s.attr(rank="same")
        s.node("mid")
        s.node("fcproj")
    with dot.subgraph() as s:
        s.attr(rank="same")
        s.node("inp")
        s.node("attproj")
    return dot
