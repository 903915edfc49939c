"""The package's import direction (ARCHITECTURE.md): engines never import torch,
transformers, the drawing libraries, the widgets or the modules built on them.

Checked by reading each engine's source, so that an import inside a function
counts too: the rule is about the file a reader opens, not only about what
`import` loads at first.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "backprop_lessons"

# The engines and the helpers they share; everything else (gradcheck, debug,
# scale, gpt/reference, viz, widgets, exercises, ...) compares with or
# runs on PyTorch, or draws.
ENGINES = [
    "scalar.py",
    "scalar_nn.py",
    "forward_mode.py",
    "tensor.py",
    "mlp3.py",
    "deep_mlp.py",
    "microgpt/__init__.py",
    "microgpt/model.py",
    "microgpt/measure.py",
    "microgpt/numpy_twin.py",
    "numerics.py",
    "example_graphs.py",
    "graph_stats.py",
    "jacobian_chain.py",
    "linearize.py",
    "higher_order.py",
    "gpt/__init__.py",
    "gpt/layers.py",
    "gpt/model.py",
    "gpt/checks.py",
    "gpt/train.py",
    "gpt/hf_checkpoint.py",
    *sorted(str(p.relative_to(PACKAGE)) for p in (PACKAGE / "data").glob("*.py")),
]
FORBIDDEN = {
    "torch",
    "transformers",
    "matplotlib",
    "graphviz",
    "ipywidgets",
    "anywidget",
    "IPython",
}
# the package's own modules that draw, make widgets or run on PyTorch
FORBIDDEN_OWN = {"viz", "widgets", "reference", "debug", "scale", "traced"}


def imported_names(source: str) -> set[str]:
    """Every module an import statement names (dotted, relative ones with
    their leading dots dropped)."""
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            names.add(base)
            if node.level and not base:  # from . import viz
                names |= {alias.name for alias in node.names}
    return names


def test_every_engine_file_exists():
    missing = [name for name in ENGINES if not (PACKAGE / name).exists()]
    assert not missing


@pytest.mark.parametrize("name", ENGINES)
def test_engine_imports_nothing_that_draws_or_runs_torch(name):
    found = imported_names((PACKAGE / name).read_text())
    bad = {
        module
        for module in found
        if module.split(".")[0] in FORBIDDEN
        or FORBIDDEN_OWN & set(module.split("."))
    }
    assert not bad, f"{name} imports {sorted(bad)}"


def test_the_check_sees_imports_inside_functions():
    source = "def f():\n    import torch\n    from ..viz import plots\n"
    assert {"torch", "viz"} <= imported_names(source)


def test_gpt_never_imports_microgpt():
    """microgpt's NumPy twin is built from gpt's layer pairs, so imports go
    microgpt -> gpt and never back (ARCHITECTURE.md)."""
    for path in sorted((PACKAGE / "gpt").glob("*.py")):
        found = imported_names(path.read_text())
        assert not any("microgpt" in module.split(".") for module in found), (
            f"gpt/{path.name} imports microgpt"
        )
