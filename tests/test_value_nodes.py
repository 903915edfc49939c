"""Tests of `backprop_lessons.exercises.value_nodes` (chapter 1): each check
on the chapter's solution ("correct"), on a stub ("not attempted yet"), on
every classic slip it names, on an answer that raises (its line quoted),
and on the inputs it holds out (a value used twice, zero, negative inputs,
tanh at +-400, relu at its kink); and the wrong versions of the solutions
that a mutation test makes (an operator swapped, a constant changed, a term
dropped) all fail."""

from __future__ import annotations

import math

import numpy as np
import pytest

from backprop_lessons.exercises import value_nodes
from backprop_lessons.scalar import Value
from verdicts import assert_not_yet, run


def stub_raising(*args):
    raise NotImplementedError


def stub_ellipsis(*args): ...


# ---- the chapter's solutions ------------------------------------------------


def add(a, b):
    return Value(a.data + b.data, "", (a, b), (1.0, 1.0), "+")


def mul(a, b):
    return Value(a.data * b.data, "", (a, b), (b.data, a.data), "*")


def power(x, k):
    return Value(x.data**k, "", (x,), (k * x.data ** (k - 1),), f"**{k}")


def exp(x):
    e = math.exp(x.data)
    return Value(e, "", (x,), (e,), "exp")


def tanh(x):
    t = math.tanh(x.data)
    return Value(t, "", (x,), (1 - t * t,), "tanh")


def relu(x):
    on = x.data > 0
    return Value(x.data if on else 0.0, "", (x,), (1.0 if on else 0.0,), "relu")


def softplus(v):
    x = v.data
    e = math.exp(-abs(x))
    slope = 1.0 / (1.0 + e) if x >= 0 else e / (1.0 + e)
    return Value(max(x, 0.0) + math.log1p(e), "", (v,), (slope,), "softplus")


def divide(a, b):
    q = a.data / b.data
    return Value(q, "", (a, b), (1.0 / b.data, -a.data / b.data**2), "/")


def hand_gradients():
    return {"a": 3.0, "b": 4.0}


SOLUTIONS = {
    "check_add": add,
    "check_mul": mul,
    "check_pow": power,
    "check_exp": exp,
    "check_tanh": tanh,
    "check_relu": relu,
    "check_softplus": softplus,
    "check_divide": divide,
    "check_hand_gradients": hand_gradients,
}


@pytest.mark.parametrize("name", SOLUTIONS)
def test_the_solutions_are_correct_and_stubs_not_attempted(name, capsys):
    check = getattr(value_nodes, name)
    assert run(check, SOLUTIONS[name], capsys).correct
    for stub in (stub_raising, stub_ellipsis):
        verdict = run(check, stub, capsys)
        assert verdict.status == "not attempted yet", str(verdict)


def test_every_check_of_the_module_is_tested():
    assert set(SOLUTIONS) == {
        n for n in value_nodes.__all__ if n.startswith("check_")
    }


def test_a_stub_is_named_by_the_readers_name(capsys):
    def my_mul(a, b):
        raise NotImplementedError

    verdict = run(value_nodes.check_mul, my_mul, capsys, exercise=2)
    assert str(verdict) == (
        "Exercise 2: not attempted yet - write my_mul(a, b): return one new Value"
    )


def test_the_cells_after_fall_back_to_the_packages_operation(capsys):
    """Run All never stops at a stub: the worked example uses the reader's
    my_mul once it passes, the package's Value.__mul__ (so named) until then."""
    from backprop_lessons.exercises import yours_or_the_solution

    def my_mul(a, b):
        raise NotImplementedError

    mul_ = yours_or_the_solution(
        my_mul, Value.__mul__, value_nodes.check_mul, exercise=2
    )
    assert mul_ is Value.__mul__
    assert capsys.readouterr().out == (
        "Using Value.__mul__, the book's version, until your my_mul passes "
        "exercise 2\n    (now: not attempted yet).\n"
    )
    assert (
        yours_or_the_solution(
            mul, Value.__mul__, value_nodes.check_mul, exercise=2
        )
        is mul
    )


# ---- the operations: slips, each named --------------------------------------


def node(data, children, local, op="op"):
    return Value(data, "", children, local, op)


