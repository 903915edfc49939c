"""Tests of `backprop_lessons.gradcheck`: the one numerical-gradient routine
(scalar and array forms), `relative_error` and the closeness of two arrays,
the check table every chapter prints - whose printed form must not depend
on round-off - and the parameter-dictionary checks chapter 5 uses.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from backprop_lessons.gradcheck import (
    CheckRow,
    CheckTable,
    check_scalar_gradients,
    close,
    compare_arrays,
    compare_gradients,
    dot_product_test,
    gradcheck,
    largest_difference,
    numerical_gradient,
    numerical_param_gradients,
    random_direction_checks,
    relative_error,
    scaled_difference,
)
from backprop_lessons.scalar import Value
from strategies import floats

# ---- numerical gradients, errors, check tables -------------------------------


@pytest.mark.parametrize(
    "f, exact, xs",
    [
        (
            lambda v: v[0] ** 2 * v[1],
            lambda v: [2 * v[0] * v[1], v[0] ** 2],
            [1.5, -2.0],
        ),
        (
            lambda v: math.sin(v[0]) * math.exp(v[1]),
            lambda v: [
                math.cos(v[0]) * math.exp(v[1]),
                math.sin(v[0]) * math.exp(v[1]),
            ],
            [0.7, 0.3],
        ),
        (
            lambda v: math.log(v[0]) + v[1] / v[2],
            lambda v: [1 / v[0], 1 / v[2], -v[1] / v[2] ** 2],
            [2.0, 3.0, 0.5],
        ),
        (lambda v: 3.0 * v[0] - 4.0, lambda v: [3.0], [10.0]),
    ],
    ids=["polynomial", "sin_exp", "log_ratio", "linear"],
)
def test_numerical_gradient_accuracy_on_known_functions(f, exact, xs):
    numeric = numerical_gradient(f, xs)
    assert isinstance(numeric, list) and all(type(n) is float for n in numeric)
    for n, e in zip(numeric, exact(xs)):
        assert relative_error(n, e) < 1e-8


@given(st.lists(floats(2.0), min_size=1, max_size=4))
def test_numerical_gradient_of_a_sum_of_cubes(xs):
    numeric = numerical_gradient(lambda v: sum(x**3 for x in v), xs)
    for x, n in zip(xs, numeric):
        # truncation error of centered differences: eps^2 f'''/6 = 1e-12
        assert abs(n - 3 * x * x) < 1e-8


def test_numerical_gradient_is_the_centered_formula_bit_for_bit():
    def f(v):
        return math.exp(v[0]) * v[1]

    eps = 1e-4
    (d0, d1) = numerical_gradient(f, [0.3, 2.0], eps)
    assert d0 == (f([0.3 + eps, 2.0]) - f([0.3 - eps, 2.0])) / (2 * eps)
    assert d1 == (f([0.3, 2.0 + eps]) - f([0.3, 2.0 - eps])) / (2 * eps)


def test_one_sided_differences_are_first_order():
    def f(v):
        return v[0] ** 2

    for eps in (1e-2, 1e-3):
        (one_sided,) = numerical_gradient(f, [1.0], eps, scheme="one-sided")
        (centered,) = numerical_gradient(f, [1.0], eps)
        assert one_sided == pytest.approx(
            2.0 + eps, rel=1e-9
        )  # ((1+e)^2 - 1) / e
        assert centered == pytest.approx(2.0, rel=1e-9)  # exact for a quadratic


def test_evaluation_counts():
    calls = []

    def f(v):
        calls.append(list(v))
        return sum(v)

    numerical_gradient(f, [1.0, 2.0, 3.0])
    assert len(calls) == 6  # two per input
    calls.clear()
    numerical_gradient(f, [1.0, 2.0, 3.0], scheme="one-sided")
    assert len(calls) == 4 and calls[0] == [
        1.0,
        2.0,
        3.0,
    ]  # f(x) once, then one per input


def test_numerical_gradient_does_not_change_its_input():
    xs = [1.0, 2.0]
    numerical_gradient(lambda v: v[0] * v[1], xs)
    assert xs == [1.0, 2.0]


def test_several_outputs_give_jacobian_columns():
    columns = numerical_gradient(
        lambda v: [v[0] * v[1], v[0] + 2 * v[1], 5.0], [3.0, -1.0]
    )
    np.testing.assert_allclose(
        columns, [[-1.0, 1.0, 0.0], [3.0, 2.0, 0.0]], atol=1e-8
    )
    assert all(type(d) is float for column in columns for d in column)


def test_errors_name_the_routine_and_the_argument():
    with pytest.raises(
        ValueError, match="numerical_gradient: scheme must be one of"
    ):
        numerical_gradient(sum, [1.0], scheme="forward")
    with pytest.raises(
        ValueError,
        match="numerical_gradient: eps must be a positive number, got 0",
    ):
        numerical_gradient(sum, [1.0], eps=0)
    with pytest.raises(
        TypeError, match="numerical_gradient: the array form needs a float array"
    ):
        numerical_gradient(lambda a: a.sum(), np.arange(3))


# ---- numerical_gradient: the array form (moved in place) ---------------------


def test_array_form_moves_the_array_in_place_and_restores_it_exactly():
    rng = np.random.default_rng(0)
    W = rng.standard_normal((3, 4))
    before = W.copy()
    R = rng.standard_normal((2, 4))
    X = rng.standard_normal((2, 3))
    # the loss reads W from the enclosing scope, not from its argument
    numeric = numerical_gradient(lambda _: float(((X @ W) * R).sum()), W)
    np.testing.assert_array_equal(W, before)
    assert numeric.shape == W.shape and numeric.dtype == np.float64
    np.testing.assert_allclose(numeric, X.T @ R, rtol=1e-8, atol=1e-9)


def test_array_form_keeps_float32_noise():
    """In float32, x + 1e-6 is not x + 1e-6: the quotient is noise."""
    x64 = np.array([1.0, 2.0])
    x32 = x64.astype(np.float32)
    g64 = numerical_gradient(
        lambda a: float((a.astype(np.float64) ** 2).sum()), x64
    )
    g32 = numerical_gradient(
        lambda a: float((a.astype(np.float64) ** 2).sum()), x32
    )
    assert x32.dtype == np.float32 and g32.dtype == np.float64
    assert relative_error(g64, [2.0, 4.0]) < 1e-8
    assert relative_error(g32, [2.0, 4.0]) > 1e-3


def test_array_form_restores_the_entry_when_f_raises():
    x = np.array([1.0, 2.0])

    def f(a):
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        numerical_gradient(f, x)
    np.testing.assert_array_equal(x, [1.0, 2.0])


# ---- relative_error ----------------------------------------------------------


def test_relative_error_of_numbers():
    assert relative_error(1.0, 1.0) == 0.0
    assert relative_error(1.0, 1.1) == pytest.approx(0.1 / 1.1)
    assert relative_error(0.0, 0.0) == 0.0
    assert relative_error(0.0, 1e-13) == pytest.approx(1e-13 / 1e-12)  # the floor


def test_relative_error_of_arrays_is_scaled_by_the_largest_entry():
    a, b = np.array([100.0, 1e-3]), np.array([100.0, 2e-3])
    assert relative_error(a, b) == pytest.approx(
        1e-3 / 100
    )  # not 0.5, the entry's ratio
    assert relative_error(np.zeros(0), np.zeros(0)) == 0.0
    with pytest.raises(
        ValueError, match=r"relative_error: shapes \(2,\) and \(3,\) differ"
    ):
        relative_error(np.zeros(2), np.zeros(3))


def test_largest_difference_is_the_largest_absolute_difference():
    assert largest_difference([1.0, -2.0, 3.0], [1.5, -2.0, 0.0]) == 3.0
    assert largest_difference(2.0, 2.0) == 0.0
    assert largest_difference(np.zeros((0, 3)), np.zeros((0, 3))) == 0.0
    assert math.isnan(largest_difference([1.0, math.nan], [1.0, 2.0]))
    with pytest.raises(ValueError, match=r"largest_difference: shapes \(2,\)"):
        largest_difference(np.zeros(2), np.zeros(3))


def test_close_is_relative_above_the_floor_and_absolute_below():
    big = np.array([100.0, -50.0])
    assert close(big + 0.5e-7, big, 1e-9)  # 0.5e-7 <= 1e-9 * 100
    assert not close(big + 2e-7, big, 1e-9)
    small = np.array([1e-3, 0.0])
    assert close(small + 0.5e-9, small, 1e-9)  # against 1, not 1e-3
    assert not close(small + 0.5e-9, small, 1e-9, floor=0.0)
    assert close(0.0, 0.0, 1e-9, floor=0.0)
    assert scaled_difference(big + 2e-7, big) == pytest.approx(2e-9)
    assert scaled_difference(small + 0.5e-9, small) == pytest.approx(0.5e-9)


def test_close_is_false_for_another_shape_or_nan():
    """The reader's answer may have any shape, or hold nan: never close."""
    assert not close(np.zeros(3), np.zeros((3, 1)), 1.0)
    assert not close([math.nan], [0.0], 1.0)


