"""Chapter 10's tiled layers: FlashAttention's forward/backward and the
fused classifier equal the eager layers in float64, keep no T x T (or
B x T x V) array, and reject bad input with a clear error."""

from __future__ import annotations

import tracemalloc
from functools import partial

import numpy as np
import pytest

from backprop_lessons.gpt import GPTConfig, gpt_backward, gpt_forward, init_params
from backprop_lessons.gpt import layers as L
from backprop_lessons.gradcheck import relative_error

RTOL = 1e-12


def close(a, b):
    return relative_error(a, b) < RTOL


def attention_pair(B, T, C, NH, tile, seed=0):
    rng = np.random.default_rng(seed)
    inp = rng.standard_normal((B, T, 3 * C))
    dout = rng.standard_normal((B, T, C))
    out1, c1 = L.attention_forward(inp, NH)
    out2, c2 = L.flash_attention_forward(inp, NH, tile=tile)
    d1 = np.zeros_like(inp)
    d2 = np.full_like(inp, 0.5)  # the backward adds into its buffer
    L.attention_backward(d1, dout, c1)
    L.flash_attention_backward(d2, dout, c2)
    return out1, out2, d1, d2 - 0.5, c2


@pytest.mark.parametrize(
    "B, T, C, NH, tile",
    [
        (2, 256, 32, 4, 64),
        (1, 100, 24, 3, 32),
        (2, 37, 16, 2, 8),
        (1, 5, 8, 2, 64),
        (1, 1, 8, 1, 1),
        (3, 64, 12, 3, 64),
    ],
)
def test_flash_attention_equals_eager_attention_in_float64(B, T, C, NH, tile):
    out1, out2, d1, d2, _ = attention_pair(B, T, C, NH, tile)
    assert close(out2, out1)
    assert close(d2, d1)


def test_flash_cache_holds_no_t_by_t_array():
    T = 96
    *_, cache = attention_pair(1, T, 16, 2, 16)
    arrays = [a for a in cache if isinstance(a, np.ndarray)]
    assert arrays
    for a in arrays:
        assert a.size < T * T, a.shape  # O(T) entries, never T x T
        assert sum(n == T for n in a.shape) <= 1


def _peak(fn):
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        fn()
        return tracemalloc.get_traced_memory()[1] - start
    finally:
        tracemalloc.stop()


def test_flash_backward_peak_is_below_eager_and_linear_in_t():
    rng = np.random.default_rng(1)
    peaks = {}
    for T in (256, 512):
        inp = rng.standard_normal((1, T, 3 * 32))
        dout = rng.standard_normal((1, T, 32))
        for name, fwd, bwd in (
            ("eager", L.attention_forward, L.attention_backward),
            ("flash", L.flash_attention_forward, L.flash_attention_backward),
        ):
            _, cache = fwd(inp, 2)
            dinp = np.zeros_like(inp)
            peaks[name, T] = _peak(partial(bwd, dinp, dout, cache))
    assert peaks["flash", 512] < peaks["eager", 512]
    assert peaks["flash", 512] <= 2.5 * peaks["flash", 256]


