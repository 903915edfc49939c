"""Tests of backprop_lessons.gpt.hf_checkpoint: transformers' GPT-2 checkpoints
in the book's GPT.

A small random `GPT2LMHeadModel` (float64, eager attention, every weight
perturbed so that no bias is zero and no gain is one) is saved with
`save_pretrained`, loaded with `load_hf_gpt2`, and its logits, loss and
every gradient are compared with the book's `gpt_forward`/`gpt_backward`.
The gradients of transformers' model are mapped to the book's names here
by hand, independently of the loader.  Then every kind of checkpoint that
does not fit must be refused with an error that names what is wrong, and
GPT-2 small's real shape (124M parameters) is checked in float64.
"""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

from backprop_lessons.gpt import (
    GPTConfig,
    gpt_backward,
    gpt_forward,
    load_hf_gpt2,
    num_parameters,
)
from backprop_lessons.gpt.checks import CheckRow, CheckTable
from backprop_lessons.gpt.hf_checkpoint import (
    CONV1D_PARAMETERS,
    config_from_hf,
    format_against_tolerance,
    hub_is_reachable,
)
from backprop_lessons.gradcheck import relative_error

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
compare_with_transformers = pytest.importorskip(
    "backprop_lessons.gpt.reference"
).compare_with_transformers
F = torch.nn.functional

SMALL = {
    "vocab_size": 50,
    "n_positions": 16,
    "n_embd": 32,
    "n_layer": 2,
    "n_head": 4,
}


def gpt2_config(**overrides):
    """A transformers GPT2Config: special tokens inside the small vocabulary,
    eager attention."""
    settings = {
        **SMALL,
        "bos_token_id": 0,
        "eos_token_id": 0,
        "attn_implementation": "eager",
        **overrides,
    }
    return transformers.GPT2Config(**settings)


def random_gpt2(seed=0, **overrides):
    """A float64 GPT2LMHeadModel in eval mode (no dropout), weights perturbed."""
    torch.manual_seed(seed)
    model = transformers.GPT2LMHeadModel(gpt2_config(**overrides)).double().eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))
    return model


@pytest.fixture(scope="module")
def model():
    return random_gpt2()


@pytest.fixture(scope="module")
def batch():
    rng = np.random.default_rng(0)
    return rng.integers(0, SMALL["vocab_size"], (3, 12)), rng.integers(
        0, SMALL["vocab_size"], (3, 12)
    )


# Each of the book's parameters and its name in transformers' GPT2LMHeadModel.
HF_NAMES = {
    "wte": "transformer.wte.weight",
    "wpe": "transformer.wpe.weight",
    "ln1w": "transformer.h.{l}.ln_1.weight",
    "ln1b": "transformer.h.{l}.ln_1.bias",
    "qkvw": "transformer.h.{l}.attn.c_attn.weight",
    "qkvb": "transformer.h.{l}.attn.c_attn.bias",
    "attprojw": "transformer.h.{l}.attn.c_proj.weight",
    "attprojb": "transformer.h.{l}.attn.c_proj.bias",
    "ln2w": "transformer.h.{l}.ln_2.weight",
    "ln2b": "transformer.h.{l}.ln_2.bias",
    "fcw": "transformer.h.{l}.mlp.c_fc.weight",
    "fcb": "transformer.h.{l}.mlp.c_fc.bias",
    "fcprojw": "transformer.h.{l}.mlp.c_proj.weight",
    "fcprojb": "transformer.h.{l}.mlp.c_proj.bias",
    "lnfw": "transformer.ln_f.weight",
    "lnfb": "transformer.ln_f.bias",
}
TRANSPOSED = {"qkvw", "attprojw", "fcw", "fcprojw"}