# ---- the check table ---------------------------------------------------------


def test_per_entry_error_sees_a_wrong_small_entry_normwise_does_not():
    """Chapter 7's case: an entry 1e-7 of the largest, sign flipped."""
    right = np.array([0.88, 0.62, 0.047, 1.1e-7])
    wrong = right * np.array([1, 1, 1, -1])
    assert relative_error(wrong, right) == pytest.approx(2.2e-7 / 0.88)
    assert relative_error(wrong, right, per_entry=True) == pytest.approx(2.0)
    assert relative_error(right, right, per_entry=True) == 0.0
    # each entry against its own size, or the floor when both are smaller
    a, b = np.array([1.0, 1e-20]), np.array([1.01, 3e-20])
    assert relative_error(a, b, per_entry=True) == pytest.approx(0.01 / 1.01)
    assert relative_error(a, b, floor=0.0, per_entry=True) == pytest.approx(2 / 3)
    rows = [
        compare_arrays("normwise", wrong, right, 1e-6),
        compare_arrays("per entry", wrong, right, 1e-3, per_entry=True),
    ]
    assert [r.passed for r in rows] == [True, False]
    with pytest.raises(TypeError, match="per_entry must be True or False"):
        relative_error(right, right, per_entry="yes")


def test_row_passes_below_its_tolerance():
    assert CheckRow("w", (2,), 1e-13, 1e-13, 1e-12).passed
    assert not CheckRow("w", (2,), 1e-12, 1e-12, 1e-12).passed
    assert not CheckRow("w", (2,), float("nan"), float("nan"), 1e-12).passed