# (check, wrong answer, words its hint must hold)
SLIPS = [
    # add
    (
        "check_add",
        lambda a, b: node(a.data + b.data, (a, b), (b.data, a.data)),
        "a product's",
    ),
    (
        "check_add",
        lambda a, b: node(a.data + b.data, (a, b), (a.data, b.data)),
        "the inputs' own values",
    ),
    (
        "check_add",
        lambda a, b: node(a.data + b.data, (a, b), (1.0, -1.0)),
        "the toy's a - b",
    ),
    ("check_add", lambda a, b: node(a.data + b.data, (a, b), (0, 0)), "are 0"),
    (
        "check_add",
        lambda a, b: node(a.data - b.data, (a, b), (1.0, 1.0)),
        "forward value is a - b",
    ),
    (
        "check_add",  # right for distinct inputs, wrong for a + a
        lambda a, b: node(
            a.data + b.data, (a, b), (2.0, 2.0) if a is b else (1.0, 1.0)
        ),
        "a value used twice",
        "each use of a gets 2",
    ),
    # mul
    (
        "check_mul",
        lambda a, b: node(a.data * b.data, (a, b), (a.data, b.data)),
        "swapped",
        "a gets a.data",
    ),
    ("check_mul", lambda a, b: node(a.data * b.data, (a, b), (1, 1)), "of a sum"),
    (
        "check_mul",
        lambda a, b: node(a.data * b.data, (a, b), (b.data, b.data)),
        "the same local derivative",
    ),
    (
        "check_mul",
        lambda a, b: node(a.data * b.data, (a, b), (a.data * b.data,) * 2),
        "the product's value",
    ),
    (
        "check_mul",
        lambda a, b: node(a.data + b.data, (a, b), (b.data, a.data)),
        "forward value is a + b",
    ),
    (
        "check_mul",
        lambda a, b: node(a.data * b.data, (a, b), (b, a)),
        "is a Value",
        ".data",
    ),
    (
        "check_mul",
        lambda a, b: node(
            a.data * b.data,
            (a, b),
            (2 * a.data,) * 2 if a is b else (b.data, a.data),
        ),
        "a value used twice",
        "2a",
    ),
    # pow
    (
        "check_pow",
        lambda x, k: node(x.data**k, (x,), (k * x.data**k,)),
        "exponent is not lowered",
    ),
    (
        "check_pow",
        lambda x, k: node(x.data**k, (x,), (x.data ** (k - 1),)),
        "the factor k is missing",
    ),
    (
        "check_pow",
        lambda x, k: node(x.data**k, (x,), (k * x.data**k - 1,)),
        "without parentheses",
    ),
    (
        "check_pow",
        lambda x, k: node(x.data**k, (x,), (k * x.data ** (k + 1),)),
        "raises the exponent",
    ),
    (
        "check_pow",
        lambda x, k: node(x.data**k, (x,), (x.data**k,)),
        "the output x ** k itself",
    ),
    (
        "check_pow",
        lambda x, k: node(k * x.data, (x,), (k * x.data ** (k - 1),)),
        "k * x, not x ** k",
    ),
    (
        "check_pow",
        lambda x, k: node(x.data**k, (x, Value(k)), (k * x.data ** (k - 1), 0.0)),
        "k is a constant number",
        "no child",
    ),
    # exp
    (
        "check_exp",
        lambda x: node(math.exp(x.data), (x,), (x.data,)),
        "is x, the input",
    ),
    ("check_exp", lambda x: node(math.exp(x.data), (x,), (1.0,)), "is 1"),
    (
        "check_exp",
        lambda x: node(math.exp(x.data), (x,), (x.data * math.exp(x.data - 1),)),
        "the power rule",
    ),
    ("check_exp", lambda x: node(math.exp(x.data), (x,), (1 / x.data,)), "log"),
    (
        "check_exp",
        lambda x: node(math.exp(x.data), (x,), (math.e,)),
        "constant e",
    ),
    (
        "check_exp",
        lambda x: node(math.e * x.data, (x,), (math.exp(x.data),)),
        "e * x, not e ** x",
    ),
    # tanh
    (
        "check_tanh",
        lambda x: node(math.tanh(x.data), (x,), (1 - math.tanh(x.data),)),
        "1 - t: the t is not squared",
    ),
    (
        "check_tanh",
        lambda x: node(math.tanh(x.data), (x,), (1 - x.data**2,)),
        "1 - x ** 2",
        "the input x",
    ),
    (
        "check_tanh",
        lambda x: node(math.tanh(x.data), (x,), (1 + math.tanh(x.data) ** 2,)),
        "a sign",
    ),
    (
        "check_tanh",
        lambda x: node(
            math.tanh(x.data),
            (x,),
            (math.tanh(x.data) * (1 - math.tanh(x.data)),),
        ),
        "the sigmoid's",
    ),
    (
        "check_tanh",
        lambda x: node(math.tanh(x.data), (x,), (math.tanh(x.data),)),
        "the output t itself",
    ),
    # relu
    (
        "check_relu",
        lambda x: node(max(x.data, 0.0), (x,), (1.0 if x.data >= 0 else 0.0,)),
        "x = 0",
        "at exactly x = 0",
        "x >= 0",
    ),
    (
        "check_relu",
        lambda x: node(max(x.data, 0.0), (x,), (1.0,)),
        "x = -1.5",
        "negative input",
    ),
    (
        "check_relu",
        lambda x: node(max(x.data, 0.0), (x,), (x.data if x.data > 0 else 0.0,)),
        "is x, the input's value",
    ),
    (
        "check_relu",
        lambda x: node(max(x.data, 0.0), (x,), (0.0,)),
        "blocks a positive input",
    ),
    (
        "check_relu",
        lambda x: node(x.data, (x,), (1.0 if x.data > 0 else 0.0,)),
        "lets a negative input through",
    ),
    (
        "check_relu",
        lambda x: node(
            max(x.data, 0.0),
            (x,),
            (1.0 if x.data > 0 else 0.5 if x.data == 0 else 0.0,),
        ),
        "average across the kink",
    ),
]


