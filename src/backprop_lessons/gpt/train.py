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

from .corpus import CharVocab
from .model import GPTConfig, gpt_backward, gpt_forward

__all__ = ["get_batch", "AdamW", "DECAYED", "train", "sample"]


def get_batch(data: np.ndarray, block_size: int, batch_size: int, rng: np.random.Generator):
    """`batch_size` random windows of the token array `data`: inputs x and targets y = x shifted by one.

    data (N,) int -> x (B, T), y (B, T) with T = block_size and y[b, t] = data[start_b + t + 1].
    """
    if data.ndim != 1 or len(data) < block_size + 1:
        raise ValueError(f"get_batch: data must be a 1-d token array longer than block_size="
                         f"{block_size}, got shape {data.shape}")
    starts = rng.integers(0, len(data) - block_size, size=batch_size)  # (B,)
    offsets = np.arange(block_size)                                    # (T,)
    x = data[starts[:, None] + offsets]                                # (B, T)
    y = data[starts[:, None] + offsets + 1]                            # (B, T)
    return x, y


# Weight decay only on the matrices (as nanoGPT does), not on biases or layernorm gains.
DECAYED = frozenset({"wte", "wpe", "qkvw", "attprojw", "fcw", "fcprojw"})


class AdamW:
    """Adam with decoupled weight decay (Loshchilov and Hutter), as
    torch.optim.AdamW.

    For each parameter p with gradient g, at step t = 1, 2, ...:
        m = b1 m + (1 - b1) g,   v = b2 v + (1 - b2) g^2
        p -= lr * ( m / (1 - b1^t) / (sqrt(v / (1 - b2^t)) + eps)  +  wd * p )
    with wd applied only to the names in DECAYED.  The moments m and v are
    kept per parameter name, in the parameters' dtype; they start at zero and,
    as in torch.optim, are created by the first step.
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.95), eps=1e-8,
                 weight_decay=0.1):
        self.lr, self.beta1, self.beta2 = lr, betas[0], betas[1]
        self.eps, self.weight_decay = eps, weight_decay
        self.m, self.v = {}, {}  # name -> array, filled by the first step
        self.t = 0

    def step(self, params, grads) -> None:
        """Update every parameter, and its moments m and v, in place from its
        gradient.

        The formula of the class docstring, in torch.optim.AdamW's order of
        operations: p *= 1 - lr wd; then
        p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps).
        One scratch array per parameter holds each intermediate in turn.
        """
        self.t += 1
        b1, b2, lr = self.beta1, self.beta2, self.lr
        step_size = lr / (1 - b1 ** self.t)         # lr with m's bias correction
        v_correction = math.sqrt(1 - b2 ** self.t)  # sqrt of v's bias correction
        for name, p in params.items():
            if name not in self.m:
                # first step (made now, they sit in memory above this step's
                # arrays and keep the C library from returning that memory to
                # the system)
                self.m[name], self.v[name] = np.zeros_like(p), np.zeros_like(p)
            g, m, v = grads[name], self.m[name], self.v[name]
            tmp = g * (1 - b1)
            m *= b1
            m += tmp                                # m = b1 m + (1 - b1) g
            np.multiply(g, g, out=tmp)
            tmp *= 1 - b2
            v *= b2
            v += tmp                                # v = b2 v + (1 - b2) g^2
            if name in DECAYED and self.weight_decay:
                p *= 1 - lr * self.weight_decay     # decoupled weight decay
            np.sqrt(v, out=tmp)
            tmp /= v_correction
            tmp += self.eps                         # sqrt(v_hat) + eps
            np.divide(m, tmp, out=tmp)
            tmp *= step_size                # lr * m_hat / (sqrt(v_hat) + eps)
            p -= tmp


def train(params, config: GPTConfig, data: np.ndarray, steps: int,
          batch_size: int = 16, lr: float = 3e-3, weight_decay: float = 0.0,
          seed: int = 0, optimizer=None) -> list[float]:
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
        # free this step's arrays now, not during the next forward
        del cache, grads
    return losses


def sample(params, config: GPTConfig, vocab: CharVocab, prompt: str = "\n", n_chars: int = 200,
           temperature: float = 1.0, seed: int = 0) -> str:
    """Continue `prompt` by `n_chars` characters drawn one at a time from the model.

    Each step runs the model on the last block_size tokens and draws the next
    one from softmax(logits / temperature) of the last position (in float64,
    with a seeded generator); temperature 0 takes the most likely token.
    Returns the prompt followed by the new characters.
    """
    if not prompt:
        raise ValueError("sample: the prompt must hold at least one character")
    if temperature < 0:
        raise ValueError(f"sample: temperature must be >= 0, got {temperature}")
    rng = np.random.default_rng(seed)
    ids = list(vocab.encode(prompt))
    for _ in range(n_chars):
        context = np.array(ids[-config.block_size:])[None, :]              # (1, T)
        _, cache = gpt_forward(params, config, context)
        logits = cache["logits"][0, -1].astype(np.float64)                 # (V,)
        if temperature == 0:
            ids.append(int(np.argmax(logits)))
            continue
        z = logits / temperature
        probs = np.exp(z - z.max())
        probs /= probs.sum()
        ids.append(int(min(np.searchsorted(np.cumsum(probs), rng.random(), side="right"),
                           len(probs) - 1)))
    return vocab.decode(ids)
