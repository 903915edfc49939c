"""microgpt's model in NumPy with a hand-written backward: the twin of the
scalar model in `microgpt.model`.

It is assembled from the forward/backward pairs of `gpt/layers.py` (encoder,
rmsnorm, matmul, attention, residual, the fused softmax cross-entropy), as
chapter 6's GPT-2 style model is, so each layer's backward stays written
once; imports go one way, microgpt -> gpt.  The one layer microgpt has and
GPT-2 does not, ReLU, is here as a pair.  The parameter table, the
vocabulary, the initial weights and the order of the training names come
from `microgpt.model`: same names, same shapes, same numbers.

The KV cache, seen as arrays: microgpt reads one token at a time and
appends its key and value to a list; here the keys and values of all T
positions are computed at once, as (T, C) arrays, and row t of the causal
attention reads their first t + 1 rows - the cache as it was at position t.
Same numbers, one call instead of T.

Shape legend: T positions (the name plus the BOS before it), C n_embd,
V vocab_size, NH n_head; B = 1 (one name per step, as microgpt).

    params_from_model(model)               float64 arrays under the table's names
    micro_forward(params, config, tokens)  -> loss, cache
    micro_backward(params, config, cache)  -> grads (same names)
    relu_forward / relu_backward
    train, sample                          microgpt's loop (with gpt.train.AdamW)
                                           and sampler
    compare_with_scalar, time_scalar_vs_numpy   the checks the appendix prints
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..gpt.layers import (
    attention_backward,
    attention_forward,
    crossentropy_softmax_backward,
    crossentropy_softmax_forward,
    encoder_backward,
    encoder_forward,
    matmul_backward,
    matmul_forward,
    residual_backward,
    residual_forward,
    rmsnorm_backward,
    rmsnorm_forward,
)
from ..gpt.train import AdamW
from ..gradcheck import CheckTable, compare_arrays
from ..scalar import zero_grad
from ..validate import instance_of, positive_int, real_number, token_ids
from .model import MicroGPT, MicroGPTConfig, NameVocab, paused_gc, train_order

__all__ = [
    "params_from_model",
    "load_into_model",
    "relu_forward",
    "relu_backward",
    "micro_forward",
    "micro_backward",
    "train",
    "sample",
    "compare_with_scalar",
    "SpeedComparison",
    "time_scalar_vs_numpy",
]


def params_from_model(model: MicroGPT) -> dict[str, np.ndarray]:
    """The scalar model's current parameters as float64 arrays (copies)."""
    instance_of("params_from_model", "model", model, MicroGPT)
    return {
        name: np.array(m, dtype=np.float64)
        for name, m in model.float_state().items()
    }


def load_into_model(params: dict[str, np.ndarray], model: MicroGPT) -> None:
    """Copy arrays (e.g. the twin's trained parameters) into the scalar
    model's Values, in place: the inverse of `params_from_model`."""
    instance_of("load_into_model", "model", model, MicroGPT)
    state = model.state
    if not isinstance(params, dict) or set(params) != set(state):
        got = sorted(params) if isinstance(params, dict) else type(params)
        raise ValueError(
            f"load_into_model: expected the keys {sorted(state)}, got {got}"
        )
    for name, matrix in state.items():
        shape = (len(matrix), len(matrix[0]))
        if np.shape(params[name]) != shape:
            raise ValueError(
                f"load_into_model: {name} must have shape {shape}, "
                f"got {np.shape(params[name])}"
            )
        for row, numbers in zip(matrix, params[name], strict=True):
            for value, number in zip(row, numbers, strict=True):
                value.data = float(number)


# ---- relu: the layer GPT-2 does not have -------------------------------------


def relu_forward(inp):
    """out = max(x, 0).  inp (B, T, 4C) -> out (B, T, 4C); cache: inp."""
    return np.maximum(inp, 0.0), inp


def relu_backward(dinp, dout, cache):
    """dinp += dout where x > 0 or NaN (the kink at 0 gets 0, a NaN passes
    dout on: Value.relu's rule).  dinp (B, T, 4C), dout (B, T, 4C)."""
    dinp += np.where(cache <= 0.0, 0.0, dout)


# ---- the model ---------------------------------------------------------------


def _check_tokens(tokens, config: MicroGPTConfig):
    """(1, T) inputs and (1, T) targets from T + 1 token ids."""
    a = token_ids("micro_forward", "tokens", tokens, config.vocab_size)
    if a.ndim != 1:
        raise ValueError(
            f"micro_forward: tokens must be a 1-d sequence of integer ids, "
            f"got shape {a.shape}"
        )
    if not 2 <= len(a) <= config.block_size + 1:
        raise ValueError(
            f"micro_forward: need 2 to block_size + 1 = "
            f"{config.block_size + 1} tokens, got {len(a)}"
        )
    return a[None, :-1], a[None, 1:]


