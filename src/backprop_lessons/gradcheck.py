"""Numerical gradients and side-by-side comparison tables.

A comparison module: it checks the engines, and no engine imports it.
Centered differences, (f(x + eps) - f(x - eps)) / (2 eps), have error
O(eps^2) from truncation plus O(machine_eps / eps) from rounding, so
eps = 1e-6 gives about 1e-10 relative accuracy in float64.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

from .scalar import Value

__all__ = ["numerical_gradient", "relative_error", "GradCheckRow", "GradCheckReport",
           "check_scalar_gradients"]


def numerical_gradient(f: Callable[[list[float]], float], xs: Sequence[float],
                       eps: float = 1e-6) -> list[float]:
    """Centered finite-difference gradient of `f` (floats in, float out) at `xs`."""
    xs = [float(x) for x in xs]
    grads = []
    for i in range(len(xs)):
        plus = xs.copy(); plus[i] += eps
        minus = xs.copy(); minus[i] -= eps
        grads.append((f(plus) - f(minus)) / (2 * eps))
    return grads


def relative_error(a: float, b: float, floor: float = 1e-12) -> float:
    """|a - b| / max(|a|, |b|, floor): 0 when equal, scale free otherwise."""
    return abs(a - b) / max(abs(a), abs(b), floor)


@dataclass
class GradCheckRow:
    name: str
    analytic: float
    numeric: float

    @property
    def abs_diff(self) -> float:
        return abs(self.analytic - self.numeric)

    @property
    def rel_error(self) -> float:
        return relative_error(self.analytic, self.numeric)


@dataclass
class GradCheckReport:
    """Rows of analytic vs numeric gradients; prints as a table with PASS/FAIL."""

    rows: list[GradCheckRow]
    tol: float = 1e-6
    columns: tuple = field(default=("analytic", "numeric"), repr=False)

    @property
    def max_rel_error(self) -> float:
        return max((r.rel_error for r in self.rows), default=0.0)

    @property
    def passed(self) -> bool:
        return self.max_rel_error < self.tol

    def __str__(self) -> str:
        head = f"{'input':<8} {self.columns[0]:>14} {self.columns[1]:>14} {'abs diff':>9} {'rel err':>9}  check"
        lines = [head, "-" * len(head)]
        for r in self.rows:
            verdict = "PASS" if r.rel_error < self.tol else "FAIL"
            lines.append(f"{r.name:<8} {r.analytic:>14.8f} {r.numeric:>14.8f} "
                         f"{r.abs_diff:>9.1e} {r.rel_error:>9.1e}  {verdict}")
        lines.append(f"max relative error {self.max_rel_error:.1e} "
                     f"(tolerance {self.tol:.0e}): {'PASS' if self.passed else 'FAIL'}")
        return "\n".join(lines)

    def _repr_pretty_(self, p, cycle) -> None:
        p.text(str(self))


def check_scalar_gradients(f: Callable[..., Value], xs: Sequence[float],
                           names: Sequence[str] | None = None, eps: float = 1e-6,
                           tol: float = 1e-6) -> GradCheckReport:
    """Compare the engine's gradients of `f(*values)` with centered differences.

    `f` takes one `Value` per entry of `xs` and returns a `Value`.
    """
    names = list(names) if names is not None else [f"x{i}" for i in range(len(xs))]
    if len(names) != len(xs):
        raise ValueError(f"check_scalar_gradients: {len(names)} names for {len(xs)} inputs")
    values = [Value(x, label=n) for x, n in zip(xs, names)]
    f(*values).backward()
    numeric = numerical_gradient(lambda v: f(*[Value(x) for x in v]).data, xs, eps)
    rows = [GradCheckRow(n, v.grad, g) for n, v, g in zip(names, values, numeric)]
    return GradCheckReport(rows, tol)
