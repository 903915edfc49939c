"""The checks of chapter 5's exercises (backprop_lessons.exercises.mlp_by_hand).

For every check: the book's answer is correct, a stub is not attempted, an
exception of the reader's code is a "not yet" that quotes the line, and the
classic slips, written here as a reader would write them, are rejected with
a hint that names the wrong gradient and, where the check can tell, the
slip; a slip it does not know points to Hint 3, never to the formula.
"""

from __future__ import annotations

import numpy as np
import pytest

from backprop_lessons.exercises import check_batchnorm_backward, mlp_by_hand
from backprop_lessons.exercises.checking import Verdict
from backprop_lessons.gpt import layers
from verdicts import assert_not_yet

torch = pytest.importorskip("torch")

check_mlp_intermediates = mlp_by_hand.check_mlp_intermediates
check_mlp_backward = mlp_by_hand.check_mlp_backward
check_input_gradient = mlp_by_hand.check_input_gradient
check_tanh_ratio = mlp_by_hand.check_tanh_ratio


def run(check, answer, capsys, exercise=1):
    """The verdict of check(answer) and everything it printed."""
    verdict = check(answer, exercise=exercise)
    printed = capsys.readouterr().out
    assert printed.endswith(f"{verdict}\n")
    assert isinstance(verdict, Verdict) and verdict.exercise == exercise
    return verdict, printed


def verdict_of(check, answer, capsys):
    return run(check, answer, capsys)[0]


def stub_raising(*args):
    raise NotImplementedError


# ---- exercise 1: every gradient, one line each ---------------------------------


def gradients(model, Y, bug=None):
    """Every gradient of the backward by name, as a reader writes them one
    per line, with one slip or none."""
    X, H1, H2, Y_hat = (model.cache[k] for k in ("X", "H1", "H2", "Y_hat"))
    W2, W3 = model.params["W2"], model.params["W3"]
    B = X.shape[0]
    g = {}
    g["dZ3"] = {
        "no /B": Y_hat - Y,
        "/B twice": (Y_hat - Y) / B**2,
        "softmax slope": Y_hat * (1 - Y_hat) / B,
        "no Y": Y_hat / B,
        "Y - Y_hat": (Y - Y_hat) / B,
        "/d3": (Y_hat - Y) / Y.shape[1],
    }.get(bug, (Y_hat - Y) / B)
    dZ3 = g["dZ3"]
    g["dW3"] = {
        "dW3 transposed": dZ3.T @ H2,
        "dW3 /B": H2.T @ dZ3 / B,
    }.get(bug, H2.T @ dZ3)
    g["db3"] = {
        "db3 mean": dZ3.mean(axis=0),
        "db3 axis 1": dZ3.sum(axis=1),
    }.get(bug, dZ3.sum(axis=0))
    g["dH2"] = dZ3 @ W3 if bug == "W3 untransposed" else dZ3 @ W3.T
    g["dH2"] = g["dH2"] * (2 if bug == "dH2 unknown" else 1)
    dH2 = g["dH2"]
    g["dZ2"] = {
        "H alone": dH2 * H2,
        "1 - H alone": dH2 * (1 - H2),
        "no slope": dH2,
        "slope alone": H2 * (1 - H2),
        "sigmoid twice": dH2
        * (1 / (1 + np.exp(-H2)))
        * (1 - 1 / (1 + np.exp(-H2))),
    }.get(bug, dH2 * H2 * (1 - H2))
    dZ2 = g["dZ2"]
    g["dW2"] = {
        "dW2 output": H2.T @ dZ2,
        "dW2 before slope": H1.T @ dH2,
    }.get(bug, H1.T @ dZ2)
    g["db2"] = dH2.sum(axis=0) if bug == "db2 before slope" else dZ2.sum(0)
    g["dH1"] = dZ2 @ W2.T
    g["dZ1"] = g["dH1"] * H1 * (1 - H1)
    g["dW1"] = X.T @ g["dZ1"]
    g["db1"] = g["dZ1"].sum(axis=0) * (1.5 if bug == "db1 unknown" else 1)
    return g