def transformers_gradients(model, idx, targets):
    """Loss, logits and gradients of transformers' model, under the book's
    names (mapped here, not by the loader)."""
    model.zero_grad(set_to_none=True)
    logits = model(input_ids=torch.as_tensor(idx)).logits
    loss = F.cross_entropy(
        logits.flatten(0, 1), torch.as_tensor(targets).flatten()
    )
    loss.backward()
    params = dict(model.named_parameters())

    def grad(key):
        return params[key].grad.numpy()

    grads = {}
    for name, key in HF_NAMES.items():
        if "{l}" in key:
            per_layer = [
                grad(key.format(l=l)) for l in range(model.config.n_layer)
            ]
            grads[name] = np.stack(
                [g.T if name in TRANSPOSED else g for g in per_layer]
            )
        else:
            grads[name] = grad(key)
    return loss.item(), logits.detach().numpy(), grads


# ---- round trips --------------------------------------------------------------


def test_save_pretrained_round_trip_matches_logits_loss_and_every_gradient(
    model, batch, tmp_path
):
    model.save_pretrained(tmp_path)
    config, params = load_hf_gpt2(tmp_path, dtype=np.float64)
    assert config == GPTConfig(
        vocab_size=50, block_size=16, n_layer=2, n_head=4, n_embd=32
    )
    assert num_parameters(params) == sum(p.numel() for p in model.parameters())
    idx, targets = batch
    loss, cache = gpt_forward(params, config, idx, targets)
    grads = gpt_backward(params, config, cache)
    ref_loss, ref_logits, ref_grads = transformers_gradients(model, idx, targets)
    assert abs(loss - ref_loss) / ref_loss < 1e-12
    assert relative_error(cache["logits"], ref_logits) < 1e-12
    assert set(grads) == set(ref_grads)
    for name in grads:
        assert relative_error(grads[name], ref_grads[name]) < 1e-12, name


def test_every_source_gives_the_same_parameters(model, tmp_path):
    model.save_pretrained(tmp_path)
    _, from_dir = load_hf_gpt2(tmp_path, dtype=np.float64)
    _, from_model = load_hf_gpt2(model, dtype=np.float64)
    state = model.state_dict()  # prefixed keys, lm_head.weight tied to wte
    _, from_tensors = load_hf_gpt2(state, dtype=np.float64, config=model.config)
    arrays = {k.removeprefix("transformer."): v.numpy() for k, v in state.items()}
    _, from_arrays = load_hf_gpt2(
        arrays, dtype=np.float64, config=model.config.to_dict()
    )
    for other in (from_model, from_tensors, from_arrays):
        assert list(other) == list(from_dir)
        for name in from_dir:
            np.testing.assert_array_equal(other[name], from_dir[name])


def test_sharded_checkpoint(model, tmp_path):
    model.save_pretrained(tmp_path, max_shard_size="20KB")
    assert (tmp_path / "model.safetensors.index.json").is_file()
    _, sharded = load_hf_gpt2(tmp_path, dtype=np.float64)
    _, whole = load_hf_gpt2(model, dtype=np.float64)
    for name in whole:
        np.testing.assert_array_equal(sharded[name], whole[name])


def test_conv1d_weights_are_transposed_and_stacked(model):
    _, params = load_hf_gpt2(model, dtype=np.float64)
    state = model.state_dict()
    assert set(CONV1D_PARAMETERS) == TRANSPOSED
    np.testing.assert_array_equal(
        params["qkvw"][1], state["transformer.h.1.attn.c_attn.weight"].T
    )
    np.testing.assert_array_equal(
        params["fcprojw"][0], state["transformer.h.0.mlp.c_proj.weight"].T
    )
    np.testing.assert_array_equal(
        params["ln2b"][1], state["transformer.h.1.ln_2.bias"]
    )
    assert all(p.flags.c_contiguous for p in params.values())


