"""Reverse mode as the transpose of forward mode (JAX's autodidax, reduced).

Chapter 3's forward mode pushes a tangent through f with one JVP rule per
primitive (`forward_mode.jvp_rules`).  Run those same rules with the primal
values known but the tangents *unknown* - symbols instead of numbers - and
each rule, instead of computing a tangent, writes down how the output's
tangent depends linearly on the inputs' ones.  What comes out is f's
linearization at the point, as a little program with two kinds of equation:

    c = add a b        c = a + b
    c = scale a 0.42   c = 0.42 * a   (the constant is a number the JVP
                                       rule computed from the primals)

Running that program is a JVP (J v).  Running it *backwards*, with every
equation replaced by its transpose, is a VJP (J^T u):

    c = add a b   ->   a gets ct_c, b gets ct_c       (an add's transpose
                                                       is a copy, a fan-out)
    c = scale a k ->   a gets k * ct_c                (a number is symmetric)

A variable that several equations read is a copy in the program; its
transpose is a sum, so cotangents accumulate (`+=`).  Two transposition
rules for the whole language, and no VJP rule for any primitive: this is
how JAX derives reverse mode from forward mode (`linearize`, then
`transpose`).  JAX writes a JVP rule for each primitive and a transpose
rule for each linear one; reverse mode needs nothing else.  The output
here is checked against the Tensor engine's hand-written VJP rules in the
tests and in chapter 11.

Functions take a list of numbers and are written as chapter 3's are (`+ - *
/ **` and the methods or `forward_mode`'s functions `exp`, `log`, `tanh`,
`sigmoid`, `relu`); the same code runs on floats, Duals, Values and here.
The tracer is a `Dual` whose tangent is a symbol, so `forward_mode`'s
functions accept it, and the rules go through `forward_mode`'s interpreter,
so `count_operations` counts them.

What this is not: a tracer of arrays (every primitive is a scalar one), or
fast.  It imports only the standard library and `forward_mode`.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Sequence

from . import forward_mode
from .forward_mode import Dual
from .validate import (
    finite_quotient_domain,
    function,
    instance_of,
    real_number,
    real_numbers,
)

__all__ = ["LinearVar", "LinearProgram", "linearize", "transpose", "vjp"]


class LinearVar:
    """An unknown tangent: a variable of a `LinearProgram`.

    Only linear operations are allowed on it: adding another LinearVar (or a
    zero tangent, the number 0) and multiplying or dividing by a number.
    Each writes one equation into the program.  Anything else (a LinearVar
    times a LinearVar, plus a non-zero constant) is not linear and raises.
    """

    __slots__ = ("program", "index")

    def __init__(self, program: LinearProgram, index: int):
        self.program, self.index = program, index

    def __repr__(self) -> str:
        return f"LinearVar({self.program.name(self.index)})"

    def __add__(self, other):
        if isinstance(other, LinearVar):
            return self.program.emit("add", (self.index, other.index), None)
        if _is_zero(other):  # a constant's tangent
            return self
        raise TypeError(
            f"linearize: a tangent plus the constant {other!r} is not linear "
            "(a JVP rule may only add tangents and scale them)"
        )

    __radd__ = __add__

    def __mul__(self, k):
        if isinstance(k, LinearVar):
            raise TypeError(
                "linearize: a tangent times a tangent is not linear "
                "(a JVP rule may only add tangents and scale them)"
            )
        k = _number(k, "*")
        if k == 0.0:
            return 0.0
        return self.program.emit("scale", (self.index,), k)

    __rmul__ = __mul__

    def __truediv__(self, k):
        if isinstance(k, LinearVar):
            raise TypeError("linearize: dividing by a tangent is not linear")
        return self * (1.0 / _number(k, "/"))

    def __neg__(self):
        return self * -1.0

    def __sub__(self, other):
        return self + (-other)

    def __rsub__(self, other):
        return (-self) + other


def _is_zero(x) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, bool) and x == 0


def _number(k, op: str) -> float:
    return real_number(f"linearize: {op}", "a tangent's scale", k, finite=False)


class LinearProgram:
    """The linearization of f at a point: J as a program.

    `equations` holds (out, op, ins, k) with op "add" (ins a, b) or "scale"
    (ins a, constant k); variables 0 .. n_inputs - 1 are the input
    tangents.  `outputs` holds one variable per output of f, or None where
    the output does not depend on the inputs (its tangent is 0).

    program(tangents) -> J v (forward mode, running the equations);
    program.transpose()(cotangents) -> J^T u (reverse mode, running their
    transposes backwards); str(program) prints it as a jaxpr.
    """

    def __init__(self, n_inputs: int):
        self.n_inputs = n_inputs
        self.n_vars = n_inputs
        self.equations: list[tuple] = []
        self.outputs: list[int | None] = []
        self.single = True

    def emit(self, op: str, ins: tuple, k) -> LinearVar:
        out = self.n_vars
        self.n_vars += 1
        self.equations.append((out, op, ins, k))
        return LinearVar(self, out)

    @staticmethod
    def name(i: int) -> str:
        """a, b, ..., z, ba, bb, ... as jaxprs name variables."""
        letters = "abcdefghijklmnopqrstuvwxyz"
        s = letters[i % 26]
        while i >= 26:
            i //= 26
            s = letters[i % 26] + s
        return s

    def __str__(self) -> str:
        ins = " ".join(self.name(i) for i in range(self.n_inputs))
        lines = [f"{{ lambda {ins} ."]
        for out, op, args, k in self.equations:
            rhs = " ".join(self.name(a) for a in args)
            const = "" if k is None else f" {k:.4g}"
            lines.append(f"    {self.name(out)} = {op} {rhs}{const}")
        outs = " ".join(
            "0.0" if o is None else self.name(o) for o in self.outputs
        )
        lines.append(f"  in ( {outs} ) }}")
        return "\n".join(lines)

    def _check(self, values, what: str, n: int) -> list[float]:
        one = n == 1 and isinstance(values, numbers.Real)
        values = [values] if one else list(values)
        if len(values) != n:
            raise ValueError(
                f"LinearProgram: {n} {what} expected, got {len(values)}"
            )
        return [_number(v, what) for v in values]

    def __call__(self, tangents):
        """J v: the equations in order (forward mode)."""
        vals = self._check(tangents, "tangents", self.n_inputs)
        vals += [0.0] * (self.n_vars - self.n_inputs)
        for out, op, ins, k in self.equations:
            if op == "add":
                vals[out] = vals[ins[0]] + vals[ins[1]]
            else:
                vals[out] = k * vals[ins[0]]
        outs = [0.0 if o is None else vals[o] for o in self.outputs]
        return outs[0] if self.single else outs

    def transpose(self) -> Callable:
        """The transposed program: u -> J^T u (a list, one per input)."""

        def transposed(cotangents) -> list[float]:
            us = self._check(cotangents, "cotangents", len(self.outputs))
            ct = [0.0] * self.n_vars
            for o, u in zip(self.outputs, us):
                if o is not None:
                    ct[o] += u
            for out, op, ins, k in reversed(self.equations):
                if op == "add":  # c = a + b: a and b each get ct_c
                    ct[ins[0]] += ct[out]
                    ct[ins[1]] += ct[out]
                else:  # c = k a: a gets k ct_c
                    ct[ins[0]] += k * ct[out]
            return ct[: self.n_inputs]

        return transposed


class _Linearizing(Dual):
    """A Dual whose tangent is a `LinearVar` (or 0.0): a primal value known,
    its tangent a symbol.  Every primitive runs chapter 3's JVP rule."""

    __slots__ = ()

    def __init__(self, value: float, tangent):
        self.value, self.tangent = value, tangent

    def __repr__(self) -> str:
        return f"_Linearizing(value={self.value!r}, tangent={self.tangent!r})"

    def __add__(self, other):
        return _apply("add", self, _lift(other, "+"))

    def __mul__(self, other):
        return _apply("mul", self, _lift(other, "*"))

    def __pow__(self, k):
        return _apply("pow", self, k=_number(k, "**"))

    def __neg__(self):
        return self * -1.0

    def __sub__(self, other):
        return self + (-_lift(other, "-"))

    def __truediv__(self, other):
        other = _lift(other, "/")
        finite_quotient_domain("linearize /", self.value, other.value)
        return self * other**-1

    def __radd__(self, other):
        return self + other

    def __rmul__(self, other):
        return self * other

    def __rsub__(self, other):
        return _lift(other, "-") - self

    def __rtruediv__(self, other):
        return _lift(other, "/") / self

    def exp(self):
        return _apply("exp", self)

    def log(self):
        return _apply("log", self)

    def relu(self):
        return _apply("relu", self)

    def tanh(self):
        return _apply("tanh", self)

    def sigmoid(self):
        return _apply("sigmoid", self)


