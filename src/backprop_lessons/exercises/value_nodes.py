"""Checks for the exercises of "Scalar Value nodes" (chapter 1).

On the chapter's main path the reader writes the scalar engine's
operations, each right after the page works its local derivative out on a
small example:

    check_add(my_add)      my_add(a, b): a + b as one new Value
    check_mul(my_mul)      my_mul(a, b): a * b
    check_pow(my_pow)      my_pow(x, k): x ** k, k a constant number
    check_exp(my_exp)      my_exp(x): e ** x
    check_tanh(my_tanh)    my_tanh(x): tanh x, also at x = +-400
    check_relu(my_relu)    my_relu(x): max(x, 0), slope 0 at the kink

Each function returns one new node, `Value(data, label, children,
local_grads, op)`, as the package's own operations do.  The check calls it
on inputs the page did not use (a value used twice, as in `a * a`; zero;
negative and large inputs; tanh at +-400, where e^(2x) overflows a float)
and compares, case after case, the node's children (the inputs themselves,
in order, one per use), its forward value and each of its local
derivatives with the right ones.  The first wrong one is named; a classic
slip (a product's two derivatives swapped, a power's exponent not lowered,
tanh's derivative taken from x instead of the output, relu's slope 1 at
the kink, a child missing or repeated, ...) is told in words, and any
other wrong derivative points to the exercise's Hint 3.  No hint prints a
right local derivative.  The reader's function may not call the package's
own operations (`return a * b` would pass every comparison: the node is the
reader's to build), nor any way of differentiating, PyTorch's or the
book's (`checking.AUTOGRAD`, `checking.BOOKS_AUTODIFF`): the local
derivatives are theirs to work out.

The closing exercises:

    check_softplus(softplus)        softplus(v) as one new Value node
    check_divide(divide)            a / b as one node, gradients included
    check_hand_gradients(answer)    answer() -> {"a": dh/da, "b": dh/db} for
                                    h = a*b + b**2, by hand

They refuse the same calls (softplus also the package's sigmoid, the
hand trace any backward), and no hint prints a number the reader is asked
for.  Each prints "Exercise N: ..." and returns a `Verdict` (see
`checking`).

`SELF_CHECKS` holds the chapter's self-check questions (`questions`).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass, field

from .. import numerics
from ..scalar import Value, float_sigmoid
from .checking import (
    AUTOGRAD,
    BOOKS_AUTODIFF,
    NotYet,
    Verdict,
    attempt,
    require_filled,
    run_check,
)
from .questions import Number

__all__ = [
    "check_add",
    "check_mul",
    "check_pow",
    "check_exp",
    "check_tanh",
    "check_relu",
    "check_softplus",
    "check_divide",
    "check_hand_gradients",
    "SELF_CHECKS",
]


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9)


# ---- the operations the reader writes ----------------------------------------

# A node's forward value and local derivatives are right when they agree with
# the exact ones to 1e-9 relative (1e-12 absolute near 0): round-off of a
# reader's other correct formula (1 - t*t, (1 - t) * (1 + t), ...) is far
# below it, and the nearest slip, relu's 0.5 at the kink, far above.
_REL, _ABS = 1e-9, 1e-12


def _near(ours: float, right: float) -> bool:
    return math.isclose(ours, right, rel_tol=_REL, abs_tol=_ABS)


@dataclass
class _Case:
    """One call of the reader's operation, `fn(*args)`, and the node it must
    return: these children (in order), this forward value and these local
    derivatives.  `slips` maps what a classic bug stores as the local
    derivatives to what the bug is; `data_slips` the same for the forward
    value; `nan_hint` is the hint for a forward value that is nan;
    `on_error(error)` adds to the hint when the reader's code raises."""

    args: tuple
    params: str  # the call's arguments as the hint writes them: "a, a"
    at: str  # where: "at a = 1.5, b = -4"
    children: tuple[Value, ...]
    names: tuple[str, ...]
    data: float
    local: tuple[float, ...]
    forward: str  # what the forward value is, in words: "a * b"
    slips: list[tuple[tuple[float, ...], str]] = field(default_factory=list)
    data_slips: list[tuple[float, str]] = field(default_factory=list)
    nan_hint: str = ""
    on_error: Callable[[BaseException], str] | None = None


