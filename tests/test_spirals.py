"""Tests of the spirals dataset (`backprop_lessons.data.spirals`)."""

from __future__ import annotations

import numpy as np
import pytest

from backprop_lessons.data.spirals import spirals


def test_shapes_labels_and_determinism():
    X, y = spirals(40, 3, 0.2, seed=0)
    assert X.shape == (120, 2) and X.dtype == np.float64
    assert y.shape == (120,) and y.dtype == np.int64
    assert np.bincount(y).tolist() == [40, 40, 40]
    X2, y2 = spirals(40, 3, 0.2, seed=0)
    np.testing.assert_array_equal(X, X2)
    np.testing.assert_array_equal(y, y2)
    assert not np.array_equal(X, spirals(40, 3, 0.2, seed=1)[0])
    assert np.all(
        np.linalg.norm(X, axis=1) <= 1.0 + 1e-12
    )  # noise moves the angle only


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (
            {"n_per_class": 0},
            r"spirals: n_per_class must be a positive int, got 0",
        ),
        (
            {"n_classes": 1},
            r"spirals: n_classes must be an int of at least 2, got 1",
        ),
        ({"noise": -0.1}, r"spirals: noise must be a number >= 0, got -0.1"),
    ],
)
def test_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        spirals(**kwargs)
