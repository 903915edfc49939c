"""The private PyTorch APIs the package calls (all in torch_private) still
exist: after a PyTorch upgrade this fails first, naming what is gone."""

from __future__ import annotations

import ast
from pathlib import Path

import torch

from backprop_lessons import torch_private

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "backprop_lessons"
PRIVATE = (
    "torch._C",
    "_get_zeros_like_grad_buckets",
    "kineto_results",
    "experimental_event_tree",
)


def test_the_private_apis_are_still_there():
    gone = torch_private.missing()
    assert not gone, (
        f"PyTorch {torch.__version__} lacks private APIs that "
        f"backprop_lessons/torch_private.py (written against "
        f"{torch_private.WRITTEN_AGAINST}) calls: {', '.join(gone)}; "
        f"update that module"
    )


def _private_imports(source: str) -> list[str]:
    """The private torch modules a file imports: a part of the dotted name
    after `torch` starts with an underscore (torch._C, torch.utils._pytree)."""
    names = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.append(node.module)
    return [
        n
        for n in names
        if n.split(".")[0] == "torch"
        and any(part.startswith("_") for part in n.split(".")[1:])
    ]


def test_only_torch_private_calls_private_apis():
    callers = sorted(
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if any(name in path.read_text() for name in PRIVATE)
        or _private_imports(path.read_text())
    )
    assert callers == ["torch_private.py"]


def test_the_check_sees_private_modules():
    assert _private_imports("from torch.utils._python_dispatch import X") == [
        "torch.utils._python_dispatch"
    ]
    assert _private_imports("import torch._C._profiler as p") == [
        "torch._C._profiler"
    ]
    assert not _private_imports("from torch.autograd.profiler import profile")


def test_the_adapter_reads_allocations():
    from torch.autograd import profiler

    with profiler.profile(profile_memory=True) as prof:
        torch.ones(1000, dtype=torch.float64)
    sizes = [size for _, _, size in torch_private.cpu_allocations(prof)]
    assert 8000 in sizes
    assert isinstance(ast.literal_eval(repr(torch_private.WRITTEN_AGAINST)), str)
