"""Forward-mode differentiation with dual numbers, its reverse-mode twin, and
an operation counter.

A `Dual` carries a number and its tangent: `(x, x_dot)`, where `x_dot` is the
derivative of `x` along one chosen direction in input space.  Every primitive
maps input pairs to an output pair with its *JVP rule* (Jacobian-vector
product), registered in `jvp_rules` right below the rule, in the style of
JAX's autodidax.  One evaluation of a function on Duals therefore gives its
value and one directional derivative: `jvp(f, primals, tangents)`.

A full Jacobian of f: R^P -> R^M takes P JVPs, one per column
(`jacobian_forward`), or M VJPs, one backward pass per row, on the scalar
reverse-mode engine (`jacobian_reverse`).  Centered and one-sided finite
differences (`finite_difference_jacobian`) are the baseline both are checked
against.

Interpreters and counting.  The rules are pure functions: they compute and
know nothing about counting.  Three things go through the *interpreter* on
top of a stack (autodidax's `trace_stack`, reduced to what this module
needs): applying a primitive's rule, evaluating f once (`evaluate_pass`) and
running a backward pass (`backward_pass`).  The base interpreter just does
them.  `with count_operations() as ops:` pushes a counting interpreter that
wraps the one below it, records what passes through, and hands it on:

  evaluations     passes of f over its inputs (on floats, Duals or Values)
  primitives      primitive operations evaluated in those passes
  tangent_rules   JVP rules applied (forward mode: one per primitive)
  backward_steps  chain-rule steps `child.grad += local * node.grad` (reverse)

Each count follows from the computation, not from a clock, so a chapter can
check cost claims exactly.  On Values the primitives are the nodes of the
graph a pass built; on plain floats nothing can be intercepted, so a pass
counts the primitives of one pass of f on Duals (`count_primitives`).
Counting blocks nest: an inner block's operations count in the outer too.

Functions to differentiate take a list of numbers and return a number or a
list of numbers.  Write them with `+ - * / **` and this module's `exp`, `log`,
`tanh`, `sigmoid` and `relu`, and the same code runs on floats, `Dual`s and
`Value`s.

What this is not: fast, or a tracer (autodidax builds jaxprs; here every
primitive runs eagerly on Python floats).  It imports only the standard
library, the scalar engine and `gradcheck.numerical_gradient`, the one
finite-difference routine of the package.
"""

from __future__ import annotations

import contextlib
import math
import numbers
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from .gradcheck import numerical_gradient
from .graph_order import topological_order
from .scalar import Value, as_float, float_sigmoid, zero_grad
from .validate import (
    counts_match,
    function,
    instance_of,
    positive_number,
    real_numbers,
    real_power_domain,
)

__all__ = [
    "Dual",
    "jvp_rules",
    "jvp",
    "vjp",
    "jacobian_forward",
    "jacobian_reverse",
    "finite_difference_jacobian",
    "exp",
    "log",
    "tanh",
    "sigmoid",
    "relu",
    "OperationCount",
    "count_operations",
    "count_primitives",
    "evaluate_pass",
    "apply_rule",
    "backward_pass",
]


# ---- input checks -----------------------------------------------------------


def _as_float(x, op: str) -> float:
    return as_float(x, op, kind="Dual")


# ---- the dual number --------------------------------------------------------


class Dual:
    """A number and its tangent: `value` + `tangent` * eps, with eps^2 = 0.

    >>> x = Dual(3.0, 1.0)  # seed: dx/dx = 1
    >>> x * x + 2 * x  # d(x^2 + 2x)/dx = 2x + 2 = 8
    Dual(value=15.0, tangent=8.0)
    """

    __slots__ = ("value", "tangent")

    def __init__(self, value, tangent=0.0):
        if type(value) is not float:  # fast path: the rules return floats
            value = _as_float(value, "construction")
        if type(tangent) is not float:
            tangent = _as_float(tangent, "construction")
        self.value, self.tangent = value, tangent

    def __repr__(self) -> str:
        return f"Dual(value={self.value!r}, tangent={self.tangent!r})"

    # Like Value: + * ** and the unary functions are primitives; - and / are
    # built from them (a - b = a + (-b), -a = a * -1, a / b = a * b**-1), so a
    # function performs the same primitives on Duals as on Values.

    def __add__(self, other) -> Dual:
        return _apply("add", self, _lift(other, "+"))

    def __mul__(self, other) -> Dual:
        return _apply("mul", self, _lift(other, "*"))

    def __pow__(self, k) -> Dual:
        if isinstance(k, Dual):
            raise TypeError(
                "Dual **: only numeric exponents are supported (int or float), "
                f"got a Dual (value={k.value!r}); "
                "write exp(k * log(x)) for x ** Dual"
            )
        return _apply("pow", self, k=_as_float(k, "**"))

    def __neg__(self) -> Dual:
        return self * -1.0

    def __sub__(self, other) -> Dual:
        return self + (-_lift(other, "-"))

    def __truediv__(self, other) -> Dual:
        other = _lift(other, "/")
        if other.value == 0.0:
            raise ZeroDivisionError(f"Dual /: division of {self.value!r} by 0.0")
        return self * other**-1

    def __radd__(self, other) -> Dual:
        return self + other

    def __rmul__(self, other) -> Dual:
        return self * other

    def __rsub__(self, other) -> Dual:
        return _lift(other, "-") - self

    def __rtruediv__(self, other) -> Dual:
        return _lift(other, "/") / self

    def exp(self) -> Dual:
        return _apply("exp", self)

    def log(self) -> Dual:
        return _apply("log", self)

    def relu(self) -> Dual:
        return _apply("relu", self)

    def tanh(self) -> Dual:
        return _apply("tanh", self)

    def sigmoid(self) -> Dual:
        return _apply("sigmoid", self)


