"""backprop_lessons.microgpt: microgpt's architecture on the scalar engine.

Sizes and parameter counts (4,192 for microgpt's defaults, 4,064 with its
earlier block size of 8), the shipped names, the errors for bad names, the
KV-cache forward on Values and on floats, gradients against centered
differences, exact graph counts, training and sampling (seeded)."""

from __future__ import annotations

import dataclasses
import math
import random

import pytest

from backprop_lessons import Value
from backprop_lessons.data.names import load_names
from backprop_lessons.microgpt import (
    INIT_STD,
    Adam,
    FiniteDifferenceCost,
    KVCache,
    MicroGPT,
    MicroGPTConfig,
    NameVocab,
    check_gradients,
    count_name_graph,
    finite_difference_cost,
    forward_token,
    num_parameters,
    parameter_shapes,
    parameter_table,
    paused_gc,
    sequence_loss,
    time_per_name,
    train,
    train_order,
)
from backprop_lessons.scalar import zero_grad
from tiny_microgpt import TINY_NAMES, tiny_model


@pytest.fixture(scope="module")
def model():
    return MicroGPT(seed=0)


# ---- sizes ---------------------------------------------------------------------


def test_default_model_is_microgpts(model):
    c = model.config
    assert (c.vocab_size, c.block_size, c.n_layer, c.n_head, c.n_embd) == (
        27,
        16,
        1,
        4,
        16,
    )
    assert len(model.params) == num_parameters(c) == 4192
    assert repr(model) == (
        "MicroGPT(4,192 parameters: vocab 27, block 16, "
        "1 layer(s), 4 heads, 16 channels)"
    )


def test_the_sources_4064_is_block_size_8():
    assert num_parameters(MicroGPTConfig(block_size=8)) == 4064
    assert num_parameters(MicroGPTConfig(block_size=16)) == 4192


@pytest.mark.parametrize(
    "sizes",
    [
        {},
        {"n_layer": 3},
        {"n_embd": 8, "n_head": 2},
        {"vocab_size": 5, "block_size": 3},
    ],
)
def test_parameter_count_formula(sizes):
    c = MicroGPTConfig(**sizes)
    V, T, C, L = c.vocab_size, c.block_size, c.n_embd, c.n_layer
    assert num_parameters(c) == V * C + T * C + 12 * C * C * L + V * C


def test_parameter_shapes_follow_the_table_in_order():
    shapes = parameter_shapes(MicroGPTConfig(n_layer=2))
    assert list(shapes) == [
        "wte",
        "wpe",
        *[
            f"layer{l}.{n}"
            for l in range(2)
            for n in (
                "attn_wq",
                "attn_wk",
                "attn_wv",
                "attn_wo",
                "mlp_fc1",
                "mlp_fc2",
            )
        ],
        "lm_head",
    ]
    assert shapes["layer1.mlp_fc1"] == (64, 16) and shapes["wpe"] == (16, 16)


def test_parameter_table_text():
    text = parameter_table(MicroGPTConfig(block_size=8))
    assert text.splitlines()[-1].split() == ["total", "4,064"]
    assert "layer0.mlp_fc1    (64, 16)    1,024" in text


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"n_embd": 10, "n_head": 4}, "n_embd=10 must be divisible by n_head=4"),
        ({"block_size": 0}, "block_size must be a positive int"),
        ({"n_layer": 1.0}, "n_layer must be a positive int"),
        ({"vocab_size": 1}, "vocab_size must be at least 2"),
    ],
)
def test_bad_config(kwargs, match):
    with pytest.raises(ValueError, match=match):
        MicroGPTConfig(**kwargs)


def test_config_must_match_the_vocabulary():
    with pytest.raises(
        ValueError, match="config.vocab_size=30 but the vocabulary has 27 tokens"
    ):
        MicroGPT(config=MicroGPTConfig(vocab_size=30))


# ---- data ----------------------------------------------------------------------


def test_shipped_names():
    names = load_names()
    assert len(names) == 5163 == len(set(names))
    assert names == sorted(names)
    assert all(n.isascii() and n.isalpha() and n.islower() for n in names)
    assert min(map(len, names)) == 2 and max(map(len, names)) == 11
    assert {"emily", "james", "mary"} <= set(names)


def test_vocabulary_is_letters_plus_bos(model):
    vocab = model.vocab
    assert len(vocab) == 27 and vocab.bos == 26
    assert vocab.chars == [chr(c) for c in range(ord("a"), ord("z") + 1)]
    assert vocab.encode("emma") == [26, 4, 12, 12, 0, 26]
    assert vocab.decode(vocab.encode("emma")) == "emma"
    assert repr(vocab) == (
        "NameVocab(27 tokens: 'abcdefghijklmnopqrstuvwxyz' and BOS=26)"
    )


