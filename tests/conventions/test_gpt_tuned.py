"""The benchmark's tuned GPT step (benchmarks/gpt_tuned.py) computes what the
book's layers compute: the same loss, gradients and updated parameters as
`gpt_forward`, `gpt_backward` and `train.AdamW`, step after step, in
float64.  The benchmark checks both against PyTorch before it times them;
this keeps the tuned variant honest between benchmark runs."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from backprop_lessons.gpt import GPTConfig, gpt_backward, gpt_forward, init_params
from backprop_lessons.gpt.train import AdamW
from backprop_lessons.gradcheck import relative_error

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from gpt_tuned import TunedGPT

ADAMW = {"lr": 1e-2, "betas": (0.9, 0.95), "eps": 1e-8, "weight_decay": 0.1}


_relative = relative_error


@pytest.mark.parametrize(
    "config, B, T",
    [
        (
            GPTConfig(vocab_size=13, block_size=8, n_layer=2, n_head=2, n_embd=8),
            3,
            8,
        ),
        # T < block_size: the rows of wpe no position reaches get no gradient
        (
            GPTConfig(vocab_size=7, block_size=9, n_layer=1, n_head=4, n_embd=16),
            2,
            5,
        ),
    ],
)
def test_tuned_step_matches_the_books_layers_in_float64(config, B, T):
    rng = np.random.default_rng(1)
    params = {
        k: v + 0.05 * rng.standard_normal(v.shape)  # no gradient trivially 0
        for k, v in init_params(config, seed=1, dtype=np.float64).items()
    }
    tuned = TunedGPT(params, config, B, T, **ADAMW)
    book = {k: v.copy() for k, v in params.items()}
    opt = AdamW(book, **ADAMW)
    for _ in range(3):
        idx = rng.integers(0, config.vocab_size, size=(B, T))
        targets = rng.integers(0, config.vocab_size, size=(B, T))
        loss, cache = gpt_forward(book, config, idx, targets)
        grads = gpt_backward(book, config, cache)
        opt.step(book, grads)
        assert tuned.step(idx, targets) == pytest.approx(loss, rel=1e-13)
        for name in book:
            assert _relative(tuned.grads[name], grads[name]) < 1e-11, name
            assert _relative(tuned.params[name], book[name]) < 1e-11, name
    assert not tuned.grads["wpe"][T:].any()


def test_tuned_step_keeps_the_parameters_dtype_and_counts_its_buffers():
    config = GPTConfig(vocab_size=5, block_size=4, n_layer=1, n_head=1, n_embd=4)
    tuned = TunedGPT(init_params(config), config, 2, 4, **ADAMW)
    tuned.step(np.zeros((2, 4), int), np.ones((2, 4), int))
    assert {p.dtype for p in tuned.params.values()} == {np.dtype(np.float32)}
    assert tuned.buffer_bytes() > tuned.grads_flat.nbytes > 0


def test_tuned_step_names_the_shape_it_was_made_for():
    config = GPTConfig(vocab_size=5, block_size=4, n_layer=1, n_head=1, n_embd=4)
    tuned = TunedGPT(init_params(config), config, 2, 4, **ADAMW)
    with pytest.raises(ValueError, match=r"TunedGPT.step: .*\(2, 4\)"):
        tuned.step(np.zeros((2, 3), int), np.zeros((2, 3), int))