def _name(fn) -> str:
    name = getattr(fn, "__name__", "")
    return name if name.isidentifier() else "your function"


def _count(items, value) -> int:
    return sum(item is value for item in items)


def _check_children(children: tuple, case: _Case, label: str) -> None:
    """The node's children are the inputs themselves, in order, one per use."""
    right = case.children
    if len(children) == len(right) and all(
        c is r for c, r in zip(children, right)
    ):
        return
    order = f"({case.params})"
    foreign = [c for c in children if not any(c is r for r in right)]
    if foreign:
        child = foreign[0]
        if isinstance(child, Value) and child._children:
            raise NotYet(
                f"{label}: a child of your node is a Value computed from the "
                "inputs, not an input: build the one node with Value(...) "
                "yourself (the package's operators add nodes of their own), "
                f"its children the inputs {order}"
            )
        if isinstance(child, Value) and case.params == "x, k":
            raise NotYet(
                f"{label}: your node lists a new Value as a child (the "
                "exponent?); k is a constant number, not an input, so it is "
                "no child: only x is"
            )
        raise NotYet(
            f"{label}: a child of your node, {child!r}, is not one of the "
            f"inputs; the children are the input Values themselves {order}"
        )
    missing = [
        n
        for r, n in zip(right, case.names)
        if _count(children, r) < _count(right, r)
    ]
    extra = [
        n
        for r, n in zip(right, case.names)
        if _count(children, r) > _count(right, r)
    ]
    if missing and extra:
        raise NotYet(
            f"{label}: your node lists {extra[0]} too often and {missing[0]} "
            f"not at all; its children are the inputs, in order {order}"
        )
    if missing and _count(right, right[case.names.index(missing[0])]) > 1:
        raise NotYet(
            f"{label}: {missing[0]} is used twice here, so the node lists it "
            f"twice, once per use {order}; your node lists it once"
        )
    if missing:
        raise NotYet(
            f"{label}: a child is missing ({missing[0]}): the node lists "
            f"every input it is computed from {order}"
        )
    if extra:
        raise NotYet(
            f"{label}: a child is repeated ({extra[0]}): the node lists each "
            f"input once per use {order}"
        )
    raise NotYet(
        f"{label}: the children are in the wrong order: list them as the "
        f"inputs come {order}, and the local derivatives in the same order"
    )


