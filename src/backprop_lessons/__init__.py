"""backprop-lessons: the engines behind the book *Backpropagation, measured*.

The package map (every module, its layer and what it may import) is in
ARCHITECTURE.md, "The package in layers".  From here: `Value`,
`topological_order` and `zero_grad`, the scalar engine's public names,
loaded on first use, so that importing one module of the package (say
`backprop_lessons.gpt.layers`) loads no engine it does not use.
"""

__version__ = "0.1.0"

__all__ = ["Value", "topological_order", "zero_grad", "__version__"]


def __getattr__(name: str):
    if name in ("Value", "topological_order", "zero_grad"):
        from . import scalar

        return getattr(scalar, name)
    raise AttributeError(f"module 'backprop_lessons' has no attribute {name!r}")