def _lift(x, op: str) -> _Linearizing:
    if isinstance(x, _Linearizing):
        return x
    return _Linearizing(_number(x, op), 0.0)


def _apply(name: str, *args: _Linearizing, **params) -> _Linearizing:
    """Primitive `name` on tracers: chapter 3's JVP rule, through
    forward_mode's interpreter (so `count_operations` sees it)."""
    primals = tuple(a.value for a in args)
    tangents = tuple(a.tangent for a in args)
    y, y_dot = forward_mode.apply_rule(name, primals, tangents, params)
    return _Linearizing(y, y_dot)


def linearize(f: Callable, primals: Sequence[float]):
    """(f(primals), the LinearProgram of J at primals), from one pass of f
    with symbolic tangents.  Outputs as f returns them (a float or a list)."""
    function("linearize", "f", f)
    xs = real_numbers("linearize: primals", primals)
    program = LinearProgram(len(xs))
    inputs = [_Linearizing(x, LinearVar(program, i)) for i, x in enumerate(xs)]
    out = forward_mode.evaluate_pass(f, inputs)
    single = not isinstance(out, (list, tuple))
    outs = [_lift(o, "output") for o in ([out] if single else out)]
    program.single = single
    program.outputs = [
        o.tangent.index if isinstance(o.tangent, LinearVar) else None
        for o in outs
    ]
    values = [o.value for o in outs]
    return (values[0] if single else values), program


def transpose(program: LinearProgram) -> Callable:
    """u -> J^T u, the transpose of a linear program (see
    `LinearProgram.transpose`)."""
    instance_of(
        "transpose", "program", program, LinearProgram, " (from linearize)"
    )
    return program.transpose()


def vjp(f: Callable, primals: Sequence[float], cotangents):
    """(f(primals), u^T J) as autodidax builds it: linearize f, transpose the
    linear program, run it on u.  No VJP rule is used anywhere."""
    out, program = linearize(f, primals)
    return out, transpose(program)(cotangents)