def test_dtype_and_copies(model):
    _, params = load_hf_gpt2(model)  # default float32
    assert {p.dtype for p in params.values()} == {np.dtype(np.float32)}
    _, params64 = load_hf_gpt2(model, dtype=np.float64)
    params64["wte"][0, 0] += 1.0  # a copy: the model is unchanged
    assert model.transformer.wte.weight[0, 0].item() != params64["wte"][0, 0]


def test_old_checkpoints_causal_mask_buffers_are_skipped(model):
    state = {
        k.removeprefix("transformer."): v for k, v in model.state_dict().items()
    }
    state["h.0.attn.bias"] = torch.ones(1, 1, 16, 16)
    state["h.1.attn.masked_bias"] = torch.tensor(-1e4)
    config, params = load_hf_gpt2(state, config=model.config)
    assert config.n_layer == 2 and "h.0.attn.bias" not in params


def test_compare_with_transformers_table(model, batch):
    table = compare_with_transformers(model, *batch)
    assert table.passed
    assert [r.name for r in table.rows[:2]] == ["loss", "logits"]
    assert len(table.rows) == 2 + 16
    assert table.max_rel_error < 1e-12


def test_compare_with_transformers_refuses_an_untied_model(batch):
    """A model whose LM head is not wte cannot be the book's GPT: refused."""
    broken = random_gpt2(tie_word_embeddings=False)
    with pytest.raises(ValueError, match="tie_word_embeddings"):
        compare_with_transformers(broken, *batch)


# ---- checkpoints that do not fit ----------------------------------------------


def state_of(model):
    return {k: v.clone() for k, v in model.state_dict().items()}


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"activation_function": "relu"}, "activation_function='relu'"),
        ({"activation_function": "gelu"}, "activation_function='gelu'"),
        ({"layer_norm_epsilon": 1e-6}, "layer_norm_epsilon=1e-06"),
        ({"n_inner": 64}, "n_inner=64"),
        (
            {"scale_attn_by_inverse_layer_idx": True},
            "scale_attn_by_inverse_layer_idx",
        ),
        ({"scale_attn_weights": False}, "scale_attn_weights"),
    ],
)
def test_config_that_computes_something_else_is_refused(
    model, overrides, message
):
    config = {**gpt2_config().to_dict(), **overrides}
    with pytest.raises(ValueError, match=message):
        load_hf_gpt2(state_of(model), config=config)


def test_other_model_type_is_refused(model):
    config = {**gpt2_config().to_dict(), "model_type": "llama"}
    with pytest.raises(ValueError, match="model_type='llama'"):
        load_hf_gpt2(state_of(model), config=config)


def test_missing_key_is_named(model):
    state = state_of(model)
    del state["transformer.h.1.mlp.c_fc.bias"]
    with pytest.raises(
        ValueError, match=r"no h\.1\.mlp\.c_fc\.bias \(parameter fcb\)"
    ):
        load_hf_gpt2(state, config=model.config)


def test_wrong_shape_is_named(model):
    state = state_of(model)
    key = "transformer.h.0.attn.c_attn.weight"
    state[key] = state[key].T  # (out, in): already transposed, as in nn.Linear
    with pytest.raises(
        ValueError,
        match=r"h\.0\.attn\.c_attn\.weight has shape \(96, 32\), "
        r"expected \(32, 96\)",
    ):
        load_hf_gpt2(state, config=model.config)


def test_config_that_does_not_match_the_weights(model):
    config = {**gpt2_config().to_dict(), "n_layer": 3}
    with pytest.raises(ValueError, match=r"no h\.2\.ln_1\.weight"):
        load_hf_gpt2(state_of(model), config=config)
    config = {**gpt2_config().to_dict(), "n_layer": 1}
    with pytest.raises(
        ValueError, match=r"unexpected tensors \['h\.1\.attn\.c_attn\.bias'"
    ):
        load_hf_gpt2(state_of(model), config=config)


