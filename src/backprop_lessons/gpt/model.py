"""The GPT-2 style model: its configuration, its parameters, its forward and
its backward.

`gpt_forward` runs the layers of `layers.py` in order and keeps every
layer's cache; `gpt_backward` calls their backwards in exactly the reverse
order and returns one gradient per parameter, under the same names.  There
is no autograd anywhere: the order of the backward calls *is* the
topological sort of chapter 2, written out by hand, as in llm.c.

Shape legend: B batch, T time (<= block_size), C n_embd, V vocab_size,
L n_layer, NH n_head, hs = C // NH.

The model (per block, pre-norm as in GPT-2):

    x = wte[idx] + wpe[:T]                                  (B, T, C)
    for each of the L blocks:
        x = x + attproj(attention(qkv(ln1(x))))             (B, T, C)
        x = x + fcproj(gelu(fc(ln2(x))))                    (B, T, C)
    logits = lnf(x) @ wte.T                                 (B, T, V)  tied head
    loss = mean cross-entropy of softmax(logits) against targets

What it is not: GPT-2 itself (no dropout, no pretrained weights) or fast.
References: llm.c (train_gpt2.c: the parameter names and shapes below);
nanoGPT (model.py); Radford et al. 2019.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..numerics import instance_of, positive_int, token_ids
from .layers import (
    attention_backward,
    attention_forward,
    crossentropy_softmax_backward,
    crossentropy_softmax_forward,
    encoder_backward,
    encoder_forward,
    fused_classifier_backward,
    fused_classifier_forward,
    gelu_backward,
    gelu_forward,
    layernorm_backward,
    layernorm_forward,
    matmul_backward,
    matmul_forward,
    residual_backward,
    residual_forward,
)

__all__ = [
    "GPTConfig",
    "PARAMETER_TABLE",
    "BLOCK_PARAMETERS",
    "parameter_shapes",
    "init_params",
    "num_parameters",
    "check_params",
    "gpt_forward",
    "gpt_backward",
]


@dataclass(frozen=True)
class GPTConfig:
    """The sizes of a model: vocab_size V, block_size (longest T), n_layer L,
    n_head NH, n_embd C."""

    vocab_size: int
    block_size: int
    n_layer: int
    n_head: int
    n_embd: int

    def __post_init__(self):
        for name in ("vocab_size", "block_size", "n_layer", "n_head", "n_embd"):
            value = positive_int("GPTConfig", name, getattr(self, name))
            object.__setattr__(self, name, value)  # np.int64(8) -> 8
        if self.n_embd % self.n_head:
            raise ValueError(
                f"GPTConfig: n_embd={self.n_embd} must be divisible by "
                f"n_head={self.n_head} (head size = n_embd // n_head)"
            )


# One ordered table of parameters (llm.c's order): the name and the matching
# key of the Hugging Face GPT-2 checkpoint (per block h.{l}.; the checkpoint
# stores Conv1D weights transposed, (in, out)).  The shapes are written once,
# in `parameter_shapes`; the comments repeat them in the legend's letters.
# fmt: off
PARAMETER_TABLE = [
    ("wte",      "wte.weight"),                # (V, C)
    ("wpe",      "wpe.weight"),                # (maxT, C)
    ("ln1w",     "h.{l}.ln_1.weight"),         # (L, C)
    ("ln1b",     "h.{l}.ln_1.bias"),           # (L, C)
    ("qkvw",     "h.{l}.attn.c_attn.weight"),  # (L, 3C, C)
    ("qkvb",     "h.{l}.attn.c_attn.bias"),    # (L, 3C)
    ("attprojw", "h.{l}.attn.c_proj.weight"),  # (L, C, C)
    ("attprojb", "h.{l}.attn.c_proj.bias"),    # (L, C)
    ("ln2w",     "h.{l}.ln_2.weight"),         # (L, C)
    ("ln2b",     "h.{l}.ln_2.bias"),           # (L, C)
    ("fcw",      "h.{l}.mlp.c_fc.weight"),     # (L, 4C, C)
    ("fcb",      "h.{l}.mlp.c_fc.bias"),       # (L, 4C)
    ("fcprojw",  "h.{l}.mlp.c_proj.weight"),   # (L, C, 4C)
    ("fcprojb",  "h.{l}.mlp.c_proj.bias"),     # (L, C)
    ("lnfw",     "ln_f.weight"),               # (C,)
    ("lnfb",     "ln_f.bias"),                 # (C,)
]
# fmt: on

# The parameters of one transformer block: the table's names stacked along L.
BLOCK_PARAMETERS = ("ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb")
BLOCK_PARAMETERS += ("ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb")


def parameter_shapes(config: GPTConfig) -> dict[str, tuple[int, ...]]:
    """Name -> shape for every parameter, in the order of PARAMETER_TABLE.

    Written out once, as llm.c's `fill_in_parameter_sizes` does: the model,
    the checkpoint loader and the distributed trainer all read them here.
    """
    instance_of("parameter_shapes", "config", config, GPTConfig)
    V, maxT, C = config.vocab_size, config.block_size, config.n_embd
    L = config.n_layer
    return {
        "wte": (V, C),  # token embeddings, also the LM head
        "wpe": (maxT, C),  # position embeddings
        "ln1w": (L, C),
        "ln1b": (L, C),
        "qkvw": (L, 3 * C, C),
        "qkvb": (L, 3 * C),
        "attprojw": (L, C, C),
        "attprojb": (L, C),
        "ln2w": (L, C),
        "ln2b": (L, C),
        "fcw": (L, 4 * C, C),
        "fcb": (L, 4 * C),
        "fcprojw": (L, C, 4 * C),
        "fcprojb": (L, C),
        "lnfw": (C,),
        "lnfb": (C,),
    }


def init_params(
    config: GPTConfig, seed: int = 0, dtype=np.float32
) -> dict[str, np.ndarray]:
    """Fresh parameters, GPT-2's initialization, the same for the same seed.

    Weights N(0, 0.02); position embeddings N(0, 0.01); the two projections
    that write into the residual stream (attprojw, fcprojw) N(0, 0.02/sqrt(2L)),
    so the stream's variance does not grow with depth; biases 0; layernorm
    gains 1.  Drawn in float64 and then cast, so float32 and float64 models
    with the same seed hold the same numbers (up to rounding).
    """
    instance_of("init_params", "config", config, GPTConfig)
    rng = np.random.default_rng(seed)
    std_proj = 0.02 / math.sqrt(2 * config.n_layer)
    stds = {"wpe": 0.01, "attprojw": std_proj, "fcprojw": std_proj}
    params = {}
    for name, shape in parameter_shapes(config).items():
        if name in ("ln1w", "ln2w", "lnfw"):
            p = np.ones(shape)
        elif name.endswith("b"):  # every bias, and the layernorm shifts
            p = np.zeros(shape)
        else:
            p = rng.normal(0.0, stds.get(name, 0.02), size=shape)
        params[name] = p.astype(dtype)
    return params


def num_parameters(params: dict[str, np.ndarray]) -> int:
    """How many numbers the model learns (wte counted once: the LM head
    shares it)."""
    instance_of("num_parameters", "params", params, dict)
    return sum(p.size for p in params.values())


def check_params(params, config: GPTConfig) -> None:
    """Raise a ValueError unless `params` has exactly the table's names,
    shapes and one float dtype."""
    shapes = parameter_shapes(config)
    if not isinstance(params, dict) or set(params) != set(shapes):
        got = (
            sorted(params) if isinstance(params, dict) else type(params).__name__
        )
        raise ValueError(
            f"gpt params: expected the keys {list(shapes)}, got {got}"
        )
    dtypes = set()
    for name, shape in shapes.items():
        p = params[name]
        if not isinstance(p, np.ndarray) or p.shape != shape:
            got = p.shape if isinstance(p, np.ndarray) else type(p).__name__
            raise ValueError(
                f"gpt params: {name} must be an array of shape {shape}, got {got}"
            )
        dtypes.add(p.dtype)
    if len(dtypes) != 1 or not np.issubdtype(next(iter(dtypes)), np.floating):
        raise ValueError(
            f"gpt params: all parameters must share one float dtype, got {dtypes}"
        )


def _check_tokens(what: str, tokens, config: GPTConfig, shape=None) -> np.ndarray:
    """`tokens` as an int array of shape (B, T), every entry in [0, V),
    T <= block_size."""
    a = token_ids("gpt_forward", what, tokens, config.vocab_size)
    if shape is not None and a.shape != shape:
        raise ValueError(
            f"gpt_forward: {what} must have the shape of idx {shape}, "
            f"got {a.shape}"
        )
    if a.ndim != 2 or a.shape[0] < 1 or a.shape[1] < 1:
        raise ValueError(
            f"gpt_forward: {what} must have shape (B, T) with B, T >= 1, "
            f"got {a.shape}"
        )
    if a.shape[1] > config.block_size:
        raise ValueError(
            f"gpt_forward: sequence length T={a.shape[1]} is longer than "
            f"block_size={config.block_size}"
        )
    return a


def gpt_forward(params, config: GPTConfig, idx, targets=None, *, fused=False):
    """Run the model on token ids `idx` (B, T); return `(loss, cache)`.

    `loss` is the mean cross-entropy against `targets` (B, T), or None when
    no targets are given (then only `cache["logits"]` (B, T, V) is useful,
    e.g. for sampling).  `cache` holds every layer's cache for `gpt_backward`.
    `fused=True` (with targets) computes the LM head, softmax and loss with
    fused_classifier_forward (chapter 10): the (B, T, V) logits are never
    held, and `cache["logits"]` is None; `gpt_backward` follows the cache.
    """
    if not isinstance(fused, bool):
        raise TypeError(f"gpt_forward: fused must be a bool, got {fused!r}")
    check_params(params, config)
    idx = _check_tokens("idx", idx, config)
    if targets is not None:
        targets = _check_tokens("targets", targets, config, shape=idx.shape)
    p, NH = params, config.n_head

    x, enc = encoder_forward(p["wte"], p["wpe"], idx)  # (B, T, C)
    blocks = []
    for l in range(config.n_layer):
        w = {name: p[name][l] for name in BLOCK_PARAMETERS}  # block l's weights
        c = {}  # block l's layer caches
        # every activation is (B, T, C), except qkv (B, T, 3C) and the MLP's
        # hidden fch and fch_gelu (B, T, 4C)
        ln1, c["ln1"] = layernorm_forward(x, w["ln1w"], w["ln1b"])
        qkv, c["qkv"] = matmul_forward(ln1, w["qkvw"], w["qkvb"])
        atty, c["att"] = attention_forward(qkv, NH)
        attproj, c["attproj"] = matmul_forward(atty, w["attprojw"], w["attprojb"])
        x, c["res1"] = residual_forward(x, attproj)
        ln2, c["ln2"] = layernorm_forward(x, w["ln2w"], w["ln2b"])
        fch, c["fc"] = matmul_forward(ln2, w["fcw"], w["fcb"])
        fch_gelu, c["gelu"] = gelu_forward(fch)
        fcproj, c["fcproj"] = matmul_forward(fch_gelu, w["fcprojw"], w["fcprojb"])
        x, c["res2"] = residual_forward(x, fcproj)
        blocks.append(c)
    lnf, lnf_cache = layernorm_forward(x, p["lnfw"], p["lnfb"])  # (B, T, C)
    fused = fused and targets is not None
    # tied head: the LM head is wte
    if fused:  # no (B, T, V) array: the loss straight from lnf
        loss, head_cache = fused_classifier_forward(lnf, p["wte"], targets)
        logits = None
    else:
        logits, head_cache = matmul_forward(lnf, p["wte"], None)  # (B, T, V)

    cache = {
        "shape": idx.shape,
        "encoder": enc,
        "blocks": blocks,
        "lnf": lnf_cache,
        "lm_head": head_cache,
        "logits": logits,
        "loss": None,
        "fused": fused,
    }
    if fused:
        cache["loss"] = head_cache
        return loss, cache
    loss = None
    if targets is not None:
        loss, cache["loss"] = crossentropy_softmax_forward(logits, targets)
    return loss, cache


def gpt_backward(params, config: GPTConfig, cache) -> dict[str, np.ndarray]:
    """Gradients of the loss of the `gpt_forward` that made `cache`, one per
    parameter.

    Calls every layer's backward in the reverse order of the forward.  The
    gradient buffers start at zero and the backwards add into them, so wte
    receives both of its contributions: from the LM head and from the
    embedding lookup.  The residual stream's gradient `dx` flows straight
    through each `x = x + f(x)` and picks up f's contribution on the way.
    """
    if cache.get("loss") is None:
        raise ValueError(
            "gpt_backward: the forward was run without targets, so there is "
            "no loss to differentiate; call "
            "gpt_forward(params, config, idx, targets)"
        )
    grads = {name: np.zeros_like(a) for name, a in params.items()}
    (B, T), C, dtype = cache["shape"], config.n_embd, params["wte"].dtype

    dlnf = np.zeros((B, T, C), dtype)
    if cache.get("fused"):  # head, softmax and loss in one (chapter 10)
        fused_classifier_backward(dlnf, grads["wte"], 1.0, cache["loss"])
    else:
        dlogits = np.zeros((B, T, config.vocab_size), dtype)
        # d loss / d loss = 1
        crossentropy_softmax_backward(dlogits, 1.0, cache["loss"])
        # first half of dwte
        matmul_backward(dlnf, grads["wte"], None, dlogits, cache["lm_head"])
        del dlogits
    dx = np.zeros((B, T, C), dtype)  # the residual stream
    layernorm_backward(dx, grads["lnfw"], grads["lnfb"], dlnf, cache["lnf"])
    # One set of activation-gradient buffers, reused by every block (zeroed
    # first), as llm.c does: (B, T, C) each, but (B, T, 4C) for the MLP's
    # hidden dfch_gelu and dfch and (B, T, 3C) for dqkv.
    dx_in, dx_mid, dfcproj, dln2, dattproj, datty, dln1 = (
        np.empty((B, T, C), dtype) for _ in range(7)
    )
    dfch_gelu, dfch = (np.empty((B, T, 4 * C), dtype) for _ in range(2))
    dqkv = np.empty((B, T, 3 * C), dtype)
    for l in reversed(range(config.n_layer)):
        c = cache["blocks"][l]
        # views of block l's gradients: the backwards add into grads
        dw = {name: grads[name][l] for name in BLOCK_PARAMETERS}
        # (dx_in is the buffer that held dx one block up: zeroed as well)
        width_c = (dx_in, dx_mid, dfcproj, dln2, dattproj, datty, dln1)
        for buffer in width_c + (dfch_gelu, dfch, dqkv):
            buffer.fill(0)
        # x_out = x_mid + fcproj: dx flows on to x_mid and into the MLP branch.
        residual_backward(dx_mid, dfcproj, dx, c["res2"])
        matmul_backward(
            dfch_gelu, dw["fcprojw"], dw["fcprojb"], dfcproj, c["fcproj"]
        )
        gelu_backward(dfch, dfch_gelu, c["gelu"])
        matmul_backward(dln2, dw["fcw"], dw["fcb"], dfch, c["fc"])
        layernorm_backward(dx_mid, dw["ln2w"], dw["ln2b"], dln2, c["ln2"])
        # x_mid = x_in + attproj: same again for the attention branch.
        residual_backward(dx_in, dattproj, dx_mid, c["res1"])
        matmul_backward(
            datty, dw["attprojw"], dw["attprojb"], dattproj, c["attproj"]
        )
        attention_backward(dqkv, datty, c["att"])
        matmul_backward(dln1, dw["qkvw"], dw["qkvb"], dqkv, c["qkv"])
        layernorm_backward(dx_in, dw["ln1w"], dw["ln1b"], dln1, c["ln1"])
        dx, dx_in = dx_in, dx  # the block's input gradient flows on down
    # second half of dwte
    encoder_backward(grads["wte"], grads["wpe"], dx, cache["encoder"])
    return grads
