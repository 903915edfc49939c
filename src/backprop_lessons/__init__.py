"""backprop-lessons: the engines behind the book *Backpropagation, measured*.

Engines (no drawing, no widgets, no torch):
    scalar        Value, topological_order, zero_grad
    scalar_nn     Neuron, Layer, MLP on Value
Comparison and display:
    gradcheck     numerical gradients and comparison tables
    viz           graphviz drawings of computation graphs
    show          the package's own source, highlighted, in a notebook
"""

__version__ = "0.1.0"

from .scalar import Value, topological_order, zero_grad

__all__ = ["Value", "topological_order", "zero_grad", "__version__"]