def test_the_books_gradients_are_correct_and_the_table_printed(capsys):
    verdict, printed = run(check_mlp_intermediates, gradients, capsys)
    assert verdict.correct, str(verdict)
    assert "at B = 8, d0 = 4, d1 = 5, d2 = 6, d3 = 3" in printed
    assert "dW1   (4, 5)   < 1e-10           yes" in printed


@pytest.mark.parametrize(
    "bug,hints",
    [
        ("no /B", ["dZ3 is the first that differs", "lacks the 1/B"]),
        ("/B twice", ["dZ3", "divides by B twice"]),
        ("softmax slope", ["dZ3", "softmax's diagonal slope alone"]),
        ("no Y", ["dZ3", "leaves out the labels Y"]),
        ("Y - Y_hat", ["dZ3", "wrong sign"]),
        ("/d3", ["dZ3", "divides by the number of classes"]),
        (
            "dW3 transposed",
            ["dW3 has shape (3, 6); it must be (d2, d3) = (6, 3)"],
        ),
        ("dW3 /B", ["dW3 is the first", "divides by B again"]),
        ("db3 mean", ["db3 is the first", "averages over the batch"]),
        ("H alone", ["dZ2 is the first", "multiplies by H2 alone"]),
        ("1 - H alone", ["dZ2", "multiplies by (1 - H2) alone"]),
        ("no slope", ["dZ2", "the sigmoid's slope is missing"]),
        ("slope alone", ["dZ2", "the sigmoid's slope alone"]),
        ("sigmoid twice", ["dZ2", "applies the sigmoid to H2"]),
        ("dW2 before slope", ["dW2 is the first", "before the sigmoid's slope"]),
        ("db2 before slope", ["db2 is the first", "sums the gradient at H2"]),
        ("db1 unknown", ["db1 is the first", "see Hint 3 for the formula"]),
        ("dH2 unknown", ["dH2 is the first", "see Hint 3 for the formula"]),
    ],
)
def test_each_slip_of_the_backward_is_named(bug, hints, capsys):
    verdict = verdict_of(
        check_mlp_intermediates, lambda m, Y: gradients(m, Y, bug), capsys
    )
    assert_not_yet(verdict, *hints)


@pytest.mark.parametrize(
    "bug,hints",
    [
        ("dW3 transposed", ["dW3", "transpose of the right one", "B = 4"]),
        ("db3 axis 1", ["db3", "sums over the wrong axis", "B = 4"]),
        ("W3 untransposed", ["dH2", "W3 without its transpose", "B = 4"]),
        ("dW2 output", ["dW2", "uses the layer's output H2", "B = 4"]),
    ],
)
def test_slips_that_keep_their_shape_are_named_on_square_weights(
    bug, hints, capsys
):
    """In the general case these raise or have the wrong shape (told as
    such); the square case (B = d1 = d2 = d3 = 4) is where their values are
    judged and the slip named."""

    def answer(model, Y):
        square = model.cache["X"].shape[0] == 4
        return gradients(model, Y, bug if square else None)

    assert_not_yet(verdict_of(check_mlp_intermediates, answer, capsys), *hints)


def test_stubs_and_partial_answers(capsys):
    def stub(model, Y):
        dZ3 = ...
        dW3 = ...
        return {"dZ3": dZ3, "dW3": dW3}

    for answer in (stub, stub_raising):
        verdict, printed = run(check_mlp_intermediates, answer, capsys)
        assert verdict.status == "not attempted yet", str(verdict)
        assert printed == f"{verdict}\n"  # no table for a stub
    assert (
        "write stub(model, Y)"
        in verdict_of(check_mlp_intermediates, stub, capsys).hint
    )

    def two_lines(model, Y):
        right = gradients(model, Y)
        return {
            **dict.fromkeys(right, ...),
            "dZ3": right["dZ3"],
            "dW3": right["dW3"],
        }

    verdict, printed = run(check_mlp_intermediates, two_lines, capsys)
    assert_not_yet(verdict, "the 2 written so far are right; still to write: db3")
    assert "(not written)" in printed