@pytest.mark.parametrize(
    "name,wrong,words", [(s[0], s[1], s[2:]) for s in SLIPS], ids=lambda v: ""
)
def test_each_classic_slip_is_named(name, wrong, words, capsys):
    verdict = run(getattr(value_nodes, name), wrong, capsys)
    assert_not_yet(verdict, *words)


# ---- the operations: the node's shape ---------------------------------------


# (wrong my_add, words its hint must hold)
SHAPES = [
    (lambda a, b: node(a.data + b.data, (a,), (1.0,)), "a child is missing (b)"),
    (
        lambda a, b: node(a.data + b.data, (a, b, b), (1.0, 1.0, 1.0)),
        "a child is repeated (b)",
    ),
    (lambda a, b: node(a.data + b.data, (a, a), (1.0, 1.0)), "b not at all"),
    (lambda a, b: node(a.data + b.data, (b, a), (1.0, 1.0)), "wrong order"),
    (  # right for distinct inputs, a child missing for a + a
        lambda a, b: node(
            a.data + b.data, (a,) if a is b else (a, b), (1.0, 1.0)
        ),
        "a is used twice here, so the node lists it twice",
    ),
    (
        lambda a, b: node(a.data + b.data, (Value(a.data), b), (1.0, 1.0)),
        "is not one of the inputs",
    ),
    (
        lambda a, b: node(a.data + b.data, (a * 1.0, b), (1.0, 1.0)),
        "the package's own *",
    ),
    (
        lambda a, b: node(a.data + b.data, (Value(a.data, "", (a,)), b), (1, 1)),
        "computed from the inputs",
    ),
    (lambda a, b: a, "returned its input itself"),
    (lambda a, b: a.data + b.data, "returned a float"),
    (lambda a, b: node(a.data + b.data, [a, b], 1.0), "tuple with one number"),
    (lambda a, b: node(a.data + b.data, (a, b), (1.0,)), "holds 1 numbers"),
    (lambda a, b: node(a.data + b.data, (a, b), ("1", "1")), "must be numbers"),
    (lambda a, b: node(a.data + b.data, a, (1.0, 1.0)), "must be a tuple"),
]


@pytest.mark.parametrize("wrong,words", SHAPES, ids=lambda v: "")
def test_the_nodes_shape_is_checked(wrong, words, capsys):
    assert_not_yet(run(value_nodes.check_add, wrong, capsys), words)


def test_the_children_may_be_a_list_and_the_derivatives_ints(capsys):
    def my_add(a, b):
        return Value(a.data + b.data, "", [a, b], [1, 1], "+")

    assert run(value_nodes.check_add, my_add, capsys).correct


def test_an_operation_must_build_its_node_itself(capsys):
    """`return a * b` would pass every comparison: the check refuses the
    package's own operations while it runs the reader's code (an operator,
    a method, the method called by its name), and they work afterwards."""
    for name, answer, words in [
        ("check_mul", lambda a, b: a * b, "Value.__mul__, the package's own *"),
        ("check_mul", lambda a, b: Value.__mul__(a, b), "Value.__mul__"),
        ("check_mul", lambda a, b: 1.0 * a * b, "Value.__rmul__"),
        ("check_add", lambda a, b: a + b, "the package's own +"),
        ("check_pow", lambda x, k: x**k, "the package's own **"),
        ("check_exp", lambda x: x.exp(), "the package's own .exp()"),
        ("check_tanh", lambda x: x.tanh(), "Value.tanh, the package's own"),
        ("check_relu", lambda x: x.relu(), "the package's own .relu()"),
        ("check_divide", lambda a, b: a / b, "the package's own /"),
        ("check_softplus", lambda v: (v.exp() + 1).log(), "own .exp()"),
    ]:
        verdict = run(getattr(value_nodes, name), answer, capsys)
        assert_not_yet(verdict, "your code called backprop_lessons.scalar.")
        assert_not_yet(verdict, words, "build the one node")
        assert verdict.where and verdict.where[0].startswith("in <lambda>")
    a = Value(2.0)
    assert (a * 3 + 1).data == 7.0 and a.exp().data == math.exp(2.0)


