"""The machinery every check of a layer's backward runs on
(backprop_lessons.exercises.layer_checks), on a toy layer: out = w * x
elementwise, with dinp += dout * w and dweight += the sum of dout * x.

A right backward passes; a stub is not attempted; the slips every layer
check recognises without being told (`=` for `+=`, rebinding a buffer or
every buffer, the wrong sign, the gradient added twice, a changed input, a
returned gradient) are named; a case's own bugs are the hint, and any other
wrong gradient points to the exercise's Hint 3 (never a formula).  A
capstone learns which of the reader's functions its model's backward calls
for which layer (`readers_calls_with`).
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

from backprop_lessons.exercises.checking import run_check
from backprop_lessons.exercises.layer_checks import (
    LAYER_SHAPES,
    SEE_HINT_3,
    TOL,
    LayerCase,
    _rebound_buffers,
    label_at,
    random_buffers,
    readers_calls_with,
    run_layer_check,
    torch_vjp,
    what_to_write,
    wrong_thirds,
)

torch = pytest.importorskip("torch")


def toy_case(rng, B: int, T: int, C: int) -> LayerCase:
    x, w = rng.standard_normal((B, T, C)), rng.standard_normal(C)
    dout = rng.standard_normal((B, T, C))
    right = torch_vjp(lambda x, w: x * w, {"x": x, "w": w}, dout)
    return LayerCase(
        buffers=random_buffers(rng, dinp=(B, T, C), dweight=(C,)),
        dout=dout,
        cache=(x, w),
        expected={"dinp": right["x"], "dweight": right["w"]},
        shapes=f"dinp (B, T, C) = {(B, T, C)}",
        label=label_at(B=B, T=T, C=C),
        bugs={"dweight": [(dout.sum(axis=(0, 1)), "it forgot the x")]},
    )


def check_toy(fn):
    def check(fn):
        rng = np.random.default_rng(0)
        cases = [toy_case(rng, *s) for s in LAYER_SHAPES]
        todo = what_to_write(fn, "(dinp, dweight, dout, cache)")
        run_layer_check(fn, cases, todo)

    return run_check(1, check, fn)


def right(dinp, dweight, dout, cache):
    x, w = cache
    dinp += dout * w
    dweight += (dout * x).sum(axis=(0, 1))


def test_a_right_backward_passes(capsys):
    assert check_toy(right).correct
    assert capsys.readouterr().out == "Exercise 1: correct\n"


def test_a_stub_is_not_attempted_in_the_readers_name():
    def my_toy_backward(dinp, dweight, dout, cache): ...

    verdict = check_toy(my_toy_backward)
    assert not verdict.attempted
    assert "write my_toy_backward(dinp, dweight, dout, cache)" in verdict.hint


def assign(dinp, dweight, dout, cache):
    x, w = cache
    dinp[...] = dout * w
    dweight[...] = (dout * x).sum(axis=(0, 1))


def rebind(dinp, dweight, dout, cache):
    x, w = cache
    dinp += dout * w
    dweight = (dout * x).sum(axis=(0, 1))  # noqa: F841 (the slip)


def rebind_all(dinp, dweight, dout, cache):
    x, w = cache
    dinp = dout * w  # noqa: F841 (the slip)
    dweight = (dout * x).sum(axis=(0, 1))  # noqa: F841


def rebind_one(dinp, dweight, dout, cache):
    x, w = cache
    dinp = dout * w  # noqa: F841 (the slip); dweight forgotten


def negated(dinp, dweight, dout, cache):
    x, w = cache
    dinp -= dout * w
    dweight += (dout * x).sum(axis=(0, 1))


def twice(dinp, dweight, dout, cache):
    right(dinp, dweight, dout, cache)
    dinp += dout * cache[1]


def forgot_x(dinp, dweight, dout, cache):
    dinp += dout * cache[1]
    dweight += dout.sum(axis=(0, 1))


def in_place(dinp, dweight, dout, cache):
    dout *= 1.0
    dout[0, 0, 0] += 1.0
    right(dinp, dweight, dout, cache)


def returns(dinp, dweight, dout, cache):
    return dout * cache[1]


def off_a_little(dinp, dweight, dout, cache):
    right(dinp, dweight, dout, cache)
    dweight += 1e-3


@pytest.mark.parametrize(
    "fn, parts",
    [
        (
            assign,
            ["dinp is wrong at B = 2, T = 3, C = 5", "(=) where it must add"],
        ),
        (rebind, ["dweight is wrong", "only rebinds the name"]),
        (
            rebind_all,
            [
                "your backward assigns to dinp and dweight (`dinp = ...`), "
                "which only rebinds the names inside your function and "
                "leaves the buffers you were given unchanged: add in place "
                "with +=: `dinp += ...`"
            ],
        ),
        (
            rebind_one,
            [
                "assigns to dinp (`dinp = ...`), which only rebinds the name "
                "inside your function and leaves the buffer you were given "
                "unchanged"
            ],
        ),
        (negated, ["dinp is wrong", "the wrong sign"]),
        (twice, ["dinp is wrong", "it is added twice"]),
        (forgot_x, ["dweight is wrong", "it forgot the x"]),
        (in_place, ["changed dout or the cache in place"]),
        (returns, ["returns nothing; yours returned a ndarray"]),
        (
            off_a_little,
            ["dweight is wrong", "largest difference 1.0e-03", SEE_HINT_3],
        ),
    ],
)
def test_the_slips_are_named(fn, parts):
    verdict = check_toy(fn)
    assert verdict.status == "not yet", str(verdict)
    for part in parts:
        assert part in verdict.hint, str(verdict)


def test_wrong_thirds_names_the_parts_of_a_qkv_gradient():
    right = np.arange(12.0).reshape(1, 2, 6)
    added = right.copy()
    assert wrong_thirds("dinp", added, right) == ""
    added[..., 2:4] += 1.0
    assert wrong_thirds("dinp", added, right) == "its dk part is wrong"
    added[..., :2] += TOL / 2  # within the tolerance
    assert wrong_thirds("dinp", added, right) == "its dk part is wrong"
    added[..., 4:] -= 1.0
    assert wrong_thirds("dinp", added, right) == "its dk and dv parts are wrong"


def test_an_unknown_slip_points_to_hint_3_and_prints_no_formula():
    verdict = check_toy(off_a_little)
    assert verdict.hint.endswith(": see Hint 3 for the formula"), str(verdict)
    assert "+=" not in verdict.hint and "sum(" not in verdict.hint


def test_a_body_that_only_passes_is_still_not_attempted():
    def my_toy_backward(dinp, dweight, dout, cache):
        x, w = cache  # unpacking the cache assigns no buffer

    verdict = check_toy(my_toy_backward)
    assert not verdict.attempted, str(verdict)
    assert "so far it adds nothing to the buffers" in verdict.hint


def test_rebound_buffers_tells_a_plain_assignment_from_an_in_place_add():
    def mixed(dinp, dweight, dbias, dout, cache):
        dinp += dout
        dweight = dout.sum()  # noqa: F841
        dout = dout * 2  # not a buffer
        scale, dbias = 1.0, dout.sum()  # noqa: F841 (unpacking assigns too)

    assert _rebound_buffers(mixed, 3) == ["dweight", "dbias"]

    def compared(dinp, dout, cache):
        dinp = dout == cache  # noqa: F841 ("==" ends in "=" too)

    assert _rebound_buffers(compared, 1) == ["dinp"]

    def captured(dinp, dout, cache):
        def later():
            return dinp

        dinp = dout  # a name a closure reads: STORE_DEREF
        return later

    assert _rebound_buffers(captured, 1) == ["dinp"]
    assert _rebound_buffers(right, 2) == []
    assert _rebound_buffers(np.add, 2) == []  # no Python code to read


def _toy_model(cache_a, cache_b, first, second):
    """A toy 'model backward' of the reader's, calling two layers."""

    def my_model_backward():
        first(np.zeros(2), np.ones(2), cache_a)
        second(np.zeros(2), np.ones(2), cache_b)
        first(np.zeros(2), np.ones(2), cache_a)

    return my_model_backward


