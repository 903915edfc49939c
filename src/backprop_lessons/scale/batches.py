"""The batches `ddp_train` trains on: the same global batch of step k on
every rank, in every run, resumed or not.

    corpus_tokens()                   the shipped corpus as token ids
    step_batch(data, options, step)   the global batch of a step
    eval_batch(data, options)         the batch the final loss is measured on
    micro_batches(x, y, rank, world_size, accumulate)
                                      this rank's shard, in micro-batches

Every rank draws the same global batch of step k from a generator seeded
with (seed, STEP_STREAM, k), takes its own contiguous slice of it
(`distributed.shard`), and splits that into K equal micro-batches.  Data
never comes from the network: the batches are windows of the corpus
shipped with the package (`data.corpus`).
"""

from __future__ import annotations

import numpy as np

from ..data.corpus import CharVocab, load_corpus
from ..gpt.train import get_batch
from .distributed import shard
from .train_options import TrainOptions

__all__ = [
    "STEP_STREAM",
    "EVAL_STREAM",
    "corpus_tokens",
    "step_batch",
    "eval_batch",
    "micro_batches",
]

# Batches of step k come from the seeds (seed, STEP_STREAM, k); the
# evaluation batch from (seed, EVAL_STREAM).
STEP_STREAM, EVAL_STREAM = 0, 1


def corpus_tokens() -> np.ndarray:
    """The shipped corpus as token ids (N,) int64; its 28 characters are the
    vocabulary of TINY_CONFIG."""
    text = load_corpus()
    return CharVocab(text).encode(text)


def step_batch(data: np.ndarray, options: TrainOptions, step: int):
    """The global batch of step `step` (0-based): (x, y), each (B, T).

    Drawn from a generator seeded with (seed, STEP_STREAM, step), so any
    rank, in any run, resumed or not, gets the same batch for the same step.
    """
    rng = np.random.default_rng([options.seed, STEP_STREAM, step])
    return get_batch(data, options.config.block_size, options.batch_size, rng)


def eval_batch(data: np.ndarray, options: TrainOptions):
    """The fixed evaluation batch (x, y), each (B, T): the final loss is
    measured on it."""
    rng = np.random.default_rng([options.seed, EVAL_STREAM])
    return get_batch(data, options.config.block_size, options.batch_size, rng)


def micro_batches(
    x: np.ndarray, y: np.ndarray, rank: int, world_size: int, accumulate: int
):
    """This rank's shard of the global batch, split into `accumulate` equal
    micro-batches: a list of (x, y) pairs, each (B / (world * K), T)."""
    xr, yr = shard(x, rank, world_size), shard(y, rank, world_size)
    return [
        (shard(xr, k, accumulate), shard(yr, k, accumulate))
        for k in range(accumulate)
    ]
