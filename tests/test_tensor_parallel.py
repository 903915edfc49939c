"""Megatron's tensor parallelism (backprop_lessons.scale.tensor_parallel): by
hand (f and g), with sequence parallelism and with PyTorch's tensor-parallel
API, every mode's gradients equal one process's; the rows of qkv each rank
holds; the communication per step.  The multiprocess tests share chapter
12's one launch (chapter12_launch)."""

from __future__ import annotations

import numpy as np
import pytest

from backprop_lessons.gpt.model import init_params
from backprop_lessons.scale import tensor_parallel
from chapter12_launch import CONFIG


def test_qkv_rows_give_each_rank_its_heads_q_k_v():
    rows = tensor_parallel.qkv_rows(16, 4, 2)
    assert sorted(rows) == list(range(48))
    assert rows[:24].tolist() == [*range(0, 8), *range(16, 24), *range(32, 40)]


def test_single_mode_is_the_reference_model(chapter12_problem):
    params, x, y, (ref_loss, ref) = chapter12_problem
    out = tensor_parallel.tp_gradients(0, 1, params, CONFIG, x, y, "single")
    assert out["loss"] == pytest.approx(ref_loss, rel=1e-14)
    for name, g in ref.items():
        np.testing.assert_allclose(
            out["grads"][name], g, rtol=1e-12, atol=1e-15, err_msg=name
        )


def test_comm_per_step_counts():
    c = tensor_parallel.comm_per_step(CONFIG, 128, 7296)
    assert c == {"tensor parallel": 4 * 2 * 128 * 16, "data parallel (DDP)": 7296}


@pytest.mark.multiprocess
@pytest.mark.parametrize("mode", ["manual", "sequence", "dtensor"])
def test_tensor_parallel_gradients_equal_one_process(
    chapter12_ranks, chapter12_problem, mode
):
    _, x, _, (ref_loss, ref) = chapter12_problem
    for r in chapter12_ranks:
        out = r[mode]
        assert out["loss"] == pytest.approx(ref_loss, rel=1e-13)
        for name, g in ref.items():
            np.testing.assert_allclose(
                out["grads"][name], g, rtol=1e-11, atol=1e-15, err_msg=name
            )
    tokens, C, L = x.size, CONFIG.n_embd, CONFIG.n_layer
    if mode == "manual":
        assert chapter12_ranks[0][mode]["comm"] == {
            "all-reduce": 4 * L * tokens * C
        }
    elif mode == "sequence":
        # the all-gathers take this rank's half of the positions: 2 forward
        # per block, 2 again in the backward (the saved halves), 2 as the
        # reduce-scatters' backward; plus the embeddings' scatter (backward)
        # and the gather in front of the head
        half = tokens // 2 * C
        assert chapter12_ranks[0][mode]["comm"] == {
            "all-gather": (6 * L + 2) * half,
            "reduce-scatter": 4 * L * tokens * C,
        }
    else:
        assert chapter12_ranks[0][mode]["comm"] == {"all_reduce": 8}


@pytest.mark.multiprocess
def test_sequence_parallelism_halves_a_blocks_activations(
    chapter12_ranks, chapter12_problem
):
    params, x, y, _ = chapter12_problem
    single = tensor_parallel.tp_gradients(0, 1, params, CONFIG, x, y, "single")
    whole = single["block_activation_bytes"]
    B, T = x.shape
    C = CONFIG.n_embd
    mask = T * T  # the causal mask (bool), whole on every rank
    # plain tensor parallelism keeps whole: both layer norms' inputs and
    # outputs (B, T, C) and their mean and 1/std (B, T), in float64
    replicated = 4 * B * T * C * 8 + 4 * B * T * 8 + mask
    for r in chapter12_ranks:
        assert 2 * r["manual"]["block_activation_bytes"] == whole + replicated
        assert 2 * r["sequence"]["block_activation_bytes"] == whole + mask
        assert r["sequence"]["activation_bytes"] < r["manual"]["activation_bytes"]


def test_bad_splits_are_clear_errors():
    params = init_params(CONFIG, seed=0, dtype=np.float64)
    with pytest.raises(ValueError, match="2 heads do not split over 3 ranks"):
        tensor_parallel.TPBlock(params, 0, CONFIG, "manual", 0, 3)
    with pytest.raises(ValueError, match="mode must be one of"):
        tensor_parallel.TPBlock(params, 0, CONFIG, "sharded")
    with pytest.raises(ValueError, match="needs mode 'manual'"):
        tensor_parallel.TPGPT(params, CONFIG, "dtensor", sequence_parallel=True)
