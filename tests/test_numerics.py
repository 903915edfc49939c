"""Tests of `backprop_lessons.numerics`: the formulas the engines share.

The array functions are compared with PyTorch in float64 and checked at the
extremes where the textbook formulas overflow; the size check and the
formatter are checked on the inputs their callers pass.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from backprop_lessons.numerics import (
    axes,
    below,
    broadcast_source,
    flag,
    format_fixed,
    int_args,
    integer_array,
    log_softmax,
    matmul_shapes,
    one_hot,
    positive_int,
    sigmoid,
    softmax,
    token_ids,
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


@pytest.mark.parametrize("value", [1, 7, np.int64(2), np.int32(5), np.uint8(3)])
def test_positive_int_accepts_python_and_numpy_integers(value):
    n = positive_int("op", "n", value)
    assert n == value and type(n) is int


@pytest.mark.parametrize(
    "value", [0, -3, True, False, 2.0, "3", None, np.float64(2)]
)
def test_positive_int_rejects_non_sizes(value):
    with pytest.raises(
        ValueError,
        match=re.escape(f"op: n must be a positive int, got {value!r}"),
    ):
        positive_int("op", "n", value)


def test_positive_int_with_a_minimum_says_so():
    assert positive_int("spirals", "K", 2, minimum=2) == 2
    with pytest.raises(
        ValueError, match=r"spirals: K must be an int of at least 2, got 1"
    ):
        positive_int("spirals", "K", 1, minimum=2)


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


def test_the_array_validators_return_what_they_accept():
    assert flag("f", "b", np.bool_(True)) is True
    assert integer_array("f", "y", [1.0, 2.0], whole_floats=True).tolist() == [
        1,
        2,
    ]
    assert below("f", "y", np.array([0, 2]), 3).tolist() == [0, 2]
    assert axes("f", -1, 3) == (2,) and axes("f", None, 2) == (0, 1)
    assert (
        int_args("f", "shape", ((2, 3),)) == (2, 3) == int_args("f", "s", (2, 3))
    )
    assert broadcast_source("f", "g", (3, 1), (2, 3, 4)) == (3, 1)
    assert matmul_shapes("f", (5, 2, 3), (3, 4)) == (5, 2, 4)


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda: flag("f", "b", 1), TypeError, r"^f: b must be True or False"),
        (
            lambda: integer_array("f", "y", [1.5], "labels", whole_floats=True),
            TypeError,
            r"^f: y must be integer labels, got dtype float64",
        ),
        (
            lambda: below("f", "y", np.array([-1, 2]), 3),
            ValueError,
            r"^f: y must lie in \[0, 3\), got values from -1 to 2",
        ),
        (
            lambda: token_ids("f", "ids", [-1]),
            ValueError,
            r"^f: ids must lie in \[0, inf\)",
        ),
        (lambda: axes("f", (0, -2), 2), ValueError, r"^f: repeated axis"),
        (lambda: int_args("f", "shape", (2, "3")), TypeError, r"^f: shape must"),
        (
            lambda: broadcast_source("f", "g", (2,), (3,)),
            ValueError,
            r"^f: g of shape \(3,\) cannot come from broadcasting shape \(2,\)",
        ),
        (
            lambda: matmul_shapes("f", (2, 3), (2, 3)),
            ValueError,
            r"^f: \(2, 3\) @ \(2, 3\): inner dimensions 3 and 2 differ",
        ),
    ],
)
def test_the_array_validators_name_the_operation(call, error, message):
    with pytest.raises(error, match=message):
        call()
