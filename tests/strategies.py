"""Hypothesis strategies shared by the test modules.

Numbers are bounded and finite (no NaN, no inf), so every comparison with
PyTorch is between two well-defined floats.  `expression_graphs()` draws a
whole program of scalar operations that `evaluate_graph` runs on any
number type with the same interface: Python floats (through `math`),
`Value` and float64 `torch.Tensor`s - one program, three engines.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from hypothesis import strategies as st

__all__ = [
    "floats",
    "positive_floats",
    "nonzero_floats",
    "exponents",
    "OPERATIONS",
    "ExpressionGraph",
    "expression_graphs",
    "evaluate_graph",
    "float_unary",
    "SPECIAL_FLOATS",
    "special_floats",
]


def floats(bound: float = 5.0):
    """Finite floats in [-bound, bound]."""
    return st.floats(-bound, bound, allow_nan=False, allow_infinity=False)


def positive_floats(low: float = 0.05, high: float = 10.0):
    """Floats in [low, high] with low > 0: safe inputs for log, x ** 0.5, 1 /
    x."""
    return st.floats(low, high, allow_nan=False, allow_infinity=False)


def nonzero_floats(low: float = 0.1, high: float = 5.0):
    """Floats with low <= |x| <= high: safe divisors."""
    return st.one_of(
        positive_floats(low, high), positive_floats(low, high).map(lambda x: -x)
    )


def exponents():
    """Numeric exponents for `x ** k` on positive bases: ints and fractions,
    both signs."""
    return st.sampled_from([2, 3, -1, -2, 0.5, 1.5, -0.5, 2.5])


# The floats where implementations disagree: NaN, both infinities, both
# zeros, the overflow edges of exp (709.78) and of float64 (1.8e308), and a
# subnormal.  `special_floats` mixes them with ordinary values.
SPECIAL_FLOATS = (
    math.nan,
    math.inf,
    -math.inf,
    0.0,
    -0.0,
    1.0,
    -1.0,
    709.0,
    710.0,
    -745.0,
    1e300,
    -1e300,
    1.7e308,
    5e-324,
)


def special_floats():
    """NaN, +-inf, +-0.0, huge and tiny values, and ordinary finite floats:
    the inputs of the NaN/inf suite
    (`tests/conventions/test_nan_semantics.py`)."""
    return st.one_of(
        st.sampled_from(SPECIAL_FLOATS),
        st.floats(-30.0, 30.0, allow_nan=False, allow_infinity=False),
    )


# ---- random expression graphs ------------------------------------------------
#
# A graph is a list of steps.  Step i makes node n_inputs + i from earlier
# nodes (any of them, so nodes are reused and the graph is a DAG, not a
# tree) and possibly a Python constant, which exercises the reflected
# operators.  While drawing, the strategy evaluates every step in floats and
# replaces a step that would leave the safe range (log of a small number, a
# small divisor, a huge result, a saturated tanh) by the negation of its
# first operand.  The drawn graph is therefore always well defined and well
# conditioned.

_BINARY = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
}
# node (op) constant; constant (op) node: the reflected operators
_WITH_CONSTANT = {
    "add_c": lambda a, c: a + c,
    "c_add": lambda a, c: c + a,
    "sub_c": lambda a, c: a - c,
    "c_sub": lambda a, c: c - a,
    "mul_c": lambda a, c: a * c,
    "c_mul": lambda a, c: c * a,
    "div_c": lambda a, c: a / c,
    "c_div": lambda a, c: c / a,
    "pow": lambda a, c: a**c,
}
_UNARY = ("neg", "exp", "log", "relu", "tanh", "sigmoid")
OPERATIONS = tuple(_BINARY) + tuple(_WITH_CONSTANT) + _UNARY

_MAX_MAGNITUDE = 50.0  # keeps forward values and local gradients moderate


def float_unary(name: str, x: float) -> float:
    """The unary operations on plain Python floats."""
    if name == "exp":
        return math.exp(x)
    if name == "log":
        return math.log(x)
    if name == "relu":
        return x if x > 0.0 else 0.0
    if name == "tanh":
        return math.tanh(x)
    if name == "sigmoid":
        return 1.0 / (1.0 + math.exp(-x))
    raise KeyError(name)


def method_unary(name: str, x):
    """The unary operations on `Value` and `torch.Tensor` (same method names)."""
    return getattr(x, name)()


@dataclass(frozen=True)
class ExpressionGraph:
    inputs: tuple[float, ...]
    steps: tuple[tuple, ...]  # (op, i) | (op, i, j) | (op, i, constant)

    def __len__(self) -> int:
        return len(self.inputs) + len(self.steps)


def apply_step(step: tuple, nodes: list, unary=method_unary):
    op, i, *rest = step
    a = nodes[i]
    if op in _BINARY:
        return _BINARY[op](a, nodes[rest[0]])
    if op in _WITH_CONSTANT:
        return _WITH_CONSTANT[op](a, rest[0])
    if op == "neg":
        return -a
    return unary(op, a)


def evaluate_graph(graph: ExpressionGraph, inputs: list, unary=method_unary):
    """Run `graph` on `inputs` (floats, Values or tensors); return the output
    node.

    The output is the sum of the last three nodes (fewer if the graph is
    smaller), so several branches reach it.
    """
    nodes = list(inputs)
    for step in graph.steps:
        nodes.append(apply_step(step, nodes, unary))
    out = nodes[-1]
    for node in nodes[-3:-1]:
        out = out + node
    return out


def _safe(step: tuple, nodes: list[float]) -> bool:
    """True if `step` is defined and moderate at these float values."""
    op, i, *rest = step
    a = nodes[i]
    if op == "div" and abs(nodes[rest[0]]) < 0.2:
        return False
    if (
        op in ("sub", "div") and rest[0] == i
    ):  # x - x, x / x: gradients cancel to 0
        return False
    if op == "c_div" and abs(a) < 0.2:
        return False
    if op == "log" and a < 0.2:
        return False
    if op == "exp" and a > 3.0:
        return False
    if op == "pow":
        k = rest[0]
        if abs(a) < 0.2 or (a < 0 and not float(k).is_integer()):
            return False
    if op == "relu" and abs(a) < 1e-9:  # keep away from the kink
        return False
    # Away from saturation: the derivatives 1 - tanh^2 and s(1 - s) lose
    # relative accuracy there (see test_scalar.py, the "_wide" rows).
    if (op == "tanh" and abs(a) > 3.0) or (op == "sigmoid" and abs(a) > 6.0):
        return False
    try:
        value = apply_step(step, nodes, float_unary)
    except (OverflowError, ValueError, ZeroDivisionError):
        return False
    # No catastrophic cancellation: a sum much smaller than its terms would
    # turn a one-ulp difference between the engines (ours computes x / y as
    # x * y ** -1, PyTorch divides) into a large relative one.
    operands = [a, nodes[rest[0]]] if op in _BINARY else [a] + rest
    sums = ("add", "sub", "add_c", "c_add", "sub_c", "c_sub")
    if op in sums and abs(value) < 1e-2 * max(abs(t) for t in operands):
        return False
    return abs(value) <= _MAX_MAGNITUDE


@st.composite
def expression_graphs(
    draw,
    min_inputs: int = 2,
    max_inputs: int = 5,
    min_steps: int = 3,
    max_steps: int = 25,
) -> ExpressionGraph:
    """A random DAG of scalar operations with reused nodes and mixed ops."""
    n_inputs = draw(st.integers(min_inputs, max_inputs))
    inputs = tuple(draw(floats(2.0)) for _ in range(n_inputs))
    nodes = list(inputs)
    steps = []
    for _ in range(draw(st.integers(min_steps, max_steps))):
        op = draw(st.sampled_from(OPERATIONS))
        # Half the time the newest node (deep chains), else any earlier one
        # (reuse).
        i = draw(
            st.one_of(st.just(len(nodes) - 1), st.integers(0, len(nodes) - 1))
        )
        if op in _BINARY:
            step = (op, i, draw(st.integers(0, len(nodes) - 1)))
        elif op == "pow":
            step = (op, i, draw(exponents()))
        elif op in _WITH_CONSTANT:
            step = (op, i, draw(nonzero_floats(0.5, 3.0)))
        else:
            step = (op, i)
        if not _safe(step, nodes):
            step = ("neg", i)  # always safe, and keeps |value| <= _MAX_MAGNITUDE
        steps.append(step)
        nodes.append(apply_step(step, nodes, float_unary))
    return ExpressionGraph(inputs, tuple(steps))
