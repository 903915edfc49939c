"""Tests of `gpt.model`'s parameter table and `gpt.train`'s optimizer: the
written-out shapes count as GPT-2's and
BLOCK_PARAMETERS are the ones stacked along L, AdamW's moments belong to
the parameters it was made for."""

from __future__ import annotations

import numpy as np
import pytest

from backprop_lessons.gpt import GPTConfig, init_params, parameter_shapes
from backprop_lessons.gpt.model import BLOCK_PARAMETERS, PARAMETER_TABLE
from backprop_lessons.gpt.train import AdamW

CONFIG = GPTConfig(vocab_size=11, block_size=7, n_layer=3, n_head=2, n_embd=4)


def test_written_out_shapes_are_in_table_order_and_count_as_gpt2():
    shapes = parameter_shapes(CONFIG)
    assert list(shapes) == [name for name, _ in PARAMETER_TABLE]
    V, maxT, L, C = 11, 7, 3, 4
    # embeddings + L blocks of 12 C^2 + 13 C + the final layernorm
    expected = V * C + maxT * C + L * (12 * C * C + 13 * C) + 2 * C
    assert sum(int(np.prod(s)) for s in shapes.values()) == expected


def test_block_parameters_are_the_ones_stacked_along_layers():
    shapes = parameter_shapes(CONFIG)
    deeper = parameter_shapes(
        GPTConfig(vocab_size=11, block_size=7, n_layer=5, n_head=2, n_embd=4)
    )
    grown = [name for name in shapes if shapes[name] != deeper[name]]
    assert list(BLOCK_PARAMETERS) == grown
    for name in BLOCK_PARAMETERS:
        assert shapes[name][0] == CONFIG.n_layer
    for name, hf_key in PARAMETER_TABLE:
        assert ("{l}" in hf_key) == (name in BLOCK_PARAMETERS)


def test_adamw_keeps_zero_moments_for_exactly_its_parameters():
    params = init_params(CONFIG, seed=0, dtype=np.float32)
    opt = AdamW(params)
    assert set(opt.m) == set(opt.v) == set(params)
    for name, p in params.items():
        assert opt.m[name].shape == p.shape and opt.m[name].dtype == np.float32
        assert not opt.m[name].any() and not opt.v[name].any()
    grads = {name: np.ones_like(p) for name, p in params.items()}
    with pytest.raises(
        ValueError, match="AdamW.step: params and grads must have"
    ):
        opt.step(params, {k: v for k, v in grads.items() if k != "wte"})
    assert opt.t == 0  # nothing was updated
