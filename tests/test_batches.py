"""The batches ddp_train trains on (backprop_lessons.scale.batches): the
corpus fits the small GPT, a step's batch is the same wherever it is drawn,
and a rank's micro-batches cover its shard in order."""

from __future__ import annotations

import numpy as np

from backprop_lessons.data.corpus import CharVocab, load_corpus
from backprop_lessons.scale import batches as B
from backprop_lessons.scale.train_options import TINY_CONFIG, TrainOptions

CONFIG = TINY_CONFIG


def test_tiny_config_fits_the_shipped_corpus():
    assert CONFIG.vocab_size == len(CharVocab(load_corpus()))
    data = B.corpus_tokens()
    assert data.min() == 0 and data.max() == CONFIG.vocab_size - 1


def test_batches_are_the_same_for_the_same_step():
    data, options = B.corpus_tokens(), TrainOptions(seed=5)
    x1, y1 = B.step_batch(data, options, 4)
    x2, y2 = B.step_batch(data, options, 4)
    x3, _ = B.step_batch(data, options, 5)
    assert np.array_equal(x1, x2) and np.array_equal(y1, y2)
    assert not np.array_equal(x1, x3)
    assert np.array_equal(y1[:, :-1], x1[:, 1:])
    ex, _ = B.eval_batch(data, options)
    assert ex.shape == (8, CONFIG.block_size) and not np.array_equal(ex, x1)


def test_micro_batches_cover_the_rank_shard_in_order():
    x = np.arange(16).reshape(8, 2)
    micro = B.micro_batches(x, x + 100, rank=1, world_size=2, accumulate=2)
    assert [m[0][:, 0].tolist() for m in micro] == [[8, 10], [12, 14]]
    assert micro[1][1][0, 0] == 112