def _check_node(out, case: _Case, label: str) -> None:
    """Raise NotYet at the first thing wrong with the reader's node `out`."""
    if not isinstance(out, Value):
        raise NotYet(
            f"{label} returned a {type(out).__name__}: return the new node, "
            'Value(data, "", children, local_grads, op)'
        )
    if any(out is v for v in case.children):
        raise NotYet(
            f"{label} returned its input itself: return a new Value whose "
            f"children are the inputs ({case.params})"
        )
    if not isinstance(out._children, (tuple, list)):
        raise NotYet(
            f"{label}: the node's children are {out._children!r}; they must "
            f"be a tuple of the input Values, ({case.params})"
        )
    _check_children(tuple(out._children), case, label)
    local = out._local_grads
    wanted = ", ".join(f"d/d{n}" for n in case.names)
    if not isinstance(local, (tuple, list)):
        raise NotYet(
            f"{label}: the node's local_grads is {local!r}; it must be a "
            f"tuple with one number per child, ({wanted},)"
        )
    if len(local) != len(case.children):
        raise NotYet(
            f"{label}: the node's local_grads holds {len(local)} numbers for "
            f"{len(case.children)} children: one local derivative per child, "
            f"in the same order ({wanted})"
        )
    if any(isinstance(g, Value) for g in local):
        raise NotYet(
            f"{label}: a local derivative of your node is a Value; store "
            "plain numbers (a Value's number is its .data)"
        )
    if not all(isinstance(g, numbers.Real) for g in local):
        raise NotYet(
            f"{label}: the local derivatives must be numbers, got {local!r}"
        )
    local = tuple(float(g) for g in local)
    if math.isnan(out.data) and case.nan_hint:
        raise NotYet(f"{label}: {case.nan_hint}")
    if not _near(out.data, case.data):
        for wrong, what in case.data_slips:
            if _near(out.data, wrong):
                raise NotYet(f"{label}: {what}")
        raise NotYet(
            f"{label}: your node's forward value is {out.data!r}, which is "
            f"not {case.forward}"
        )
    wrong = [
        i for i, (g, r) in enumerate(zip(local, case.local)) if not _near(g, r)
    ]
    if not wrong:
        return
    for slip, what in case.slips:
        if all(_near(g, s) for g, s in zip(local, slip)):
            raise NotYet(f"{label}: {what}")
    i = wrong[0]
    child = f"child {i + 1}, {case.names[i]}" if len(local) > 1 else case.names[i]
    raise NotYet(
        f"{label}: the local derivative for {child} is {local[i]!r}, which is "
        "not right: see Hint 3 for the general formula"
    )


#: The operations of `Value` that the reader's own may not call: the exercise
#: is to build the node, and `return a * b` would pass every comparison.
_PACKAGE_OPERATIONS = {
    "__add__": "+", "__radd__": "+", "__sub__": "-", "__rsub__": "-",
    "__mul__": "*", "__rmul__": "*", "__truediv__": "/", "__rtruediv__": "/",
    "__pow__": "**", "__neg__": "-", "exp": ".exp()", "log": ".log()",
    "tanh": ".tanh()", "relu": ".relu()", "sigmoid": ".sigmoid()",
}  # fmt: skip

#: What an operation of the reader's may not call (`run_check`'s refuse=):
#: the package's operations, and any way of differentiating for them.
_REFUSED = (
    *(
        (
            getattr(Value, name),
            f"the package's own {symbol}: write the operation on numbers "
            "(x.data) and build the one node with "
            'Value(data, "", children, local_grads, op) yourself',
        )
        for name, symbol in _PACKAGE_OPERATIONS.items()
    ),
    AUTOGRAD,
    BOOKS_AUTODIFF,
)


def _run_node_check(fn, cases: list[_Case], todo: str) -> None:
    """Call fn once per case and raise NotYet at the first wrong node."""
    name = _name(fn)
    for case in cases:
        label = f"{name}({case.params}) {case.at}"
        inputs = [v for v in case.args if isinstance(v, Value)]
        before = [(v.data, v.grad) for v in inputs]
        try:
            out = attempt(fn, *case.args, todo=todo)
        except NotYet as error:
            if error.refused:  # what it called is all there is to say
                raise
            more = case.on_error(error.__cause__) if case.on_error else ""
            raise NotYet(
                f"{label}: {error}{'; ' + more if more else ''}",
                where=error.where,
            ) from None
        if [(v.data, v.grad) for v in inputs] != before:
            raise NotYet(
                f"{label} changed an input's data or grad: an operation "
                "reads its inputs and leaves them as they are (backward fills "
                "in grad later)"
            )
        _check_node(out, case, label)


