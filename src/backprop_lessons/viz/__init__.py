"""Drawing: computation graphs with graphviz, plots with matplotlib.

`viz` may import the engines; no engine imports `viz`.
"""

from .graph import draw_graph, require_dot

__all__ = ["draw_graph", "require_dot"]
