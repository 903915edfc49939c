"""The backward graph PyTorch derives for a function, as readable text.

This book's engines (and PyTorch in its default, eager mode) are
*define-by-run*: the graph is recorded while the forward runs, and backward
walks that recording.  A compiler instead traces the function ahead of time
into a graph of operations and derives a second graph, the backward, from
it.  `torch_backward_graphs(f, *inputs)` asks PyTorch's own AOTAutograd
(the part of `torch.compile` that does this, here with no compiler behind
it, on the CPU) for both graphs and prints them one operation a line:

    forward:  what runs first, and which tensors it saves for backward
    backward: the vector-Jacobian products, as ordinary tensor operations

`inplace_ops(f, *inputs)` lists the in-place (mutating) operations a
function performs, as PyTorch's dispatcher sees them: the ops to look at
when autograd reports "a variable needed for gradient computation has been
modified by an inplace operation".

A comparison module like `gradcheck`: it imports torch, and no engine
imports it.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["TracedGraphs", "torch_backward_graphs", "inplace_ops"]


@dataclass(frozen=True)
class TracedGraphs:
    """The two graphs AOTAutograd made: forward and backward, as text, and
    the names of the tensors the forward saves for the backward."""

    forward: str
    backward: str
    saved: tuple

    def __str__(self) -> str:
        return f"forward graph\n{self.forward}\n\nbackward graph\n{self.backward}"

    def _repr_pretty_(self, p, cycle) -> None:
        p.text(str(self))


def _op_name(target) -> str:
    """aten.mv.default -> mv; aten.pow.Tensor_Scalar -> pow."""
    packet = getattr(target, "overloadpacket", None)
    return (
        packet.__name__
        if packet is not None
        else getattr(target, "__name__", str(target))
    )


def _argument(a) -> str:
    if hasattr(a, "name") and hasattr(a, "op"):  # an fx Node
        return a.name
    if isinstance(a, (list, tuple)):
        return "[" + ", ".join(_argument(x) for x in a) + "]"
    return repr(a)


def graph_text(graph_module) -> str:
    """One line per node: inputs, `name = op(args)`, and what is returned."""
    lines = []
    for node in graph_module.graph.nodes:
        if node.op == "placeholder":
            lines.append(f"input  {node.name}")
        elif node.op == "call_function":
            args = [_argument(a) for a in node.args]
            args += [
                f"{k}={_argument(v)}"
                for k, v in node.kwargs.items()
                if k
                not in (
                    "pin_memory",
                    "memory_format",
                    "layout",
                    "device",
                    "dtype",
                )
            ]
            lines.append(
                f"{node.name} = {_op_name(node.target)}({', '.join(args)})"
            )
        elif node.op == "output":
            lines.append(f"return {_argument(node.args[0])}")
    return "\n".join(lines)


def torch_backward_graphs(f, *inputs) -> TracedGraphs:
    """Trace `f(*inputs)` (tensors; the output a scalar) with AOTAutograd and
    return its forward and backward graphs.

    The inputs are copied with requires_grad=True; f runs once forward and
    once backward (the backward graph is made when it first runs).
    """
    import torch

    from .torch_private import aot_autograd

    aot_function, make_boxed_func = aot_autograd()

    graphs = {}

    def keep(kind):
        def compiler(gm, example_inputs):
            graphs[kind] = gm
            return make_boxed_func(gm.forward)

        return compiler

    args = [
        torch.as_tensor(x).detach().clone().requires_grad_(True) for x in inputs
    ]
    out = aot_function(
        f, fw_compiler=keep("forward"), bw_compiler=keep("backward")
    )(*args)
    if out.ndim != 0:
        raise ValueError(
            f"torch_backward_graphs: f must return a scalar, got "
            f"shape {tuple(out.shape)}"
        )
    out.backward()
    backward_inputs = [
        n.name for n in graphs["backward"].graph.nodes if n.op == "placeholder"
    ]
    saved = tuple(n for n in backward_inputs if not n.startswith("tangents"))
    return TracedGraphs(
        graph_text(graphs["forward"]), graph_text(graphs["backward"]), saved
    )


def inplace_ops(f, *inputs) -> list[str]:
    """The in-place operations `f(*inputs)` runs, in order, by their ATen
    names (add_, relu_, mul_...): every operator whose schema says it writes
    into an argument that is not an `out=` buffer.  Runs f once, with
    autograd as it is (call `.backward()` inside f to see the backward too).
    """
    from .torch_private import dispatch_mode, schema_arguments

    TorchDispatchMode = dispatch_mode()

    found = []

    class Recorder(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            written = [
                a
                for a in schema_arguments(func)
                if a.alias_info is not None
                and a.alias_info.is_write
                and not a.kwarg_only
            ]
            if written:
                found.append(func.overloadpacket.__name__)
            return func(*args, **(kwargs or {}))

    with Recorder():
        f(*inputs)
    return found