def test_a_line_that_uses_an_unwritten_gradient_is_told_to_go_in_order(capsys):
    def out_of_order(model, Y):
        H2 = model.cache["H2"]
        dZ3 = ...
        dW3 = H2.T @ dZ3
        return {"dZ3": dZ3, "dW3": dW3}

    verdict = verdict_of(check_mlp_intermediates, out_of_order, capsys)
    assert_not_yet(verdict, "uses dZ3, still written as ...", "in order")
    assert any("dW3 = H2.T @ dZ3" in line for line in verdict.where)


def test_a_raising_answer_is_quoted(capsys):
    def raises(model, Y):
        right = gradients(model, Y)
        right["dH1"] = right["dZ2"] @ model.params["W2"]  # shapes do not fit
        return right

    verdict = verdict_of(check_mlp_intermediates, raises, capsys)
    assert_not_yet(verdict, "your code raised ValueError", "the shapes in Hint 2")
    assert any("in raises, line" in line for line in verdict.where), verdict.where


def test_malformed_answers(capsys):
    def named(**extra):
        return lambda m, Y: {**gradients(m, Y), **extra}

    cases = [
        (lambda m, Y: [1, 2], "return a dict of your gradients"),
        (named(dX=np.zeros(1)), "unknown name 'dX'"),
        (named(dH1="not an array"), "dH1 has shape not an array"),
    ]
    for answer, hint in cases:
        assert_not_yet(verdict_of(check_mlp_intermediates, answer, capsys), hint)

    def with_nan(m, Y):
        g = gradients(m, Y)
        g["db1"] = g["db1"] * np.nan
        return g

    verdict, printed = run(check_mlp_intermediates, with_nan, capsys)
    assert_not_yet(verdict, "db1 is the first", "nan or inf")


def test_every_case_counts():
    """A slip invisible in the first case is still caught by another: a
    batch of one hides nothing, and each case is a different network."""
    assert [B for _, B, _ in mlp_by_hand.MLP_CASES] == [8, 4, 1]
    sizes = [s for s, _, _ in mlp_by_hand.MLP_CASES]
    assert sizes[1][1:] == (4, 4, 4) and 1 in sizes[2]


# ---- exercise 2: batch normalization -------------------------------------------


def batchnorm(dinp, dweight, dbias, dout, cache, bug=None):
    """Batch norm's backward as a reader writes it, with one slip or none."""
    inp, weight, mean, rstd = cache
    B = inp.shape[0]
    axis = 1 if bug == "layernorm axis" else 0
    if bug in {"unbiased xhat", "unbiased forward", "layernorm stats"}:
        ax = 1 if bug == "layernorm stats" else 0
        m = inp.mean(axis=ax, keepdims=True)
        ddof = 0 if bug == "layernorm stats" else 1
        rstd = 1 / np.sqrt(inp.var(axis=ax, ddof=ddof, keepdims=True) + 1e-5)
        xhat = (inp - m) * rstd
        axis = ax
    elif bug == "divides by rstd":
        xhat = (inp - mean) / rstd
    elif bug == "no mean in xhat":
        xhat = inp * rstd
    else:
        xhat = (inp - mean) * rstd
    g = dout if bug == "dout for g" else dout * weight
    mean_g = g.mean(axis=axis, keepdims=True)
    mean_gx = (g * xhat).mean(axis=axis, keepdims=True)
    if bug == "sums":
        mean_g, mean_gx = mean_g * B, mean_gx * B
    if bug in {"bessel", "unbiased forward"}:
        mean_gx = (g * xhat).sum(axis=0, keepdims=True) / (B - 1)
    if bug in {"no mean path", "constants"}:
        mean_g = 0
    if bug in {"no variance path", "constants"}:
        mean_gx = 0
    sign_var = -1 if bug == "variance sign" else 1
    sign_mean = -1 if bug == "mean sign" else 1
    grad = g - sign_mean * mean_g - sign_var * xhat * mean_gx
    grad = grad * (1 if bug == "no rstd" else rstd)
    if bug == "running statistics":
        grad = g / np.sqrt(1 + 1e-5)
    if bug == "g alone":
        grad = g
    dweight_part = {
        "dweight x": (dout * inp).sum(axis=0),
        "dweight is dbias": dout.sum(axis=0),
        "dweight mean": (dout * xhat).mean(axis=0),
        "dweight no rstd": (dout * (inp - mean)).sum(axis=0),
        "dweight channels": (dout * xhat).sum(axis=1),
    }.get(bug, (dout * xhat).sum(axis=0))
    dbias_part = {
        "dbias is dweight": (dout * xhat).sum(axis=0),
        "dbias mean": dout.mean(axis=0),
        "dbias weight": (dout * weight).sum(axis=0),
        "dbias channels": dout.sum(axis=1),
    }.get(bug, dout.sum(axis=0))
    if bug == "= for dinp":
        dinp[...] = grad
    else:
        dinp += grad
    if bug == "= for dweight":
        dweight[:] = dweight_part
    elif dweight_part.shape == dweight.shape:  # else: it adds nothing
        dweight += dweight_part
    if bug == "= for dbias":
        dbias[:] = dbias_part
    elif dbias_part.shape == dbias.shape:
        dbias += dbias_part


