"""Tests of backprop_lessons.gpt: each layer's backward alone (numerical,
float64), the whole model against PyTorch autograd (float64, two configs), the
accumulate contract, shapes, keys, training determinism and the errors for bad
input."""

from __future__ import annotations

import math

import numpy as np
import pytest

from backprop_lessons.data.corpus import CharVocab, load_corpus
from backprop_lessons.gpt import (
    PARAMETER_TABLE,
    GPTConfig,
    gpt_backward,
    gpt_forward,
    init_params,
    layers,
    num_parameters,
    parameter_shapes,
)
from backprop_lessons.gpt.checks import LAYER_NAMES, check_all_layers, check_layer
from backprop_lessons.gpt.train import AdamW, get_batch, sample, train

torch = pytest.importorskip("torch")
from backprop_lessons.gpt.reference import (  # noqa: E402
    compare_gpt_with_torch,
    torch_forward_backward,
    torch_gpt_block,
)

CONFIGS = {
    "1 layer, 1 head": GPTConfig(
        vocab_size=7, block_size=5, n_layer=1, n_head=1, n_embd=4
    ),
    "2 layers, 2 heads": GPTConfig(
        vocab_size=11, block_size=8, n_layer=2, n_head=2, n_embd=8
    ),
    "3 layers, 4 heads": GPTConfig(
        vocab_size=13, block_size=6, n_layer=3, n_head=4, n_embd=16
    ),
}


def random_params(config, seed=0, dtype=np.float64):
    """GPT-2 init plus noise, so that biases and layernorm shifts are not all
    zero."""
    params = init_params(config, seed=seed, dtype=np.float64)
    rng = np.random.default_rng(seed + 100)
    return {
        k: (v + 0.1 * rng.standard_normal(v.shape)).astype(dtype)
        for k, v in params.items()
    }


def random_batch(config, B=3, T=None, seed=0):
    rng = np.random.default_rng(seed)
    T = T or config.block_size
    return (
        rng.integers(0, config.vocab_size, (B, T)),
        rng.integers(0, config.vocab_size, (B, T)),
    )


# ---- each layer alone ----------------------------------------------------------


@pytest.mark.parametrize("name", LAYER_NAMES)
def test_layer_backward_matches_centered_differences(name):
    rows = check_layer(name, seed=1)
    for row in rows:
        assert row.rel_error < 1e-7, row


def test_check_all_layers_table_prints_every_input():
    table = check_all_layers()
    assert table.passed
    text = str(table)
    assert "attention: dinp" in text and text.splitlines()[-1] == "all 15 PASS"
    assert len(table.rows) == 15
    assert "rmsnorm: dinp" in text and "rmsnorm: dweight" in text


def test_rmsnorm_layer_check_catches_a_missing_path():
    """An rmsnorm backward without the path through the scale,
    dx = rstd * g, fails on dinp only: dweight does not go through it."""

    def straight_through_rmsnorm_backward(g, dout, cache):
        inp, weight, rstd = cache
        g["weight"] += (dout * inp * rstd).sum(axis=(0, 1))
        g["inp"] += rstd * dout * weight

    rows = check_layer("rmsnorm", backward=straight_through_rmsnorm_backward)
    assert [row.name for row in rows] == ["rmsnorm: dinp", "rmsnorm: dweight"]
    assert not rows[0].passed and rows[0].rel_error > 1e-3
    assert rows[1].passed


def test_layer_check_catches_a_wrong_backward():
    def wrong_gelu_backward(
        g, dout, cache
    ):  # forgets the product rule's second term
        x, tanh_u = cache
        g["inp"] += dout * 0.5 * (1 + tanh_u)

    rows = check_layer("gelu", backward=wrong_gelu_backward)
    assert not rows[0].passed


