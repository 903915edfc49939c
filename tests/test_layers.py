"""Tests of the GPT's layers (`backprop_lessons.gpt.layers`) beyond the whole
model's (test_gpt): the functions chapter 6 shows read as their formulas;
RMSNorm against PyTorch's `torch.nn.functional.rms_norm` in float64 and
centered differences, with the layer contract (`+=` into the buffers, None
skips a gradient); and chapter 10's tiled layers, FlashAttention's
forward/backward and the fused classifier, equal to the eager layers in
float64, keeping no T x T (or B x T x V) array, and refusing bad input
with a clear error.
"""

from __future__ import annotations

import ast
import inspect
import tracemalloc
from functools import partial

import numpy as np
import pytest

from backprop_lessons.gpt import (
    GPTConfig,
    gpt_backward,
    gpt_forward,
    init_params,
    layers,
)
from backprop_lessons.gpt import layers as L
from backprop_lessons.gpt.layers import (
    BATCHNORM_EPS,
    batchnorm_backward,
    batchnorm_forward,
    layernorm_forward,
    rmsnorm_backward,
    rmsnorm_forward,
)
from backprop_lessons.gradcheck import numerical_gradient, relative_error

# ---- every layer function is short, its backward next to it ------------------


MAX_CODE_LINES = 20
FUNCTIONS = [name for name in layers.__all__ if callable(getattr(layers, name))]


def code_lines(fn) -> int:
    """Lines from the first statement after the docstring to the end."""
    node = ast.parse(inspect.getsource(fn)).body[0]
    body = node.body[1:] if ast.get_docstring(node) else node.body
    return node.end_lineno - body[0].lineno + 1


@pytest.mark.parametrize("name", FUNCTIONS)
def test_layer_function_is_short(name):
    assert code_lines(getattr(layers, name)) <= MAX_CODE_LINES


def test_every_forward_has_its_backward_next_to_it():
    source = inspect.getsource(layers)
    for name in FUNCTIONS:
        if name.endswith("_forward"):
            backward = name.replace("_forward", "_backward")
            between = source[
                source.index(f"def {name}(") : source.index(f"def {backward}(")
            ]
            assert between.count("\ndef ") == 0, (
                f"{name} and {backward} are not adjacent"
            )


# ---- RMSNorm -----------------------------------------------------------------


torch = pytest.importorskip("torch")
F = torch.nn.functional

SHAPES = [(2, 3, 8), (1, 5, 16), (4, 1, 3), (7, 16)]


rel_err = relative_error


def make_inputs(shape, with_weight, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape) * rng.uniform(0.1, 3.0)
    weight = rng.standard_normal(shape[-1]) if with_weight else None
    dout = rng.standard_normal(shape)
    return x, weight, dout


def ours(x, weight, dout, eps=1e-5):
    """Output and gradients of L = sum(out * dout) from the hand-written pair."""
    out, cache = rmsnorm_forward(x, weight, eps)
    dx = np.zeros_like(x)
    dw = np.zeros_like(weight) if weight is not None else None
    rmsnorm_backward(dx, dw, dout, cache)
    return out, dx, dw


@pytest.mark.parametrize(
    "with_weight", [True, False], ids=["weight", "no weight"]
)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("eps", [1e-5, 1e-2])
def test_matches_torch_rms_norm_in_float64(shape, with_weight, eps):
    x, weight, dout = make_inputs(shape, with_weight, seed=len(shape) + shape[-1])
    out, dx, dw = ours(x, weight, dout, eps)

    tx = torch.tensor(x, requires_grad=True)
    tw = torch.tensor(weight, requires_grad=True) if with_weight else None
    tout = F.rms_norm(tx, (shape[-1],), tw, eps)
    (tout * torch.tensor(dout)).sum().backward()

    assert out.shape == shape and out.dtype == np.float64
    assert rel_err(out, tout.detach().numpy()) < 1e-13
    assert rel_err(dx, tx.grad.numpy()) < 1e-12
    if with_weight:
        assert rel_err(dw, tw.grad.numpy()) < 1e-12


@pytest.mark.parametrize(
    "with_weight", [True, False], ids=["weight", "no weight"]
)
def test_matches_centered_differences(with_weight):
    x, weight, dout = make_inputs((2, 3, 5), with_weight, seed=7)
    _, dx, dw = ours(x, weight, dout)

    def loss(x_, w_):
        return float((rmsnorm_forward(x_, w_)[0] * dout).sum())

    num_dx = numerical_gradient(lambda x_: loss(x_, weight), x.copy())
    assert rel_err(dx, num_dx) < 1e-8
    if with_weight:
        num_dw = numerical_gradient(lambda w_: loss(x, w_), weight.copy())
        assert rel_err(dw, num_dw) < 1e-8