def test_a_readers_batchnorm_backward_is_correct(capsys):
    assert verdict_of(check_batchnorm_backward, batchnorm, capsys).correct


@pytest.mark.parametrize(
    "bug,hints",
    [
        (
            "no mean path",
            ["dinp is wrong at B = 6, C = 4", "lacks the path through the mean"],
        ),
        ("no variance path", ["dinp", "lacks the path through the variance"]),
        ("constants", ["dinp", "treats the mean and the variance as constants"]),
        ("running statistics", ["dinp", "uses running statistics"]),
        ("g alone", ["dinp", "passes g = dout * weight through unchanged"]),
        ("bessel", ["dinp", "unbiased variance", "Bessel's correction"]),
        ("unbiased xhat", ["dinp", "unbiased variance"]),
        # Backprop Ninja's: the statistics recomputed with B - 1, and the
        # variance's path divided by B - 1 too
        ("unbiased forward", ["dinp", "unbiased variance"]),
        ("layernorm axis", ["dinp", "layernorm's axis"]),
        ("layernorm stats", ["dinp", "layernorm's axis"]),
        ("sums", ["dinp", "B times too large"]),
        ("no rstd", ["dinp", "lacks the factor rstd"]),
        ("dout for g", ["dinp", "uses dout where the gradient at xhat belongs"]),
        (
            "variance sign",
            ["dinp", "path through the variance has the wrong sign"],
        ),
        ("mean sign", ["dinp", "path through the mean has the wrong sign"]),
        ("divides by rstd", ["dinp", "divides by rstd"]),
        ("no mean in xhat", ["dinp", "leaves out the mean"]),
        ("dweight x", ["dweight is wrong", "multiplies dout by the input x"]),
        ("dweight is dbias", ["dweight is wrong", "dbias's sum"]),
        ("dweight mean", ["dweight is wrong", "averages over the B examples"]),
        ("dweight no rstd", ["dweight is wrong", "leaves out rstd"]),
        ("dbias is dweight", ["dbias is wrong", "dweight's sum"]),
        ("dbias mean", ["dbias is wrong", "averages"]),
        ("dbias weight", ["dbias is wrong", "multiplies by the weight"]),
        ("= for dinp", ["dinp is wrong", "assigns (=) where it must add (+=)"]),
        ("= for dweight", ["dweight is wrong", "assigns (=)"]),
        ("= for dbias", ["dbias is wrong", "assigns (=)"]),
    ],
)
def test_each_batchnorm_slip_is_named(bug, hints, capsys):
    def answer(*args):
        return batchnorm(*args, bug=bug)

    verdict = verdict_of(check_batchnorm_backward, answer, capsys)
    assert_not_yet(verdict, *hints)
    assert "g - mean(g)" not in verdict.hint  # the slip, never the formula


