"""Tests of `backprop_lessons.validate`: the checks every engine calls at its
boundary take what they should, and name the operation, the argument and
what was expected when they refuse."""

from __future__ import annotations

import re

import numpy as np
import pytest

from backprop_lessons.validate import (
    axes,
    below,
    broadcast_source,
    counts_match,
    flag,
    function,
    int_args,
    integer_array,
    matmul_shapes,
    named_arrays,
    positive_int,
    ready,
    real_numbers,
    token_batch,
    token_ids,
)


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


def test_real_numbers_are_a_non_empty_list_of_floats():
    assert real_numbers("op", (1, 2.5, np.float64(3))) == [1.0, 2.5, 3.0]
    with pytest.raises(
        TypeError, match="op: expected a sequence of real numbers"
    ):
        real_numbers("op", "12")
    with pytest.raises(ValueError, match="op: expected at least one input"):
        real_numbers("op", [])
    with pytest.raises(TypeError, match="op: input 1 must be a real number"):
        real_numbers("op", [1.0, True])


def test_function_counts_and_ready():
    assert function("op", "f", len) is len
    with pytest.raises(TypeError, match="op: f must be a function, got int"):
        function("op", "f", 3)
    counts_match("jvp", [1, 2], "primals", [3, 4], "tangents")
    with pytest.raises(ValueError, match="^jvp: 2 primals but 1 tangents$"):
        counts_match("jvp", [1, 2], "primals", [3], "tangents")
    assert ready("m.loss", {"a": 1}, "call forward first") == {"a": 1}
    with pytest.raises(RuntimeError, match="^m.loss: call forward first$"):
        ready("m.loss", None, "call forward first")


def test_named_arrays_and_token_batches():
    shapes = {"w": (2, 3), "b": (3,)}
    good = {"w": np.zeros((2, 3)), "b": np.zeros(3)}
    assert named_arrays("gpt params", good, shapes) is good
    with pytest.raises(ValueError, match=r"expected the keys \['w', 'b'\]"):
        named_arrays("gpt params", {"w": good["w"]}, shapes)
    with pytest.raises(ValueError, match=r"b must be an array of shape \(3,\)"):
        named_arrays("gpt params", {**good, "b": np.zeros(4)}, shapes)
    with pytest.raises(ValueError, match="must share one float dtype"):
        named_arrays("gpt params", {**good, "b": np.zeros(3, np.float32)}, shapes)
    ids = token_batch("fwd", "idx", [[1, 2, 3]], max_T=4)
    assert ids.shape == (1, 3)
    with pytest.raises(ValueError, match=r"T=5 is longer than block_size=4"):
        token_batch("fwd", "idx", np.zeros((1, 5), int), max_T=4)
    with pytest.raises(ValueError, match=r"idx must have shape \(B, T\)"):
        token_batch("fwd", "idx", np.zeros(3, int), max_T=4)
    with pytest.raises(ValueError, match=r"targets must have the shape of idx"):
        token_batch("fwd", "targets", np.zeros((2, 2), int), 4, shape=(1, 2))