def test_printed_table_shows_errors_against_their_tolerances():
    table = CheckTable(
        "demo",
        [
            CheckRow("loss", (), 1e-17, 3e-16, 1e-12),
            CheckRow("W1", (4, 5), 0.01, 0.42, 1e-4),
        ],
    )
    lines = str(table).splitlines()
    assert lines[0] == "demo"
    assert lines[1].split() == ["name", "shape", "rel", "error", "check"]
    assert set(lines[2]) == {"-"} and len(lines[2]) == len(lines[1])
    assert lines[3].split() == ["loss", "()", "<", "1e-12", "PASS"]
    assert lines[4].split() == [
        "W1",
        "(4,",
        "5)",
        "4.2e-01",
        ">",
        "1e-04",
        "FAIL",
    ]
    assert lines[5] == "1 of 2 FAIL"
    assert not table.passed and table.max_rel_error == 0.42
    assert table["W1"].max_abs_diff == 0.01  # raw numbers stay available


@given(st.floats(0, 0.999e-12), st.floats(0, 0.999e-12))
def test_printed_form_does_not_depend_on_round_off(e1, e2):
    """The property that makes stored outputs portable: two machines whose
    round-off differs, both below the tolerance, print the same table."""

    def table(err):
        return str(CheckTable("t", [CheckRow("x", (3,), err, err, 1e-12)]))

    assert table(e1) == table(e2)


def test_scalar_rows_print_both_values():
    report = check_scalar_gradients(
        lambda a, b: a * b, [1.5, -2.0], names=["a", "b"]
    )
    lines = str(report).splitlines()
    assert lines[0].split() == [
        "name",
        "analytic",
        "numeric",
        "rel",
        "error",
        "check",
    ]
    assert lines[2].split() == [
        "a",
        "-2.000000",
        "-2.000000",
        "<",
        "1e-06",
        "PASS",
    ]
    assert lines[3].split() == ["b", "1.500000", "1.500000", "<", "1e-06", "PASS"]
    assert lines[4] == "all 2 PASS"


