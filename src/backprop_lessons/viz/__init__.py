"""Drawing: computation graphs with graphviz (`graph`), figures with matplotlib
(`plots`).

    draw_graph, require_dot   graph.py: a scalar graph as a graphviz drawing
    draw_block_backward       block_backward.py: one GPT block's backward
                              dataflow, where the residual gradient forks
                              and joins (chapter 6)
    plots                     plots.py: figures sized for the book's text
                              column, one class palette for every chapter,
                              ratio bars on log axes (matplotlib, imported
                              only when a plot is made)
    plot_step_timeline        timeline.py: a DDP step's compute and
                              all-reduces on one time axis, per rank and
                              per bucket (chapter 8; import it from
                              `viz.timeline`)

`viz` may import the engines; no engine imports `viz`.
"""

from . import plots
from .block_backward import draw_block_backward
from .graph import draw_graph, require_dot

__all__ = ["draw_block_backward", "draw_graph", "require_dot", "plots"]
