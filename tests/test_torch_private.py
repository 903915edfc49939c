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


def test_only_torch_private_calls_private_apis():
    callers = sorted(
        str(path.relative_to(PACKAGE))
        for path in PACKAGE.rglob("*.py")
        if any(name in path.read_text() for name in PRIVATE)
    )
    assert callers == ["torch_private.py"]


def test_the_adapter_reads_allocations():
    from torch.autograd import profiler

    with profiler.profile(profile_memory=True) as prof:
        torch.ones(1000, dtype=torch.float64)
    sizes = [size for _, _, size in torch_private.cpu_allocations(prof)]
    assert 8000 in sizes
    assert isinstance(ast.literal_eval(repr(torch_private.WRITTEN_AGAINST)), str)