@pytest.mark.parametrize(
    "bug,hint",
    [
        ("dweight channels", "sums over the C channels of each example"),
        ("dbias channels", "sums over the C channels of each example"),
    ],
)
def test_a_sum_over_the_channels_is_named_where_its_shape_fits(bug, hint, capsys):
    """(B, C) = (4, 4) is where a sum over axis 1 has the shape (C,); in the
    other shapes it adds nothing and the check says so."""

    def answer(*args):
        return batchnorm(*args, bug=bug)

    verdict = verdict_of(check_batchnorm_backward, answer, capsys)
    assert_not_yet(verdict, "wrong")
    square = mlp_by_hand.BATCHNORM_SHAPES.index((4, 4))
    assert square == len(mlp_by_hand.BATCHNORM_SHAPES) - 1
    # each case on its own: the square one names the axis
    rng = np.random.default_rng(0)
    case = mlp_by_hand._batchnorm_case(rng, 4, 4)
    from backprop_lessons.exercises.checking import NotYet
    from backprop_lessons.exercises.layer_checks import run_layer_check

    with pytest.raises(NotYet, match=hint):
        run_layer_check(answer, [case], "todo")


def test_an_unknown_slip_points_to_hint_3(capsys):
    def answer(dinp, dweight, dbias, dout, cache):
        batchnorm(dinp, dweight, dbias, dout, cache)
        dinp += 0.1 * dout  # nothing the check knows

    verdict = verdict_of(check_batchnorm_backward, answer, capsys)
    assert_not_yet(verdict, "dinp is wrong", "see Hint 3 for the formula")


def test_batchnorm_stub_raising_and_in_place_changes(capsys):
    def stub(dinp, dweight, dbias, dout, cache):
        inp, weight, mean, rstd = cache
        raise NotImplementedError

    verdict = verdict_of(check_batchnorm_backward, stub, capsys)
    assert verdict.status == "not attempted yet"
    assert "write stub(dinp, dweight, dbias, dout, cache)" in verdict.hint

    def raises(dinp, dweight, dbias, dout, cache):
        inp, weight, mean, rstd = cache
        dinp += rstd * dout @ weight  # (B, C) @ (C,): a (B,) row
        dweight += 0

    verdict = verdict_of(check_batchnorm_backward, raises, capsys)
    assert_not_yet(verdict, "your code raised ValueError", "at B = 6, C = 4")
    assert any("dinp += rstd * dout @ weight" in w for w in verdict.where)

    def changes_dout(dinp, dweight, dbias, dout, cache):
        dout *= cache[1]
        batchnorm(dinp, dweight, dbias, dout / cache[1], cache)

    assert_not_yet(
        verdict_of(check_batchnorm_backward, changes_dout, capsys),
        "changed dout or the cache in place",
    )


def test_batchnorm_runs_on_a_batch_of_two_and_a_single_channel():
    shapes = mlp_by_hand.BATCHNORM_SHAPES
    assert any(B == 2 for B, _ in shapes) and any(C == 1 for _, C in shapes)


def test_the_batchnorm_check_is_exported():
    from backprop_lessons import exercises

    assert (
        exercises.check_batchnorm_backward is mlp_by_hand.check_batchnorm_backward
    )
    assert "check_batchnorm_backward" in exercises.__all__


# ---- exercises 3 to 5 ----------------------------------------------------------


def parameter_backward(model, Y, sigmoid_slope=True):
    g = gradients(model, Y)
    if not sigmoid_slope:  # the demonstration's bug: delta1 = dH1 * H1
        H1 = model.cache["H1"]
        dZ1 = g["dH1"] * H1
        g["dW1"], g["db1"] = model.cache["X"].T @ dZ1, dZ1.sum(axis=0)
    return {
        name[1:]: g[name] for name in ("dW1", "db1", "dW2", "db2", "dW3", "db3")
    }


