"""The vocabulary-parallel embedding and cross-entropy
(backprop_lessons.scale.vocab_parallel) equal the unsharded ones on two
ranks (chapter 12's one launch, chapter12_launch)."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.mark.multiprocess
def test_vocabulary_parallel_loss_and_gradients_equal_unsharded(chapter12_ranks):
    for r in chapter12_ranks:
        out = r["vocab"]
        assert out["loss"] == pytest.approx(out["ref_loss"], rel=1e-14)
        np.testing.assert_allclose(
            out["wte_grad"], out["ref_wte_grad"], rtol=1e-12, atol=1e-15
        )
        np.testing.assert_allclose(
            out["h_grad"], out["ref_h_grad"], rtol=1e-12, atol=1e-17
        )
        # embedding (B T C) and f's backward, then (m, s, target) per position
        assert out["comm"] == {"all-reduce": 2 * 8 * 16 * 16 + 3 * 8 * 16}
    halves = [r["vocab"]["wte_grad"] for r in chapter12_ranks]
    assert halves[0].shape == halves[1].shape == (14, 16)
