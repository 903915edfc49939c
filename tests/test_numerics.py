"""Tests of `backprop_lessons.numerics`: the formulas the engines share.

The array functions are compared with PyTorch in float64 and checked at the
extremes where the textbook formulas overflow; the formatter is checked on
the inputs its callers pass.  The validators are tested in test_validate.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from backprop_lessons.numerics import (
    format_fixed,
    log_softmax,
    one_hot,
    sigmoid,
    softmax,
)
from backprop_lessons.scalar import float_sigmoid

# underflow to 0 is fine; overflow or 0/0 would be a bug
NO_OVERFLOW = {"over": "raise", "divide": "raise", "invalid": "raise"}


def test_sigmoid_matches_torch_and_never_overflows():
    z = np.array([-1000.0, -40.0, -1.5, 0.0, 2.0, 40.0, 1000.0])
    with np.errstate(**NO_OVERFLOW):
        s = sigmoid(z)
    expected = torch.sigmoid(torch.tensor(z)).numpy()
    np.testing.assert_allclose(s, expected, rtol=1e-15, atol=0)
    assert sigmoid(z.astype(np.float32)).dtype == np.float32


@given(st.floats(-700.0, 700.0))
def test_float_sigmoid_equals_the_array_formula(x):
    assert float_sigmoid(x) == pytest.approx(
        float(sigmoid(np.array(x))), rel=1e-15
    )


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_softmax_and_log_softmax_match_torch_along_any_axis(axis):
    z = np.random.default_rng(0).standard_normal((4, 5)) * 10
    zt = torch.tensor(z)
    np.testing.assert_allclose(
        softmax(z, axis), torch.softmax(zt, dim=axis).numpy(), rtol=1e-14, atol=0
    )
    np.testing.assert_allclose(
        log_softmax(z, axis),
        torch.log_softmax(zt, dim=axis).numpy(),
        rtol=1e-14,
        atol=1e-14,
    )


def test_softmax_family_at_extremes():
    with np.errstate(**NO_OVERFLOW):
        P = softmax(np.array([[1000.0, 0.0, -1000.0], [1e4, 1e4, 1e4]]))
        logP = log_softmax(np.array([[1000.0, 0.0, -1000.0]]))
    np.testing.assert_allclose(P, [[1, 0, 0], [1 / 3, 1 / 3, 1 / 3]], rtol=1e-15)
    np.testing.assert_allclose(logP, [[0.0, -1000.0, -2000.0]], rtol=1e-15)


def test_one_hot_rows_and_errors():
    np.testing.assert_array_equal(
        one_hot(np.array([2, 0]), 3), [[0, 0, 1], [1, 0, 0]]
    )
    assert one_hot([1], 2, np.float32).dtype == np.float32
    with pytest.raises(ValueError, match=r"one_hot: labels must lie in \[0, 3\)"):
        one_hot(np.array([3]), 3)
    with pytest.raises(
        ValueError, match=r"labels must be a 1-D array of integers"
    ):
        one_hot(np.array([[1]]), 3)


@pytest.mark.parametrize(
    "x,digits,text",
    [
        (1.23456, 4, "1.2346"),
        (-1.23456, 2, "-1.23"),
        (-0.00001, 4, "0.0000"),  # rounds to zero: no sign
        (-0.0, 2, "0.00"),
        (0.00001, 4, "0.0000"),
        (-0.00005, 4, "-0.0001"),  # rounds away from zero: keeps its sign
    ],
)
def test_format_fixed_never_prints_negative_zero(x, digits, text):
    assert format_fixed(x, digits) == text