def test_a_row_prints_as_one_portable_line():
    assert (
        str(CheckRow("dW", (3, 4), 1e-17, 2e-16, 1e-12))
        == "dW: rel error < 1e-12  PASS"
    )
    assert (
        str(CheckRow("db", (4,), 0.5, 0.25, 1e-6))
        == "db: rel error 2.5e-01 > 1e-06  FAIL"
    )


def test_numbers_compared_keep_their_values():
    table = CheckTable(
        "",
        [compare_arrays("o", 0.5, 0.5 + 1e-17, 1e-12)],
        value_labels=("engine", "PyTorch"),
    )
    assert table.rows[0].values == (0.5, 0.5)
    lines = str(table).splitlines()
    assert lines[2].split() == ["o", "0.500000", "0.500000", "<", "1e-12", "PASS"]
    assert len(lines) == 3  # a single row needs no summary line
    assert compare_arrays("W", np.ones(2), np.ones(2), 1e-12).values is None


def test_table_lookup_by_name():
    table = CheckTable("t", [CheckRow("a", (), 0, 0, 1)])
    assert table["a"].name == "a"
    with pytest.raises(
        KeyError, match=r"CheckTable: no row named 'b' \(have \['a'\]\)"
    ):
        table["b"]


def test_compare_arrays_rows():
    row = compare_arrays("W", [[1.0, 2.0]], [[1.0, 2.5]], tol=1e-6)
    assert (row.shape, row.max_abs_diff, row.rel_error, row.passed) == (
        (1, 2),
        0.5,
        0.2,
        False,
    )
    mismatch = compare_arrays("W", np.zeros((2, 3)), np.zeros((3, 2)), tol=1.0)
    assert mismatch.shape == "(2, 3) vs (3, 2)" and not mismatch.passed
    assert "(2, 3) vs (3, 2)" in str(CheckTable("", [mismatch]))


def test_empty_table_passes():
    assert CheckTable("nothing").passed
    assert str(CheckTable("nothing")).splitlines()[-1] == "all 0 PASS"


def test_table_pretty_prints_in_ipython():
    pretty = pytest.importorskip("IPython.lib.pretty")
    report = check_scalar_gradients(lambda a: a * a, [3.0])
    assert pretty.pretty(report) == str(report)


# ---- check_scalar_gradients --------------------------------------------------


def test_check_passes_on_a_correct_function():
    report = check_scalar_gradients(
        lambda a, b: (a * b + a.exp()).tanh() / (b**2 + 1),
        [0.4, -1.3],
        names=["a", "b"],
    )
    assert report.passed
    assert [r.name for r in report.rows] == ["a", "b"]
    assert report.max_rel_error < 1e-8


def sin_with_wrong_derivative(x: Value) -> Value:
    """sin(x) storing sin(x) as its local gradient, not cos(x): a planted bug."""
    return Value(math.sin(x.data), "", (x,), (math.sin(x.data),), "sin")


def sin_with_right_derivative(x: Value) -> Value:
    return Value(math.sin(x.data), "", (x,), (math.cos(x.data),), "sin")


def test_check_passes_on_a_custom_operation_with_the_right_local_gradient():
    report = check_scalar_gradients(
        lambda x, y: sin_with_right_derivative(x * y), [0.9, 1.7]
    )
    assert report.passed


def test_check_detects_a_wrong_local_gradient():
    report = check_scalar_gradients(
        lambda x, y: sin_with_wrong_derivative(x * y) + y,
        [0.9, 1.7],
        names=["x", "y"],
    )
    assert not report.passed
    assert report.max_rel_error > 0.1


def test_only_the_input_with_the_wrong_gradient_fails():
    # x reaches the output through the wrong sin only; y also directly.
    report = check_scalar_gradients(
        lambda x, y: sin_with_wrong_derivative(x) + y * y,
        [0.9, 1.7],
        names=["x", "y"],
    )
    assert report["x"].rel_error > 0.1
    assert report["y"].rel_error < 1e-8
    lines = str(report).splitlines()
    assert lines[2].startswith("x") and lines[2].endswith("FAIL")
    assert lines[3].startswith("y") and lines[3].endswith("PASS")


def test_names_must_match_inputs():
    with pytest.raises(
        ValueError, match=r"check_scalar_gradients: 1 names for 2 inputs"
    ):
        check_scalar_gradients(lambda a, b: a * b, [1.0, 2.0], names=["a"])


# ---- the dot-product test ----------------------------------------------------