def _binary_cases(forward, local, slips, data_slips, what: str) -> list[_Case]:
    """Cases of a binary operation: distinct inputs, the same Value twice,
    a zero and negative inputs."""
    cases = []
    for x, y in (
        (1.5, -4.0),
        (-2.5, None),
        (0.0, 3.0),
        (-0.5, -6.0),
        (1e6, 2e-3),
    ):
        a = Value(x, label="a")
        b = a if y is None else Value(y, label="b")
        y = x if y is None else y
        twice = a is b
        cases.append(
            _Case(
                args=(a, b),
                params="a, a" if twice else "a, b",
                at=f"(a value used twice) at a = {x:g}"
                if twice
                else f"at a = {x:g}, b = {y:g}",
                children=(a, b),
                names=("a", "a") if twice else ("a", "b"),
                data=forward(x, y),
                local=local(x, y),
                forward=what,
                slips=slips(x, y, twice),
                data_slips=data_slips(x, y),
            )
        )
    return cases


def _todo(fn, params: str) -> str:
    return f"write {_name(fn)}({params}): return one new Value"


def check_add(fn, *, exercise: int) -> Verdict:
    """fn(a, b) must return one new Value: a + b, its children (a, b) and
    their two local derivatives; also for a value used twice, fn(a, a)."""

    def slips(x, y, twice):
        return [
            (
                (y, x),
                "your local derivatives are a product's (each input gets the "
                "other's value); this node adds",
            ),
            (
                (x, y),
                "your local derivatives are the inputs' own values; how much "
                "a sum moves does not depend on where the inputs are",
            ),
            (
                (1.0, -1.0),
                "(1, -1) are the local derivatives of the toy's a - b; this "
                "node adds b",
            ),
            (
                (0.0, 0.0),
                "your local derivatives are 0: the gradient would stop at "
                "this node",
            ),
            (
                (x + y, x + y),
                "your local derivatives are the sum's value, not how much it "
                "moves",
            ),
            (
                (2.0, 2.0),
                "each use of a gets 2, the derivative of a + a as a whole: "
                "the node lists a twice, and each use gets its own part "
                "(backward's += adds them up)",
            ),
        ]

    def data_slips(x, y):
        return [
            (x - y, "your node's forward value is a - b (the toy's), not a + b"),
            (x * y, "your node's forward value is a * b, not a + b"),
        ]

    def check(fn):
        cases = _binary_cases(
            lambda x, y: x + y,
            lambda x, y: (1.0, 1.0),
            slips,
            data_slips,
            "a + b",
        )
        _run_node_check(fn, cases, _todo(fn, "a, b"))

    return run_check(exercise, check, fn, refuse=_REFUSED)


def check_mul(fn, *, exercise: int) -> Verdict:
    """fn(a, b) must return one new Value: a * b, its children (a, b) and
    their two local derivatives; also for a value used twice, fn(a, a)."""

    def slips(x, y, twice):
        found = [
            (
                (x, y),
                "your local derivatives are swapped: a gets a.data and b gets "
                "b.data",
            ),
            (
                (1.0, 1.0),
                "(1, 1) are the local derivatives of a sum; this node multiplies",
            ),
            (
                (x * y, x * y),
                "your local derivatives are the product's value, not how much "
                "it moves",
            ),
            (
                (2 * x, 2 * x),
                "each use of a gets 2a, the derivative of a * a as a whole: "
                "the node lists a twice, and each use gets its own part "
                "(backward's += adds them up)",
            ),
        ]
        if not twice:
            same = "both inputs get the same local derivative"
            found += [((x, x), f"{same}, a.data"), ((y, y), f"{same}, b.data")]
        return found

    def data_slips(x, y):
        return [(x + y, "your node's forward value is a + b, not a * b")]

    def check(fn):
        cases = _binary_cases(
            lambda x, y: x * y, lambda x, y: (y, x), slips, data_slips, "a * b"
        )
        _run_node_check(fn, cases, _todo(fn, "a, b"))

    return run_check(exercise, check, fn, refuse=_REFUSED)


def _k_is_a_number(error: BaseException | None) -> str:
    if isinstance(error, AttributeError) and "no attribute 'data'" in str(error):
        return (
            "k is a plain number (an int or a float), not a Value: use k itself"
        )
    return ""


