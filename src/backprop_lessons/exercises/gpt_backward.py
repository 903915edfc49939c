"""Checks for the exercises of "A GPT's backward by hand" (chapter 6).

    check_layernorm_backward(backward)     a layernorm backward (from
                                           `gpt_layers`, with the other
                                           layers' and the whole model's)
    check_parameter_count(count)           parameters from a GPTConfig alone
    check_wte_parts(head_part, embedding_part, params, config, idx, targets)
                                           the two halves of wte's gradient

The wte check with PyTorch (imported when it runs) on a model whose LM head has
its own copy of wte.  Each check prints "Exercise N: ..." and returns a
`Verdict` (see `checking`).
"""

from __future__ import annotations

import math

import numpy as np

from ..gpt.model import GPTConfig, parameter_shapes
from .checking import (
    NotYet,
    Verdict,
    attempt,
    close,
    require_filled,
    run_check,
)
from .gpt_layers import check_layernorm_backward

__all__ = ["check_layernorm_backward", "check_parameter_count", "check_wte_parts"]


def check_parameter_count(count, exercise: int = 2) -> Verdict:
    """count(config) must give the number of parameters of any config,
    without building arrays."""

    def check(count):
        todo = "write count(config) and run its cell"
        for config in (
            GPTConfig(28, 32, 2, 4, 32),
            GPTConfig(65, 64, 4, 4, 128),
            GPTConfig(5, 3, 1, 1, 2),
        ):
            expected = sum(
                math.prod(s) for s in parameter_shapes(config).values()
            )
            got = attempt(count, config, todo=todo)
            if got != expected:
                raise NotYet(
                    f"for {config} expected {expected:,}, got {got!r}; "
                    "per block: two layernorms, qkv, the attention projection "
                    "and the two MLP matmuls, each with a bias"
                )

    return run_check(exercise, check, count)


def check_wte_parts(
    head_part, embedding_part, params, config, idx, targets, exercise: int = 3
) -> Verdict:
    """head_part and embedding_part (V, C): the LM head's and the embedding's
    contributions to grads["wte"] for the float64 `params` on (idx, targets),
    compared with PyTorch with the two uses of wte untied."""
    import torch

    from ..gpt.reference import torch_gpt_loss

    def check(head_part, embedding_part):
        todo = "compute head_part and embedding_part and run their cell"
        require_filled([head_part, embedding_part], todo)
        tp = {
            name: torch.tensor(p, requires_grad=True)
            for name, p in params.items()
        }
        tp["lm_head"] = torch.tensor(params["wte"], requires_grad=True)  # a copy
        idx_t, targets_t = torch.as_tensor(idx), torch.as_tensor(targets)
        torch_gpt_loss(tp, config, idx_t, targets_t).backward()
        parts = (
            ("head_part", head_part, tp["lm_head"].grad.numpy()),
            ("embedding_part", embedding_part, tp["wte"].grad.numpy()),
        )
        for label, ours, theirs in parts:
            if np.shape(ours) != theirs.shape:
                raise NotYet(f"{label} must have shape {theirs.shape}")
            if not close(ours, theirs, 1e-10):
                raise NotYet(f"{label} differs from PyTorch's")

    return run_check(exercise, check, head_part, embedding_part)
