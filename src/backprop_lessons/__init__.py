"""backprop-lessons: the engines behind the book *Backpropagation, measured*.

Engines (NumPy and the standard library only: no drawing, widgets or torch):
    scalar        Value, topological_order, zero_grad: the scalar reverse-mode engine
    scalar_nn     Neuron, Layer, MLP built from Values
    forward_mode  Dual numbers, JVP rules, Jacobians by columns or rows, operation counts
    tensor        Tensor: the NumPy reverse-mode engine; unbroadcast
    mlp3          ThreeLayerMLP with a hand-derived backward
    deep_mlp      deep sigmoid/ReLU nets for the vanishing-gradient experiment
    gpt           a GPT-2-style model with hand-written layer backwards
Comparison, display and data:
    gradcheck     numerical gradients and comparison tables (PyTorch loaded lazily)
    debug         PyTorch gradient-flow tables, backward hooks, memory measurement
    scale         FLOP counts, saved-activation bytes, gradient buckets (PyTorch)
    distributed   worker processes on torch.distributed (gloo) for data parallelism
    ddp_train     `python -m backprop_lessons.ddp_train`: the GPT trained with DDP or
                  FSDP, alone or under torchrun; checkpoints with torch.distributed.checkpoint
    scale_out     DDP/FSDP measured: broadcast, no_sync, bytes per rank, speed-up, overlap
    viz           graphviz drawings of computation graphs
    widgets       steppers through topological sort and backward (work without a kernel)
    show          the package's own source, highlighted, in a notebook
    data          small datasets generated in code or shipped with the package
"""

__version__ = "0.1.0"

from .scalar import Value, topological_order, zero_grad

__all__ = ["Value", "topological_order", "zero_grad", "__version__"]