def check_pow(fn, *, exercise: int) -> Verdict:
    """fn(x, k), k an int or float constant, must return one new Value:
    x ** k, its one child x and its local derivative."""

    def case(x, k):
        v = Value(x, label="x")
        return _Case(
            args=(v, k),
            params="x, k",
            at=f"at x = {x:g}, k = {k!r}",
            children=(v,),
            names=("x",),
            data=x**k,
            local=(k * x ** (k - 1),),
            forward="x ** k",
            slips=[
                (
                    (k * x**k,),
                    "your local derivative is k * x ** k: the exponent is not "
                    "lowered",
                ),
                (
                    (x ** (k - 1),),
                    "the factor k is missing from your local derivative",
                ),
                (
                    (k * x**k - 1,),
                    "your local derivative is k * x ** k - 1: without "
                    "parentheses Python subtracts 1 after the power",
                ),
                (
                    (k * x ** (k + 1),),
                    "your local derivative raises the exponent by one; "
                    "differentiating lowers it",
                ),
                ((x**k,), "your local derivative is the output x ** k itself"),
            ],
            data_slips=[
                (k * x, "your node's forward value is k * x, not x ** k")
            ],
            on_error=_k_is_a_number,
        )

    def check(fn):
        points = (
            (1.5, 3),
            (-2.0, 2),
            (4.0, 0.5),
            (0.5, -1),
            (3.0, 1),
            (0.0, 2.0),
        )
        cases = [case(x, k) for x, k in points + ((-1.5, 3),)]
        _run_node_check(fn, cases, _todo(fn, "x, k"))

    return run_check(exercise, check, fn, refuse=_REFUSED)


def _unary_case(x: float, data: float, local: float, forward: str, slips, **more):
    v = Value(x, label="x")
    return _Case(
        args=(v,),
        params="x",
        at=f"at x = {x:g}",
        children=(v,),
        names=("x",),
        data=data,
        local=(local,),
        forward=forward,
        slips=[((s,), what) for s, what in slips],
        **more,
    )


def check_exp(fn, *, exercise: int) -> Verdict:
    """fn(x) must return one new Value: e ** x, its one child x and its local
    derivative."""

    def case(x):
        e = math.exp(x)
        slips = [
            (x, "your local derivative is x, the input"),
            (1.0, "your local derivative is 1 wherever x is"),
            (
                x * math.exp(x - 1),
                "your local derivative is x * e ** (x - 1): that is the power "
                "rule, for x ** k; here x is the exponent, not the base",
            ),
            (math.e, "your local derivative is the constant e"),
        ]
        if x != 0:
            slips.append(
                (1 / x, "1 / x is the local derivative of log, not of exp")
            )
        return _unary_case(
            x,
            e,
            e,
            "e ** x",
            slips,
            data_slips=[
                (math.e * x, "your node's forward value is e * x, not e ** x")
            ],
        )

    def check(fn):
        cases = [case(x) for x in (1.5, -2.0, 0.0, 300.0, -30.0)]
        _run_node_check(fn, cases, _todo(fn, "x"))

    return run_check(exercise, check, fn, refuse=_REFUSED)


def _tanh_overflows(error: BaseException | None) -> str:
    if isinstance(error, OverflowError):
        return (
            "e ** (2x) overflows a float above x = 355 (e ** (-2x) below "
            "-355): compute t without forming it"
        )
    return ""


