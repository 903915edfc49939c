"""Each collective's backward (backprop_lessons.scale.collectives): against
finite differences and PyTorch's own differentiable collectives on two
ranks (chapter 12's one launch, chapter12_launch), and the ring's cost."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from backprop_lessons.scale import collectives


def test_wire_elements_of_a_ring():
    counts = {"all-reduce": 100, "reduce-scatter": 100, "all-gather": 50}
    assert collectives.wire_elements(counts, 2) == 100 + 50 + 50
    assert collectives.wire_elements(counts, 4) == 150 + 75 + 150
    with pytest.raises(ValueError, match="no ring cost for broadcast"):
        collectives.wire_elements({"broadcast": 1}, 2)


@pytest.mark.multiprocess
def test_collective_backwards_match_finite_differences_and_torch(chapter12_ranks):
    for r in chapter12_ranks:
        for name in ("all-reduce", "all-gather", "reduce-scatter", "broadcast"):
            row = r["collectives"][name]
            np.testing.assert_allclose(
                row["derived"], row["numeric"], rtol=0, atol=1e-9, err_msg=name
            )
            np.testing.assert_array_equal(
                row["derived"], row["torch"], err_msg=name
            )
        fg = r["collectives"]["f and g"]
        np.testing.assert_allclose(fg["derived"], fg["numeric"], atol=1e-9)
        np.testing.assert_allclose(
            fg["all-reduce as g"], 2 * fg["derived"], rtol=1e-14
        )
    assert not chapter12_ranks[1]["collectives"]["broadcast"]["derived"].any()


def test_a_split_that_does_not_divide_is_a_clear_error():
    with pytest.raises(ValueError, match="reduce_scatter: dim 1 \\(15\\)"):
        collectives._blocks(torch.zeros(2, 15, 4), 2, 1, "reduce_scatter")