def _lift(x, op: str) -> Dual:
    """A Dual as is; a number as a constant (tangent 0)."""
    return x if type(x) is Dual else Dual(_as_float(x, op))


def _apply(name: str, *args: Dual, **params) -> Dual:
    """Run primitive `name` on Duals: the interpreter on top applies its rule."""
    primals = tuple(a.value for a in args)
    tangents = tuple(a.tangent for a in args)
    y, y_dot = _interpreters[-1].apply_rule(name, primals, tangents, params)
    return Dual(y, y_dot)


# ---- JVP rules: (primals, tangents) -> (output, output tangent) -------------
# Each rule is the chain rule for one primitive: y_dot = f'(x) * x_dot.

jvp_rules: dict[str, Callable] = {}


def add_jvp(primals, tangents):
    (x, y), (x_dot, y_dot) = primals, tangents
    return x + y, x_dot + y_dot


jvp_rules["add"] = add_jvp


def mul_jvp(primals, tangents):
    (x, y), (x_dot, y_dot) = primals, tangents
    return x * y, x_dot * y + x * y_dot  # product rule


jvp_rules["mul"] = mul_jvp


def pow_jvp(primals, tangents, k):
    (x,), (x_dot,) = primals, tangents
    real_power_domain("Dual **", x, k)
    return x**k, k * x ** (k - 1) * x_dot  # d(x^k) = k x^(k-1) dx


jvp_rules["pow"] = pow_jvp


def exp_jvp(primals, tangents):
    (x,), (x_dot,) = primals, tangents
    try:
        y = math.exp(x)
    except OverflowError:
        raise OverflowError(f"Dual exp: exp({x!r}) overflows a float") from None
    return y, y * x_dot  # d(e^x) = e^x dx


jvp_rules["exp"] = exp_jvp


def log_jvp(primals, tangents):
    (x,), (x_dot,) = primals, tangents
    positive_number("Dual log", "log", x)
    return math.log(x), x_dot / x  # d(ln x) = dx / x


jvp_rules["log"] = log_jvp


def relu_jvp(primals, tangents):
    (x,), (x_dot,) = primals, tangents
    # The kink at 0 gets derivative 0, as in Value and PyTorch; NaN stays
    # NaN and passes its tangent on (slope 1), as in every engine here.
    return (0.0, 0.0) if x <= 0.0 else (x, x_dot)


jvp_rules["relu"] = relu_jvp


def tanh_jvp(primals, tangents):
    (x,), (x_dot,) = primals, tangents
    t = math.tanh(x)
    return t, (1.0 - t * t) * x_dot  # d tanh = (1 - tanh^2) dx


jvp_rules["tanh"] = tanh_jvp


def sigmoid_jvp(primals, tangents):
    (x,), (x_dot,) = primals, tangents
    s = float_sigmoid(x)
    return s, s * (1.0 - s) * x_dot  # ds = s (1 - s) dx


jvp_rules["sigmoid"] = sigmoid_jvp


# ---- the unary functions for every number type ------------------------------


def _unary(name: str, on_float: Callable[[float], float]) -> Callable:
    def function(x):
        if isinstance(x, (Dual, Value)):
            return getattr(x, name)()
        return on_float(_as_float(x, name))

    function.__name__ = name
    function.__doc__ = (
        f"{name}(x) for a float, a Dual or a Value "
        f"(calls x.{name}() on the latter two)."
    )
    return function


def _float_log(x: float) -> float:
    positive_number("log", "log", x)
    return math.log(x)


exp = _unary("exp", math.exp)
log = _unary("log", _float_log)
tanh = _unary("tanh", math.tanh)
sigmoid = _unary("sigmoid", float_sigmoid)
relu = _unary("relu", lambda x: x if x > 0.0 else 0.0)


