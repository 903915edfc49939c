"""Training the hand-written GPT: seeded batches, AdamW, the loop, and sampling.

Everything is driven by explicit seeds (`numpy.random.default_rng`), so the
same call gives the same batches, the same losses and the same samples.
(In float32 the last bits of a matmul can depend on the BLAS library and its
thread count; print losses rounded to a few decimals.)

    get_batch(data, block_size, batch_size, rng) -> (x, y)       (B, T) each
    AdamW(params, lr, ...).step(params, grads)                    in place
    train(params, config, data, steps, ...) -> list of losses
    sample(params, config, vocab, prompt, n_chars, temperature, seed) -> str

Not here: learning-rate schedules, gradient clipping, evaluation splits -
kept out so the loop stays short enough to read in one screen.
"""

from __future__ import annotations

import math

import numpy as np

from ..data.corpus import CharVocab
from ..numerics import softmax
from ..validate import (
    at_least,
    instance_of,
    nonempty_text,
    numpy_generator,
    positive_int,
    real_number,
    token_stream,
)
from .model import PARAMETERS, GPTConfig, gpt_backward, gpt_forward

__all__ = ["get_batch", "AdamW", "DECAYED", "train", "sample"]


def get_batch(data: np.ndarray, block_size: int, batch_size: int, rng):
    """`batch_size` random windows of the token array `data`: inputs x and
    targets y = x shifted by one.

    data (N,) int -> x (B, T), y (B, T) with T = block_size and
    y[b, t] = data[start_b + t + 1]; `rng` is a numpy.random.Generator.
    """
    block_size = positive_int("get_batch", "block_size", block_size)
    batch_size = positive_int("get_batch", "batch_size", batch_size)
    data = token_stream("get_batch", "data", data, block_size)
    numpy_generator("get_batch", "rng", rng)
    starts = rng.integers(0, len(data) - block_size, size=batch_size)  # (B,)
    offsets = np.arange(block_size)  # (T,)
    x = data[starts[:, None] + offsets]  # (B, T)
    y = data[starts[:, None] + offsets + 1]  # (B, T)
    return x, y


# Weight decay only on the matrices (as nanoGPT does), not on biases or
# layernorm gains: the table's `decayed` parameters.
DECAYED = frozenset(p.name for p in PARAMETERS if p.decayed)


class AdamW:
    """Adam with decoupled weight decay (Loshchilov and Hutter), as
    torch.optim.AdamW.

    For each parameter p with gradient g, at step t = 1, 2, ...:
        m = b1 m + (1 - b1) g,   v = b2 v + (1 - b2) g^2
        p -= lr * ( m / (1 - b1^t) / (sqrt(v / (1 - b2^t)) + eps)  +  wd * p )
    with wd applied only to the names in DECAYED.  The moments m and v of
    every parameter in `params` start at zero, in the parameter's dtype.
    """

    def __init__(
        self, params, lr=1e-3, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1
    ):
        self.lr, (self.beta1, self.beta2) = lr, betas
        self.eps, self.weight_decay = eps, weight_decay
        self.m = {name: np.zeros_like(p) for name, p in params.items()}
        self.v = {name: np.zeros_like(p) for name, p in params.items()}
        self.t = 0

    def step(self, params, grads, lr: float | None = None) -> None:
        """Update every parameter, and its moments m and v, in place from its
        gradient: the formula of the class docstring, in torch.optim.AdamW's
        order of operations (p *= 1 - lr wd first).  `lr`, if given, is this
        step's learning rate (a schedule's), else the optimizer's."""
        if set(grads) != set(self.m) or set(params) != set(self.m):
            raise ValueError(
                "AdamW.step: params and grads must have the names the optimizer "
                f"was made for, {sorted(self.m)}; got params {sorted(params)} "
                f"and grads {sorted(grads)}"
            )
        self.t += 1
        b1, b2, wd = self.beta1, self.beta2, self.weight_decay
        lr = self.lr if lr is None else lr
        step_size = lr / (1 - b1**self.t)  # lr with m's bias correction
        v_correction = math.sqrt(1 - b2**self.t)  # sqrt of v's bias correction
        for name, p in params.items():
            g, m, v = grads[name], self.m[name], self.v[name]
            m *= b1
            m += (1 - b1) * g  # m = b1 m + (1 - b1) g
            v *= b2
            v += (1 - b2) * (g * g)  # v = b2 v + (1 - b2) g^2
            if name in DECAYED and wd:
                p *= 1 - lr * wd  # decoupled weight decay
            # p -= lr m_hat / (sqrt(v_hat) + eps), bracketed as torch does it
            p -= step_size * (m / (np.sqrt(v) / v_correction + self.eps))


def train(
    params,
    config: GPTConfig,
    data: np.ndarray,
    steps: int,
    batch_size: int = 16,
    lr: float = 3e-3,
    weight_decay: float = 0.0,
    seed: int = 0,
    optimizer=None,
) -> list[float]:
    """`steps` AdamW steps on random batches of `data` (token ids); returns
    every step's loss.

    `params` are updated in place.  Pass an `optimizer` to continue a run
    with its moments; otherwise a fresh AdamW is made.
    """
    rng = np.random.default_rng(seed)
    opt = optimizer or AdamW(params, lr=lr, weight_decay=weight_decay)
    losses = []
    for _ in range(steps):
        x, y = get_batch(data, config.block_size, batch_size, rng)
        loss, cache = gpt_forward(params, config, x, y)
        grads = gpt_backward(params, config, cache)
        opt.step(params, grads)
        losses.append(loss)
        # drop this step's activations before the next forward makes its own:
        # the peak memory is then one step's, not two
        del cache, grads
    return losses


def sample(
    params,
    config: GPTConfig,
    vocab: CharVocab,
    prompt: str = "\n",
    n_chars: int = 200,
    temperature: float = 1.0,
    seed: int = 0,
) -> str:
    """Continue `prompt` by `n_chars` characters drawn one at a time from the
    model.

    Each step runs the model on the last block_size tokens and draws the next
    one from softmax(logits / temperature) of the last position (in float64,
    with a seeded generator); temperature 0 takes the most likely token.
    Returns the prompt followed by the new characters.
    """
    instance_of("sample", "config", config, GPTConfig)
    instance_of("sample", "vocab", vocab, CharVocab)
    nonempty_text("sample", "prompt", prompt)
    temperature = real_number("sample", "temperature", temperature)
    at_least("sample", "temperature", temperature, 0)
    n_chars = positive_int("sample", "n_chars", n_chars, minimum=0)
    rng = np.random.default_rng(seed)
    ids = list(vocab.encode(prompt))
    for _ in range(n_chars):
        context = np.array(ids[-config.block_size :])[None, :]  # (1, T)
        _, cache = gpt_forward(params, config, context)
        logits = cache["logits"][0, -1].astype(np.float64)  # (V,)
        if temperature == 0:
            ids.append(int(np.argmax(logits)))
            continue
        probs = softmax(logits / temperature)  # (V,)
        # the first token whose cumulative probability passes a uniform draw
        # (min: rounding may leave the total a hair below the draw)
        i = np.searchsorted(np.cumsum(probs), rng.random(), side="right")
        ids.append(int(min(i, len(probs) - 1)))
    return vocab.decode(ids)