def test_output_has_unit_root_mean_square():
    x, _, _ = make_inputs((3, 4, 64), False, seed=1)
    out, _ = rmsnorm_forward(x, eps=0.0)
    np.testing.assert_allclose(np.sqrt((out**2).mean(axis=-1)), 1.0, rtol=1e-14)


def test_no_recentering_unlike_layernorm():
    """A constant row is left as a constant (+1 or -1), where layernorm gives
    0."""
    x = np.full((1, 1, 4), -3.0)
    out, _ = rmsnorm_forward(x, eps=0.0)
    np.testing.assert_allclose(out, -1.0)


def test_backward_accumulates_into_the_buffers():
    x, weight, dout = make_inputs((2, 3, 4), True, seed=3)
    _, dx, dw = ours(x, weight, dout)
    _, cache = rmsnorm_forward(x, weight)
    dx2, dw2 = np.ones_like(x), np.ones_like(weight)
    rmsnorm_backward(dx2, dw2, dout, cache)
    rmsnorm_backward(dx2, dw2, dout, cache)
    np.testing.assert_allclose(dx2, 1.0 + 2 * dx, rtol=1e-14, atol=1e-14)
    np.testing.assert_allclose(dw2, 1.0 + 2 * dw, rtol=1e-14, atol=1e-14)


def test_none_skips_a_gradient():
    x, weight, dout = make_inputs((2, 3, 4), True, seed=4)
    _, dx, dw = ours(x, weight, dout)
    _, cache = rmsnorm_forward(x, weight)
    only_dx = np.zeros_like(x)
    rmsnorm_backward(only_dx, None, dout, cache)
    only_dw = np.zeros_like(weight)
    rmsnorm_backward(None, only_dw, dout, cache)
    np.testing.assert_array_equal(only_dx, dx)
    np.testing.assert_array_equal(only_dw, dw)


def test_backward_leaves_dout_and_the_cache_unchanged():
    x, weight, dout = make_inputs((2, 3, 4), True, seed=5)
    _, cache = rmsnorm_forward(x, weight)
    saved = [a.copy() for a in (x, weight, cache[2], dout)]
    rmsnorm_backward(np.zeros_like(x), np.zeros_like(weight), dout, cache)
    for before, after in zip(saved, (x, weight, cache[2], dout)):
        np.testing.assert_array_equal(before, after)


def test_dweight_without_a_weight_is_an_error():
    x, _, dout = make_inputs((2, 3, 4), False)
    _, cache = rmsnorm_forward(x)
    with pytest.raises(
        ValueError, match="rmsnorm_backward: got a dweight buffer"
    ):
        rmsnorm_backward(np.zeros_like(x), np.zeros(4), dout, cache)


# ---- chapter 10's tiled layers -----------------------------------------------


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


# ---- batch normalization (chapter 5), training mode: against PyTorch's
# torch.nn.functional.batch_norm(training=True) in float64, against centered
# differences, the layer contract, how it differs from layernorm, bad input

BN_SHAPES = [(6, 4), (2, 3), (5, 1), (4, 4), (64, 16)]


def bn_make_inputs(shape, seed=0):
    rng = np.random.default_rng(seed)
    B, C = shape
    x = 2.0 * rng.standard_normal(shape) + 3.0 * rng.standard_normal((1, C))
    weight = 1.0 + 0.5 * rng.standard_normal(C)
    bias = 0.5 * rng.standard_normal(C)
    dout = rng.standard_normal(shape)
    return x, weight, bias, dout


def bn_ours(x, weight, bias, dout, eps=BATCHNORM_EPS):
    """Output and gradients of L = sum(out * dout) from the hand-written pair."""
    out, cache = batchnorm_forward(x, weight, bias, eps)
    grads = [np.zeros_like(x), np.zeros_like(weight), np.zeros_like(bias)]
    batchnorm_backward(*grads, dout, cache)
    return out, cache, grads


@pytest.mark.parametrize("shape", BN_SHAPES, ids=str)
@pytest.mark.parametrize("eps", [1e-5, 1e-1])
def test_matches_torch_batch_norm_in_float64(shape, eps):
    x, weight, bias, dout = bn_make_inputs(shape, seed=sum(shape))
    out, cache, (dx, dw, db) = bn_ours(x, weight, bias, dout, eps)

    tx, tw, tb = (torch.tensor(a, requires_grad=True) for a in (x, weight, bias))
    tout = F.batch_norm(tx, None, None, tw, tb, training=True, eps=eps)
    (tout * torch.tensor(dout)).sum().backward()

    assert out.shape == shape and out.dtype == np.float64
    assert cache[2].shape == cache[3].shape == (1, shape[1])  # mean, rstd
    assert relative_error(out, tout.detach().numpy()) < 1e-13
    for mine, theirs in ((dx, tx), (dw, tw), (db, tb)):
        assert relative_error(mine, theirs.grad.numpy(), floor=1.0) < 1e-12