def _layer(params, l: int, name: str):
    return params[f"layer{l}.{name}"]


def micro_forward(params, config: MicroGPTConfig, tokens):
    """The mean cross-entropy of `tokens` (T + 1 ids: [BOS, ..., BOS]) and
    the cache for `micro_backward`.  Each line is one layer of
    `backprop_lessons.microgpt.model.forward_token`, for all T positions at once.
    """
    idx, targets = _check_tokens(tokens, config)  # (1, T) each
    p, NH, cache = params, config.n_head, {"blocks": []}
    x, cache["encoder"] = encoder_forward(p["wte"], p["wpe"], idx)  # (1, T, C)
    x, cache["ln0"] = rmsnorm_forward(x)  # (1, T, C)
    for l in range(config.n_layer):
        c = {}
        h, c["ln1"] = rmsnorm_forward(x)  # (1, T, C)
        wqkv = np.concatenate(
            [
                _layer(p, l, "attn_wq"),
                _layer(p, l, "attn_wk"),
                _layer(p, l, "attn_wv"),
            ]
        )  # (3C, C)
        qkv, c["qkv"] = matmul_forward(h, wqkv, None)  # (1, T, 3C)
        y, c["att"] = attention_forward(qkv, NH)  # (1, T, C)
        o, c["wo"] = matmul_forward(y, _layer(p, l, "attn_wo"), None)
        x, _ = residual_forward(x, o)  # (1, T, C)
        h, c["ln2"] = rmsnorm_forward(x)  # (1, T, C)
        f, c["fc1"] = matmul_forward(h, _layer(p, l, "mlp_fc1"), None)
        f, c["relu"] = relu_forward(f)  # (1, T, 4C)
        m, c["fc2"] = matmul_forward(f, _layer(p, l, "mlp_fc2"), None)
        x, _ = residual_forward(x, m)  # (1, T, C)
        cache["blocks"].append(c)
    logits, cache["lm_head"] = matmul_forward(x, p["lm_head"], None)  # (1, T, V)
    loss, cache["loss"] = crossentropy_softmax_forward(logits, targets)
    cache["logits"] = logits
    return loss, cache


def micro_backward(params, config: MicroGPTConfig, cache) -> dict:
    """Every parameter's gradient of the loss of `micro_forward`: the layer
    backwards in the reverse order of the forward, adding into zeroed
    buffers (the residual stream's gradient dx collects both branches)."""
    grads = {name: np.zeros_like(a) for name, a in params.items()}
    T, C = cache["logits"].shape[1], config.n_embd

    def zeros(n):
        return np.zeros((1, T, n))  # (1, T, n)

    dlogits = zeros(config.vocab_size)
    crossentropy_softmax_backward(dlogits, 1.0, cache["loss"])
    dx = zeros(C)
    matmul_backward(dx, grads["lm_head"], None, dlogits, cache["lm_head"])
    for l in reversed(range(config.n_layer)):
        c, g = cache["blocks"][l], lambda name, l=l: grads[f"layer{l}.{name}"]
        dx_mid, dm, df, dh = zeros(C), zeros(C), zeros(4 * C), zeros(C)
        residual_backward(dx_mid, dm, dx)  # x_out = x_mid + mlp(x_mid)
        dr = zeros(4 * C)
        matmul_backward(dr, g("mlp_fc2"), None, dm, c["fc2"])
        relu_backward(df, dr, c["relu"])
        matmul_backward(dh, g("mlp_fc1"), None, df, c["fc1"])
        rmsnorm_backward(dx_mid, None, dh, c["ln2"])
        dx_in, do, dy = zeros(C), zeros(C), zeros(C)
        residual_backward(dx_in, do, dx_mid)  # x_mid = x_in + attn(x_in)
        matmul_backward(dy, g("attn_wo"), None, do, c["wo"])
        dqkv, dwqkv, dh = zeros(3 * C), np.zeros((3 * C, C)), zeros(C)
        attention_backward(dqkv, dy, c["att"])
        matmul_backward(dh, dwqkv, None, dqkv, c["qkv"])
        for i, name in enumerate(("attn_wq", "attn_wk", "attn_wv")):
            g(name)[...] += dwqkv[i * C : (i + 1) * C]  # (C, C)
        rmsnorm_backward(dx_in, None, dh, c["ln1"])
        dx = dx_in
    demb = zeros(C)
    rmsnorm_backward(demb, None, dx, cache["ln0"])
    encoder_backward(grads["wte"], grads["wpe"], demb, cache["encoder"])
    return grads


# ---- training and sampling ---------------------------------------------------