def _tanh_by_dual_numbers(x):
    from backprop_lessons.forward_mode import Dual

    t = Dual(x.data, 1.0).tanh()  # its tangent: the local derivative
    return Value(t.value, "", (x,), (t.tangent,), "tanh")


def _tanh_by_torch(x):
    import torch

    y = torch.tensor(x.data, dtype=torch.float64, requires_grad=True)
    t = torch.tanh(y)
    t.backward()
    return Value(t.item(), "", (x,), (y.grad.item(),), "tanh")


def _tanh_by_torch_func(x):
    import torch

    y = torch.tensor(x.data, dtype=torch.float64)
    slope = torch.func.grad(torch.tanh)(y)
    return Value(math.tanh(x.data), "", (x,), (slope.item(),), "tanh")


def _tanh_by_the_engine(x):
    t = Value(x.data)
    out = t.tanh()
    out.backward()
    return Value(out.data, "", (x,), (t.grad,), "tanh")


def _tanh_by_finite_differences(x):
    from backprop_lessons.gradcheck import numerical_gradient

    (slope,) = numerical_gradient(lambda xs: math.tanh(xs[0]), [x.data])
    return Value(math.tanh(x.data), "", (x,), (slope,), "tanh")


def _softplus_by_the_packages_sigmoid(v):
    from backprop_lessons.scalar import float_sigmoid as sigmoid

    x = v.data
    value = max(x, 0.0) + math.log1p(math.exp(-abs(x)))
    return Value(value, "", (v,), (sigmoid(x),), "softplus")


@pytest.mark.parametrize(
    "name, gaming, words",
    [
        ("check_tanh", _tanh_by_dual_numbers, "forward_mode.tanh_jvp, the"),
        ("check_tanh", _tanh_by_torch, "Tensor.backward, PyTorch's autograd"),
        ("check_tanh", _tanh_by_torch_func, "torch.func.grad, PyTorch's"),
        ("check_tanh", _tanh_by_the_engine, "Value.tanh"),
        (
            "check_tanh",
            _tanh_by_finite_differences,
            "gradcheck.numerical_gradient",
        ),
        ("check_softplus", _softplus_by_the_packages_sigmoid, "float_sigmoid"),
    ],
    ids=lambda v: getattr(v, "__name__", ""),
)
def test_a_derivative_found_by_differentiation_is_refused(
    name, gaming, words, capsys
):
    """The local derivative is the reader's to work out: PyTorch's autograd,
    the book's engines, dual numbers, finite differences and the package's
    helpers for it are refused, named, and the reader's line quoted."""
    verdict = run(getattr(value_nodes, name), gaming, capsys)
    assert_not_yet(verdict, "your code called", words)
    assert verdict.where and verdict.where[-1].startswith(f"in {gaming.__name__}")


def test_an_operation_may_not_change_its_inputs(capsys):
    def my_mul(a, b):
        a.grad = b.data
        return Value(a.data * b.data, "", (a, b), (b.data, a.data), "*")

    assert_not_yet(run(value_nodes.check_mul, my_mul, capsys), "changed an input")


def test_a_fallback_hint_points_to_hint_3_and_gives_no_number(capsys):
    def my_mul(a, b):
        return Value(a.data * b.data, "", (a, b), (b.data + 1, a.data), "*")

    verdict = run(value_nodes.check_mul, my_mul, capsys)
    assert_not_yet(verdict, "child 1, a", "-3.0", "see Hint 3")
    assert "-4.0" not in verdict.hint  # the right local derivative
    verdict = run(
        value_nodes.check_exp, lambda x: node(2.0**x.data, (x,), (1,)), capsys
    )
    assert_not_yet(verdict, "forward value", "not e ** x")


# ---- the operations: held-out inputs ----------------------------------------


