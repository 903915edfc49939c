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

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "backprop_lessons"

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
    "validate.py",
    "graph_order.py",
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


# ---- what importing an engine loads, followed through every import -----------
# The source check above reads one file; this one imports each engine in a
# fresh interpreter and lists every module of the package that came along
# (the package's own `__init__`s included).  An engine loads only the shared
# helpers and the engines it is built on (ARCHITECTURE.md, "The package in
# layers"), never torch or a drawing or widget library.

HELPERS = {"validate", "numerics", "graph_order"}
LOADS = {
    "validate": set(),
    "numerics": {"validate"},
    "graph_order": set(),
    "scalar": HELPERS,
    "tensor": HELPERS,
    "mlp3": HELPERS,
    "deep_mlp": HELPERS,
    "scalar_nn": HELPERS | {"scalar"},
    # Duals mix with Values (chapter 3 counts both modes on them), and
    # gradcheck's numerical_gradient is the one finite-difference routine
    "forward_mode": HELPERS | {"scalar", "gradcheck"},
    "higher_order": HELPERS | {"scalar", "gradcheck", "forward_mode"},
    "linearize": HELPERS | {"scalar", "gradcheck", "forward_mode"},
    # gpt/__init__ loads the model; the checkpoint loader waits until used
    "gpt.layers": HELPERS | {"gpt", "gpt.model"},
    "gpt.model": HELPERS | {"gpt", "gpt.layers"},
    "microgpt.model": HELPERS | {"microgpt", "scalar", "data", "data.*"},
}
THIRD_PARTY = sorted(FORBIDDEN | {"scipy", "pygments", "yaml", "safetensors"})
_LOADED = """
import json, sys
import backprop_lessons.{name}
print(json.dumps(sorted(sys.modules)))
"""


@pytest.mark.parametrize("name", sorted(LOADS))
def test_importing_an_engine_loads_only_what_it_is_built_on(name):
    import json
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-c", _LOADED.format(name=name)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    loaded = json.loads(out)
    own = {
        m.removeprefix("backprop_lessons.")
        for m in loaded
        if m.startswith("backprop_lessons.")
    } - {name}
    allowed = LOADS[name]
    extra = sorted(
        m
        for m in own
        if m not in allowed
        and not any(a.endswith(".*") and m.startswith(a[:-1]) for a in allowed)
    )
    assert not extra, f"importing {name} loads {extra}"
    foreign = [m for m in THIRD_PARTY if m in loaded]
    assert not foreign, f"importing {name} loads {foreign}"


# ---- private names stay in their module --------------------------------------


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_names_from_other_modules(source: str) -> list[str]:
    """Every private name (`_x`) `source` takes from another module of the
    package: `from .m import _x`, or `m._x` (an attribute chain from a name
    an import of the package bound: `from . import m`, `import
    backprop_lessons.m as m`, `from .m import Cls` then `Cls._x`)."""
    found, bound = [], set()
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (
            node.level or (node.module or "").startswith("backprop_lessons")
        ):
            for alias in node.names:
                if _is_private(alias.name):
                    found.append(
                        f"{node.lineno}: from {node.module} import {alias.name}"
                    )
                bound.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("backprop_lessons"):
                    bound.add(alias.asname or alias.name.split(".")[0])
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _is_private(node.attr):
            root = node.value
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id in bound:
                found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_private_name_crosses_modules():
    """What another module uses is public: a private helper several modules
    need moves into a module of its own under a public name (issue 45)."""
    found = [
        f"{path.relative_to(PACKAGE)}:{hit}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for hit in private_names_from_other_modules(path.read_text())
    ]
    assert not found, f"private names used across modules: {found}"


@pytest.mark.parametrize(
    "source, hits",
    [
        ("from .gpt_layers import _Case, check_gelu_backward", 1),
        ("from backprop_lessons.exercises.gpt_layers import _todo as t", 1),
        ("from . import forward_mode\nforward_mode._interpreters[-1]", 1),
        ("from . import pipeline as pp\nx = pp._loss_fn(h, y)", 1),
        ("import backprop_lessons.scale.pipeline as pp\npp._loss_fn", 1),
        ("from .scalar import Value\nValue._backward", 1),
        # a module's own privates, a value's attributes, dunders, torch's
        ("def _f(): pass\n_f()", 0),
        ("def g(node): return node._children", 0),
        ("from . import scalar\nscalar.__name__", 0),
        ("from torch._C._profiler import _EventType", 0),
        ("import torch\ntorch._C", 0),
    ],
)
def test_the_private_name_check_sees_imports_and_attributes(source, hits):
    assert len(private_names_from_other_modules(source)) == hits