def check_tanh(fn, *, exercise: int) -> Verdict:
    """fn(x) must return one new Value: tanh x, its one child x and its local
    derivative; also at x = +-400, where e^(2x) or e^(-2x) overflows."""

    def case(x):
        t = math.tanh(x)
        return _unary_case(
            x,
            t,
            1 - t * t,
            "tanh x",
            [
                (1 - t, "your local derivative is 1 - t: the t is not squared"),
                (
                    1 - x * x,
                    "your local derivative is 1 - x ** 2: it is computed from "
                    "the input x where the output t belongs",
                ),
                (1 + t * t, "your local derivative is 1 + t ** 2: a sign is off"),
                (
                    t * (1 - t),
                    "your local derivative is t * (1 - t), the sigmoid's, not "
                    "tanh's",
                ),
                (t, "your local derivative is the output t itself (exp's rule)"),
            ],
            nan_hint="your tanh is nan here: e ** (2x) overflowed to inf, and "
            "inf / inf is nan; compute t without forming it",
            on_error=_tanh_overflows,
        )

    def check(fn):
        cases = [case(x) for x in (0.5, -1.2, 0.0, 3.0, 400.0, -400.0)]
        _run_node_check(fn, cases, _todo(fn, "x"))

    return run_check(exercise, check, fn, refuse=_REFUSED)


def check_relu(fn, *, exercise: int) -> Verdict:
    """fn(x) must return one new Value: max(x, 0), its one child x and its
    local derivative, which is 0 at the kink, x = 0 (PyTorch's choice)."""

    def case(x):
        if x > 0:
            slips = [
                (x, "your local derivative is x, the input's value"),
                (0.0, "your local derivative blocks a positive input"),
            ]
            data_slips = [(0.0, "your relu outputs 0 for a positive input")]
        elif x < 0:
            slips = [
                (
                    1.0,
                    "your local derivative is 1 for a negative input, where "
                    "relu is flat",
                ),
                (x, "your local derivative is x, the input's value"),
            ]
            data_slips = [(x, "your relu lets a negative input through")]
        else:
            slips = [
                (
                    1.0,
                    "your local derivative is 1 at exactly x = 0, the kink: "
                    "PyTorch (and the package) take 0 there (x > 0, not x >= 0)",
                ),
                (
                    0.5,
                    "0.5 is a centered difference's average across the kink; "
                    "at x = 0 PyTorch (and the package) take the slope of the "
                    "flat side",
                ),
            ]
            data_slips = []
        return _unary_case(
            x,
            max(x, 0.0),
            1.0 if x > 0 else 0.0,
            "max(x, 0)",
            slips,
            data_slips=data_slips,
        )

    def check(fn):
        cases = [case(x) for x in (2.5, -1.5, 0.0, 1e-3, -1e-3)]
        _run_node_check(fn, cases, _todo(fn, "x"))

    return run_check(exercise, check, fn, refuse=_REFUSED)


# ---- the closing exercises ---------------------------------------------------


def _softplus(x: float) -> float:
    """ln(1 + e^x), accurate for every float x."""
    return max(x, 0.0) + math.log1p(math.exp(-abs(x)))


