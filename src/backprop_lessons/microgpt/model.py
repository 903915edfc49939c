"""microgpt's model rebuilt on the scalar engine: a GPT with one `Value` per
number.

A. Karpathy's microgpt (2026) trains a GPT on a list of names in about two
hundred lines of plain Python, with a scalar autograd engine like this
book's.  This module rebuilds its architecture on `backprop_lessons.Value`
so the book can measure it: how many parameters, how many nodes one name
creates, how many chain-rule steps its backward takes, what finite
differences would cost.  The code is written for this book; only the
architecture and the hyperparameters follow microgpt.

The model, for the token at position t (C = n_embd, NH = n_head,
hs = C // NH, V = vocab_size; the numbers on the right are vector lengths):

    x = rmsnorm(wte[token] + wpe[t])                          C
    for each layer l:
        h = rmsnorm(x)                                        C
        q, k, v = attn_wq h, attn_wk h, attn_wv h             C each
        append k and v to the KV cache of layer l             (t+1) x C each
        per head: a = softmax(q_h . k_h[s] / sqrt(hs), s <= t)  t+1
                  y_h = sum_s a[s] v_h[s]                     hs
        x = x + attn_wo y                                     C
        x = x + mlp_fc2 relu(mlp_fc1 rmsnorm(x))              4C inside
    logits = lm_head x                                        V

RMSNorm has no weights, no matrix has a bias, and lm_head is a matrix of its
own (not tied to wte).  One token at a time, as microgpt's
`gpt(token_id, pos_id, keys, values)`: the KV cache holds the keys and
values of the positions read so far, and they are live Values, so the
backward runs through them.  A name is read as [BOS, letters..., BOS]; the
loss is the mean over its positions of -log p(next token).

The functions of the model work on Values (a graph to differentiate) and on
plain floats (no graph: sampling and finite differences at the cost of the
arithmetic alone): the same code, two number types.

    MicroGPTConfig, parameter_shapes           sizes, and the parameter table
    NameVocab                                           the characters (names
                                                        from data.names)
    forward_token, sequence_loss, KVCache               the model
    MicroGPT(seed=0)                                    parameters + methods
    Adam, train                                         microgpt's optimizer
    measurements: parameter_table, count_name_graph, finite_difference_cost,
        check_gradients, time_per_name

References: A. Karpathy, microgpt.py and "microgpt" (blog post, 12 Feb
2026); Zhang and Sennrich 2019 (RMSNorm); Kingma and Ba 2015 (Adam).
"""

from __future__ import annotations

import contextlib
import gc
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

from ..data.names import load_names
from ..scalar import Value, zero_grad
from ..validate import instance_of, positive_int, real_number, token_ids

__all__ = [
    "MicroGPTConfig",
    "parameter_shapes",
    "num_parameters",
    "NameVocab",
    "KVCache",
    "forward_token",
    "sequence_loss",
    "MicroGPT",
    "Adam",
    "train",
    "train_order",
    "paused_gc",
    "RMSNORM_EPS",
    "INIT_STD",
]

RMSNORM_EPS = 1e-5  # as microgpt
INIT_STD = 0.08  # every weight starts as gauss(0, 0.08), as in microgpt


# ---- sizes and parameter names -----------------------------------------------