def test_tanh_must_not_overflow_at_plus_or_minus_400(capsys):
    def my_tanh(x):
        e = math.exp(2 * x.data)  # overflows above x = 355
        t = (e - 1) / (e + 1)
        return Value(t, "", (x,), (1 - t * t,), "tanh")

    verdict = run(value_nodes.check_tanh, my_tanh, capsys, exercise=5)
    assert_not_yet(verdict, "at x = 400", "OverflowError", "compute t without")
    line = my_tanh.__code__.co_firstlineno + 1
    assert verdict.where == (
        f"in my_tanh, line {line}: e = math.exp(2 * x.data) "
        "# overflows above x = 355",
    )

    def my_tanh_left(x):  # e^(-2x) overflows below x = -355
        e = math.exp(-2 * x.data)
        t = (1 - e) / (1 + e)
        return Value(t, "", (x,), (1 - t * t,), "tanh")

    assert_not_yet(run(value_nodes.check_tanh, my_tanh_left, capsys), "x = -400")

    def my_tanh_numpy(x):  # inf / inf: nan, and no error
        with np.errstate(over="ignore", invalid="ignore"):
            e = np.exp(2 * x.data)
            t = (e - 1) / (e + 1)
        return Value(t, "", (x,), (1 - t * t,), "tanh")

    verdict = run(value_nodes.check_tanh, my_tanh_numpy, capsys)
    assert_not_yet(verdict, "at x = 400", "is nan here")


def test_tanh_from_exp_of_minus_2_abs_x_is_right(capsys):
    def my_tanh(x):
        e = math.exp(-2 * abs(x.data))
        t = math.copysign((1 - e) / (1 + e), x.data)
        return Value(t, "", (x,), ((1 - t) * (1 + t),), "tanh")

    assert run(value_nodes.check_tanh, my_tanh, capsys).correct


def test_pow_takes_k_as_a_plain_number(capsys):
    verdict = run(
        value_nodes.check_pow,
        lambda x, k: node(x.data**k.data, (x,), (1.0,)),
        capsys,
    )
    assert_not_yet(verdict, "AttributeError", "k is a plain number")


def test_pow_is_checked_at_zero_negative_and_fractional_exponents(capsys):
    """An answer right at the first points but wrong where x = 0, x < 0 or
    k is not a positive integer is caught there."""
    for where, wrong in [
        (
            "k = 0.5",
            lambda x, k: k * x ** (k - 1) if float(k).is_integer() else 0,
        ),
        ("k = -1", lambda x, k: k * x ** (k - 1) if k > 0 else 0),
        ("x = 0", lambda x, k: k * x ** (k - 1) if x else 1.0),
        ("x = -2", lambda x, k: k * abs(x) ** (k - 1)),
    ]:

        def my_pow(x, k, wrong=wrong):
            return node(x.data**k, (x,), (wrong(x.data, k),))

        assert_not_yet(run(value_nodes.check_pow, my_pow, capsys), where)


def test_the_binary_checks_use_zero_and_negative_inputs(capsys):
    def zero_blind(a, b):  # wrong wherever an input is 0
        local = (b.data, a.data) if a.data and b.data else (1.0, 1.0)
        return node(a.data * b.data, (a, b), local)

    assert_not_yet(run(value_nodes.check_mul, zero_blind, capsys), "a = 0")

    def sign_blind(a, b):  # wrong where both inputs are negative
        both = a is not b and a.data < 0 and b.data < 0
        local = (-b.data, -a.data) if both else (b.data, a.data)
        return node(a.data * b.data, (a, b), local)

    assert_not_yet(run(value_nodes.check_mul, sign_blind, capsys), "b = -6")


def test_a_raising_operation_is_quoted(capsys):
    def my_exp(x):  # right, but raises for x < 0
        e = math.exp(x.data)
        return Value(e, "", (x,), (e + 0 * math.log(x.data),), "exp")

    verdict = run(value_nodes.check_exp, my_exp, capsys)
    assert_not_yet(verdict, "at x = -2", "your code raised ValueError")
    line = my_exp.__code__.co_firstlineno + 2
    assert verdict.where[0].startswith(f"in my_exp, line {line}: return Value(")


# ---- softplus ---------------------------------------------------------------


def test_softplus_must_not_overflow(capsys):
    def overflowing(v):
        e = math.exp(v.data)
        return Value(math.log1p(e), "", (v,), (e / (1.0 + e),), "softplus")

    verdict = run(value_nodes.check_softplus, overflowing, capsys)
    assert_not_yet(verdict, "at x = 800", "OverflowError", "e ** x overflows")


