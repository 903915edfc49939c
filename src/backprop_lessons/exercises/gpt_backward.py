"""Checks for the exercises of "A GPT's backward by hand" (chapter 6).

    check_layernorm_backward(backward)     a fixed layernorm backward
    check_parameter_count(count)           parameters from a GPTConfig alone
    check_wte_parts(head_part, embedding_part, params, config, idx, targets)
                                           the two halves of wte's gradient

The layernorm check compares with centered differences (`gradcheck`); the
wte check with PyTorch (imported when it runs) on a model whose LM head has
its own copy of wte.  Each check prints "Exercise N: ..." and returns a
`Verdict` (see `checking`).
"""

from __future__ import annotations

import math

import numpy as np

from ..gpt.layers import layernorm_forward
from ..gpt.model import GPTConfig, parameter_shapes
from ..gradcheck import numerical_param_gradients
from .checking import (
    NotAttempted,
    NotYet,
    Verdict,
    attempt,
    close,
    mismatched,
    require_filled,
    run_check,
)

__all__ = ["check_layernorm_backward", "check_parameter_count", "check_wte_parts"]


def check_layernorm_backward(backward, exercise: int = 1) -> Verdict:
    """backward(dinp, dweight, dbias, dout, cache), with the signature of
    `layers.layernorm_backward`: it must add the three gradients into the
    buffers, matching centered differences."""

    def check(backward):
        todo = "write the fixed layernorm backward and run its cell"
        rng = np.random.default_rng(3)
        inputs = {
            "inp": rng.standard_normal((2, 3, 8)),  # (B, T, C)
            "weight": 1.0 + 0.1 * rng.standard_normal(8),  # (C,)
            "bias": 0.1 * rng.standard_normal(8),  # (C,)
        }
        dout = rng.standard_normal((2, 3, 8))  # (B, T, C)
        _, cache = layernorm_forward(
            inputs["inp"], inputs["weight"], inputs["bias"]
        )
        grads = {name: np.zeros_like(a) for name, a in inputs.items()}
        buffers = (grads["inp"], grads["weight"], grads["bias"])
        attempt(backward, *buffers, dout, cache, todo=todo, may_return_none=True)
        if all(not g.any() for g in grads.values()):  # a stub that does nothing
            raise NotAttempted(f"{todo} (so far it adds nothing to the buffers)")

        def loss():  # L = sum(out * dout): its gradient is the VJP with dout
            out, _ = layernorm_forward(
                inputs["inp"], inputs["weight"], inputs["bias"]
            )
            return float((out * dout).sum())

        numeric = numerical_param_gradients(loss, inputs)
        wrong = [f"d{name}" for name in mismatched(grads, numeric, 1e-6)]
        if wrong:
            raise NotYet(
                f"wrong gradients for {', '.join(wrong)}: compare with "
                "r (g - mean(g) - xhat mean(g xhat))"
            )

    return run_check(exercise, check, backward)


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