@dataclass(frozen=True)
class MicroGPTConfig:
    """Sizes: vocab_size V (letters + BOS), block_size (most positions),
    n_layer, n_head NH, n_embd C.  The defaults are microgpt's."""

    vocab_size: int = 27
    block_size: int = 16
    n_layer: int = 1
    n_head: int = 4
    n_embd: int = 16

    def __post_init__(self):
        for name in ("vocab_size", "block_size", "n_layer", "n_head", "n_embd"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(
                    f"MicroGPTConfig: {name} must be a positive "
                    f"int, got {value!r}"
                )
        if self.vocab_size < 2:
            raise ValueError(
                "MicroGPTConfig: vocab_size must be at least 2 "
                f"(a character and BOS), got {self.vocab_size}"
            )
        if self.n_embd % self.n_head:
            raise ValueError(
                f"MicroGPTConfig: n_embd={self.n_embd} must be "
                f"divisible by n_head={self.n_head}"
            )


def parameter_shapes(config: MicroGPTConfig) -> dict[str, tuple[int, int]]:
    """The parameter table: microgpt's name -> (rows, columns) for every
    matrix, in microgpt's order (the layer entries repeat for l = 0 ..
    n_layer - 1).  Every matrix maps a vector of length `columns` to one of
    length `rows`.

    Written out once, as llm.c's `fill_in_parameter_sizes` does; the model,
    its measurements and its NumPy twin all read them here.
    """
    instance_of("parameter_shapes", "config", config, MicroGPTConfig)
    V, maxT, C = config.vocab_size, config.block_size, config.n_embd
    shapes = {
        "wte": (V, C),  # token embeddings, one row a token
        "wpe": (maxT, C),  # position embeddings, one row a t
    }
    for l in range(config.n_layer):
        shapes[f"layer{l}.attn_wq"] = (C, C)  # query
        shapes[f"layer{l}.attn_wk"] = (C, C)  # key
        shapes[f"layer{l}.attn_wv"] = (C, C)  # value
        shapes[f"layer{l}.attn_wo"] = (C, C)  # the heads' output
        shapes[f"layer{l}.mlp_fc1"] = (4 * C, C)  # up to 4C channels
        shapes[f"layer{l}.mlp_fc2"] = (C, 4 * C)  # back to C
    shapes["lm_head"] = (V, C)  # logits = lm_head x (not tied)
    return shapes


def num_parameters(config: MicroGPTConfig) -> int:
    """How many numbers the model learns: V C + maxT C + 12 C^2 L + V C."""
    instance_of("num_parameters", "config", config, MicroGPTConfig)
    return sum(r * c for r, c in parameter_shapes(config).values())


# ---- the characters of the names (data.names.load_names) ---------------------


class NameVocab:
    """Characters <-> token ids, plus BOS: the characters of `names` get ids
    0 .. n-1 in sorted order, and BOS (a name's beginning and end) gets n."""

    def __init__(self, names: Sequence[str]):
        if isinstance(names, str) or not names:
            raise ValueError(
                "NameVocab: expected a non-empty list of names, "
                f"got {names!r:.40}"
            )
        self.chars = sorted(set("".join(names)))
        self.stoi = {ch: i for i, ch in enumerate(self.chars)}
        self.bos = len(self.chars)

    def __len__(self) -> int:
        return len(self.chars) + 1

    def __repr__(self) -> str:
        return (
            f"NameVocab({len(self)} tokens: {''.join(self.chars)!r} "
            f"and BOS={self.bos})"
        )

    def encode(self, name: str) -> list[int]:
        """[BOS, ids of the characters..., BOS]; a clear error for bad input."""
        if not isinstance(name, str):
            raise TypeError(
                f"NameVocab.encode: a name must be a str, got "
                f"{type(name).__name__} {name!r}"
            )
        if not name:
            raise ValueError(
                "NameVocab.encode: the name is empty (a name "
                "needs at least one character)"
            )
        missing = sorted(set(name) - set(self.stoi))
        if missing:
            raise ValueError(
                f"NameVocab.encode: {name!r} has characters "
                f"outside the vocabulary {missing}; the vocabulary "
                f"is {''.join(self.chars)!r}"
            )
        return [self.bos] + [self.stoi[ch] for ch in name] + [self.bos]

    def decode(self, ids: Sequence[int]) -> str:
        """The characters of `ids`, with BOS left out."""
        ids = token_ids("NameVocab.decode", "ids", ids, len(self)).tolist()
        return "".join(self.chars[i] for i in ids if i != self.bos)


# ---- the model: functions of numbers (Values or floats) ----------------------
# exp, log and relu of a Value (a new node) or of a float (just a number).


def _exp(x):
    return x.exp() if isinstance(x, Value) else math.exp(x)


def _log(x):
    return x.log() if isinstance(x, Value) else math.log(x)


def _relu(x):
    # NaN stays NaN, as Value.relu (and PyTorch) keep it
    return x.relu() if isinstance(x, Value) else (0.0 if x <= 0.0 else x)


def _plain(x) -> float:
    """The float of a Value (its data) or of a float."""
    return x.data if isinstance(x, Value) else x


def _total(xs):
    """xs[0] + xs[1] + ...: Python's sum() would start from 0 and so add one
    constant node and one + node per call."""
    it = iter(xs)
    total = next(it)
    for x in it:
        total = total + x
    return total


def _dot(ws, xs):
    """sum_i ws[i] xs[i]: n * nodes and n - 1 + nodes for n terms."""
    return _total(w * x for w, x in zip(ws, xs))


def linear(x, w):
    """w x, one dot product per row: x has C numbers, w is OC rows of C."""
    return [_dot(row, x) for row in w]


def rmsnorm(x):
    """x / sqrt(mean(x^2) + eps), no weight (as microgpt)."""
    rstd = (_dot(x, x) * (1.0 / len(x)) + RMSNORM_EPS) ** -0.5
    return [xi * rstd for xi in x]


def softmax(scores):
    """exp(s - max) / sum: the max is a plain float, a constant for the graph
    (subtracting it changes no gradient), and 1/sum is made once."""
    top = max(_plain(s) for s in scores)
    exps = [_exp(s - top) for s in scores]
    inv_total = _total(exps) ** -1
    return [e * inv_total for e in exps]


def cross_entropy(logits, target: int):
    """-log softmax(logits)[target] = log sum_j exp(z_j - m) - (z_target - m),
    m = max z: the log of a sum of exps, never the log of a rounded-off
    probability, and no probabilities made for the other tokens."""
    top = max(_plain(z) for z in logits)
    log_total = _log(_total(_exp(z - top) for z in logits))
    return log_total - (logits[target] - top)


@dataclass
class KVCache:
    """The keys and values of the positions read so far: keys[l][s] is the
    key vector (C numbers) of position s in layer l, values[l][s] its value."""

    keys: list
    values: list

    @classmethod
    def empty(cls, n_layer: int) -> KVCache:
        """A cache with no positions yet, for a model of n_layer layers."""
        return cls([[] for _ in range(n_layer)], [[] for _ in range(n_layer)])


def attention(q, keys, values, n_head: int):
    """Causal multi-head attention of one query over the cached positions.

    q (C), keys and values: one (C) vector per position read so far -> (C).
    The cache holds exactly the positions s <= t, so no mask is needed.
    """
    hs = len(q) // n_head
    scale = 1.0 / math.sqrt(hs)
    out = []
    for h in range(n_head):
        lo, hi = h * hs, (h + 1) * hs
        scores = [_dot(q[lo:hi], k[lo:hi]) * scale for k in keys]  # t+1
        weights = softmax(scores)  # t+1
        out += [
            _dot(weights, [v[i] for v in values])  # hs
            for i in range(lo, hi)
        ]
    return out


def forward_token(
    state: dict,
    config: MicroGPTConfig,
    token_id: int,
    pos_id: int,
    cache: KVCache,
) -> list:
    """The logits (V) of the token after `token_id` at position `pos_id`.

    microgpt's gpt(token_id, pos_id, keys, values): appends this position's
    key and value to `cache` (one list per layer) and attends over all of
    them.  `state` maps the table's names to matrices (lists of rows) of
    Values or of floats; the logits are of the same type.
    """
    x = [t + p for t, p in zip(state["wte"][token_id], state["wpe"][pos_id])]
    x = rmsnorm(x)  # C
    for l in range(config.n_layer):
        w = {
            name: state[f"layer{l}.{name}"]
            for name in (
                "attn_wq",
                "attn_wk",
                "attn_wv",
                "attn_wo",
                "mlp_fc1",
                "mlp_fc2",
            )
        }
        h = rmsnorm(x)  # C
        cache.keys[l].append(linear(h, w["attn_wk"]))  # C
        cache.values[l].append(linear(h, w["attn_wv"]))  # C
        y = attention(
            linear(h, w["attn_wq"]), cache.keys[l], cache.values[l], config.n_head
        )  # C
        x = [a + b for a, b in zip(x, linear(y, w["attn_wo"]))]  # C
        h = [_relu(u) for u in linear(rmsnorm(x), w["mlp_fc1"])]  # 4C
        x = [a + b for a, b in zip(x, linear(h, w["mlp_fc2"]))]  # C
    return linear(x, state["lm_head"])  # V


def sequence_loss(state: dict, config: MicroGPTConfig, tokens: Sequence[int]):
    """Mean over positions t of -log p(tokens[t+1] | tokens[:t+1]).

    tokens holds n + 1 ids (n positions to predict, n <= block_size); the
    loss is a Value when `state` holds Values, a float when it holds floats.
    """
    instance_of("sequence_loss", "config", config, MicroGPTConfig)
    n = len(tokens) - 1
    if not 1 <= n <= config.block_size:
        raise ValueError(
            f"sequence_loss: need 2 to block_size + 1 = "
            f"{config.block_size + 1} tokens, got {len(tokens)}"
        )
    cache = KVCache.empty(config.n_layer)
    losses = [
        cross_entropy(
            forward_token(state, config, tokens[t], t, cache), tokens[t + 1]
        )
        for t in range(n)
    ]
    return _total(losses) * (1.0 / n)


# ---- the model object --------------------------------------------------------


class MicroGPT:
    """microgpt's GPT with every parameter a `Value`.

    MicroGPT(seed=0) makes microgpt's default model (1 layer, 4 heads, 16
    channels, 16 positions) over the characters of the shipped names plus
    BOS.  Every weight is drawn as random.gauss(0, 0.08) from
    random.Random(seed), in the order of `parameter_shapes`, so a seed always
    gives the same model on every machine.

        .params        every parameter Value, in table order
        .state         name -> matrix (list of rows) of those Values
        .loss(name)    the mean cross-entropy of a name, a Value to backward
        .sample(...)   new names, drawn from the model (seeded)
    """

    def __init__(
        self,
        seed: int = 0,
        *,
        config: MicroGPTConfig | None = None,
        vocab: NameVocab | None = None,
    ):
        self.vocab = vocab or NameVocab(load_names())
        self.config = config or MicroGPTConfig(vocab_size=len(self.vocab))
        if self.config.vocab_size != len(self.vocab):
            raise ValueError(
                f"MicroGPT: config.vocab_size="
                f"{self.config.vocab_size} but the vocabulary "
                f"has {len(self.vocab)} tokens (characters + BOS)"
            )
        rng = random.Random(seed)
        self.state = {
            name: [
                [Value(rng.gauss(0.0, INIT_STD)) for _ in range(c)]
                for _ in range(r)
            ]
            for name, (r, c) in parameter_shapes(self.config).items()
        }
        self.params = [p for m in self.state.values() for row in m for p in row]

    def __repr__(self) -> str:
        c = self.config
        return (
            f"MicroGPT({len(self.params):,} parameters: vocab "
            f"{c.vocab_size}, block {c.block_size}, {c.n_layer} layer(s), "
            f"{c.n_head} heads, {c.n_embd} channels)"
        )

    def encode(self, name: str) -> list[int]:
        """[BOS, characters..., BOS], checked against the vocabulary and the
        block size (a name may have at most block_size - 1 characters)."""
        tokens = self.vocab.encode(name)
        if len(tokens) - 1 > self.config.block_size:
            raise ValueError(
                f"MicroGPT: {name!r} has {len(name)} characters; "
                f"this model reads at most block_size - 1 = "
                f"{self.config.block_size - 1}"
            )
        return tokens

    def loss(self, name: str) -> Value:
        """The mean cross-entropy of `name` as a Value: call .backward() on it."""
        return sequence_loss(self.state, self.config, self.encode(name))

    def float_state(self) -> dict:
        """The parameters' current data as plain floats, in the same nesting."""
        return {
            k: [[p.data for p in row] for row in m] for k, m in self.state.items()
        }

    def loss_value(self, name: str, state: dict | None = None) -> float:
        """The loss of `name` on floats (no graph): `state` defaults to the
        model's own float_state()."""
        state = state if state is not None else self.float_state()
        return sequence_loss(state, self.config, self.encode(name))

    def gradients(self) -> dict:
        """The .grad of every parameter, name -> matrix (list of rows)."""
        return {
            k: [[p.grad for p in row] for row in m] for k, m in self.state.items()
        }

    def sample(
        self, n: int = 10, temperature: float = 0.5, seed: int = 0
    ) -> list[str]:
        """`n` names drawn one character at a time from softmax(logits / T).

        Starts from BOS and stops at BOS or after block_size tokens.  Runs on
        floats (no graph); random.Random(seed).choices draws the tokens.
        """
        temperature = real_number("MicroGPT.sample", "temperature", temperature)
        if not temperature > 0:
            raise ValueError(
                f"MicroGPT.sample: temperature must be > 0, got {temperature!r}"
            )
        n = positive_int("MicroGPT.sample", "n", n, minimum=0)
        rng, state, bos = random.Random(seed), self.float_state(), self.vocab.bos
        names = []
        for _ in range(n):
            cache, token, ids = KVCache.empty(self.config.n_layer), bos, []
            for pos in range(self.config.block_size):
                logits = forward_token(state, self.config, token, pos, cache)
                probs = softmax([z / temperature for z in logits])
                token = rng.choices(range(len(probs)), weights=probs)[0]
                if token == bos:
                    break
                ids.append(token)
            names.append(self.vocab.decode(ids))
        return names


# ---- training: microgpt's Adam and loop --------------------------------------


class Adam:
    """Adam (Kingma and Ba) over a list of Values, microgpt's settings.

    At step t = 1, 2, ... with gradient g and learning rate lr:
        m = b1 m + (1 - b1) g,        v = b2 v + (1 - b2) g^2
        p -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
    """

    def __init__(
        self,
        params: Sequence[Value],
        lr: float = 0.01,
        betas: tuple[float, float] = (0.85, 0.99),
        eps: float = 1e-8,
    ):
        self.params, self.lr, (self.b1, self.b2), self.eps = (
            list(params),
            lr,
            betas,
            eps,
        )
        self.m = [0.0] * len(self.params)
        self.v = [0.0] * len(self.params)
        self.t = 0

    def step(self, lr: float | None = None) -> None:
        """One update of every parameter from its .grad (lr: this step's rate)."""
        self.t += 1
        lr = self.lr if lr is None else lr
        c1, c2 = 1.0 - self.b1**self.t, 1.0 - self.b2**self.t
        for i, p in enumerate(self.params):
            g = p.grad
            self.m[i] = self.b1 * self.m[i] + (1.0 - self.b1) * g
            self.v[i] = self.b2 * self.v[i] + (1.0 - self.b2) * g * g
            p.data -= (
                lr * (self.m[i] / c1) / (math.sqrt(self.v[i] / c2) + self.eps)
            )


@contextlib.contextmanager
def paused_gc():
    """Python's cyclic garbage collector off inside the block, as it was after.

    The scalar engine makes no reference cycles (a node refers only to its
    inputs), so reference counting alone frees a graph.  The cyclic
    collector still runs every few hundred allocations and, now and then,
    walks every object alive, the whole growing graph included: on
    microgpt's 45,000-node graphs that takes about as long as the arithmetic
    (measured: a step takes about twice as long with it on).
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def train_order(names: Sequence[str], seed: int = 0) -> list[str]:
    """The names in the order training visits them: shuffled by
    random.Random(seed), as microgpt shuffles its documents once."""
    order = list(names)
    random.Random(seed).shuffle(order)
    return order


def train(
    model: MicroGPT,
    names: Sequence[str],
    steps: int,
    lr: float = 0.01,
    betas: tuple[float, float] = (0.85, 0.99),
    seed: int = 0,
    optimizer: Adam | None = None,
) -> list[float]:
    """`steps` Adam steps, one name each; returns every step's loss.

    Step i uses name i of train_order(names, seed) (cycling) and the rate
    lr * (1 - i / steps), microgpt's linear decay.  Gradients are zeroed
    before every backward (backward accumulates into the parameters).  The
    cyclic garbage collector is paused meanwhile (see `paused_gc`).
    """
    instance_of("train", "model", model, MicroGPT)
    opt = optimizer or Adam(model.params, lr, betas)
    order = train_order(names, seed)
    losses = []
    with paused_gc():
        for i in range(steps):
            loss = model.loss(order[i % len(order)])
            zero_grad(model.params)
            loss.backward()
            opt.step(lr * (1.0 - i / steps))
            losses.append(loss.data)
            del loss  # free this step's graph now, not during the next one
    return losses