@pytest.mark.parametrize(
    "name, error, match",
    [
        ("", ValueError, "the name is empty"),
        ("Emma", ValueError, r"characters outside the vocabulary \['E'\]"),
        ("jo-ann", ValueError, r"outside the vocabulary \['-'\]"),
        ("ann 2", ValueError, r"outside the vocabulary \[' ', '2'\]"),
        (["emma"], TypeError, "a name must be a str, got list"),
        (None, TypeError, "a name must be a str, got NoneType"),
    ],
)
def test_bad_names_get_clear_errors(model, name, error, match):
    with pytest.raises(error, match=match):
        model.loss(name)


def test_a_name_too_long_for_the_block_is_an_error(model):
    model.encode("a" * 15)  # 16 positions: fits
    with pytest.raises(
        ValueError,
        match="has 16 characters; this model reads at most block_size - 1 = 15",
    ):
        model.loss("a" * 16)


def test_vocab_needs_names():
    with pytest.raises(ValueError, match="non-empty list of names"):
        NameVocab([])
    with pytest.raises(ValueError, match="non-empty list of names"):
        NameVocab("emma")


# ---- the model -----------------------------------------------------------------


def test_initialization_is_seeded_and_gaussian():
    a, b, c = tiny_model(0), tiny_model(0), tiny_model(1)
    assert [p.data for p in a.params] == [p.data for p in b.params]
    assert [p.data for p in a.params] != [p.data for p in c.params]
    big = MicroGPT(3)
    data = [p.data for p in big.params]
    std = math.sqrt(sum(x * x for x in data) / len(data))
    assert abs(std - INIT_STD) < 0.005 and abs(sum(data) / len(data)) < 0.005
    rng = random.Random(3)
    assert data[:5] == [rng.gauss(0.0, INIT_STD) for _ in range(5)]


def test_state_and_params_are_the_same_values(model):
    flat = [p for m in model.state.values() for row in m for p in row]
    assert all(a is b for a, b in zip(flat, model.params))
    for name, (r, c) in parameter_shapes(model.config).items():
        assert len(model.state[name]) == r and all(
            len(row) == c for row in model.state[name]
        )


def test_loss_at_initialization_is_near_log_vocab(model):
    loss = model.loss("emily")
    assert isinstance(loss, Value)
    assert abs(loss.data - math.log(27)) < 0.3


def test_values_and_floats_give_the_same_loss_bit_for_bit(model):
    for name in ("emily", "jo", "christopher"):
        assert model.loss(name).data == model.loss_value(name)


def test_the_kv_cache_grows_one_position_per_token():
    m = tiny_model(n_layer=2)
    cache, state = KVCache.empty(2), m.float_state()
    for pos, token in enumerate(m.encode("dave")[:-1]):
        logits = forward_token(state, m.config, token, pos, cache)
        assert len(logits) == m.config.vocab_size
        assert [len(k) for k in cache.keys] == [pos + 1] * 2
        assert all(len(v) == m.config.n_embd for v in cache.values[1])


def test_a_position_sees_only_the_past():
    """Changing a later token leaves the earlier positions' losses alone:
    the cache holds positions <= t only, so attention is causal."""
    m = tiny_model()
    state = m.float_state()
    a, b = m.encode("cara"), m.encode("card" if "d" in m.vocab.stoi else "cave")

    def first(tokens):
        return sequence_loss(state, m.config, tokens[:3])

    assert a[:3] == b[:3] and a != b
    assert first(a) == first(b)


def test_sequence_loss_needs_two_to_block_plus_one_tokens():
    m = tiny_model()
    with pytest.raises(ValueError, match="need 2 to block_size \\+ 1 = 9 tokens"):
        sequence_loss(m.float_state(), m.config, [m.vocab.bos])


# ---- gradients -----------------------------------------------------------------


def test_gradients_match_centered_differences_default_model(model):
    check = check_gradients(model, "emily", per_matrix=3, seed=1)
    assert check.passed, str(check)
    assert [r.name for r in check.rows] == list(parameter_shapes(model.config))
    assert all(r.shape == (3,) for r in check.rows)


@pytest.mark.parametrize("sizes", [{}, {"n_layer": 2, "n_head": 4}])
def test_every_gradient_of_a_small_model_matches_centered_differences(sizes):
    m = tiny_model(seed=5, **sizes)
    check = check_gradients(m, "dave", per_matrix=10_000)  # every used entry
    assert check.passed, str(check)
    assert sum(r.shape[0] for r in check.rows) > 0.5 * len(m.params)


def test_gradient_check_table_prints_bounds_and_pass():
    check = check_gradients(tiny_model(), "eve", per_matrix=2)
    lines = str(check).splitlines()
    assert lines[0] == "backprop vs centered differences, 2 entries per matrix"
    assert lines[1].split() == ["name", "shape", "rel", "error", "check"]
    rows = lines[3:-1]
    assert len(rows) == len(check.rows)
    assert all(line.endswith("PASS") and "< 1e-06" in line for line in rows)
    assert lines[-1] == f"all {len(rows)} PASS"