# ---- interpreters: the base one, and one that counts ------------------------


@dataclass
class OperationCount:
    """What a differentiation did: passes of f, primitives, JVP rules,
    chain-rule steps."""

    evaluations: int = 0
    primitives: int = 0
    tangent_rules: int = 0
    backward_steps: int = 0

    @property
    def operations(self) -> int:
        """All elementary operations: primitives + tangent rules + backward
        steps."""
        return self.primitives + self.tangent_rules + self.backward_steps


class _Evaluator:
    """The base interpreter: applies a rule, evaluates f, runs backward."""

    def apply_rule(self, name: str, primals, tangents, params: dict):
        return jvp_rules[name](primals, tangents, **params)

    def evaluate(self, f: Callable, inputs: list):
        return f(inputs)

    def backward(self, out: Value) -> None:
        out.backward()


class _Counter(_Evaluator):
    """Records in `count` what passes through it, then lets `inner` do it."""

    def __init__(self, inner: _Evaluator, count: OperationCount):
        self.inner, self.count = inner, count
        self._float_pass = {}  # f -> primitives of one pass, measured on Duals

    def apply_rule(self, name: str, primals, tangents, params: dict):
        self.count.primitives += 1
        self.count.tangent_rules += 1
        return self.inner.apply_rule(name, primals, tangents, params)

    def evaluate(self, f: Callable, inputs: list):
        self.count.evaluations += 1
        out = self.inner.evaluate(f, inputs)
        if isinstance(inputs[0], Value):  # the nodes this pass created
            self.count.primitives += _graph_primitives(out)
        elif not isinstance(inputs[0], Dual):  # floats: as many as on Duals
            if f not in self._float_pass:
                self._float_pass[f] = count_primitives(f, inputs)
            self.count.primitives += self._float_pass[f]
        return out

    def backward(self, out: Value) -> None:
        # one chain-rule step per edge of the graph
        nodes = topological_order(out)
        self.count.backward_steps += sum(len(node._children) for node in nodes)
        self.inner.backward(out)


def _graph_primitives(out) -> int:
    """The non-leaf Values behind `out` (a Value or a list), each counted once."""
    seen, count = set(), 0
    stack = list(out) if isinstance(out, list) else [out]
    while stack:
        node = stack.pop()
        if isinstance(node, Value) and id(node) not in seen:
            seen.add(id(node))
            count += bool(node._children)
            stack.extend(node._children)
    return count


_interpreters: list[_Evaluator] = [_Evaluator()]  # the top one is in charge


def evaluate_pass(f: Callable, inputs: list):
    """f(inputs), one pass of f, run by the interpreter in charge."""
    return _interpreters[-1].evaluate(f, inputs)


def apply_rule(name: str, primals: tuple, tangents: tuple, params: dict):
    """(output, output tangent) of primitive `name`, by the rule of the
    interpreter in charge (linearize's tracers run chapter 3's rules so)."""
    return _interpreters[-1].apply_rule(name, primals, tangents, params)


def backward_pass(out: Value) -> None:
    """out.backward(), run by the interpreter in charge."""
    instance_of("backward_pass", "out", out, Value)
    _interpreters[-1].backward(out)


@contextlib.contextmanager
def _pushed(interpreter: _Evaluator) -> Iterator[None]:
    _interpreters.append(interpreter)
    try:
        yield
    finally:
        _interpreters.remove(interpreter)


@contextlib.contextmanager
def count_operations() -> Iterator[OperationCount]:
    """Count what the differentiation calls inside the block do.

    >>> with count_operations() as ops:
    ...     _ = jvp(lambda xs: xs[0] * xs[1], [2.0, 3.0], [1.0, 0.0])
    >>> ops
    OperationCount(evaluations=1, primitives=1, tangent_rules=1, backward_steps=0)
    """
    count = OperationCount()
    with _pushed(_Counter(_interpreters[-1], count)):
        yield count


def count_primitives(f: Callable, xs: Sequence[float]) -> int:
    """How many primitive operations one evaluation of `f` at `xs` performs.

    Runs f once on Duals under a counter of its own, which wraps the base
    interpreter: an enclosing `count_operations` block does not see it.
    """
    duals = [Dual(x) for x in real_numbers("count_primitives", xs)]
    count = OperationCount()
    with _pushed(_Counter(_interpreters[0], count)):
        f(duals)
    return count.primitives


# ---- forward mode: JVPs and Jacobians by columns ----------------------------


def _outputs(out, where: str) -> tuple[list, bool]:
    """(list of outputs, whether f returned a single number)."""
    if isinstance(out, (Dual, Value, numbers.Real)) and not isinstance(out, bool):
        return [out], True
    if isinstance(out, Sequence) and not isinstance(out, (str, bytes)) and out:
        return list(out), False
    raise TypeError(
        f"{where}: f must return a number or a non-empty list of numbers, "
        f"got {type(out).__name__}"
    )