def classifier_pair(B, T, C, V, chunk, dloss=1.0, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((B, T, C))
    wte = rng.standard_normal((V, C))
    targets = rng.integers(0, V, (B, T))
    logits, head = L.matmul_forward(x, wte, None)
    loss1, ce = L.crossentropy_softmax_forward(logits, targets)
    dlogits = np.zeros_like(logits)
    L.crossentropy_softmax_backward(dlogits, dloss, ce)
    dx1, dw1 = np.zeros_like(x), np.zeros_like(wte)
    L.matmul_backward(dx1, dw1, None, dlogits, head)
    loss2, cache = L.fused_classifier_forward(x, wte, targets, chunk=chunk)
    dx2, dw2 = np.ones_like(x), np.ones_like(wte)
    L.fused_classifier_backward(dx2, dw2, dloss, cache)
    return (loss1, dx1, dw1), (loss2, dx2 - 1.0, dw2 - 1.0), cache


@pytest.mark.parametrize(
    "B, T, C, V, chunk, dloss",
    [
        (2, 7, 16, 101, 10, 1.0),
        (1, 16, 8, 65, 65, 0.5),
        (3, 4, 8, 50, 1, 2.0),
        (1, 3, 4, 30, 1000, 1.0),
    ],
)
def test_fused_classifier_equals_matmul_and_ce(B, T, C, V, chunk, dloss):
    (l1, dx1, dw1), (l2, dx2, dw2), _ = classifier_pair(B, T, C, V, chunk, dloss)
    assert abs(l1 - l2) < RTOL * abs(l1)
    assert close(dx2, dx1)
    assert close(dw2, dw1)


def test_fused_classifier_cache_holds_no_logits_and_buffers_may_be_none():
    B, T, C, V = 2, 5, 8, 40
    _, _, cache = classifier_pair(B, T, C, V, 16)
    for a in cache:
        if isinstance(a, np.ndarray):
            assert a.size <= max(B * T * C, V * C)
            assert a.shape != (B, T, V)
    dx = np.zeros((B, T, C))
    L.fused_classifier_backward(dx, None, 1.0, cache)
    L.fused_classifier_backward(None, None, 1.0, cache)


def test_gpt_with_the_fused_classifier_equals_the_default_model():
    config = GPTConfig(vocab_size=29, block_size=8, n_layer=2, n_head=2, n_embd=8)
    params = init_params(config, seed=0, dtype=np.float64)
    rng = np.random.default_rng(0)
    idx, targets = rng.integers(0, 29, (2, 8)), rng.integers(0, 29, (2, 8))
    loss1, cache1 = gpt_forward(params, config, idx, targets)
    loss2, cache2 = gpt_forward(params, config, idx, targets, fused=True)
    assert cache2["logits"] is None
    assert abs(loss1 - loss2) < RTOL
    g1 = gpt_backward(params, config, cache1)
    g2 = gpt_backward(params, config, cache2)
    for name in g1:
        assert close(g2[name], g1[name]), name
    # without targets there is no loss to fuse with: the logits as before
    _, cache3 = gpt_forward(params, config, idx, fused=True)
    assert np.array_equal(cache3["logits"], cache1["logits"])
    with pytest.raises(
        TypeError, match="gpt_forward: fused must be True or False"
    ):
        gpt_forward(params, config, idx, targets, fused="yes")


@pytest.mark.parametrize(
    "call, error, message",
    [
        (
            lambda: L.flash_attention_forward(np.zeros((1, 4, 9)), 2),
            ValueError,
            r"flash_attention_forward: the last axis 9 must be 3\*C",
        ),
        (
            lambda: L.flash_attention_forward(np.zeros((4, 12)), 2),
            ValueError,
            r"flash_attention_forward: inp must have shape \(B, T",
        ),
        (
            lambda: L.flash_attention_forward(np.zeros((1, 4, 12)), 2, tile=0),
            ValueError,
            "flash_attention_forward: tile must be a positive integer",
        ),
        (
            lambda: L.flash_attention_forward(np.zeros((1, 4, 12)), 2, tile=2.5),
            TypeError,
            "flash_attention_forward: tile must be a positive integer",
        ),
        (
            lambda: L.fused_classifier_forward(
                np.zeros((1, 3, 4)), np.zeros((10, 5)), np.zeros((1, 3), int)
            ),
            ValueError,
            "fused_classifier_forward: inp must be",
        ),
        (
            lambda: L.fused_classifier_forward(
                np.zeros((1, 3, 4)), np.zeros((10, 4)), np.full((1, 3), 10)
            ),
            ValueError,
            r"fused_classifier_forward: targets must lie in \[0, V",
        ),
        (
            lambda: L.fused_classifier_forward(
                np.zeros((1, 3, 4)), np.zeros((10, 4)), np.zeros((3,), int)
            ),
            ValueError,
            "fused_classifier_forward: targets must be integers",
        ),
        (
            lambda: L.fused_classifier_forward(
                np.zeros((1, 3, 4)), np.zeros((10, 4)), np.zeros((1, 3), int), 0
            ),
            ValueError,
            "fused_classifier_forward: chunk must be a positive",
        ),
    ],
)
def test_bad_input_is_a_clear_error(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_flash_backward_rejects_a_dout_of_the_wrong_shape():
    _, cache = L.flash_attention_forward(np.zeros((1, 4, 12)), 2)
    with pytest.raises(ValueError, match="flash_attention_backward: dout"):
        L.flash_attention_backward(
            np.zeros((1, 4, 12)), np.zeros((1, 4, 5)), cache
        )