def check_softplus(softplus, *, exercise: int) -> Verdict:
    """softplus(v) must return one new Value whose only input is v, with
    value ln(1 + e^x) to 1e-12 relative, also far left, where it is as small
    as e^x (x = -40), and at x = +-800, where e^|x| overflows a float (so
    neither the value nor the derivative may form e to a large positive
    power there), and the local derivative d/dx ln(1 + e^x)."""

    def check(softplus):
        todo = "write softplus(v) and run its cell"
        for x in (-3.0, 0.0, 0.5, 2.5, -1e-3, -40.0, -700.0, 800.0, -800.0):
            v = Value(x, label="x")
            try:
                out = attempt(softplus, v, todo=todo)
            except NotYet as error:
                if error.refused:
                    raise
                more = ""
                if isinstance(error.__cause__, OverflowError):
                    power = "x" if x > 0 else "-x"
                    more = (
                        f"; e ** {power} overflows a float once {power} "
                        "passes 709: rewrite the formula so that it never "
                        "forms e to a large positive power"
                    )
                raise NotYet(
                    f"at x = {x:g}, {error}{more}", where=error.where
                ) from None
            if not isinstance(out, Value) or list(out._children) != [v]:
                raise NotYet("return one new Value whose only input is v")
            expected = _softplus(x)
            if not math.isclose(out.data, expected, rel_tol=1e-12):
                if x < 0 and out.data == math.log(1.0 + math.exp(x)):
                    raise NotYet(
                        f"softplus({x:g}) is {out.data!r}, not ln(1 + e^x): "
                        "1 + e ** x rounds to 1 when e ** x is tiny, and so "
                        "its log to 0 (math.log1p(e) computes ln(1 + e) "
                        "without that rounding)"
                    )
                raise NotYet(
                    f"softplus({x:g}) is {out.data!r}, which is not ln(1 + e^x)"
                )
            local = out._local_grads
            if (
                not isinstance(local, (tuple, list))
                or len(local) != 1
                or not isinstance(local[0], numbers.Real)
            ):
                raise NotYet(
                    "the node's local_grads must be a tuple with one number, "
                    "(d/dx softplus,)"
                )
            slope, ours = float_sigmoid(x), float(local[0])
            if not _near(ours, slope):
                raise NotYet(
                    f"at x = {x:g} the local derivative is {ours!r}, which is "
                    "not d/dx ln(1 + e^x): apply the chain rule through the "
                    "log (see the Why)"
                )

    sigmoid = "the package's own sigmoid: compute the local derivative yourself"
    refuse = (*_REFUSED, (float_sigmoid, sigmoid), (numerics.sigmoid, sigmoid))
    return run_check(exercise, check, softplus, refuse=refuse)


def _all_close(xs, ys) -> bool:
    return all(_close(x, y) for x, y in zip(xs, ys))


def _divide_slips(x: float, y: float) -> list[tuple[tuple, str]]:
    """(what a classic slip gives as (d/da, d/db) of a / b at a = x, b = y,
    what it is)."""
    return [
        (
            (1 / y, x / y**2),
            "d/db has the wrong sign: a / b falls as b grows (for a, b > 0)",
        ),
        (
            (1 / y, -x / y),
            "d/db is -a / b: b's power is not lowered (a / b is a * b ** -1)",
        ),
        ((-x / y**2, 1 / y), "d/da and d/db are swapped"),
    ]


def check_divide(divide, *, exercise: int) -> Verdict:
    """divide(a, b) on two Values must give one node, a / b with children
    (a, b), and local derivatives whose gradients after backward are the
    exact ones, at five points (a zero among them) and for a value used
    twice, divide(a, a), whose gradient is 0.  No hint prints a derivative."""

    def check(divide):
        todo = "write a fixed divide(a, b) and run its cell"
        points = ((3.0, 2.0), (-1.5, 0.5), (2.0, -4.0), (0.0, 3.0),
                  (5.0, -0.25), (1.5, None))  # fmt: skip
        for x, y in points:
            a = Value(x, label="a")
            b = a if y is None else Value(y, label="b")
            y = x if y is None else y
            at = f"at a = {x:g}, b = {y:g}" if a is not b else f"at a = {x:g}"
            out = attempt(divide, a, b, todo=todo)
            if not isinstance(out, Value):
                raise NotYet(
                    f"divide must return a Value, got {type(out).__name__}"
                )
            if not (
                isinstance(out._children, (tuple, list))
                and len(out._children) == 2
                and out._children[0] is a
                and out._children[1] is b
            ):
                raise NotYet(
                    "divide must return one node whose children are (a, b), "
                    "in that order"
                )
            local = out._local_grads
            if not (
                isinstance(local, (tuple, list))
                and len(local) == 2
                and all(isinstance(g, numbers.Real) for g in local)
            ):
                raise NotYet(
                    "the node's local_grads must be a tuple of two numbers, "
                    "(d/da, d/db)"
                )
            if not math.isclose(out.data, x / y, rel_tol=1e-12):
                raise NotYet(
                    f"{at}, divide's forward value is {out.data!r}, which is "
                    "not a / b"
                )
            out.backward()
            if a is b:
                if not _close(a.grad, 0.0):
                    raise NotYet(
                        f"divide(a, a) {at} is always 1, so its gradient is "
                        f"0; yours gives {a.grad:.6g}: the two local "
                        "derivatives must cancel"
                    )
                continue
            right = (1 / y, -x / y**2)
            got = (float(local[0]), float(local[1]))
            for slip, what in _divide_slips(x, y):
                if _all_close(got, slip) and not _all_close(slip, right):
                    raise NotYet(f"{at}: {what}")
            for name, node, slope in (("a", a, right[0]), ("b", b, right[1])):
                if not _close(node.grad, slope):
                    raise NotYet(
                        f"{at}: d/d{name} is {node.grad:.6g}, which is not "
                        f"the derivative of a / b with respect to {name} "
                        "(see the Why)"
                    )

    return run_check(exercise, check, divide, refuse=_REFUSED)