def jvp(f: Callable, primals: Sequence[float], tangents: Sequence[float]):
    """f(primals) and its directional derivative J v along v = `tangents`, in
    one pass.

    Returns `(outputs, output_tangents)`: two floats if f returns a number,
    two lists if it returns a list.
    """
    function("jvp", "f", f)
    xs = real_numbers("jvp primals", primals)
    vs = real_numbers("jvp tangents", tangents)
    counts_match("jvp", xs, "primals", vs, "tangents", " (one per input)")
    out = evaluate_pass(f, [Dual(x, v) for x, v in zip(xs, vs)])
    outs, single = _outputs(out, "jvp")
    # an output that ignores the inputs is a constant: tangent 0
    outs = [_lift(o, "output") for o in outs]
    values, dots = [o.value for o in outs], [o.tangent for o in outs]
    return (values[0], dots[0]) if single else (values, dots)


def jacobian_forward(f: Callable, xs: Sequence[float]) -> list[list[float]]:
    """The M x P Jacobian of f at xs, one column per JVP: P passes of f
    on Duals."""
    xs = real_numbers("jacobian_forward", xs)
    columns = []
    for j in range(len(xs)):
        # the j-th unit vector
        e_j = [1.0 if i == j else 0.0 for i in range(len(xs))]
        _, column = jvp(f, xs, e_j)
        columns.append(column if isinstance(column, list) else [column])
    return [list(row) for row in zip(*columns)]


# ---- reverse mode on the scalar engine: VJPs and Jacobians by rows ----------


def _as_values(outs: list) -> list[Value]:
    """Outputs as Values; a number (an output that ignores the inputs) becomes
    a constant leaf."""
    return [
        o if isinstance(o, Value) else Value(_as_float(o, "output")) for o in outs
    ]


def vjp(
    f: Callable, primals: Sequence[float], cotangents: Sequence[float] | float
):
    """f(primals) and u^T J for u = `cotangents` (one per output), by one
    backward pass.

    Returns `(outputs, input_cotangents)`: outputs as f returned them (float or
    list), input cotangents as a list with one entry per input.
    """
    function("vjp", "f", f)
    inputs = [Value(x) for x in real_numbers("vjp primals", primals)]
    returned = {}  # f's outputs, for the caller

    def weighted_sum(values: list[Value]) -> Value:
        # One backward from L = sum_i u_i y_i gives dL/dx = u^T J.
        ys, single = _outputs(f(values), "vjp")
        ys = _as_values(ys)
        returned.update(values=[y.data for y in ys], single=single)
        one = single and isinstance(cotangents, numbers.Real)
        us = real_numbers("vjp cotangents", [cotangents] if one else cotangents)
        if len(us) != len(ys):
            raise ValueError(
                f"vjp: f has {len(ys)} outputs but {len(us)} cotangents "
                "were given"
            )
        loss = ys[0] * us[0]
        for y, u in zip(ys[1:], us[1:]):
            loss = loss + y * u
        return loss

    backward_pass(evaluate_pass(weighted_sum, inputs))
    values = returned["values"]
    return (values[0] if returned["single"] else values), [x.grad for x in inputs]


def jacobian_reverse(f: Callable, xs: Sequence[float]) -> list[list[float]]:
    """The M x P Jacobian of f at xs, one row per backward pass: one forward on
    Values, then M backward passes (gradients zeroed between them)."""
    inputs = [Value(x) for x in real_numbers("jacobian_reverse", xs)]
    outs, _ = _outputs(evaluate_pass(f, inputs), "jacobian_reverse")
    rows = []
    for out in _as_values(outs):
        zero_grad(inputs)
        backward_pass(out)
        rows.append([x.grad for x in inputs])
    return rows


# ---- finite differences -----------------------------------------------------


def finite_difference_jacobian(
    f: Callable, xs: Sequence[float], eps: float = 1e-6, scheme: str = "centered"
) -> list[list[float]]:
    """The M x P Jacobian of f at xs by differences of f on floats.

    centered:  (f(x + eps e_j) - f(x - eps e_j)) / (2 eps)   2P passes, O(eps^2)
    one-sided: (f(x + eps e_j) - f(x)) / eps                 P+1 passes, O(eps)
    Both also carry a rounding error of about machine epsilon / eps.
    """
    xs = real_numbers("finite_difference_jacobian", xs)

    def evaluate(point: list[float]) -> list[float]:
        outs, _ = _outputs(evaluate_pass(f, point), "finite_difference_jacobian")
        return [_as_float(o, "output") for o in outs]

    # one column per input: the outputs' derivatives along that input
    columns = numerical_gradient(evaluate, xs, eps, scheme)
    return [list(row) for row in zip(*columns)]