def test_softplus_slope_must_not_overflow_far_left(capsys):
    """The live trial's gap: a stable value whose slope, 1 / (1 + e^-x),
    overflows below x = -709."""

    def naive_sigmoid(v):
        x = v.data
        value = max(x, 0.0) + math.log1p(math.exp(-abs(x)))
        return Value(value, "", (v,), (1.0 / (1.0 + math.exp(-x)),), "softplus")

    verdict = run(value_nodes.check_softplus, naive_sigmoid, capsys)
    assert_not_yet(verdict, "at x = -800", "OverflowError", "e ** -x overflows")


def test_softplus_must_be_right_far_left(capsys):
    """The mutation test's survivor: a forward value that loses the tiny
    softplus of a very negative x (1 + e^x rounds to 1)."""

    def rounding(v):
        x = v.data
        value = max(x, 0.0) + math.log(1.0 + math.exp(-abs(x)))
        return Value(value, "", (v,), (float_sigmoid(x),), "softplus")

    verdict = run(value_nodes.check_softplus, rounding, capsys)
    assert_not_yet(verdict, "softplus(-40)", "math.log1p")

    def dropped_the_log(v):  # max(x, 0) alone: wrong for small |x|
        x = v.data
        return Value(max(x, 0.0), "", (v,), (float_sigmoid(x),), "softplus")

    assert_not_yet(run(value_nodes.check_softplus, dropped_the_log, capsys))


def float_sigmoid(x):
    """The sigmoid, the reader's way (the package's is refused)."""
    e = math.exp(-abs(x))
    return 1.0 / (1.0 + e) if x >= 0 else e / (1.0 + e)


@pytest.mark.parametrize(
    "wrong,words",
    [
        (lambda v: Value(softplus(v).data, "", (), (0.5,)), "one new Value"),
        (
            lambda v: Value(softplus(v).data, "", (v,), (math.exp(v.data),)),
            "not d/dx ln(1 + e^x)",
        ),
        (
            lambda v: Value(softplus(v).data, "", (v,), 0.5),
            "tuple with one number",
        ),
    ],
)
def test_softplus_slips(wrong, words, capsys):
    assert_not_yet(run(value_nodes.check_softplus, wrong, capsys), words)


def test_a_raising_answer_is_quoted(capsys):
    def softplus(v):
        x = np.array([v.data])
        return x[3]  # out of bounds

    verdict = run(value_nodes.check_softplus, softplus, capsys)
    assert_not_yet(verdict, "your code raised IndexError")
    line = softplus.__code__.co_firstlineno + 2
    assert verdict.where == (
        f"in softplus, line {line}: return x[3] # out of bounds",
    )


# ---- divide -----------------------------------------------------------------


def buggy_divide(a, b):
    return Value(
        a.data / b.data, "", (a, b), (1 / b.data, a.data / b.data**2), "/"
    )


@pytest.mark.parametrize(
    "wrong,words",
    [
        (buggy_divide, "at a = 3, b = 2: d/db has the wrong sign"),
        (
            lambda a, b: Value(
                a.data / b.data, "", (a, b), (1 / b.data, -a.data / b.data)
            ),
            "at a = 3, b = 2: d/db is -a / b",
        ),
        (
            lambda a, b: Value(
                a.data / b.data, "", (a, b), (-a.data / b.data**2, 1 / b.data)
            ),
            "swapped",
        ),
        (
            lambda a, b: Value(a.data / b.data, "", (a, b), (1 / b.data, 0.0)),
            (
                "at a = 3, b = 2: d/db is 0,",
                "not the derivative of a / b with respect to b",
            ),
        ),
        (
            lambda a, b: Value(a.data / b.data, "", (a, b), (1 / b.data,)),
            "a tuple of two numbers",
        ),
        (
            lambda a, b: (
                Value(
                    a.data / b.data, "", (a, b), (1 / b.data, a.data / b.data**2)
                )
                if a.data < 0
                else divide(a, b)
            ),
            "at a = -1.5, b = 0.5",
        ),
        (
            lambda a, b: Value(a.data / b.data, "", (b, a), (1, 1), "/"),
            "children are (a, b)",
        ),
        (lambda a, b: a.data / b.data, "must return a Value"),
        (
            lambda a, b: Value(a.data * b.data, "", (a, b), (1, 1), "/"),
            "at a = 3, b = 2, divide's forward value is 6.0, which is not a / b",
        ),
    ],
)
def test_divide_slips(wrong, words, capsys):
    """Each named; no hint prints a derivative (nor the forward value) the
    reader is asked for: the right d/db at (3, 2) is -0.75."""
    verdict = run(value_nodes.check_divide, wrong, capsys)
    assert_not_yet(verdict, *([words] if isinstance(words, str) else words))
    assert "0.75" not in verdict.hint and "should be" not in verdict.hint


