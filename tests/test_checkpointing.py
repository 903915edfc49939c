"""backprop_lessons.checkpointing: the twin in checkpointed segments of k
blocks gives the plain twin's loss and gradients; its saved bytes follow
(N / k) s + k A, and its FLOPs do not depend on k."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from backprop_lessons.checkpointing import (
    run_blocks,
    segment_costs,
    torch_gpt_loss_segments,
)
from backprop_lessons.gpt import GPTConfig, init_params
from backprop_lessons.gpt.reference import torch_gpt_loss

CONFIG = GPTConfig(vocab_size=11, block_size=8, n_layer=4, n_head=2, n_embd=16)


@pytest.fixture
def twin():
    params = init_params(CONFIG, seed=0, dtype=np.float64)
    tp = {k: torch.tensor(v, requires_grad=True) for k, v in params.items()}
    rng = np.random.default_rng(0)
    idx, targets = (torch.tensor(rng.integers(0, 11, (2, 8))) for _ in range(2))
    return tp, idx, targets


def _grads(tp, loss):
    for t in tp.values():
        t.grad = None
    loss.backward()
    return {k: t.grad.clone() for k, t in tp.items()}


@pytest.mark.parametrize("k", [1, 2, 3, 4, 9])
def test_segments_give_the_plain_loss_and_gradients(twin, k):
    tp, idx, targets = twin
    plain = torch_gpt_loss(tp, CONFIG, idx, targets)
    expected = _grads(tp, plain)
    loss = torch_gpt_loss_segments(tp, CONFIG, idx, targets, k)
    assert loss.item() == plain.item()
    got = _grads(tp, loss)
    for name in expected:
        torch.testing.assert_close(got[name], expected[name], rtol=0, atol=1e-14)


def test_run_blocks_is_the_blocks_in_order(twin):
    tp, idx, _ = twin
    x = tp["wte"][idx] + tp["wpe"][:8]
    assert torch.equal(run_blocks(x, tp, CONFIG, 2, 2), x)


def test_saved_bytes_follow_segments_and_flops_do_not(twin):
    tp, idx, targets = twin
    table = segment_costs(tp, CONFIG, idx, targets, [1, 2, 4])
    every, pairs, whole = table.rows
    s = 2 * 8 * 16 * 8  # one block input (B, T, C) in float64
    # one segment fewer keeps one block input fewer
    assert every.kept - pairs.kept == 2 * s and pairs.kept - whole.kept == s
    assert [r.segments for r in table.rows] == [4, 2, 1]
    # rebuilt: k blocks' activations, k times one block's
    assert (
        pairs.rebuilt == 2 * every.rebuilt and whole.rebuilt == 4 * every.rebuilt
    )
    # a block saves many times its input: one block per segment holds least
    assert every.rebuilt > 4 * s and every.worst < pairs.worst < whole.worst
    # one segment of everything saves what the plain twin does, and more
    assert whole.worst >= table.plain_bytes
    # every k recomputes each block once: the same FLOPs, above plain
    assert every.flops == pairs.flops == whole.flops > table.plain_flops
    text = str(table)
    assert text.splitlines()[0].startswith("4 blocks; without checkpointing")
    assert len(text.splitlines()) == 3 + 3


def test_segment_length_must_be_positive(twin):
    tp, idx, targets = twin
    with pytest.raises(ValueError, match="torch_gpt_loss_segments: k"):
        torch_gpt_loss_segments(tp, CONFIG, idx, targets, 0)
    with pytest.raises(ValueError, match="segment_costs: k"):
        segment_costs(tp, CONFIG, idx, targets, [2, -1])


def test_chapter_8s_sixteen_blocks():
    """Chapter 8's claim, counted (bytes follow from shapes, not values): on
    16 blocks of C = 64 with B = 8, T = 64 a block saves about 20 times its
    input, so every block holds 12% of the plain saved bytes at the worst
    moment and every 4 = sqrt(16) blocks 27%, both at 1.33 times the
    plain step's FLOPs."""
    config = GPTConfig(
        vocab_size=28, block_size=64, n_layer=16, n_head=4, n_embd=64
    )
    params = init_params(config, seed=0, dtype=np.float32)
    tp = {k: torch.tensor(v, requires_grad=True) for k, v in params.items()}
    idx = torch.zeros((8, 64), dtype=torch.long)
    table = segment_costs(tp, config, idx, idx, [1, 4])
    every, root = table.rows
    s_in = 4 * 8 * 64 * 64
    assert 19.5 < every.rebuilt / s_in < 20.5
    assert round(every.worst / table.plain_bytes, 2) == 0.12
    assert round(root.worst / table.plain_bytes, 2) == 0.27
    assert (
        round(every.flops / table.plain_flops, 2)
        == 1.33
        == round(root.flops / table.plain_flops, 2)
    )