def check_hand_gradients(answer, *, exercise: int) -> Verdict:
    """`answer()` returns {"a": dh/da, "b": dh/db} for h = a*b + b**2 at
    a = -2, b = 3, found by hand; compared with the engine's gradients.
    (A dict itself is read as well.)"""

    def check(answer):
        todo = 'fill in the two numbers of {"a": ..., "b": ...}'
        if callable(answer):
            answer = attempt(answer, todo=todo)
        answer = require_filled(answer, todo)
        if not isinstance(answer, dict) or set(answer) != {"a", "b"}:
            raise NotYet('return a dict with the keys "a" and "b"')
        if not all(isinstance(answer[k], numbers.Real) for k in "ab"):
            raise NotYet(f"the two gradients must be numbers, got {answer!r}")
        a, b = Value(-2.0, label="a"), Value(3.0, label="b")
        (a * b + b**2).backward()
        da, db = float(answer["a"]), float(answer["b"])
        if not math.isclose(da, a.grad, abs_tol=1e-9):
            why = (
                "that is a's own value; the product sends each factor the "
                "other factor's value"
                if math.isclose(da, a.data)
                else "the product sends the other factor's value to a"
            )
            raise NotYet(f"dh/da is not {answer['a']!r}: {why}")
        if not math.isclose(db, b.grad, abs_tol=1e-9):
            if math.isclose(db, a.data):
                why = "only the product's part: the square sends b a part too"
            elif math.isclose(db, 2 * b.data):
                why = "only the square's part: the product sends b a part too"
            else:
                why = (
                    "b is used twice, so it gets a contribution from the "
                    "product and one from the square"
                )
            raise NotYet(f"dh/db is not {answer['b']!r}: {why}")

    # by hand: no backward, PyTorch's or the book's, may compute them
    return run_check(exercise, check, answer, refuse=(AUTOGRAD, BOOKS_AUTODIFF))


# ---- self-checks -------------------------------------------------------------

#: The chapter's self-check questions, shown by `widgets.self_check`.
SELF_CHECKS = {
    "relu-blocks-gradient": Number(
        "For f = relu(a*b + d) at a = 2, b = -3, d = 3, what is ∂f/∂a?",
        answer=0,
        hint="Compute a*b + d first: which side of zero is it on?",
        explanation="a*b + d = -3 < 0, so relu passes no gradient: ∂f/∂a = 0 "
        "(and so are ∂f/∂b and ∂f/∂d).",
    ),
    "backward-twice": Number(
        "x = Value(3.0); y = x * x; then y.backward() is called twice, with no "
        "zero_grad in between. What is x.grad?",
        answer=12,
        hint="One backward gives dy/dx = 2x. What does the second call add to?",
        explanation="Each backward adds 2x = 6 into x.grad: 6 + 6 = 12. Leaves "
        "accumulate across calls, as in PyTorch.",
    ),
}
