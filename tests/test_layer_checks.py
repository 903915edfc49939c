"""The machinery every check of a layer's backward runs on
(backprop_lessons.exercises.layer_checks), on a toy layer: out = w * x
elementwise, with dinp += dout * w and dweight += the sum of dout * x.

A right backward passes; a stub is not attempted; the slips every layer
check recognises without being told (`=` for `+=`, rebinding the buffer,
the wrong sign, the gradient added twice, a changed input, a returned
gradient) are named; a case's own bugs and the formulas are the hint.
"""

from __future__ import annotations

import numpy as np
import pytest

from backprop_lessons.exercises.checking import run_check
from backprop_lessons.exercises.layer_checks import (
    LAYER_SHAPES,
    TOL,
    LayerCase,
    label_at,
    random_buffers,
    run_layer_check,
    torch_vjp,
    what_to_write,
    wrong_thirds,
)

torch = pytest.importorskip("torch")

FORMULAS = {"dinp": "dinp += dout * w", "dweight": "dweight += sum(dout * x)"}


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
        run_layer_check(fn, cases, todo, FORMULAS)

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
        (negated, ["dinp is wrong", "the wrong sign"]),
        (twice, ["dinp is wrong", "it is added twice"]),
        (forgot_x, ["dweight is wrong", "it forgot the x"]),
        (in_place, ["changed dout or the cache in place"]),
        (returns, ["returns nothing; yours returned a ndarray"]),
        (
            off_a_little,
            ["dweight is wrong", "largest difference 1.0e-03", "sum(dout * x)"],
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