def test_the_fixed_backward(capsys):
    assert verdict_of(check_mlp_backward, parameter_backward, capsys).correct
    verdict = verdict_of(
        check_mlp_backward,
        lambda m, Y: parameter_backward(m, Y, sigmoid_slope=False),
        capsys,
    )
    assert_not_yet(verdict, "W1, b1 disagree", "all of them depend on")
    assert "H1" not in verdict.hint  # the exercise is to find it
    one = verdict_of(
        check_mlp_backward,
        lambda m, Y: {
            **parameter_backward(m, Y),
            "b3": 2 * parameter_backward(m, Y)["b3"],
        },
        capsys,
    )
    assert_not_yet(one, "b3 disagree", "that it depends on")
    assert verdict_of(check_mlp_backward, stub_raising, capsys).status == (
        "not attempted yet"
    )
    assert_not_yet(
        verdict_of(check_mlp_backward, lambda m, Y: {"W1": 0}, capsys),
        "return a dict with the keys",
    )

    def raises(model, Y):
        return model.cache["nothing"]

    verdict = verdict_of(check_mlp_backward, raises, capsys)
    assert_not_yet(verdict, "your code raised KeyError")
    assert any('model.cache["nothing"]' in w for w in verdict.where)


def input_gradient(model, Y, bug=None):
    g = gradients(model, Y)
    W1, X = model.params["W1"], model.cache["X"]
    answers = {
        None: lambda: g["dZ1"] @ W1.T,
        "W1 untransposed": lambda: g["dZ1"] @ W1,  # square W1 only
        "stops at dZ1": lambda: g["dZ1"],  # square W1 only
        "no slope": lambda: g["dH1"] @ W1.T,
        "X slope": lambda: g["dZ1"] @ W1.T * X * (1 - X),
        "times B": lambda: X.shape[0] * (g["dZ1"] @ W1.T),
        "sign": lambda: -(g["dZ1"] @ W1.T),
        "unknown": lambda: 1.5 * (g["dZ1"] @ W1.T),
    }
    return answers[bug]()


@pytest.mark.parametrize(
    "bug,hint",
    [
        ("no slope", "leaves out the first sigmoid's slope"),
        ("X slope", "a sigmoid's slope at the inputs"),
        ("times B", "lacks the 1/B of the mean"),
        ("sign", "wrong sign"),
        ("unknown", "see Hint 3 for the formula"),
    ],
)
def test_the_input_gradient_slips(bug, hint, capsys):
    verdict = verdict_of(
        check_input_gradient, lambda m, Y: input_gradient(m, Y, bug), capsys
    )
    assert_not_yet(verdict, "dX disagrees with PyTorch's", hint)


@pytest.mark.parametrize(
    "bug,hint",
    [
        ("W1 untransposed", "W1 without its transpose"),
        ("stops at dZ1", "it stops at dZ1"),
    ],
)
def test_input_gradient_slips_that_keep_the_shape_on_a_square_w1(
    bug, hint, capsys
):
    def answer(model, Y):
        W1 = model.params["W1"]
        return input_gradient(
            model, Y, bug if W1.shape[0] == W1.shape[1] else None
        )

    verdict = verdict_of(check_input_gradient, answer, capsys)
    assert_not_yet(verdict, "d0 = 4, d1 = 4", hint)


def test_the_input_gradient_right_stub_wrong_shape_and_raising(capsys):
    assert verdict_of(check_input_gradient, input_gradient, capsys).correct
    assert verdict_of(check_input_gradient, stub_raising, capsys).status == (
        "not attempted yet"
    )
    assert_not_yet(
        verdict_of(check_input_gradient, lambda m, Y: m.cache["H1"], capsys),
        "dX must have the shape of X",
    )

    def raises(model, Y):
        return model.params["W4"]

    verdict = verdict_of(check_input_gradient, raises, capsys)
    assert_not_yet(verdict, "your code raised KeyError")
    assert verdict.where