def test_backwards_accumulate_into_their_buffers():
    """Every backward adds (+=): starting from a buffer holding 1.0 gives 1.0 +
    the gradient."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 12))
    out, cache = layers.attention_forward(x, 2)
    dout = rng.standard_normal(out.shape)
    fresh, prefilled = np.zeros_like(x), np.ones_like(x)
    layers.attention_backward(fresh, dout, cache)
    layers.attention_backward(prefilled, dout, cache)
    np.testing.assert_allclose(prefilled, 1.0 + fresh, rtol=0, atol=1e-15)

    inp, w, b = (
        rng.standard_normal((2, 3, 4)),
        rng.standard_normal(4),
        rng.standard_normal(4),
    )
    out, cache = layers.layernorm_forward(inp, w, b)
    dout = rng.standard_normal(out.shape)
    bufs1 = [np.zeros_like(inp), np.zeros_like(w), np.zeros_like(b)]
    bufs2 = [np.full_like(inp, 2.0), np.full_like(w, 2.0), np.full_like(b, 2.0)]
    layers.layernorm_backward(*bufs1, dout, cache)
    layers.layernorm_backward(*bufs2, dout, cache)
    for a, c in zip(bufs1, bufs2):
        np.testing.assert_allclose(c, 2.0 + a, rtol=0, atol=1e-14)


def test_encoder_backward_scatter_adds_repeated_tokens():
    wte, wpe = np.zeros((4, 2)), np.zeros((3, 2))
    idx = np.array([[1, 1, 2]])
    _, cache = layers.encoder_forward(wte, wpe, idx)
    dwte, dwpe = np.zeros_like(wte), np.zeros_like(wpe)
    dout = np.array([[[1.0, 0.0], [10.0, 0.0], [100.0, 1.0]]])
    layers.encoder_backward(dwte, dwpe, dout, cache)
    np.testing.assert_array_equal(dwte[1], [11.0, 0.0])  # both uses of token 1
    np.testing.assert_array_equal(dwte[2], [100.0, 1.0])
    np.testing.assert_array_equal(dwpe, dout[0])


def test_attention_is_causal():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 5, 12))
    out1, _ = layers.attention_forward(x, 2)
    x2 = x.copy()
    x2[:, 3:] += 1.0  # change the future of positions 0..2
    out2, _ = layers.attention_forward(x2, 2)
    np.testing.assert_array_equal(out1[:, :3], out2[:, :3])


# ---- the whole model vs PyTorch ------------------------------------------------


@pytest.mark.parametrize("name", list(CONFIGS))
def test_model_gradients_match_pytorch_float64(name):
    config = CONFIGS[name]
    params = random_params(config, seed=3)
    idx, targets = random_batch(config, B=3, seed=4)
    table = compare_gpt_with_torch(params, config, idx, targets)
    print()
    print(table)
    assert table["loss"].rel_error < 1e-12
    for row in table.rows[1:]:
        assert row.rel_error < 1e-10, row
    assert [r.name for r in table.rows[1:]] == [
        name for name, _ in PARAMETER_TABLE
    ]


def test_model_gradients_match_pytorch_float32():
    config = CONFIGS["2 layers, 2 heads"]
    params = random_params(config, seed=5, dtype=np.float32)
    idx, targets = random_batch(config, seed=6)
    table = compare_gpt_with_torch(params, config, idx, targets)
    assert table.passed, table


def test_shorter_sequence_than_block_size():
    config = CONFIGS["2 layers, 2 heads"]
    params = random_params(config, seed=7)
    idx, targets = random_batch(config, B=2, T=3, seed=8)
    table = compare_gpt_with_torch(params, config, idx, targets)
    assert table.max_rel_error < 1e-10
    loss, cache = gpt_forward(params, config, idx, targets)
    grads = gpt_backward(params, config, cache)
    assert np.all(grads["wpe"][3:] == 0)  # positions never used get no gradient


def test_loss_at_init_is_near_log_vocab():
    config = GPTConfig(
        vocab_size=28, block_size=16, n_layer=2, n_head=4, n_embd=32
    )
    params = init_params(config, seed=0, dtype=np.float64)
    idx, targets = random_batch(config, B=4, seed=0)
    loss, _ = gpt_forward(params, config, idx, targets)
    assert abs(loss - math.log(28)) < 0.05


# ---- shapes, keys, dtypes ------------------------------------------------------


def test_params_have_llmc_names_and_shapes():
    config = GPTConfig(vocab_size=10, block_size=6, n_layer=2, n_head=2, n_embd=8)
    params = init_params(config, seed=0)
    assert list(params) == [
        "wte",
        "wpe",
        "ln1w",
        "ln1b",
        "qkvw",
        "qkvb",
        "attprojw",
        "attprojb",
        "ln2w",
        "ln2b",
        "fcw",
        "fcb",
        "fcprojw",
        "fcprojb",
        "lnfw",
        "lnfb",
    ]
    assert parameter_shapes(config) == {
        "wte": (10, 8),
        "wpe": (6, 8),
        "ln1w": (2, 8),
        "ln1b": (2, 8),
        "qkvw": (2, 24, 8),
        "qkvb": (2, 24),
        "attprojw": (2, 8, 8),
        "attprojb": (2, 8),
        "ln2w": (2, 8),
        "ln2b": (2, 8),
        "fcw": (2, 32, 8),
        "fcb": (2, 32),
        "fcprojw": (2, 8, 32),
        "fcprojb": (2, 8),
        "lnfw": (8,),
        "lnfb": (8,),
    }
    assert all(p.dtype == np.float32 for p in params.values())
    assert num_parameters(params) == sum(
        int(np.prod(s)) for s in parameter_shapes(config).values()
    )
    p64 = init_params(config, seed=0, dtype=np.float64)
    np.testing.assert_allclose(params["qkvw"], p64["qkvw"], rtol=1e-6)


def test_gradients_have_the_params_keys_shapes_and_dtype():
    config = CONFIGS["2 layers, 2 heads"]
    for dtype in (np.float32, np.float64):
        params = init_params(config, seed=0, dtype=dtype)
        idx, targets = random_batch(config)
        loss, cache = gpt_forward(params, config, idx, targets)
        grads = gpt_backward(params, config, cache)
        assert list(grads) == list(params)
        for name in params:
            assert (
                grads[name].shape == params[name].shape
                and grads[name].dtype == dtype
            )
        assert cache["logits"].shape == (3, config.block_size, config.vocab_size)


def test_backward_twice_gives_the_same_gradients():
    """gpt_backward zeroes its own buffers: calling it twice does not double
    anything."""
    config = CONFIGS["1 layer, 1 head"]
    params = random_params(config)
    idx, targets = random_batch(config)
    _, cache = gpt_forward(params, config, idx, targets)
    g1, g2 = (
        gpt_backward(params, config, cache),
        gpt_backward(params, config, cache),
    )
    for name in params:
        np.testing.assert_array_equal(g1[name], g2[name])


# ---- errors --------------------------------------------------------------------


@pytest.fixture
def small():
    config = CONFIGS["1 layer, 1 head"]
    return config, init_params(config, dtype=np.float64)


def test_token_out_of_range(small):
    config, params = small
    with pytest.raises(ValueError, match=r"idx must lie in \[0, 7\)"):
        gpt_forward(params, config, np.array([[1, 7]]), np.array([[1, 2]]))
    with pytest.raises(ValueError, match=r"idx must lie in \[0, 7\)"):
        gpt_forward(params, config, np.array([[-1, 2]]))


def test_sequence_longer_than_block_size(small):
    config, params = small
    with pytest.raises(ValueError, match="T=6 is longer than block_size=5"):
        gpt_forward(params, config, np.zeros((1, 6), dtype=int))


def test_targets_shape_and_dtype(small):
    config, params = small
    idx = np.zeros((2, 3), dtype=int)
    with pytest.raises(
        ValueError, match=r"targets must have the shape of idx \(2, 3\)"
    ):
        gpt_forward(params, config, idx, np.zeros((2, 2), dtype=int))
    with pytest.raises(TypeError, match="integer token ids"):
        gpt_forward(params, config, idx.astype(float))
    with pytest.raises(ValueError, match=r"shape \(B, T\)"):
        gpt_forward(params, config, np.zeros(3, dtype=int))


def test_backward_without_targets(small):
    config, params = small
    _, cache = gpt_forward(params, config, np.zeros((1, 3), dtype=int))
    with pytest.raises(ValueError, match="without targets"):
        gpt_backward(params, config, cache)


def test_backward_from_given_logit_gradients_matches_pytorch():
    """gpt_backward(..., dlogits=u) is J^T u for the map parameters ->
    logits: PyTorch's gradients of sum(logits * u), float64."""
    config = CONFIGS["2 layers, 2 heads"]
    params = random_params(config)
    idx, _ = random_batch(config, B=2)
    _, cache = gpt_forward(params, config, idx)  # no targets needed
    u = np.random.default_rng(5).standard_normal(cache["logits"].shape)
    grads = gpt_backward(params, config, cache, dlogits=u)
    tp = {k: torch.tensor(v, requires_grad=True) for k, v in params.items()}
    x = tp["wte"][torch.tensor(idx)] + tp["wpe"][: idx.shape[1]]
    for l in range(config.n_layer):
        x = torch_gpt_block(x, tp, config, l)
    x = torch.nn.functional.layer_norm(
        x, (config.n_embd,), tp["lnfw"], tp["lnfb"], layers.LAYERNORM_EPS
    )
    (x @ tp["wte"].T * torch.tensor(u)).sum().backward()
    for name, t in tp.items():
        np.testing.assert_allclose(
            grads[name], t.grad.numpy(), rtol=1e-10, atol=1e-12
        )


