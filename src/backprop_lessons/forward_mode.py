"""Forward-mode differentiation with dual numbers, its reverse-mode twin, and a cost counter.

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

Counting.  Inside `with count_operations() as ops:` every method records what
it did, deterministically, so a chapter can check cost claims without timings:
  evaluations     passes of f over its inputs (on floats, Duals or Values)
  primitives      primitive operations evaluated in those passes
  tangent_rules   JVP rules applied (forward mode: one per primitive)
  backward_steps  chain-rule steps `child.grad += local * node.grad` (reverse)
Finite differences evaluate f on plain floats, which cannot be counted one by
one; their `primitives` are `evaluations` times the primitives of one pass,
counted once on Duals (`count_primitives`).

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
from dataclasses import dataclass
from typing import Callable, Iterator, Sequence

from .gradcheck import numerical_gradient
from .scalar import Value, topological_order, zero_grad

__all__ = ["Dual", "jvp_rules", "jvp", "vjp", "jacobian_forward", "jacobian_reverse",
           "finite_difference_jacobian", "exp", "log", "tanh", "sigmoid", "relu",
           "OperationCount", "count_operations", "count_primitives"]


# ---- counting ------------------------------------------------------------------

@dataclass
class OperationCount:
    """What a differentiation did: passes of f, primitives, JVP rules, chain-rule steps."""

    evaluations: int = 0
    primitives: int = 0
    tangent_rules: int = 0
    backward_steps: int = 0

    @property
    def operations(self) -> int:
        """All elementary operations: primitives + tangent rules + backward steps."""
        return self.primitives + self.tangent_rules + self.backward_steps


_counter: OperationCount | None = None  # the active counter, if any


@contextlib.contextmanager
def count_operations() -> Iterator[OperationCount]:
    """Count what the differentiation calls inside the block do (not reentrant).

    >>> with count_operations() as ops:
    ...     _ = jvp(lambda xs: xs[0] * xs[1], [2.0, 3.0], [1.0, 0.0])
    >>> ops
    OperationCount(evaluations=1, primitives=1, tangent_rules=1, backward_steps=0)
    """
    global _counter
    if _counter is not None:
        raise RuntimeError("count_operations: already counting (blocks cannot be nested)")
    _counter = OperationCount()
    try:
        yield _counter
    finally:
        _counter = None


def count_primitives(f: Callable, xs: Sequence[float]) -> int:
    """How many primitive operations one evaluation of `f` at `xs` performs."""
    global _counter
    saved, _counter = _counter, OperationCount()
    try:
        f([Dual(x) for x in _as_floats(xs, "count_primitives")])
        return _counter.primitives
    finally:
        _counter = saved


# ---- input checks --------------------------------------------------------------

def _as_float(x, op: str) -> float:
    """Convert a real number to float, or raise a TypeError naming `op`."""
    if isinstance(x, numbers.Real) and not isinstance(x, bool):
        return float(x)
    raise TypeError(f"Dual {op}: expected a Dual or a real number, got {type(x).__name__} {x!r}")


def _as_floats(xs, where: str) -> list[float]:
    """A non-empty list of floats from a sequence of real numbers, or a clear error."""
    if isinstance(xs, (str, bytes)) or not isinstance(xs, Sequence):
        raise TypeError(f"{where}: expected a sequence of real numbers, got {type(xs).__name__}")
    if len(xs) == 0:
        raise ValueError(f"{where}: expected at least one input, got an empty sequence")
    out = []
    for i, x in enumerate(xs):
        if not isinstance(x, numbers.Real) or isinstance(x, bool):
            raise TypeError(f"{where}: input {i} must be a real number, "
                            f"got {type(x).__name__} {x!r}")
        out.append(float(x))
    return out


# ---- the dual number -----------------------------------------------------------

class Dual:
    """A number and its tangent: `value` + `tangent` * eps, with eps^2 = 0.

    >>> x = Dual(3.0, 1.0)            # seed: dx/dx = 1
    >>> x * x + 2 * x                 # d(x^2 + 2x)/dx = 2x + 2 = 8
    Dual(value=15.0, tangent=8.0)
    """

    __slots__ = ("value", "tangent")

    def __init__(self, value, tangent=0.0):
        self.value = value if type(value) is float else _as_float(value, "construction")
        self.tangent = tangent if type(tangent) is float else _as_float(tangent, "construction")

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
            raise TypeError("Dual **: only numeric exponents are supported (int or float), "
                            f"got a Dual (value={k.value!r}); write exp(k * log(x)) for x ** Dual")
        return _apply("pow", self, k=_as_float(k, "**"))

    def __neg__(self) -> Dual:
        return self * -1.0

    def __sub__(self, other) -> Dual:
        return self + (-_lift(other, "-"))

    def __truediv__(self, other) -> Dual:
        other = _lift(other, "/")
        if other.value == 0.0:
            raise ZeroDivisionError(f"Dual /: division of {self.value!r} by 0.0")
        return self * other ** -1

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
    """Run primitive `name` on Duals through its JVP rule (and count it)."""
    primals = tuple(a.value for a in args)
    tangents = tuple(a.tangent for a in args)
    y, y_dot = jvp_rules[name](primals, tangents, **params)
    if _counter is not None:
        _counter.primitives += 1
        _counter.tangent_rules += 1
    return Dual(y, y_dot)


# ---- JVP rules: (primals, tangents) -> (output, output tangent) --------------
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
    if x == 0.0 and k < 0:
        raise ZeroDivisionError(f"Dual **: 0.0 ** {k!r} is undefined (division by zero)")
    if x < 0 and not k.is_integer():
        raise ValueError(f"Dual **: {x!r} ** {k!r} is not a real number "
                         "(a negative base needs an integer exponent)")
    return x ** k, k * x ** (k - 1) * x_dot  # d(x^k) = k x^(k-1) dx


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
    if x <= 0.0:
        raise ValueError(f"Dual log: log is defined for positive numbers, got {x!r}")
    return math.log(x), x_dot / x  # d(ln x) = dx / x


jvp_rules["log"] = log_jvp


def relu_jvp(primals, tangents):
    (x,), (x_dot,) = primals, tangents
    # The kink at 0 gets derivative 0, as in Value and PyTorch.
    return (x, x_dot) if x > 0.0 else (0.0, 0.0)


jvp_rules["relu"] = relu_jvp


def tanh_jvp(primals, tangents):
    (x,), (x_dot,) = primals, tangents
    t = math.tanh(x)
    return t, (1.0 - t * t) * x_dot  # d tanh = (1 - tanh^2) dx


jvp_rules["tanh"] = tanh_jvp


def sigmoid_jvp(primals, tangents):
    (x,), (x_dot,) = primals, tangents
    s = _sigmoid_float(x)
    return s, s * (1.0 - s) * x_dot  # ds = s (1 - s) dx


jvp_rules["sigmoid"] = sigmoid_jvp


# ---- the unary functions for every number type -------------------------------

def _sigmoid_float(x: float) -> float:
    if x >= 0.0:  # two branches so that exp never overflows
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


def _unary(name: str, on_float: Callable[[float], float]) -> Callable:
    def function(x):
        if isinstance(x, (Dual, Value)):
            return getattr(x, name)()
        return on_float(_as_float(x, name))
    function.__name__ = name
    function.__doc__ = f"{name}(x) for a float, a Dual or a Value (calls x.{name}() on the latter two)."
    return function


def _float_log(x: float) -> float:
    if x <= 0.0:
        raise ValueError(f"log: log is defined for positive numbers, got {x!r}")
    return math.log(x)


exp = _unary("exp", math.exp)
log = _unary("log", _float_log)
tanh = _unary("tanh", math.tanh)
sigmoid = _unary("sigmoid", _sigmoid_float)
relu = _unary("relu", lambda x: x if x > 0.0 else 0.0)


# ---- forward mode: JVPs and Jacobians by columns -------------------------------

def _outputs(out, where: str) -> tuple[list, bool]:
    """(list of outputs, whether f returned a single number)."""
    if isinstance(out, (Dual, Value, numbers.Real)) and not isinstance(out, bool):
        return [out], True
    if isinstance(out, Sequence) and not isinstance(out, (str, bytes)) and len(out) > 0:
        return list(out), False
    raise TypeError(f"{where}: f must return a number or a non-empty list of numbers, "
                    f"got {type(out).__name__}")


def _count_evaluation() -> None:
    if _counter is not None:
        _counter.evaluations += 1


def jvp(f: Callable, primals: Sequence[float], tangents: Sequence[float]):
    """f(primals) and its directional derivative J v along v = `tangents`, in one pass.

    Returns `(outputs, output_tangents)`: two floats if f returns a number,
    two lists if it returns a list.
    """
    xs = _as_floats(primals, "jvp primals")
    vs = _as_floats(tangents, "jvp tangents")
    if len(xs) != len(vs):
        raise ValueError(f"jvp: {len(xs)} primals but {len(vs)} tangents (need one tangent per input)")
    _count_evaluation()
    outs, single = _outputs(f([Dual(x, v) for x, v in zip(xs, vs)]), "jvp")
    outs = [_lift(o, "output") for o in outs]  # an output that ignores the inputs has tangent 0
    values, dots = [o.value for o in outs], [o.tangent for o in outs]
    return (values[0], dots[0]) if single else (values, dots)


def jacobian_forward(f: Callable, xs: Sequence[float]) -> list[list[float]]:
    """The M x P Jacobian of f at xs, one column per JVP: P passes of f
    on Duals."""
    xs = _as_floats(xs, "jacobian_forward")
    columns = []
    for j in range(len(xs)):
        # the j-th unit vector
        e_j = [1.0 if i == j else 0.0 for i in range(len(xs))]
        _, column = jvp(f, xs, e_j)
        columns.append(column if isinstance(column, list) else [column])
    return [list(row) for row in zip(*columns)]


# ---- reverse mode on the scalar engine: VJPs and Jacobians by rows -------------

def _count_graph(outputs: list[Value]) -> None:
    """Record the primitives (non-leaf nodes) of the graphs behind `outputs`, each node once."""
    seen: set[int] = set()
    stack = list(outputs)
    while stack:
        node = stack.pop()
        if id(node) not in seen:
            seen.add(id(node))
            _counter.primitives += bool(node._children)
            stack.extend(node._children)


def _backward_steps(out: Value) -> int:
    """Chain-rule steps one `out.backward()` performs: one per edge of its graph."""
    return sum(len(node._children) for node in topological_order(out))


def _reverse_setup(f: Callable, xs: list[float], where: str) -> tuple[list[Value], list, bool]:
    inputs = [Value(x) for x in xs]
    _count_evaluation()
    outs, single = _outputs(f(inputs), where)
    outs = [o if isinstance(o, Value) else Value(_as_float(o, "output")) for o in outs]
    if _counter is not None:
        _count_graph(outs)
    return inputs, outs, single


def vjp(f: Callable, primals: Sequence[float], cotangents: Sequence[float] | float):
    """f(primals) and u^T J for u = `cotangents` (one per output), by one backward pass.

    Returns `(outputs, input_cotangents)`: outputs as f returned them (float or
    list), input cotangents as a list with one entry per input.
    """
    xs = _as_floats(primals, "vjp primals")
    inputs, outs, single = _reverse_setup(f, xs, "vjp")
    us = _as_floats([cotangents] if single and isinstance(cotangents, numbers.Real)
                    else cotangents, "vjp cotangents")
    if len(us) != len(outs):
        raise ValueError(f"vjp: f has {len(outs)} outputs but {len(us)} cotangents were given")
    # One backward from L = sum_i u_i y_i gives dL/dx = u^T J.
    loss = outs[0] * us[0]
    for u, o in zip(us[1:], outs[1:]):
        loss = loss + o * u
    if _counter is not None:
        _counter.primitives += 2 * len(outs) - 1
        _counter.backward_steps += _backward_steps(loss)
    loss.backward()
    values = [o.data for o in outs]
    return (values[0] if single else values), [x.grad for x in inputs]


def jacobian_reverse(f: Callable, xs: Sequence[float]) -> list[list[float]]:
    """The M x P Jacobian of f at xs, one row per backward pass: one forward on
    Values, then M backward passes (gradients zeroed between them)."""
    xs = _as_floats(xs, "jacobian_reverse")
    inputs, outs, _ = _reverse_setup(f, xs, "jacobian_reverse")
    rows = []
    for out in outs:
        zero_grad(inputs)
        if _counter is not None:
            _counter.backward_steps += _backward_steps(out)
        out.backward()
        rows.append([x.grad for x in inputs])
    return rows


# ---- finite differences ----------------------------------------------------------

def finite_difference_jacobian(f: Callable, xs: Sequence[float], eps: float = 1e-6,
                               scheme: str = "centered") -> list[list[float]]:
    """The M x P Jacobian of f at xs by differences of f on floats.

    centered:  (f(x + eps e_j) - f(x - eps e_j)) / (2 eps)   2P passes, error O(eps^2)
    one-sided: (f(x + eps e_j) - f(x)) / eps                 P+1 passes, error O(eps)
    Both also carry a rounding error of about machine epsilon / eps.
    """
    xs = _as_floats(xs, "finite_difference_jacobian")
    if scheme not in ("centered", "one-sided"):
        raise ValueError("finite_difference_jacobian: scheme must be 'centered' or 'one-sided', "
                         f"got {scheme!r}")
    if not (isinstance(eps, numbers.Real) and eps > 0):
        raise ValueError(f"finite_difference_jacobian: eps must be a positive number, got {eps!r}")

    def evaluate(point: list[float]) -> list[float]:
        _count_evaluation()
        outs, _ = _outputs(f(point), "finite_difference_jacobian")
        return [_as_float(o, "output") for o in outs]

    per_pass = count_primitives(f, xs) if _counter is not None else 0
    passes_before = _counter.evaluations if _counter is not None else 0
    # one column per input: the outputs' derivatives along that input
    columns = numerical_gradient(evaluate, xs, eps, scheme)
    if _counter is not None:
        _counter.primitives += per_pass * (_counter.evaluations - passes_before)
    return [list(row) for row in zip(*columns)]
