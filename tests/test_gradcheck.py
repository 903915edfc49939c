"""Tests of the scalar part of `backprop_lessons.gradcheck`: numerical
gradients, relative errors and the PASS/FAIL table of `check_scalar_gradients`.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from backprop_lessons.gradcheck import (GradCheckReport, GradCheckRow, check_scalar_gradients,
                                        numerical_gradient, relative_error)
from backprop_lessons.scalar import Value
from strategies import floats


@pytest.mark.parametrize("f, exact, xs", [
    (lambda v: v[0] ** 2 * v[1], lambda v: [2 * v[0] * v[1], v[0] ** 2], [1.5, -2.0]),
    (lambda v: math.sin(v[0]) * math.exp(v[1]),
     lambda v: [math.cos(v[0]) * math.exp(v[1]), math.sin(v[0]) * math.exp(v[1])], [0.7, 0.3]),
    (lambda v: math.log(v[0]) + v[1] / v[2],
     lambda v: [1 / v[0], 1 / v[2], -v[1] / v[2] ** 2], [2.0, 3.0, 0.5]),
    (lambda v: 3.0 * v[0] - 4.0, lambda v: [3.0], [10.0]),
], ids=["polynomial", "sin_exp", "log_ratio", "linear"])
def test_numerical_gradient_accuracy_on_known_functions(f, exact, xs):
    numeric = numerical_gradient(f, xs)
    for n, e in zip(numeric, exact(xs)):
        assert relative_error(n, e) < 1e-8


@given(st.lists(floats(2.0), min_size=1, max_size=4))
def test_numerical_gradient_of_a_sum_of_cubes(xs):
    numeric = numerical_gradient(lambda v: sum(x ** 3 for x in v), xs)
    for x, n in zip(xs, numeric):
        # truncation error of centered differences: eps^2 f'''/6 = 1e-12
        assert abs(n - 3 * x * x) < 1e-8


def test_numerical_gradient_does_not_change_its_input():
    xs = [1.0, 2.0]
    numerical_gradient(lambda v: v[0] * v[1], xs)
    assert xs == [1.0, 2.0]


def test_relative_error():
    assert relative_error(1.0, 1.0) == 0.0
    assert relative_error(1.0, 1.1) == pytest.approx(0.1 / 1.1)
    assert relative_error(0.0, 0.0) == 0.0
    assert relative_error(0.0, 1e-13) == pytest.approx(1e-13 / 1e-12)  # the floor


def test_check_passes_on_a_correct_function():
    report = check_scalar_gradients(lambda a, b: (a * b + a.exp()).tanh() / (b ** 2 + 1),
                                    [0.4, -1.3], names=["a", "b"])
    assert report.passed
    assert [r.name for r in report.rows] == ["a", "b"]
    assert report.max_rel_error < 1e-8


def sin_with_wrong_derivative(x: Value) -> Value:
    """sin(x) whose stored local gradient is sin(x) instead of cos(x): a planted bug."""
    return Value(math.sin(x.data), "", (x,), (math.sin(x.data),), "sin")


def sin_with_right_derivative(x: Value) -> Value:
    return Value(math.sin(x.data), "", (x,), (math.cos(x.data),), "sin")


def test_check_passes_on_a_custom_operation_with_the_right_local_gradient():
    report = check_scalar_gradients(lambda x, y: sin_with_right_derivative(x * y), [0.9, 1.7])
    assert report.passed


def test_check_detects_a_wrong_local_gradient():
    report = check_scalar_gradients(
        lambda x, y: sin_with_wrong_derivative(x * y) + y, [0.9, 1.7], names=["x", "y"])
    assert not report.passed
    assert report.max_rel_error > 0.1
    text = str(report)
    assert "FAIL" in text
    assert text.splitlines()[-1].endswith("FAIL")


def test_only_the_input_with_the_wrong_gradient_fails():
    # x reaches the output through the wrong sin only; y also directly.
    report = check_scalar_gradients(
        lambda x, y: sin_with_wrong_derivative(x) + y * y, [0.9, 1.7], names=["x", "y"])
    rows = {r.name: r for r in report.rows}
    assert rows["x"].rel_error > 0.1
    assert rows["y"].rel_error < 1e-8
    lines = str(report).splitlines()
    assert lines[2].startswith("x") and lines[2].endswith("FAIL")
    assert lines[3].startswith("y") and lines[3].endswith("PASS")


def test_table_printing():
    report = GradCheckReport([GradCheckRow("a", 1.0, 1.0), GradCheckRow("b", 2.0, 2.5)], tol=1e-6)
    lines = str(report).splitlines()
    assert lines[0].split() == ["input", "analytic", "numeric", "abs", "diff", "rel", "err",
                                "check"]
    assert set(lines[1]) == {"-"} and len(lines[1]) == len(lines[0])
    assert lines[2].split() == ["a", "1.00000000", "1.00000000", "0.0e+00", "0.0e+00", "PASS"]
    assert lines[3].split() == ["b", "2.00000000", "2.50000000", "5.0e-01", "2.0e-01", "FAIL"]
    assert lines[4] == "max relative error 2.0e-01 (tolerance 1e-06): FAIL"
    assert report.max_rel_error == pytest.approx(0.2)
    assert not report.passed


def test_table_pretty_prints_in_ipython():
    pretty = pytest.importorskip("IPython.lib.pretty")
    report = check_scalar_gradients(lambda a: a * a, [3.0])
    assert pretty.pretty(report) == str(report)


def test_empty_report_passes():
    assert GradCheckReport([]).passed


def test_names_must_match_inputs():
    with pytest.raises(ValueError, match=r"check_scalar_gradients: 1 names for 2 inputs"):
        check_scalar_gradients(lambda a, b: a * b, [1.0, 2.0], names=["a"])