def test_random_directions_pass_and_name_a_transposed_gradient():
    """Chapter 7's checks on the model: every parameter's gradient along a
    random direction, then attprojw's gradient transposed (a square
    matrix, so no shape catches it) fails its own row only."""
    from backprop_lessons.gradcheck import random_direction_checks

    config = CONFIGS["3 layers, 4 heads"]
    params = random_params(config)
    idx, targets = random_batch(config)
    _, cache = gpt_forward(params, config, idx, targets)
    grads = gpt_backward(params, config, cache)

    def loss(p):
        return gpt_forward(p, config, idx, targets)[0]

    assert random_direction_checks(loss, params, grads).passed
    planted = dict(grads, attprojw=grads["attprojw"].transpose(0, 2, 1))
    table = random_direction_checks(loss, params, planted)
    assert [r.name for r in table.rows if not r.passed] == [
        "attprojw",
        "all at once",
    ]


def test_backward_from_logit_gradients_errors(small):
    config, params = small
    idx = np.zeros((1, 3), dtype=int)
    _, cache = gpt_forward(params, config, idx)
    with pytest.raises(ValueError, match="dlogits must have the logits' shape"):
        gpt_backward(params, config, cache, dlogits=np.zeros((1, 3, 2)))
    _, fused = gpt_forward(params, config, idx, idx, fused=True)
    with pytest.raises(ValueError, match="the forward was fused"):
        gpt_backward(params, config, fused, dlogits=np.zeros((1, 3, 7)))