def test_readers_calls_with_lists_the_readers_layer_calls_in_order():
    cache_a, cache_b, other = (np.arange(2.0),), (np.arange(3.0),), (1.0,)

    def helper(cache):
        return cache

    def my_first(dinp, dout, cache):
        helper(cache)  # inside a listed call: not listed again
        dinp += dout

    def my_second(*args):  # *args counts too
        dinp, dout, cache = args
        np.add(dinp, dout, out=dinp)

    def my_two_layers(cache_a, cache_b):  # takes two caches: not a layer
        my_first(np.zeros(2), np.ones(2), cache_a)

    def my_cache_first(cache, dinp, dout):  # the cache where none belongs
        my_first(dinp, dout, cache)

    known = {id(cache_a): (cache_a, "a", 3), id(cache_b): (cache_b, "b", 3)}
    profiler = sys.getprofile()
    with readers_calls_with(known) as calls:
        _toy_model(cache_a, cache_b, my_first, my_second)()
        my_second(np.zeros(1), np.ones(1), other)  # not a known object
        my_two_layers(cache_a, cache_b)
        my_cache_first(cache_b, np.zeros(2), np.ones(2))
    assert sys.getprofile() is profiler
    assert [(c.function, c.about) for c in calls] == [
        (my_first, "a"),
        (my_second, "b"),
        (my_first, "a"),
        (my_first, "a"),  # inside my_two_layers
        (my_first, "b"),  # inside my_cache_first
    ]


def test_readers_calls_with_skips_the_packages_own_functions():
    from backprop_lessons.gpt import layers

    x = np.random.default_rng(0).standard_normal((1, 2, 4))
    _, cache = layers.gelu_forward(x)
    with readers_calls_with({id(cache): (cache, "gelu", 3)}) as calls:
        layers.gelu_backward(np.zeros_like(x), np.ones_like(x), cache)
    assert calls == []


def test_readers_calls_with_finds_a_function_reached_by_attribute():
    """The function object is found even when the caller reached it through
    an attribute, not a name of its own."""
    cache = (np.zeros(1),)

    class Layers:
        @staticmethod
        def my_layer(dinp, dout, cache):
            dinp += dout

    with readers_calls_with({id(cache): (cache, "x", 3)}) as calls:
        Layers.my_layer(np.zeros(1), np.ones(1), cache)
    assert [c.function for c in calls] == [Layers.my_layer]