def test_batchnorm_matches_centered_differences():
    x, weight, bias, dout = bn_make_inputs((5, 3), seed=7)
    _, _, (dx, dw, db) = bn_ours(x, weight, bias, dout)

    def loss(x_, w_, b_):
        return float((batchnorm_forward(x_, w_, b_)[0] * dout).sum())

    checks = [
        (dx, numerical_gradient(lambda a: loss(a, weight, bias), x.copy())),
        (dw, numerical_gradient(lambda a: loss(x, a, bias), weight.copy())),
        (db, numerical_gradient(lambda a: loss(x, weight, a), bias.copy())),
    ]
    for analytic, numeric in checks:
        assert relative_error(analytic, numeric) < 1e-8


def test_batchnorm_backward_adds_into_its_buffers_and_skips_none():
    x, weight, bias, dout = bn_make_inputs((4, 3), seed=1)
    _, cache, fresh = bn_ours(x, weight, bias, dout)
    prefilled = [np.full_like(g, 2.0) for g in fresh]
    batchnorm_backward(*prefilled, dout, cache)
    for a, b in zip(fresh, prefilled):
        np.testing.assert_allclose(b, 2.0 + a, rtol=0, atol=1e-14)
    only_dx = np.zeros_like(x)
    batchnorm_backward(only_dx, None, None, dout, cache)
    np.testing.assert_array_equal(only_dx, fresh[0])


def test_batchnorm_each_channel_is_normalized_over_the_batch_unlike_layernorm():
    x, _, _, _ = bn_make_inputs((8, 5), seed=2)
    ones, zeros = np.ones(5), np.zeros(5)
    out, _ = batchnorm_forward(x, ones, zeros, eps=0.0)
    np.testing.assert_allclose(out.mean(axis=0), 0.0, atol=1e-14)
    np.testing.assert_allclose(out.var(axis=0), 1.0, rtol=1e-13)  # biased
    ln, _ = layernorm_forward(x[None], ones, zeros, eps=0.0)
    np.testing.assert_allclose(ln[0].mean(axis=1), 0.0, atol=1e-14)
    assert np.abs(out.mean(axis=1)).max() > 0.1  # not over the channels


def test_batchnorm_the_examples_of_a_batch_are_coupled():
    """Changing one example changes every output of its channel; the input
    gradient of each channel sums to zero over the batch."""
    x, weight, bias, dout = bn_make_inputs((4, 2), seed=3)
    out, _, (dx, _, _) = bn_ours(x, weight, bias, dout)
    moved = x.copy()
    moved[0, 0] += 1.0
    out2, _ = batchnorm_forward(moved, weight, bias)
    assert np.all(out2[:, 0] != out[:, 0]) and np.all(out2[:, 1] == out[:, 1])
    np.testing.assert_allclose(dx.sum(axis=0), 0.0, atol=1e-13)


def test_batchnorm_of_two_examples_is_plus_minus_one_with_tiny_dx():
    x = np.array([[3.0], [7.0]])
    out, _, (dx, _, _) = bn_ours(
        x, np.ones(1), np.zeros(1), np.array([[1.0], [0.5]])
    )
    np.testing.assert_allclose(out.ravel(), [-1.0, 1.0], atol=1e-5)
    assert np.abs(dx).max() < 1e-5


@pytest.mark.parametrize(
    "args,match",
    [
        ((np.ones(3), np.ones(3), np.zeros(3)), r"inp must have shape \(B, C\)"),
        ((np.ones((1, 3)), np.ones(3), np.zeros(3)), r"B >= 2 .*got \(1, 3\)"),
        ((np.ones((4, 3)), np.ones(2), np.zeros(3)), r"weight must have shape"),
        (
            (np.ones((4, 3)), np.ones(3), np.zeros((1, 3))),
            r"bias must have shape",
        ),
    ],
)
def test_batchnorm_bad_input_names_the_operation(args, match):
    with pytest.raises(ValueError, match=rf"^batchnorm_forward: .*{match}"):
        batchnorm_forward(*args)
    with pytest.raises(TypeError, match=r"^batchnorm_forward: inp must be real"):
        batchnorm_forward([["a", "b"], ["c", "d"]], np.ones(2), np.zeros(2))
