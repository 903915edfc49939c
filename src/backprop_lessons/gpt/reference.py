"""A PyTorch twin of the hand-written GPT, built from the same parameter dict,
for checking.

`torch_forward_backward(params, config, idx, targets)` copies every NumPy
parameter into a leaf tensor (same dtype), runs the same model with
PyTorch's own functions (`F.layer_norm`, `F.linear`,
`F.gelu(approximate="tanh")`, `softmax`, `F.cross_entropy`; attention written
out as in nanoGPT), lets autograd compute the gradients and returns
`(loss, grads)` as NumPy.
`compare_gpt_with_torch` puts the two side by side in a `gradcheck.CheckTable`;
`compare_with_transformers` does the same with Hugging Face's GPT-2 model,
its weights loaded into the book's layout by `hf_checkpoint.load_hf_gpt2`
(chapter 9).

This is the only module of `backprop_lessons.gpt` that imports torch; the
model itself never does.  It is an independent implementation: none of the
backward code of `layers.py` is used here.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

from ..gradcheck import CheckTable, compare_arrays
from .hf_checkpoint import load_hf_gpt2
from .layers import LAYERNORM_EPS
from .model import GPTConfig, check_params, gpt_backward, gpt_forward

__all__ = [
    "torch_attention",
    "torch_gpt_block",
    "torch_gpt_loss",
    "torch_forward_backward",
    "compare_gpt_with_torch",
    "DEFAULT_TOLERANCES",
    "compare_with_transformers",
    "TRANSFORMERS_TOLERANCES",
]

# Relative error a row must stay below, per dtype; other names use "default".
# float32 differs by summation order (BLAS kernels, fused ops), not by bugs;
# the embedding gradients sum the most terms.
DEFAULT_TOLERANCES = {
    "float64": {"default": 1e-10, "loss": 1e-12},
    "float32": {"default": 2e-4, "loss": 1e-5, "wte": 5e-4, "wpe": 5e-4},
}


def torch_attention(qkv: torch.Tensor, n_head: int) -> torch.Tensor:
    """Causal multi-head attention from the qkv matmul's output, in PyTorch:
    qkv (B, T, 3C) -> (B, T, C), as `layers.attention_forward`.  The one
    PyTorch attention the package compares with (the model, the exercise
    checks, tensor parallelism's blocks, which pass their own heads)."""
    B, T, C3 = qkv.shape
    C = C3 // 3
    hs = C // n_head
    q, k, v = (
        t.reshape(B, T, n_head, hs).transpose(1, 2) for t in qkv.split(C, dim=2)
    )  # (B, NH, T, hs)
    mask = torch.ones(T, T, dtype=torch.bool).tril()  # (T, T)
    att = (q @ k.transpose(-2, -1)) / math.sqrt(hs)  # (B, NH, T, T)
    att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
    return (att @ v).transpose(1, 2).reshape(B, T, C)  # (B, T, C)


def torch_gpt_block(
    x: torch.Tensor, tp: dict, config: GPTConfig, l: int
) -> torch.Tensor:
    """Transformer block `l`: x (B, T, C) -> (B, T, C), pre-norm, as in
    `layers`."""
    C = x.shape[-1]
    h = F.layer_norm(x, (C,), tp["ln1w"][l], tp["ln1b"][l], LAYERNORM_EPS)
    qkv = F.linear(h, tp["qkvw"][l], tp["qkvb"][l])  # (B, T, 3C)
    y = torch_attention(qkv, config.n_head)  # (B, T, C)
    x = x + F.linear(y, tp["attprojw"][l], tp["attprojb"][l])
    h = F.layer_norm(x, (C,), tp["ln2w"][l], tp["ln2b"][l], LAYERNORM_EPS)
    h = F.gelu(
        F.linear(h, tp["fcw"][l], tp["fcb"][l]), approximate="tanh"
    )  # (B, T, 4C)
    return x + F.linear(h, tp["fcprojw"][l], tp["fcprojb"][l])


def torch_gpt_loss(
    tp: dict,
    config: GPTConfig,
    idx: torch.Tensor,
    targets: torch.Tensor,
    run_block=torch_gpt_block,
):
    """The model's loss from torch tensors `tp` (same names as the NumPy params).

    Each block is computed by `run_block(x, tp, config, l)`; chapter 8 passes
    a checkpointed one.  An extra entry `tp["lm_head"]` (V, C), if present, is
    used by the LM head instead of `wte`: the two uses of the tied matrix then
    get separate gradients.
    """
    B, T = idx.shape
    C = config.n_embd
    x = tp["wte"][idx] + tp["wpe"][:T]  # (B, T, C)
    for l in range(config.n_layer):
        x = run_block(x, tp, config, l)
    x = F.layer_norm(x, (C,), tp["lnfw"], tp["lnfb"], LAYERNORM_EPS)
    logits = x @ tp.get("lm_head", tp["wte"]).T  # (B, T, V), tied
    return F.cross_entropy(logits.reshape(B * T, -1), targets.reshape(B * T))


def torch_forward_backward(params, config: GPTConfig, idx, targets):
    """(loss, grads) computed by PyTorch autograd on copies of `params` (same
    dtype)."""
    check_params(params, config)
    tp = {name: torch.tensor(a, requires_grad=True) for name, a in params.items()}
    idx_t, targets_t = (
        torch.as_tensor(np.asarray(idx)),
        torch.as_tensor(np.asarray(targets)),
    )
    loss = torch_gpt_loss(tp, config, idx_t.long(), targets_t.long())
    loss.backward()
    return loss.item(), {name: t.grad.numpy() for name, t in tp.items()}


def compare_gpt_with_torch(
    params, config: GPTConfig, idx, targets, tolerances=None
) -> CheckTable:
    """The hand-written loss and gradients next to PyTorch's, by parameter.

    `tolerances`: name -> relative error that must not be reached ("default"
    for the rest); by default DEFAULT_TOLERANCES for the parameters' dtype.
    """
    dtype = np.dtype(params["wte"].dtype).name
    tol = dict(DEFAULT_TOLERANCES.get(dtype, DEFAULT_TOLERANCES["float32"]))
    tol.update(tolerances or {})
    loss, cache = gpt_forward(params, config, idx, targets)
    grads = gpt_backward(params, config, cache)
    ref_loss, ref_grads = torch_forward_backward(params, config, idx, targets)
    table = CheckTable(f"hand-written backward vs PyTorch autograd ({dtype})")
    table.rows.append(
        compare_arrays("loss", loss, ref_loss, tol.get("loss", tol["default"]))
    )
    for name in params:  # the order of PARAMETER_TABLE
        table.rows.append(
            compare_arrays(
                name, grads[name], ref_grads[name], tol.get(name, tol["default"])
            )
        )
    return table


# ---- comparing with transformers -----------------------------------------------

# Largest relative error that passes, per dtype; a name not listed uses "default".
TRANSFORMERS_TOLERANCES = {
    "float64": {"default": 1e-9, "loss": 1e-11, "logits": 1e-11},
    "float32": {"default": 1e-4, "loss": 1e-5, "logits": 1e-4},
}


def compare_with_transformers(model, idx, targets, tolerances=None) -> CheckTable:
    """The book's loss and gradients next to those of a transformers GPT-2 model.

    `model` is a `GPT2LMHeadModel` (eval mode: no dropout; use
    `attn_implementation="eager"` for float64).  Its weights are loaded with
    `load_hf_gpt2` in the model's own dtype, the book's `gpt_forward` and
    `gpt_backward` run on `idx` and `targets` (B, T), and transformers' model
    runs forward (its logits, then the mean cross-entropy) and backward
    through torch autograd.  Its gradients are mapped to the book's names by
    the same loader: a gradient has its weight's layout.  One row each for
    the loss, the logits and every parameter (its L blocks stacked).
    """
    dtype = (
        np.float64
        if next(model.parameters()).dtype == torch.float64
        else np.float32
    )
    # transformers first; its gradients are copied out and dropped before the
    # book's model runs, so that two sets of gradients never sit next to two
    # sets of weights (124M parameters in float64: 1 GB each)
    model.zero_grad(set_to_none=True)
    idx_t = torch.as_tensor(np.asarray(idx), dtype=torch.long)
    targets_t = torch.as_tensor(np.asarray(targets), dtype=torch.long)
    logits = model(input_ids=idx_t).logits  # (B, T, V)
    ref_loss = F.cross_entropy(logits.flatten(0, 1), targets_t.flatten())
    ref_loss.backward()
    ref_grads = {
        k: p.grad for k, p in model.named_parameters() if p.grad is not None
    }
    _, ref_grads = load_hf_gpt2(ref_grads, dtype=dtype, config=model.config)
    model.zero_grad(set_to_none=True)

    config, params = load_hf_gpt2(model, dtype=dtype)
    loss, cache = gpt_forward(params, config, idx, targets)
    grads = gpt_backward(params, config, cache)

    name = np.dtype(dtype).name
    tol = {
        **TRANSFORMERS_TOLERANCES.get(name, TRANSFORMERS_TOLERANCES["float32"]),
        **(tolerances or {}),
    }
    table = CheckTable(
        f"hand-written backward vs transformers GPT2LMHeadModel ({name})"
    )
    table.rows.append(
        compare_arrays(
            "loss", loss, ref_loss.item(), tol.get("loss", tol["default"])
        )
    )
    table.rows.append(
        compare_arrays(
            "logits",
            cache["logits"],
            logits.detach().numpy(),
            tol.get("logits", tol["default"]),
        )
    )
    for p in params:
        table.rows.append(
            compare_arrays(p, grads[p], ref_grads[p], tol.get(p, tol["default"]))
        )
    return table