def tanh_measured():
    from backprop_lessons.deep_mlp import layer_gradient_norms, per_layer_ratio

    return per_layer_ratio(layer_gradient_norms(**mlp_by_hand.TANH_NETWORK))


def test_the_tanh_measurement(capsys):
    ratio = tanh_measured()

    def answer(**overrides):
        return lambda: {"tanh_ratio": ratio, "vanishes": False, **overrides}

    assert verdict_of(check_tanh_ratio, answer(), capsys).correct
    assert_not_yet(
        verdict_of(check_tanh_ratio, answer(vanishes=True), capsys),
        "look at the ratio again",
    )
    assert_not_yet(
        verdict_of(check_tanh_ratio, answer(vanishes="no"), capsys),
        "True or False",
    )
    assert_not_yet(
        verdict_of(check_tanh_ratio, answer(tanh_ratio=0.5), capsys),
        "not the ratio of that network",
    )
    assert_not_yet(
        verdict_of(check_tanh_ratio, answer(tanh_ratio="a"), capsys),
        "must be a number",
    )
    from backprop_lessons.deep_mlp import layer_gradient_norms, per_layer_ratio

    sigmoid = per_layer_ratio(
        layer_gradient_norms(
            **{**mlp_by_hand.TANH_NETWORK, "activation": "sigmoid"}
        )
    )
    assert_not_yet(
        verdict_of(check_tanh_ratio, answer(tanh_ratio=sigmoid), capsys),
        "the sigmoid network's ratio",
    )
    for stub in (
        stub_raising,
        lambda: {"tanh_ratio": ..., "vanishes": ...},
        answer(vanishes=...),
    ):
        assert (
            verdict_of(check_tanh_ratio, stub, capsys).status
            == "not attempted yet"
        )
    assert_not_yet(
        verdict_of(check_tanh_ratio, lambda: {"ratio": 1}, capsys),
        '"tanh_ratio" and "vanishes"',
    )

    def raises():
        return {"tanh_ratio": 1 / 0, "vanishes": False}

    verdict = verdict_of(check_tanh_ratio, raises, capsys)
    assert_not_yet(verdict, "ZeroDivisionError")
    assert verdict.where
    assert f"{ratio:.2f}" not in verdict.hint  # the check never prints it


# ---- gaming: the book's backward, PyTorch's autograd ---------------------------


def test_the_models_own_backward_is_refused(capsys):
    """model.backward(Y) computes every gradient: the exercises of the
    backward may not call it."""

    def from_the_book(model, Y):
        return {f"d{n}": g for n, g in model.backward(Y).items()}

    for check, answer in (
        (mlp_by_hand.check_mlp_intermediates, from_the_book),
        (mlp_by_hand.check_mlp_backward, lambda model, Y: model.backward(Y)),
    ):
        assert_not_yet(
            verdict_of(check, answer, capsys),
            "your code called backprop_lessons.mlp3.ThreeLayerMLP.backward",
        )


def test_batchnorm_refuses_the_books_and_autograd(capsys):
    def from_the_book(dinp, dweight, dbias, dout, cache):
        layers.batchnorm_backward(dinp, dweight, dbias, dout, cache)

    assert_not_yet(
        verdict_of(check_batchnorm_backward, from_the_book, capsys),
        "your code called backprop_lessons.gpt.layers.batchnorm_backward",
    )


def test_the_input_gradient_refuses_autograd(capsys):
    import torch

    def by_autograd(model, Y):
        X = torch.tensor(model.cache["X"], requires_grad=True)
        p = {n: torch.tensor(v) for n, v in model.params.items()}
        h = torch.sigmoid(X @ p["W1"] + p["b1"])
        h = torch.sigmoid(h @ p["W2"] + p["b2"])
        loss = torch.nn.functional.cross_entropy(
            h @ p["W3"] + p["b3"], torch.tensor(Y.argmax(axis=1))
        )
        loss.backward()
        return X.grad.numpy()

    assert_not_yet(
        verdict_of(mlp_by_hand.check_input_gradient, by_autograd, capsys),
        "your code called Tensor.backward, PyTorch's autograd",
    )
