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


# ---- Tensor functions ------------------------------------------------------------
# Checks for the NumPy engine (`tensor.py`): numerical gradients of whole arrays
# and a side-by-side run in PyTorch.  A function of tensors with a non-scalar
# output is reduced to the scalar L = sum(out * dout) with a fixed random
# `dout` (a random projection), so every entry of the output is checked.

import numpy as np  # noqa: E402  (this section was added after the scalar one)

from .tensor import Tensor  # noqa: E402

__all__ += ["array_relative_error", "TensorCheckRow", "TensorCheckReport", "gradcheck",
            "compare_with_torch"]


def array_relative_error(a, b, floor: float = 1e-12) -> float:
    """max|a - b| / max(max|a|, max|b|, floor): the largest difference relative to the
    arrays' scale (an entry-by-entry ratio would blow up where the gradient is near 0)."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.size == 0:
        return 0.0
    scale = max(float(np.abs(a).max()), float(np.abs(b).max()), floor)
    return float(np.abs(a - b).max()) / scale


@dataclass
class TensorCheckRow:
    """One compared array: its name and shape, how far apart the two versions are, the verdict."""

    name: str
    shape: tuple
    max_abs_diff: float
    rel_error: float
    passed: bool


@dataclass
class TensorCheckReport:
    """Rows of compared arrays; prints as a table with PASS/FAIL per row."""

    rows: list[TensorCheckRow]
    title: str = ""
    rule: str = ""  # how PASS was decided, printed under the table

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.rows)

    @property
    def max_rel_error(self) -> float:
        return max((r.rel_error for r in self.rows), default=0.0)

    def __getitem__(self, name: str) -> TensorCheckRow:
        for r in self.rows:
            if r.name == name:
                return r
        raise KeyError(f"TensorCheckReport: no row named {name!r}")

    def __str__(self) -> str:
        width = max([len("name")] + [len(r.name) for r in self.rows])
        head = f"{'name':<{width}}  {'shape':<14} {'max abs diff':>12} {'rel error':>10}  check"
        lines = ([self.title] if self.title else []) + [head, "-" * len(head)]
        for r in self.rows:
            lines.append(f"{r.name:<{width}}  {str(r.shape):<14} {r.max_abs_diff:>12.1e} "
                         f"{r.rel_error:>10.1e}  {'PASS' if r.passed else 'FAIL'}")
        if self.rule:
            lines.append(self.rule)
        return "\n".join(lines)

    def _repr_pretty_(self, p, cycle) -> None:
        p.text(str(self))


def _named_inputs(inputs, names) -> tuple[list[str], list[np.ndarray]]:
    """(names, float64 arrays) from a dict name -> array or a sequence of arrays/Tensors."""
    if isinstance(inputs, dict):
        names, arrays = list(inputs), list(inputs.values())
    else:
        arrays = list(inputs)
        names = list(names) if names is not None else [f"x{i}" for i in range(len(arrays))]
    if len(names) != len(arrays):
        raise ValueError(f"gradcheck: {len(names)} names for {len(arrays)} inputs")
    arrays = [np.array(a.data if isinstance(a, Tensor) else a, dtype=np.float64) for a in arrays]
    return names, arrays


def _projection(shape: tuple, seed: int) -> np.ndarray:
    """The fixed output weights `dout` of L = sum(out * dout): ones for a scalar, else random."""
    if int(np.prod(shape)) == 1:
        return np.ones(shape)
    return np.random.default_rng(seed).standard_normal(shape)


def gradcheck(f, inputs, eps: float = 1e-6, atol: float = 1e-5, rtol: float = 1e-3,
              names=None, seed: int = 0) -> TensorCheckReport:
    """Compare the engine's gradients of `f(*tensors)` with centered differences.

    `f` takes one Tensor per input and returns a Tensor; `inputs` is a dict
    name -> array or a sequence of arrays (then named x0, x1, ...).  All
    arithmetic is float64 (a float32 difference quotient is mostly noise).
    An input passes when |analytic - numeric| <= atol + rtol * |numeric|
    entry by entry (the defaults are those of torch.autograd.gradcheck).
    Costs two forward passes per input entry: use small arrays.
    """
    names, arrays = _named_inputs(inputs, names)
    tensors = [Tensor(a, requires_grad=True) for a in arrays]
    out = f(*tensors)
    dout = _projection(out.shape, seed)
    out.backward(dout)
    rows = []
    for i, (name, x) in enumerate(zip(names, arrays)):
        numeric = np.zeros_like(x)
        for j in np.ndindex(x.shape):
            old = x[j]
            x[j] = old + eps
            plus = float((f(*[Tensor(a) for a in arrays]).data * dout).sum())
            x[j] = old - eps
            minus = float((f(*[Tensor(a) for a in arrays]).data * dout).sum())
            x[j] = old
            numeric[j] = (plus - minus) / (2 * eps)
        analytic = tensors[i].grad if tensors[i].grad is not None else np.zeros_like(x)
        diff = float(np.abs(analytic - numeric).max()) if x.size else 0.0
        ok = bool(np.allclose(analytic, numeric, rtol=rtol, atol=atol))
        rows.append(TensorCheckRow(name, x.shape, diff, array_relative_error(analytic, numeric), ok))
    return TensorCheckReport(rows, "analytic (backward) vs numeric (centered differences)",
                             f"PASS: |analytic - numeric| <= {atol:g} + {rtol:g} |numeric| everywhere")


def compare_with_torch(f, inputs, torch_f=None, names=None, tol=1e-12,
                       seed: int = 0) -> TensorCheckReport:
    """Run `f` on Tensors and `torch_f` (default: `f`) on torch float64 tensors made from
    the same arrays; compare the outputs and every input's gradient of sum(out * dout).

    `tol` is the largest relative error (see `array_relative_error`) that passes:
    one number, or a dict name -> tolerance (rows are named "output" and
    "grad <input name>"; missing names use 1e-12).  Returns the table.
    """
    import torch  # only this helper needs PyTorch

    names, arrays = _named_inputs(inputs, names)
    torch_f = f if torch_f is None else torch_f
    ours = [Tensor(a, requires_grad=True) for a in arrays]
    theirs = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in arrays]
    out, ref = f(*ours), torch_f(*theirs)
    dout = _projection(out.shape, seed)
    out.backward(dout)
    (ref * torch.from_numpy(dout.reshape(tuple(ref.shape)))).sum().backward()

    def row(name, a, b):
        b = b.detach().numpy()
        limit = tol.get(name, 1e-12) if isinstance(tol, dict) else tol
        if a.shape != b.shape:
            return TensorCheckRow(name, f"{a.shape}!={b.shape}", float("inf"), float("inf"), False)
        err = array_relative_error(a, b)
        diff = float(np.abs(a - b).max()) if a.size else 0.0
        return TensorCheckRow(name, a.shape, diff, err, err <= limit)

    rows = [row("output", out.data, ref)]
    for name, t, r in zip(names, ours, theirs):
        g = t.grad if t.grad is not None else np.zeros(t.shape)
        rows.append(row(f"grad {name}", g, r.grad if r.grad is not None else torch.zeros(r.shape)))
    rule = (f"PASS means relative error <= {tol:g}" if not isinstance(tol, dict)
            else "PASS means relative error <= the tolerance chosen for that name")
    return TensorCheckReport(rows, "backprop_lessons.tensor vs PyTorch (float64)", rule)


# ---- Dictionaries of parameters ---------------------------------------------------
# Checks for hand-written NumPy models (chapter 5's `mlp3`, `deep_mlp`): the model
# keeps its parameters in a dict name -> array, and its backward returns a dict
# of gradients with the same names.  One row per parameter, matched by name.

__all__ += ["numerical_param_gradients", "compare_gradients"]


def numerical_param_gradients(loss_fn, params: dict, eps: float = 1e-6,
                              names=None) -> dict:
    """Centered differences of `loss_fn()` for every entry of the arrays in
    `params`.

    `loss_fn` takes no argument and reads the arrays of `params`, which are
    changed in place one entry at a time (each entry is restored exactly
    afterwards).  `names` picks a subset of the parameters.  The arithmetic
    happens in the parameters' own dtype, so float32 shows float32 noise.
    Costs two calls of `loss_fn` per entry.
    """
    names = list(params) if names is None else list(names)
    grads = {}
    for name in names:
        if name not in params:
            raise KeyError("numerical_param_gradients: no parameter named "
                           f"{name!r} (have {list(params)})")
        x = params[name]
        g = np.zeros(x.shape, dtype=np.float64)
        for j in np.ndindex(x.shape):
            old = x[j]
            x[j] = old + eps
            plus = float(loss_fn())
            x[j] = old - eps
            minus = float(loss_fn())
            x[j] = old
            g[j] = (plus - minus) / (2 * eps)
        grads[name] = g
    return grads


def compare_gradients(analytic: dict, reference: dict, tol=1e-4, title: str = "",
                      names=None) -> TensorCheckReport:
    """One row per name: shape, max |analytic - reference|, relative error
    (`array_relative_error`), PASS when the relative error is <= `tol`.

    `tol` is one number or a dict name -> tolerance.  A name missing from
    `reference`, or a shape mismatch, is a FAIL row (not an exception), so
    the table always shows every parameter.
    """
    names = list(analytic) if names is None else list(names)
    rows = []
    for name in names:
        limit = tol[name] if isinstance(tol, dict) else tol
        a = np.asarray(analytic[name], dtype=np.float64)
        if name not in reference:
            rows.append(TensorCheckRow(name, a.shape, float("inf"), float("inf"), False))
            continue
        b = np.asarray(reference[name], dtype=np.float64)
        if a.shape != b.shape:
            rows.append(TensorCheckRow(name, f"{a.shape}!={b.shape}", float("inf"),
                                       float("inf"), False))
            continue
        err = array_relative_error(a, b)
        diff = float(np.abs(a - b).max()) if a.size else 0.0
        rows.append(TensorCheckRow(name, a.shape, diff, err, err <= limit))
    rule = (f"PASS means relative error <= {tol:g}" if not isinstance(tol, dict)
            else "PASS means relative error <= the tolerance chosen for that name")
    return TensorCheckReport(rows, title, rule)