def test_check_gradients_catches_a_wrong_gradient():
    m = tiny_model()
    check = check_gradients(m, "eve", per_matrix=2)
    assert check.passed
    row = check.rows[0]
    check.rows[0] = dataclasses.replace(row, rel_error=10 * row.tol)
    assert not check.passed
    assert "FAIL" in str(check)


def test_unused_parameters_get_zero_gradient(model):
    zero_grad(model.params)
    model.loss("eve").backward()
    grads = model.gradients()
    used = set(model.encode("eve")[:-1])  # the last BOS is only a target
    for token, row in enumerate(grads["wte"]):
        assert any(g != 0.0 for g in row) == (token in used)
    assert all(g == 0.0 for row in grads["wpe"][4:] for g in row)


# ---- counts --------------------------------------------------------------------


def test_graph_counts_of_a_five_letter_name_are_exact(model):
    counts = count_name_graph(model, "emily")
    assert counts.operations == 44_940
    assert counts.constants == 631
    assert counts.created == 45_571
    assert counts.backward_steps == 89_202
    assert counts.parameters == 3_696  # wte rows of e, m, i, l, y, BOS; wpe 0-5
    assert counts.nodes == counts.created + counts.parameters


@pytest.mark.parametrize("name", ["jo", "emily", "christopher"])
def test_operation_count_follows_the_per_position_formula(model, name):
    """Per position t: 7,279 operations plus 84 t for attention over the t + 1
    cached positions, and n for the mean at the end.  The matrices make
    6,837 of the 7,279: 3,504 weights used, one * each, and 3,333 + to sum
    the products of 171 dot products."""
    n = len(name) + 1
    expected = sum(7279 + 84 * t for t in range(n)) + n
    assert count_name_graph(model, name).operations == expected


def test_counts_depend_only_on_the_length(model):
    assert count_name_graph(model, "emily") == count_name_graph(model, "james")


def test_finite_difference_cost(model):
    cost = finite_difference_cost(model, "emily")
    assert (cost.parameters, cost.forward_ops, cost.backward_steps) == (
        4192,
        44_940,
        89_202,
    )
    assert cost.one_sided_passes == 4193 and cost.centered_passes == 8384
    assert cost.ratio("one-sided", "passes") == 2096.5
    assert cost.ratio("centered", "operations") == pytest.approx(
        8384 * 44_940 / (44_940 + 89_202)
    )
    assert 1400 < cost.ratio() < 1410
    text = str(cost)
    assert "one-sided differences: N + 1" in text and "1,405 x" in text
    assert "2,809 x" in text


def test_the_sources_2000x_is_passes_at_4064_parameters():
    cost = FiniteDifferenceCost(4064, 1, 1)
    assert cost.ratio("one-sided", "passes") == 2032.5


def test_time_per_name_is_positive_and_ordered(model):
    t = time_per_name(model, "emily", repeats=1)
    assert t.float_forward > 0 and t.backward > 0 and t.forward > 0
    assert t.forward_backward == t.forward + t.backward


def test_paused_gc_restores_the_collector():
    import gc

    assert gc.isenabled()
    with paused_gc():
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with paused_gc():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


# ---- training and sampling -----------------------------------------------------


def test_training_lowers_the_loss_and_is_seeded():
    a, b = tiny_model(seed=2), tiny_model(seed=2)
    losses_a = train(a, TINY_NAMES, steps=40, lr=0.02, seed=0)
    losses_b = train(b, TINY_NAMES, steps=40, lr=0.02, seed=0)
    assert losses_a == losses_b
    first = sum(losses_a[:5]) / 5
    last = sum(losses_a[-5:]) / 5
    assert last < 0.6 * first


def test_train_visits_the_names_in_a_seeded_shuffled_order():
    order = train_order(TINY_NAMES, seed=0)
    assert sorted(order) == sorted(TINY_NAMES)
    assert order == train_order(TINY_NAMES, seed=0)
    rng = random.Random(0)
    expected = list(TINY_NAMES)
    rng.shuffle(expected)
    assert order == expected


def test_adam_first_step_moves_each_parameter_by_about_lr():
    ps = [Value(1.0), Value(-2.0)]
    ps[0].grad, ps[1].grad = 0.5, -3.0
    opt = Adam(ps, lr=0.1)
    opt.step()
    assert ps[0].data == pytest.approx(0.9) and ps[1].data == pytest.approx(-1.9)
    assert opt.t == 1


def test_sample_is_seeded_and_uses_the_vocabulary():
    m = tiny_model(seed=4)
    train(m, TINY_NAMES, steps=30, lr=0.02)
    names = m.sample(n=8, temperature=0.5, seed=3)
    assert names == m.sample(n=8, temperature=0.5, seed=3)
    assert len(names) == 8
    assert all(set(n) <= set(m.vocab.chars) and len(n) <= 8 for n in names)


def test_sample_rejects_a_bad_temperature(model):
    with pytest.raises(ValueError, match="temperature must be > 0"):
        model.sample(temperature=0)
