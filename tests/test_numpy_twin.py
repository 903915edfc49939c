"""backprop_lessons.microgpt.numpy_twin: microgpt in NumPy with a
hand-written backward.

Its loss and every gradient equal the scalar engine's to 1e-12 (several
sizes, at initialization and after training), both train along the same
trajectory and sample the same names, and the relu pair and the input
checks behave."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from backprop_lessons.microgpt import MicroGPT, numpy_twin, train
from backprop_lessons.microgpt.numpy_twin import (
    compare_with_scalar,
    micro_backward,
    micro_forward,
    params_from_model,
    relu_backward,
    relu_forward,
)
from tiny_microgpt import TINY_NAMES, tiny_model


@pytest.fixture(scope="module")
def model():
    return MicroGPT(seed=0)


def test_default_model_gradients_equal_the_scalar_engine(model):
    check = compare_with_scalar(model, "emily")
    assert check.passed, str(check)
    assert [r.name for r in check.rows][:2] == ["loss", "wte"]
    assert len(check.rows) == 1 + 9


@pytest.mark.parametrize(
    "sizes",
    [
        {},
        {"n_layer": 3},
        {"n_head": 1},
        {"n_head": 4, "n_embd": 16, "block_size": 4},
    ],
)
@pytest.mark.parametrize("name", ["ab", "dave", "caravo"])
def test_other_sizes_and_lengths(sizes, name):
    m = tiny_model(seed=3, **sizes)
    if len(name) + 1 > m.config.block_size:
        pytest.skip("longer than the block")
    assert compare_with_scalar(m, name).passed


def test_still_equal_after_training():
    m = tiny_model(seed=1, n_layer=2)
    train(m, TINY_NAMES, steps=15, lr=0.05)
    assert compare_with_scalar(m, "cara").passed


def test_comparison_table_text(model):
    lines = str(compare_with_scalar(model, "emily")).splitlines()
    assert lines[0] == "scalar engine vs NumPy twin"
    assert lines[1].split() == ["name", "shape", "rel", "error", "check"]
    assert lines[4].split() == ["wte", "(27,", "16)", "<", "1e-12", "PASS"]
    assert all(line.endswith("PASS") for line in lines[3:-1])


def test_comparison_catches_a_different_gradient(model):
    check = compare_with_scalar(model, "emily")
    check.rows[1] = dataclasses.replace(check.rows[1], rel_error=1e-3)
    assert not check.passed
    assert "FAIL" in str(check)


def test_training_follows_the_scalar_trajectory():
    """Same names, same order, same Adam: the losses agree to rounding."""
    names = TINY_NAMES * 2
    a = tiny_model(seed=6)
    params = params_from_model(a)
    scalar_losses = train(a, names, steps=25, lr=0.02)
    numpy_losses = numpy_twin.train(
        params, a.config, a.vocab, names, steps=25, lr=0.02
    )
    np.testing.assert_allclose(numpy_losses, scalar_losses, rtol=1e-12)
    after = params_from_model(a)
    for key in params:
        np.testing.assert_allclose(params[key], after[key], rtol=0, atol=1e-12)


def test_load_into_model_is_the_inverse_of_params_from_model():
    trained = params_from_model(tiny_model(seed=6))
    fresh = tiny_model(seed=7)
    numpy_twin.load_into_model(trained, fresh)
    after = params_from_model(fresh)
    assert all(np.array_equal(after[k], trained[k]) for k in trained)


def test_load_into_model_names_what_does_not_fit():
    m = tiny_model(seed=0)
    params = params_from_model(m)
    with pytest.raises(ValueError, match="load_into_model: expected the keys"):
        numpy_twin.load_into_model({"wte": params["wte"]}, m)
    params["lm_head"] = params["lm_head"][:, :3]
    with pytest.raises(ValueError, match="lm_head must have shape"):
        numpy_twin.load_into_model(params, m)
    with pytest.raises(TypeError, match="load_into_model"):
        numpy_twin.load_into_model(params, "model")


def test_sampling_draws_the_same_names():
    m = tiny_model(seed=2)
    train(m, TINY_NAMES, steps=20, lr=0.02)
    assert numpy_twin.sample(
        params_from_model(m), m.config, m.vocab, n=6, temperature=0.7, seed=5
    ) == m.sample(6, 0.7, seed=5)


def test_backward_of_a_fresh_forward_does_not_change_params(model):
    params = params_from_model(model)
    saved = {k: v.copy() for k, v in params.items()}
    _, cache = micro_forward(params, model.config, model.encode("ann"))
    grads = micro_backward(params, model.config, cache)
    assert set(grads) == set(params)
    for k in params:
        np.testing.assert_array_equal(params[k], saved[k])
        assert grads[k].shape == params[k].shape


def test_relu_pair():
    x = np.array([[[-1.0, 0.0, 2.0]]])
    out, cache = relu_forward(x)
    np.testing.assert_array_equal(out, [[[0.0, 0.0, 2.0]]])
    dinp = np.ones_like(x)
    relu_backward(dinp, np.array([[[5.0, 5.0, 5.0]]]), cache)
    np.testing.assert_array_equal(dinp, [[[1.0, 1.0, 6.0]]])  # += , kink gets 0


@pytest.mark.parametrize(
    "tokens, match",
    [
        ([26], "need 2 to block_size \\+ 1 = 17 tokens"),
        ([26] * 18, "got 18"),
        ([26, 27], "tokens must lie in \\[0, 27\\)"),
        ([[26, 1]], "must be a 1-d sequence"),
    ],
)
def test_bad_tokens(model, tokens, match):
    with pytest.raises(ValueError, match=match):
        micro_forward(params_from_model(model), model.config, tokens)


def test_tokens_that_are_not_integers(model):
    tokens = [26.0, 1.0]
    with pytest.raises(TypeError, match="tokens must be integer token ids"):
        micro_forward(params_from_model(model), model.config, tokens)


def test_sample_rejects_a_bad_temperature(model):
    with pytest.raises(ValueError, match="temperature must be > 0"):
        numpy_twin.sample(
            params_from_model(model), model.config, model.vocab, temperature=-1
        )


def test_time_scalar_vs_numpy_validates_then_times():
    m = tiny_model()
    speed = numpy_twin.time_scalar_vs_numpy(m, "dave", repeats=1, numpy_runs=2)
    assert speed.scalar > 0 and speed.numpy > 0
    assert speed.ratio == speed.scalar / speed.numpy