def test_unexpected_tensor_is_named(model):
    state = state_of(model)
    state["transformer.h.0.attn.q_attn.weight"] = torch.zeros(32, 32)
    with pytest.raises(
        ValueError, match=r"unexpected tensors \['h\.0\.attn\.q_attn\.weight'\]"
    ):
        load_hf_gpt2(state, config=model.config)


def test_untied_lm_head_is_refused(model):
    state = state_of(model)
    state["lm_head.weight"] = state["lm_head.weight"] + 1.0
    with pytest.raises(
        ValueError, match="lm_head.weight differs from wte.weight"
    ):
        load_hf_gpt2(state, config=model.config)


def test_integer_tensor_is_refused(model):
    state = state_of(model)
    state["transformer.ln_f.bias"] = torch.zeros(32, dtype=torch.long)
    with pytest.raises(ValueError, match="ln_f.bias must be a float array"):
        load_hf_gpt2(state, config=model.config)


def test_bad_sources(model, tmp_path):
    with pytest.raises(ValueError, match="pass config="):
        load_hf_gpt2(state_of(model))
    with pytest.raises(TypeError, match="source must be a directory"):
        load_hf_gpt2([1, 2, 3])
    with pytest.raises(ValueError, match="is not a directory"):
        load_hf_gpt2(tmp_path / "nothing")
    with pytest.raises(ValueError, match="has no config.json"):
        load_hf_gpt2(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps(gpt2_config().to_dict()))
    with pytest.raises(ValueError, match="has no model.safetensors"):
        load_hf_gpt2(tmp_path)
    with pytest.raises(ValueError, match="dtype must be a float type"):
        load_hf_gpt2(model, dtype=np.int32)


def test_config_missing_a_size():
    with pytest.raises(ValueError, match="config has no 'n_head'"):
        config_from_hf(
            {"vocab_size": 5, "n_positions": 4, "n_layer": 1, "n_embd": 8}
        )


# ---- printing and the hub ----------------------------------------------------


def test_format_against_tolerance_prints_bounds_not_digits():
    table = CheckTable(
        "t",
        [
            CheckRow("a", (2,), 1e-16, 3e-15, 1e-9),
            CheckRow("b", (), 1e-10, 5e-10, 1e-9),
            CheckRow("c", (3, 4), 1e-3, 2e-3, 1e-9),
        ],
    )
    lines = format_against_tolerance(table).splitlines()
    assert lines[0] == "t"
    assert lines[3].split("|")[2:] == ["    < 1e-11 ", "     1e-09 ", " PASS"]
    assert lines[4].split("|")[2:] == ["    5.0e-10 ", "     1e-09 ", " PASS"]
    assert lines[5].split("|")[2:] == ["    2.0e-03 ", "     1e-09 ", " FAIL"]


def test_hub_is_reachable_answers_quickly_offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert hub_is_reachable() is False
    monkeypatch.delenv("HF_HUB_OFFLINE")
    start = time.perf_counter()
    assert hub_is_reachable("host.invalid", timeout=1.0) is False
    assert time.perf_counter() - start < 2.0


# ---- GPT-2 small's real shape -------------------------------------------------


@pytest.mark.full_size
def test_gpt2_small_124m_float64_matches_transformers():
    """12 layers, 12 heads, C = 768, V = 50257, block 1024: 124,439,808
    parameters, random init.

    Loss to 1e-11 and every gradient to 1e-9 (relative) in float64.  About
    5 GB of memory and 10-30 seconds.
    """
    torch.manual_seed(0)
    config = transformers.GPT2Config(attn_implementation="eager")
    model = transformers.GPT2LMHeadModel(config).double().eval()
    assert sum(p.numel() for p in model.parameters()) == 124_439_808
    rng = np.random.default_rng(0)
    idx, targets = (
        rng.integers(0, 50257, (1, 16)),
        rng.integers(0, 50257, (1, 16)),
    )
    table = compare_with_transformers(model, idx, targets)
    assert table.passed, table.format()
    assert table["loss"].rel_error < 1e-11