def test_divide_by_itself_has_gradient_zero(capsys):
    def a_over_a_wrong(a, b):  # right for distinct inputs only
        local = (1 / b.data, -a.data / b.data**2)
        return Value(
            a.data / b.data, "", (a, b), (local[0], 0.0) if a is b else local
        )

    assert_not_yet(
        run(value_nodes.check_divide, a_over_a_wrong, capsys), "divide(a, a)"
    )


# ---- the hand trace ---------------------------------------------------------


@pytest.mark.parametrize(
    "answer,words",
    [
        ({"a": 3.0, "b": -2.0}, "only the product's part"),
        ({"a": 3.0, "b": 6.0}, "only the square's part"),
        ({"a": 3.0, "b": 5.0}, "b is used twice"),
        ({"a": -2.0, "b": 4.0}, "that is a's own value"),
        ({"a": 2.0, "b": 4.0}, "the other factor's value"),
        ({"a": 3.0}, 'keys "a" and "b"'),
        ({"a": "3", "b": 4}, "must be numbers"),
    ],
)
def test_hand_trace_slips(answer, words, capsys):
    verdict = run(value_nodes.check_hand_gradients, lambda: answer, capsys)
    assert_not_yet(verdict, words)


def test_hand_trace_in_a_function_or_a_dict(capsys):
    check = value_nodes.check_hand_gradients
    assert run(check, {"a": 3, "b": 4}, capsys).correct
    for stub in ({"a": ..., "b": ...}, lambda: {"a": ..., "b": 4.0}):
        assert run(check, stub, capsys).status == "not attempted yet"

    def hand_gradients():
        b = 3
        return {"a": b, "b": a + 2 * b}  # noqa: F821 (a is not defined)

    verdict = run(check, hand_gradients, capsys)
    assert_not_yet(verdict, "NameError")
    assert verdict.where[0].startswith("in hand_gradients, line ")


# ---- mutants of the solutions -----------------------------------------------

# What a mutation test makes of each solution (`+=` for `=`, an operator
# swapped, a constant changed, a term dropped), written out; each computes
# something else, and each must fail its check.
MUTANTS = {
    "check_add": [
        lambda a, b: Value(a.data - b.data, "", (a, b), (1.0, 1.0), "+"),
        lambda a, b: Value(a.data * b.data, "", (a, b), (1.0, 1.0), "+"),
        lambda a, b: Value(a.data, "", (a, b), (1.0, 1.0), "+"),
        lambda a, b: Value(a.data + b.data, "", (a, b), (2.0, 1.0), "+"),
        lambda a, b: Value(a.data + b.data, "", (a, b), (1.0, 0.0), "+"),
        lambda a, b: Value(a.data + b.data, "", (a,), (1.0,), "+"),
    ],
    "check_mul": [
        lambda a, b: Value(a.data + b.data, "", (a, b), (b.data, a.data), "*"),
        lambda a, b: Value(a.data / b.data, "", (a, b), (b.data, a.data), "*"),
        lambda a, b: Value(a.data * b.data, "", (a, b), (b.data, 1.0), "*"),
        lambda a, b: Value(a.data * b.data, "", (a, b), (-b.data, a.data), "*"),
        lambda a, b: Value(
            a.data * b.data, "", (a, b), (b.data, a.data + 1), "*"
        ),
        lambda a, b: Value(a.data * b.data, "", (b, a), (b.data, a.data), "*"),
    ],
    "check_pow": [
        lambda x, k: Value(x.data * k, "", (x,), (k * x.data ** (k - 1),)),
        lambda x, k: Value(x.data**k, "", (x,), (k * x.data ** (k - 2),)),
        lambda x, k: Value(x.data**k, "", (x,), (k + x.data ** (k - 1),)),
        lambda x, k: Value(x.data**k, "", (x,), (k * x.data ** (k + 1),)),
        lambda x, k: Value(x.data**k, "", (x,), (k * x.data * (k - 1),)),
        lambda x, k: Value(x.data**k, "", (x,), (2 * x.data ** (k - 1),)),
        lambda x, k: Value(x.data ** (k + 1), "", (x,), (k * x.data ** (k - 1),)),
    ],
    "check_exp": [
        lambda x: Value(math.exp(x.data), "", (x,), (math.exp(-x.data),)),
        lambda x: Value(math.exp(-x.data), "", (x,), (math.exp(x.data),)),
        lambda x: Value(math.exp(x.data), "", (x,), (2 * math.exp(x.data),)),
        lambda x: Value(math.exp(x.data), "", (x,), (math.exp(x.data) + 1,)),
        lambda x: Value(math.exp(x.data + 1), "", (x,), (math.exp(x.data),)),
    ],
    "check_tanh": [
        lambda x: Value(
            math.tanh(x.data), "", (x,), (1 + math.tanh(x.data) ** 2,)
        ),
        lambda x: Value(
            math.tanh(x.data), "", (x,), (2 - math.tanh(x.data) ** 2,)
        ),
        lambda x: Value(
            math.tanh(x.data), "", (x,), (1 - math.tanh(x.data) ** 3,)
        ),
        lambda x: Value(
            math.tanh(x.data), "", (x,), (1 * math.tanh(x.data) ** 2,)
        ),
        lambda x: Value(
            math.tanh(x.data), "", (x,), (1 - math.tanh(x.data) * 2,)
        ),
        lambda x: Value(
            math.tanh(x.data), "", (x,), (-(math.tanh(x.data) ** 2),)
        ),
        lambda x: Value(
            math.sinh(x.data), "", (x,), (1 - math.tanh(x.data) ** 2,)
        ),
    ],
    "check_relu": [
        lambda x: Value(x.data if x.data > 0 else 0.0, "", (x,), (1.0,)),
        lambda x: Value(x.data if x.data > 0 else 0.0, "", (x,), (0.0,)),
        lambda x: Value(
            x.data if x.data > 1 else 0.0, "", (x,), (float(x.data > 0),)
        ),
        lambda x: Value(
            x.data if x.data < 0 else 0.0, "", (x,), (float(x.data > 0),)
        ),
        lambda x: Value(
            x.data if x.data > 0 else 1.0, "", (x,), (float(x.data > 0),)
        ),
        lambda x: Value(max(x.data, 0.0), "", (x,), (float(x.data > 1),)),
        lambda x: Value(max(x.data, 0.0), "", (x,), (float(x.data > -1),)),
        lambda x: Value(
            max(x.data, 0.0), "", (x,), (2.0 if x.data > 0 else 0.0,)
        ),
        lambda x: Value(
            max(x.data, 0.0), "", (x,), (1.0 if x.data > 0 else 1.0,)
        ),
    ],
}