def train(
    params: dict,
    config: MicroGPTConfig,
    vocab: NameVocab,
    names: Sequence[str],
    steps: int,
    lr: float = 0.01,
    betas=(0.85, 0.99),
    seed: int = 0,
    optimizer: AdamW | None = None,
) -> list[float]:
    """microgpt.train on arrays: the same names in the same order, the same
    decaying rate, updating `params` in place; returns every step's loss.
    The optimizer is the book's one NumPy Adam, `gpt.train.AdamW`, without
    weight decay: microgpt's Adam, to rounding."""
    opt = optimizer or AdamW(params, lr, betas, eps=1e-8, weight_decay=0.0)
    order = train_order(names, seed)
    losses = []
    for i in range(steps):
        loss, cache = micro_forward(
            params, config, vocab.encode(order[i % len(order)])
        )
        opt.step(
            params, micro_backward(params, config, cache), lr * (1.0 - i / steps)
        )
        losses.append(loss)
    return losses


def sample(
    params: dict,
    config: MicroGPTConfig,
    vocab: NameVocab,
    n: int = 10,
    temperature: float = 0.5,
    seed: int = 0,
) -> list[str]:
    """MicroGPT.sample on arrays: the same draws from the same generator."""
    instance_of("sample", "config", config, MicroGPTConfig)
    instance_of("sample", "vocab", vocab, NameVocab)
    temperature = real_number("sample", "temperature", temperature)
    n = positive_int("sample", "n", n, minimum=0)
    if not temperature > 0:
        raise ValueError(f"sample: temperature must be > 0, got {temperature!r}")
    rng, names = random.Random(seed), []
    for _ in range(n):
        ids = [vocab.bos]
        while len(ids) <= config.block_size:
            # the logits of the last position; a dummy target makes T + 1 ids
            _, cache = micro_forward(params, config, ids + [vocab.bos])
            z = cache["logits"][0, -1] / temperature  # (V,)
            probs = np.exp(z - z.max())
            token = rng.choices(range(len(z)), weights=probs.tolist())[0]
            if token == vocab.bos:
                break
            ids.append(token)
        names.append(vocab.decode(ids))
    return names


# ---- the checks the chapter prints -------------------------------------------


def compare_with_scalar(
    model: MicroGPT, name: str, tol: float = 1e-12
) -> CheckTable:
    """Backward of `name` on both engines, from the model's current weights:
    one row per matrix, max|a - b| / max(|a|, |b|) against `tol`."""
    instance_of("compare_with_scalar", "model", model, MicroGPT)
    zero_grad(model.params)
    scalar_loss = model.loss(name)
    scalar_loss.backward()
    params = params_from_model(model)
    loss, cache = micro_forward(params, model.config, model.encode(name))
    grads = micro_backward(params, model.config, cache)
    table = CheckTable("scalar engine vs NumPy twin")
    table.rows.append(compare_arrays("loss", loss, scalar_loss.data, tol))
    for key, g in model.gradients().items():
        table.rows.append(compare_arrays(key, grads[key], g, tol))
    return table


@dataclass(frozen=True)
class SpeedComparison:
    """Seconds for one name's forward + backward on each engine (best of
    several, taken in turns); an illustration of the machine it ran on."""

    scalar: float
    numpy: float

    @property
    def ratio(self) -> float:
        return self.scalar / self.numpy


def time_scalar_vs_numpy(
    model: MicroGPT, name: str, repeats: int = 5, numpy_runs: int = 20
) -> SpeedComparison:
    """Validate (gradients equal to 1e-12), then time both engines in turns:
    one scalar step, then the best of `numpy_runs` NumPy steps, `repeats`
    times; the fastest of each side is kept.  The cyclic garbage collector
    is paused, as `microgpt.train` runs (see `microgpt.paused_gc`)."""
    instance_of("time_scalar_vs_numpy", "model", model, MicroGPT)
    check = compare_with_scalar(model, name)
    if not check.passed:
        raise RuntimeError(
            f"time_scalar_vs_numpy: the two engines disagree, "
            f"nothing timed\n{check}"
        )
    params, tokens = params_from_model(model), model.encode(name)
    best_scalar = best_numpy = math.inf
    with paused_gc():
        for _ in range(repeats):
            best_scalar, best_numpy = _time_turn(
                model, name, params, tokens, numpy_runs, best_scalar, best_numpy
            )
    return SpeedComparison(best_scalar, best_numpy)


def _time_turn(
    model, name, params, tokens, numpy_runs, best_scalar, best_numpy
) -> tuple[float, float]:
    """One scalar step, then `numpy_runs` NumPy steps; the minima so far."""
    zero_grad(model.params)
    t0 = time.perf_counter()
    model.loss(name).backward()
    best_scalar = min(best_scalar, time.perf_counter() - t0)
    for _ in range(numpy_runs):
        t0 = time.perf_counter()
        _, cache = micro_forward(params, model.config, tokens)
        micro_backward(params, model.config, cache)
        best_numpy = min(best_numpy, time.perf_counter() - t0)
    return best_scalar, best_numpy
