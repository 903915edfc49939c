"""Tests of the parameter-dictionary checks in `gradcheck` (used by chapter 5)."""

from __future__ import annotations

import numpy as np
import pytest

from backprop_lessons.gradcheck import (
    compare_gradients,
    numerical_param_gradients,
)


def test_numerical_param_gradients_of_a_quadratic_and_restores_params():
    params = {
        "a": np.array([1.0, -2.0, 3.0]),
        "M": np.array([[0.5, 1.5], [-1.0, 2.0]]),
    }
    before = {k: v.copy() for k, v in params.items()}
    calls = []

    def loss_fn():
        calls.append(1)
        return (params["a"] ** 2).sum() + 3 * params["M"].sum()

    g = numerical_param_gradients(loss_fn, params)
    np.testing.assert_allclose(g["a"], 2 * before["a"], rtol=1e-9)
    np.testing.assert_allclose(g["M"], 3.0, rtol=1e-9)
    assert len(calls) == 2 * (3 + 4)  # two evaluations per entry
    for k in params:
        np.testing.assert_array_equal(params[k], before[k])
    assert list(numerical_param_gradients(loss_fn, params, names=["M"])) == ["M"]
    with pytest.raises(
        KeyError, match="numerical_param_gradients: no parameter named 'x'"
    ):
        numerical_param_gradients(loss_fn, params, names=["x"])


def test_compare_gradients_rows_and_verdicts():
    a = {
        "W": np.array([[1.0, 2.0]]),
        "b": np.array([1.0]),
        "c": np.zeros(2),
        "d": np.ones(1),
    }
    ref = {
        "W": np.array([[1.0, 2.0 + 1e-9]]),
        "b": np.array([1.1]),
        "c": np.zeros(3),
    }
    report = compare_gradients(a, ref, tol=1e-6, title="demo")
    assert [r.name for r in report.rows] == ["W", "b", "c", "d"]
    assert [r.passed for r in report.rows] == [True, False, False, False]
    assert report["W"].rel_error == pytest.approx(0.5e-9, rel=1e-6)
    assert report["b"].max_abs_diff == pytest.approx(0.1)
    text = str(report)
    assert text.splitlines()[0] == "demo" and "< 1e-06" in text
    assert "(2,) vs (3,)" in text and "(1,) vs missing" in text
    assert text.splitlines()[-1] == "3 of 4 FAIL"
    assert (
        compare_gradients(
            a, ref, tol={"W": 1e-12, "b": 0.2, "c": 1, "d": 1}, names=["W", "b"]
        ).passed
        is False
    )
    assert compare_gradients(
        a, ref, tol={"W": 1e-6, "b": 0.2}, names=["W", "b"]
    ).passed
    assert compare_gradients(
        a, ref, tol={"default": 0.2}, names=["W", "b"]
    ).passed
