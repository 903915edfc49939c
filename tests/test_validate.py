"""Tests of `backprop_lessons.validate`: the checks every engine calls at its
boundary take what they should, and name the operation, the argument and
what was expected when they refuse."""

from __future__ import annotations

import random
import re

import numpy as np
import pytest

from backprop_lessons.validate import (
    at_least,
    axes,
    below,
    broadcast_source,
    classifier_inputs,
    counts_match,
    flag,
    float_dtype,
    function,
    gradient_for,
    int_args,
    integer_array,
    matmul_shapes,
    named_arrays,
    nonempty_sequence,
    nonempty_text,
    number_or,
    numpy_generator,
    output_gradient,
    permutation,
    positive_int,
    probability_rows,
    python_random,
    qkv_heads,
    ready,
    real_numbers,
    tile_size,
    token_batch,
    token_ids,
    token_stream,
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


# ---- the validators the engines' guards moved into (issue 45) ------------------


def test_random_generators():
    rng = np.random.default_rng(0)
    assert numpy_generator("get_batch", "rng", rng) is rng
    with pytest.raises(
        TypeError, match=r"^get_batch: rng must be a numpy\.random"
    ):
        numpy_generator("get_batch", "rng", 0)
    r = random.Random(1)
    assert python_random("Neuron", "rng", r) is r
    assert (
        python_random("Neuron", "rng", None).random() == random.Random(0).random()
    )
    with pytest.raises(TypeError, match=r"^Neuron: rng must be a random\.Random"):
        python_random("Neuron", "rng", np.random.default_rng(0))


def test_numbers_text_and_sequences():
    assert number_or("Node", "data", 2.5) == 2.5
    assert number_or("Node", "data", "x", (str,)) == "x"
    for bad in (True, None, "2"):
        with pytest.raises(
            TypeError, match=r"^Node \*\*: k must be a number, got"
        ):
            number_or("Node **", "k", bad)
    assert at_least("sample", "temperature", 0.0, 0) == 0.0
    with pytest.raises(
        ValueError, match=r"^sample: temperature must be >= 0, got -1"
    ):
        at_least("sample", "temperature", -1, 0)
    assert float_dtype("m", "dtype", "float32") == np.float32
    with pytest.raises(
        ValueError, match=r"^m: dtype must be a float type, got int64"
    ):
        float_dtype("m", "dtype", np.int64)
    assert nonempty_text("sample", "prompt", "a") == "a"
    for bad in ("", None, 3):
        with pytest.raises(ValueError, match="^sample: the prompt must hold at"):
            nonempty_text("sample", "prompt", bad)
    assert nonempty_sequence("MLP", "nouts", (3, 1), "layer size") == (3, 1)
    with pytest.raises(
        TypeError, match=r"^MLP: nouts must be a list of layer sizes"
    ):
        nonempty_sequence("MLP", "nouts", "31", "layer size")
    with pytest.raises(
        ValueError, match=r"^MLP: nouts must list at least one layer"
    ):
        nonempty_sequence("MLP", "nouts", [], "layer size")


def test_rows_gradients_streams_and_permutations():
    Y = np.eye(3)[[0, 2]]
    assert probability_rows("m.loss", "Y", Y, 2, 3) is Y
    with pytest.raises(
        ValueError, match=r"Y must be integer labels \(2,\) or one-hot"
    ):
        probability_rows("m.loss", "Y", np.eye(3), 2, 3)
    with pytest.raises(ValueError, match=r"each row of Y must be a probability"):
        probability_rows("m.loss", "Y", 2 * Y, 2, 3)
    g = np.zeros(2)
    assert gradient_for("sgd_step", "W", g, (2,)) is g
    with pytest.raises(
        ValueError, match=r"^sgd_step: gradient W has shape \(2,\), the"
    ):
        gradient_for("sgd_step", "W", g, (2, 2))
    assert token_stream("get_batch", "data", [1, 2, 3], 2).tolist() == [1, 2, 3]
    with pytest.raises(
        ValueError, match=r"longer than block_size=3, got shape \(3,\)"
    ):
        token_stream("get_batch", "data", [1, 2, 3], 3)
    with pytest.raises(ValueError, match=r"a 1-d token array"):
        token_stream("get_batch", "data", np.zeros((2, 4), int), 2)
    assert permutation("transpose", (-1, 0), (2, 3)) == (1, 0)
    with pytest.raises(ValueError, match=r"\(0, 0\) is not a permutation of the"):
        permutation("transpose", (0, 0), (2, 3))


def test_the_tiled_layers_arguments():
    assert tile_size("flash", "tile", np.int64(4)) == 4
    with pytest.raises(
        TypeError, match=r"^flash: tile must be a positive integer"
    ):
        tile_size("flash", "tile", 2.0)
    with pytest.raises(
        ValueError, match=r"^flash: tile must be a positive int.*got 0"
    ):
        tile_size("flash", "tile", 0)
    assert qkv_heads("flash", np.zeros((1, 2, 12)), 2) == 2
    with pytest.raises(ValueError, match=r"inp must have shape \(B, T, 3C\)"):
        qkv_heads("flash", np.zeros((2, 12)), 2)
    with pytest.raises(
        ValueError, match=r"last axis 12 must be 3\*C with C divisible"
    ):
        qkv_heads("flash", np.zeros((1, 2, 12)), 3)
    dout = np.zeros((1, 2))
    assert output_gradient("flash", dout, (1, 2)) is dout
    with pytest.raises(
        ValueError, match=r"dout must have the shape of the output"
    ):
        output_gradient("flash", dout, (2, 1))
    inp, wte = np.zeros((1, 2, 3)), np.zeros((5, 3))
    chunk, targets = classifier_inputs("fc", inp, wte, [[1, 4]], np.int64(2))
    assert chunk == 2 and targets.tolist() == [[1, 4]]
    with pytest.raises(ValueError, match=r"wte \(V, C\) with the same C"):
        classifier_inputs("fc", inp, np.zeros((5, 4)), [[1, 4]], 2)
    with pytest.raises(ValueError, match=r"targets must be integers of shape"):
        classifier_inputs("fc", inp, wte, [[1.0, 4.0]], 2)
    with pytest.raises(ValueError, match=r"targets must lie in \[0, V=5\)"):
        classifier_inputs("fc", inp, wte, [[1, 5]], 2)