def test_bad_params_and_config(small):
    config, params = small
    bad = dict(params)
    bad["qkvw"] = bad["qkvw"][:, :3]
    with pytest.raises(
        ValueError, match=r"qkvw must be an array of shape \(1, 12, 4\)"
    ):
        gpt_forward(bad, config, np.zeros((1, 2), dtype=int))
    missing = {k: v for k, v in params.items() if k != "lnfb"}
    with pytest.raises(ValueError, match="expected the keys"):
        gpt_forward(missing, config, np.zeros((1, 2), dtype=int))
    with pytest.raises(ValueError, match="divisible by n_head=3"):
        GPTConfig(vocab_size=5, block_size=4, n_layer=1, n_head=3, n_embd=8)
    with pytest.raises(ValueError, match="n_layer must be a positive int"):
        GPTConfig(vocab_size=5, block_size=4, n_layer=0, n_head=1, n_embd=8)


# ---- training, sampling --------------------------------------------------------


def test_get_batch_targets_are_shifted_inputs():
    data = np.arange(100)
    x, y = get_batch(data, 8, 4, np.random.default_rng(0))
    assert x.shape == y.shape == (4, 8)
    np.testing.assert_array_equal(y, x + 1)
    with pytest.raises(ValueError, match="longer than block_size=8"):
        get_batch(np.arange(5), 8, 4, np.random.default_rng(0))


