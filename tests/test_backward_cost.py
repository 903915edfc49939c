"""FLOP counts, saved-tensor bytes, checkpointing and gradient buckets
(backprop_lessons.scale.backward_cost)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from backprop_lessons.gpt import GPTConfig, init_params
from backprop_lessons.gpt.reference import torch_gpt_loss
from backprop_lessons.scale import backward_cost as S

CONFIG = GPTConfig(vocab_size=13, block_size=8, n_layer=2, n_head=2, n_embd=16)


def _model(dtype=np.float64):
    tp = {
        k: torch.tensor(v, requires_grad=True)
        for k, v in init_params(CONFIG, dtype=dtype).items()
    }
    rng = np.random.default_rng(0)
    idx = torch.tensor(rng.integers(0, 13, (3, 8)))
    return tp, idx, torch.tensor(rng.integers(0, 13, (3, 8)))


def test_flop_counts_match_the_formula_and_backward_is_twice_forward():
    tp, idx, targets = _model()
    forward, loss = S.count_flops(torch_gpt_loss, tp, CONFIG, idx, targets)
    backward, _ = S.count_flops(loss.backward)
    expected = S.gpt_flops_formula(CONFIG, 3, 8)
    assert (forward, backward) == (expected["forward"], expected["backward"])
    assert S.gpt_matmul_parameters(CONFIG) == 2 * 12 * 16 * 16 + 13 * 16


def test_saved_bytes_grow_linearly_with_batch():
    tp, idx, targets = _model(np.float32)
    one, _ = S.saved_tensor_bytes(
        torch_gpt_loss, tp, CONFIG, idx[:1], targets[:1], exclude=tp.values()
    )
    three, _ = S.saved_tensor_bytes(
        torch_gpt_loss, tp, CONFIG, idx, targets, exclude=tp.values()
    )
    mask = 8 * 8  # the causal mask (bool) does not depend on the batch
    assert three.bytes - mask == pytest.approx(3 * (one.bytes - mask), rel=0.02)


def test_checkpointing_saves_less_and_gives_the_same_gradients():
    tp, idx, targets = _model()
    plain, loss = S.saved_tensor_bytes(
        torch_gpt_loss, tp, CONFIG, idx, targets, exclude=tp.values()
    )
    loss.backward()
    expected = {k: t.grad.clone() for k, t in tp.items()}
    for t in tp.values():
        t.grad = None
    ckpt, loss_c = S.saved_tensor_bytes(
        S.torch_gpt_loss_checkpointed,
        tp,
        CONFIG,
        idx,
        targets,
        exclude=tp.values(),
    )
    loss_c.backward()
    assert ckpt.bytes < plain.bytes / 3
    assert loss_c.item() == pytest.approx(loss.item(), rel=1e-14)
    for k in tp:
        torch.testing.assert_close(
            tp[k].grad, expected[k], rtol=1e-12, atol=1e-14
        )


def test_gradient_ready_order_is_the_reverse_of_the_forward():
    model = torch.nn.Sequential(
        torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2)
    )
    names = [n for n, _ in model.named_parameters()]
    order = S.gradient_ready_order(
        model.named_parameters(), lambda: model(torch.ones(2, 3)).sum()
    )
    assert order == names[::-1]
    assert all(not p._post_accumulate_grad_hooks for p in model.parameters())


def test_gradient_ready_order_refuses_a_frozen_tensor():
    with pytest.raises(
        ValueError, match="'w' must be a tensor that requires grad"
    ):
        S.gradient_ready_order([("w", torch.ones(2))], lambda: torch.ones(1))


def test_buckets_close_at_the_cap_and_launch_when_complete():
    sizes = {"d": 8, "c": 128, "b": 128, "a": 2048, "z": 512}
    buckets = S.assign_buckets(sizes, 256)
    assert buckets == [["d", "c", "b"], ["a"], ["z"]]
    events = S.bucket_timeline(list(sizes), buckets)
    assert [e.step for e in events if e.launched] == [2, 3, 4]
    with pytest.raises(ValueError, match="cap_bytes must be a positive int"):
        S.assign_buckets(sizes, 0)
    with pytest.raises(ValueError, match=r"only one of them: \['q'\]"):
        S.bucket_timeline(["q"] + list(sizes), buckets)
