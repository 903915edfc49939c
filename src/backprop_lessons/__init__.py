"""backprop-lessons: the engines behind the book *Backpropagation, measured*.

Engines (NumPy and the standard library only: no drawing, widgets or torch):
    scalar          Value, topological_order, zero_grad: scalar reverse mode
    scalar_nn       Neuron, Layer, MLP built from Values
    forward_mode    Dual numbers, JVP rules, Jacobians by columns or rows,
                    operation counts
    tensor          Tensor: the NumPy reverse-mode engine; unbroadcast
    mlp3            ThreeLayerMLP with a hand-derived backward
    deep_mlp        deep sigmoid/ReLU nets for the vanishing-gradient experiment
    gpt             a GPT-2-style model with hand-written layer backwards
    microgpt        microgpt's GPT on the scalar engine (model) and the
                    chapter's measurements of it (measure)
    numerics        the formulas several engines share (stable sigmoid,
                    softmax, log-softmax, one-hot) and the size checks
Measuring, comparing, showing:
    gradcheck       numerical gradients and check tables (PyTorch lazily)
    graph_stats     counts over a scalar graph: nodes, chain-rule steps, paths
    jacobian_chain  forward vs reverse mode as orders of one matrix product
    traced          PyTorch's own backward graph of a function, as text
    debug           PyTorch gradient-flow tables, backward hooks, memory
    scale           chapter 8's and 9's PyTorch machinery: backward_cost
                    (FLOPs, saved bytes, buckets), distributed (worker
                    processes), ddp_train (`python -m
                    backprop_lessons.scale.ddp_train`: DDP or FSDP under
                    torchrun), scale_out (DDP/FSDP measured), harness
                    (ddp_train's test support)
    timing          best_time: the one timing helper of the chapters
    exercises       the chapters' exercise checks (explicit arguments)
    viz             graphviz drawings of computation graphs
    widgets         steppers through topological sort and backward
                    (they work without a kernel)
    show            the package's own source, highlighted, in a notebook
    data            datasets generated in code or shipped with the package
"""

__version__ = "0.1.0"

from .scalar import Value, topological_order, zero_grad

__all__ = ["Value", "topological_order", "zero_grad", "__version__"]