def test_adamw_matches_torch():
    rng = np.random.default_rng(0)
    params = {"wte": rng.standard_normal((3, 2)), "lnfb": rng.standard_normal(2)}
    tparams = {k: torch.tensor(v, requires_grad=True) for k, v in params.items()}
    opt = AdamW(params, lr=0.1, weight_decay=0.1)
    topt = torch.optim.AdamW(
        [
            {"params": [tparams["wte"]], "weight_decay": 0.1},
            {"params": [tparams["lnfb"]], "weight_decay": 0.0},
        ],
        lr=0.1,
        betas=(0.9, 0.95),
        eps=1e-8,
    )
    for _ in range(3):
        grads = {k: rng.standard_normal(v.shape) for k, v in params.items()}
        opt.step(params, grads)
        for k, t in tparams.items():
            t.grad = torch.tensor(grads[k])
        topt.step()
    for k in params:
        np.testing.assert_allclose(
            params[k], tparams[k].detach().numpy(), rtol=1e-12, atol=1e-14
        )


def test_training_is_seeded_and_lowers_the_loss():
    text = load_corpus()[:5000]
    vocab = CharVocab(load_corpus())
    data = vocab.encode(text)
    config = GPTConfig(
        vocab_size=len(vocab), block_size=16, n_layer=1, n_head=2, n_embd=16
    )
    runs = []
    for _ in range(2):
        params = init_params(config, seed=0)
        runs.append(
            train(params, config, data, steps=30, batch_size=8, lr=1e-2, seed=0)
        )
    assert runs[0] == runs[1]
    assert np.mean(runs[0][-5:]) < runs[0][0] - 0.4
    s1 = sample(params, config, vocab, "the ", 20, temperature=0.8, seed=1)
    s2 = sample(params, config, vocab, "the ", 20, temperature=0.8, seed=1)
    assert s1 == s2 and s1.startswith("the ") and len(s1) == 24
    with pytest.raises(ValueError, match="temperature must be >= 0"):
        sample(params, config, vocab, "a", 5, temperature=-1)


def test_torch_twin_alone_matches_loss():
    config = CONFIGS["1 layer, 1 head"]
    params = random_params(config)
    idx, targets = random_batch(config)
    loss, _ = gpt_forward(params, config, idx, targets)
    ref_loss, ref_grads = torch_forward_backward(params, config, idx, targets)
    assert abs(loss - ref_loss) < 1e-12
    assert set(ref_grads) == set(params)


def test_attention_backward_adds_into_a_strided_buffer():
    """The backward writes through a view of dinp by heads: any strides must
    work."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 12))
    out, cache = layers.attention_forward(x, 2)
    dout = rng.standard_normal(out.shape)
    contiguous = np.zeros_like(x)
    strided = np.zeros((12, 3, 2)).transpose(
        2, 1, 0
    )  # (2, 3, 12), last axis not contiguous
    layers.attention_backward(contiguous, dout, cache)
    layers.attention_backward(strided, dout, cache)
    np.testing.assert_array_equal(strided, contiguous)
    assert np.abs(contiguous).max() > 0