def _softplus_mutant(value=None, slope=None):
    def softplus(v):
        x = v.data
        e = math.exp(-abs(x))
        right = 1.0 / (1.0 + e) if x >= 0 else e / (1.0 + e)
        y = max(x, 0.0) + math.log1p(e) if value is None else value(x, e)
        return Value(y, "", (v,), (right if slope is None else slope(x, e),))

    return softplus


MUTANTS["check_softplus"] = [
    _softplus_mutant(value=lambda x, e: max(x, 0.0) - math.log1p(e)),
    _softplus_mutant(value=lambda x, e: max(x, 1.0) + math.log1p(e)),
    _softplus_mutant(value=lambda x, e: max(x, 0.0) + math.log1p(e) / 2),
    _softplus_mutant(value=lambda x, e: max(x, 0.0)),
    _softplus_mutant(value=lambda x, e: math.log1p(e)),
    _softplus_mutant(value=lambda x, e: max(x, 0.0) + math.log(1 + e)),
    _softplus_mutant(value=lambda x, e: max(x, 0.0) + math.log1p(e) + 1e-16),
    _softplus_mutant(
        slope=lambda x, e: 1.0 / (1.0 - e) if x > 0 else e / (1 + e)
    ),
    _softplus_mutant(
        slope=lambda x, e: 1.0 / (1.0 + e) if x >= 0 else e / (1 - e)
    ),
    _softplus_mutant(
        slope=lambda x, e: 1.0 / (1.0 + e) if x >= 0 else 1 / (1 + e)
    ),
    _softplus_mutant(
        slope=lambda x, e: 2.0 / (1.0 + e) if x >= 0 else e / (1 + e)
    ),
    _softplus_mutant(
        slope=lambda x, e: 1.0 / (1.0 + e) if x >= 1 else e / (1 + e)
    ),
    _softplus_mutant(
        slope=lambda x, e: 1.0 / (1.0 + e) if x >= -1 else e / (1 + e)
    ),
]


@pytest.mark.parametrize(
    "name,number",
    [(name, i) for name, mutants in MUTANTS.items() for i in range(len(mutants))],
)
def test_every_mutant_of_a_solution_fails(name, number, capsys):
    verdict = run(getattr(value_nodes, name), MUTANTS[name][number], capsys)
    assert verdict.status == "not yet", str(verdict)
