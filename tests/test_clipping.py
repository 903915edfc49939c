"""scale.clipping: global gradient-norm clipping, here in one process (the
ranks' versions run in tests/test_model_parallel_train.py, every mode against
one process)."""

from __future__ import annotations

import pytest
import torch

from backprop_lessons.scale import clipping


def _grads(seed=0):
    gen = torch.Generator().manual_seed(seed)
    return [
        torch.randn(shape, dtype=torch.float64, generator=gen)
        for shape in ((3, 4), (4,), (2, 2, 2))
    ]


@pytest.mark.parametrize("max_norm", [0.05, 1.0, 100.0])
def test_equals_torch_clip_grad_norm(max_norm):
    ours, theirs = _grads(), _grads()
    params = [torch.nn.Parameter(torch.zeros_like(g)) for g in theirs]
    for p, g in zip(params, theirs):
        p.grad = g
    expected = torch.nn.utils.clip_grad_norm_(params, max_norm)
    norm = clipping.clip_by_global_norm(ours, ours, max_norm)
    assert norm == pytest.approx(float(expected), rel=1e-15)
    for a, p in zip(ours, params):
        torch.testing.assert_close(a, p.grad, rtol=1e-15, atol=0)


def test_counted_and_held_are_separate():
    # a replicated parameter held twice but counted once: both copies are
    # scaled, the norm is the one parameter's
    g = torch.full((4,), 3.0, dtype=torch.float64)
    copy = g.clone()
    norm = clipping.clip_by_global_norm([g], [g, copy], 1.0)
    assert norm == pytest.approx(6.0)
    assert torch.equal(g, copy)
    assert float(g.norm()) == pytest.approx(1.0 / (1 + clipping.EPS / 6.0))
    assert clipping.global_norm([]) == 0.0


def test_bad_max_norm_is_a_clear_error():
    for bad in (0.0, -1):
        with pytest.raises(ValueError, match="clip_by_global_norm: max_norm"):
            clipping.clip_by_global_norm([], [], bad)
    with pytest.raises(TypeError, match="clip_by_global_norm: max_norm"):
        clipping.clip_by_global_norm([], [], "1")
