"""Tests of `gpt.model`'s parameter table and `gpt.train`'s optimizer: the
written-out shapes agree with the table's legend, AdamW's moments belong to
the parameters it was made for."""

from __future__ import annotations

import re

import numpy as np
import pytest

from backprop_lessons.gpt import GPTConfig, init_params, parameter_shapes
from backprop_lessons.gpt.model import BLOCK_PARAMETERS, PARAMETER_TABLE
from backprop_lessons.gpt.train import AdamW

CONFIG = GPTConfig(vocab_size=11, block_size=7, n_layer=3, n_head=2, n_embd=4)


def _legend_shape(text: str, config: GPTConfig) -> tuple[int, ...]:
    """A shape of the table's legend, "(L, 3C, C)", in numbers."""
    sizes = {"V": config.vocab_size, "maxT": config.block_size}
    sizes |= {"L": config.n_layer, "C": config.n_embd}
    shape = []
    for dim in re.findall(r"(\d*)(V|maxT|L|C)", text):
        factor, letter = dim
        shape.append(int(factor or 1) * sizes[letter])
    return tuple(shape)


def test_written_out_shapes_match_the_table_legend_in_its_order():
    shapes = parameter_shapes(CONFIG)
    assert list(shapes) == [name for name, _, _ in PARAMETER_TABLE]
    for name, legend, _ in PARAMETER_TABLE:
        assert shapes[name] == _legend_shape(legend, CONFIG), name


def test_block_parameters_are_the_ones_stacked_along_layers():
    stacked = [
        name for name, legend, _ in PARAMETER_TABLE if legend.startswith("(L,")
    ]
    assert list(BLOCK_PARAMETERS) == stacked
    for name, _, hf_key in PARAMETER_TABLE:
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