def _matrix_maps(M):
    """J v and J^T u of x -> M x, as dot_product_test takes them."""
    return (lambda vs: M @ vs[0]), (lambda u: [M.T @ u])


def test_dot_product_test_passes_on_a_linear_map_and_its_transpose():
    M = np.random.default_rng(0).standard_normal((4, 3))
    jvp, vjp = _matrix_maps(M)
    row = dot_product_test(jvp, vjp, [(3,)])
    assert row.passed and row.rel_error < 1e-14


def test_dot_product_test_catches_a_transposed_square_jacobian():
    """The 2 AM bug: using J where J^T belongs; shapes cannot catch it when
    J is square, the dot-product test does."""
    M = np.random.default_rng(1).standard_normal((3, 3))
    row = dot_product_test(lambda vs: M @ vs[0], lambda u: [M @ u], [(3,)])
    assert not row.passed
    assert "FAIL" in str(row)


def test_dot_product_test_checks_shapes():
    M = np.ones((2, 3))
    with pytest.raises(ValueError, match="dot_product_test: vjp"):
        dot_product_test(lambda vs: M @ vs[0], lambda u: [u], [(3,)])
    with pytest.raises(ValueError, match="dot_product_test: J v has shape"):
        dot_product_test(
            lambda vs: M @ vs[0], lambda u: [M.T @ u], [(3,)], u=np.ones(3)
        )


def test_gradcheck_dot_product_row():
    from backprop_lessons.tensor import Tensor

    rng = np.random.default_rng(2)
    inputs = {"X": rng.standard_normal((3, 3)), "W": rng.standard_normal((3, 3))}
    report = gradcheck(lambda x, w: (x @ w).tanh(), inputs, dot_product=True)
    assert report.passed and report["dot product"].passed
    original = Tensor.matmul_backward

    def transposed(g, saved, needs):  # dX = G W instead of G W^T
        a, b = saved
        return g @ b, a.swapaxes(-1, -2) @ g

    try:
        Tensor.matmul_backward = staticmethod(transposed)
        bad = gradcheck(lambda x, w: x @ w, inputs, dot_product=True)
    finally:
        Tensor.matmul_backward = staticmethod(original)
    assert not bad["dot product"].passed
    with pytest.raises(TypeError, match="gradcheck: dot_product must be"):
        gradcheck(lambda x, w: x @ w, inputs, dot_product=1)


# ---- random directions -------------------------------------------------------


def _quadratic():
    """f(x) = sum(A * x^2) + sum(b * y) with its gradients, as dicts."""
    rng = np.random.default_rng(3)
    arrays = {"x": rng.standard_normal((3, 4)), "y": rng.standard_normal(5)}
    A, b = rng.standard_normal((3, 4)), rng.standard_normal(5)

    def f(p):
        return float((A * p["x"] ** 2).sum() + (b * p["y"]).sum())

    return f, arrays, {"x": 2 * A * arrays["x"], "y": b.copy()}


def test_random_direction_checks_pass_a_right_gradient():
    f, arrays, grads = _quadratic()
    table = random_direction_checks(f, arrays, grads)
    assert [r.name for r in table.rows] == ["x", "y", "all at once"]
    assert [r.shape for r in table.rows] == [(3, 4), (5,), "every array"]
    assert table.passed and table.max_rel_error < 1e-8
    assert "every array" in str(table) and "all 3 PASS" in str(table)
    before = {k: v.copy() for k, v in arrays.items()}
    assert all(np.array_equal(before[k], arrays[k]) for k in arrays)


def test_random_direction_checks_name_the_wrong_array():
    f, arrays, grads = _quadratic()
    grads["x"] = grads["x"].copy()
    grads["x"][0, 0] *= -1  # one wrong entry
    table = random_direction_checks(f, arrays, grads)
    assert [r.passed for r in table.rows] == [False, True, False]


def test_random_direction_checks_costs_two_passes_per_row():
    f, arrays, grads = _quadratic()
    calls = []
    random_direction_checks(lambda p: calls.append(1) or f(p), arrays, grads)
    assert len(calls) == 2 * (len(arrays) + 1)


def test_random_direction_checks_needs_every_gradient():
    f, arrays, grads = _quadratic()
    del grads["y"]
    with pytest.raises(KeyError, match="no gradient for"):
        random_direction_checks(f, arrays, grads)


# ---- the parameter-dictionary checks (chapter 5) -----------------------------


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
