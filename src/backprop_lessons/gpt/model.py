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
import re
from dataclasses import dataclass

import numpy as np

from ..validate import (
    flag,
    instance_of,
    named_arrays,
    positive_int,
    real_array,
    token_batch,
    token_ids,
)
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
    "Parameter",
    "PARAMETERS",
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


@dataclass(frozen=True)
class Parameter:
    """One row of the parameter table.

    name      llm.c's name, the key of `params` and of the gradients
    shape     in the legend's letters; a leading L means one per block,
              stacked ("L, 3C, C": block l's weight is params["qkvw"][l])
    hf_key    the key of a Hugging Face GPT-2 checkpoint (h.{l}. per block)
    split     how tensor parallelism (Megatron) cuts it: "column" (the rows
              of the weight and the bias), "row" (the columns of the
              weight) or "" (every rank holds it whole)
    """

    name: str
    shape: str
    hf_key: str
    split: str = ""

    @property
    def per_block(self) -> bool:
        return self.shape.startswith("L,")

    @property
    def matrix(self) -> bool:
        """A weight matrix or an embedding (2 axes, per block or not)."""
        return self.shape.count(",") - self.per_block == 1

    @property
    def decayed(self) -> bool:
        """AdamW's weight decay applies (to matrices only, as in nanoGPT)."""
        return self.matrix

    @property
    def conv1d(self) -> bool:
        """GPT-2's checkpoint stores it transposed, (in, out): its linear
        layers are `Conv1D` modules."""
        return self.per_block and self.matrix

    def dims(self, config: GPTConfig) -> tuple[int, ...]:
        """The shape in numbers, for `config`."""
        sizes = {
            "V": config.vocab_size,
            "maxT": config.block_size,
            "C": config.n_embd,
            "L": config.n_layer,
        }
        dims = []
        for axis in self.shape.split(","):
            factor, letter = re.fullmatch(r"\s*(\d*)(\w+)\s*", axis).groups()
            dims.append(int(factor or 1) * sizes[letter])
        return tuple(dims)


# The one table of parameters, in llm.c's order.  Everything else that
# names them derives from it: `parameter_shapes`, `BLOCK_PARAMETERS`, the
# checkpoint's keys and layout (hf_checkpoint), the weight decay
# (train.AdamW), the tensor-parallel split (scale.tensor_parallel).
# fmt: off
PARAMETERS = (
    Parameter("wte",      "V, C",     "wte.weight"),
    Parameter("wpe",      "maxT, C",  "wpe.weight"),
    Parameter("ln1w",     "L, C",     "h.{l}.ln_1.weight"),
    Parameter("ln1b",     "L, C",     "h.{l}.ln_1.bias"),
    Parameter("qkvw",     "L, 3C, C", "h.{l}.attn.c_attn.weight", "column"),
    Parameter("qkvb",     "L, 3C",    "h.{l}.attn.c_attn.bias",   "column"),
    Parameter("attprojw", "L, C, C",  "h.{l}.attn.c_proj.weight", "row"),
    Parameter("attprojb", "L, C",     "h.{l}.attn.c_proj.bias"),
    Parameter("ln2w",     "L, C",     "h.{l}.ln_2.weight"),
    Parameter("ln2b",     "L, C",     "h.{l}.ln_2.bias"),
    Parameter("fcw",      "L, 4C, C", "h.{l}.mlp.c_fc.weight",    "column"),
    Parameter("fcb",      "L, 4C",    "h.{l}.mlp.c_fc.bias",      "column"),
    Parameter("fcprojw",  "L, C, 4C", "h.{l}.mlp.c_proj.weight",  "row"),
    Parameter("fcprojb",  "L, C",     "h.{l}.mlp.c_proj.bias"),
    Parameter("lnfw",     "C",        "ln_f.weight"),
    Parameter("lnfb",     "C",        "ln_f.bias"),
)
# fmt: on

#: (name, GPT-2 key) pairs, the table as chapter 6 prints it.
PARAMETER_TABLE = [(p.name, p.hf_key) for p in PARAMETERS]

#: The parameters of one transformer block: the table's names stacked along L.
BLOCK_PARAMETERS = tuple(p.name for p in PARAMETERS if p.per_block)


def parameter_shapes(config: GPTConfig) -> dict[str, tuple[int, ...]]:
    """Name -> shape for every parameter, in the order of the table.

    As llm.c's `fill_in_parameter_sizes`: the model, the checkpoint loader
    and the distributed trainer all read them here.
    """
    instance_of("parameter_shapes", "config", config, GPTConfig)
    return {p.name: p.dims(config) for p in PARAMETERS}


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
    named_arrays("gpt params", params, parameter_shapes(config))


def _check_tokens(what: str, tokens, config: GPTConfig, shape=None) -> np.ndarray:
    """`tokens` as an int array of shape (B, T), every entry in [0, V),
    T <= block_size."""
    a = token_ids("gpt_forward", what, tokens, config.vocab_size)
    return token_batch("gpt_forward", what, a, config.block_size, shape)


def gpt_forward(params, config: GPTConfig, idx, targets=None, *, fused=False):
    """Run the model on token ids `idx` (B, T); return `(loss, cache)`.

    `loss` is the mean cross-entropy against `targets` (B, T), or None when
    no targets are given (then only `cache["logits"]` (B, T, V) is useful,
    e.g. for sampling).  `cache` holds every layer's cache for `gpt_backward`.
    `fused=True` (with targets) computes the LM head, softmax and loss with
    fused_classifier_forward (chapter 10): the (B, T, V) logits are never
    held, and `cache["logits"]` is None; `gpt_backward` follows the cache.
    """
    fused = flag("gpt_forward", "fused", fused)
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


def gpt_backward(
    params, config: GPTConfig, cache, dlogits=None
) -> dict[str, np.ndarray]:
    """Gradients of the loss of the `gpt_forward` that made `cache`, one per
    parameter.

    Calls every layer's backward in the reverse order of the forward.  The
    gradient buffers start at zero and the backwards add into them, so wte
    receives both of its contributions: from the LM head and from the
    embedding lookup.  The residual stream's gradient `dx` flows straight
    through each `x = x + f(x)` and picks up f's contribution on the way.

    `dlogits` (B, T, V), if given, is the upstream gradient at the logits
    in place of the loss's: the backward then returns J^T dlogits for the
    map from the parameters to the logits (chapter 7's dot-product test).
    It needs the logits held (an unfused forward; targets not needed).
    """
    if dlogits is None and cache.get("loss") is None:
        raise ValueError(
            "gpt_backward: the forward was run without targets, so there is "
            "no loss to differentiate; call "
            "gpt_forward(params, config, idx, targets)"
        )
    grads = {name: np.zeros_like(a) for name, a in params.items()}
    (B, T), C, dtype = cache["shape"], config.n_embd, params["wte"].dtype

    dlnf = np.zeros((B, T, C), dtype)
    if dlogits is not None:  # the VJP of the logits, from a given upstream
        if cache.get("fused"):
            raise ValueError(
                "gpt_backward: dlogits needs the logits, but the forward was "
                "fused (fused=True holds no logits); run it unfused"
            )
        dlogits = real_array("gpt_backward", "dlogits", dlogits, dtype)
        if dlogits.shape != (B, T, config.vocab_size):
            raise ValueError(
                f"gpt_backward: dlogits must have the logits' shape "
                f"{(B, T, config.vocab_size)}, got {dlogits.shape}"
            )
        matmul_backward(dlnf, grads["wte"], None, dlogits, cache["lm_head"])
    elif cache.get("fused"):  # head, softmax and loss in one (chapter 10)
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
