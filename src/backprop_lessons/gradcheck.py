"""Numerical gradients and check tables: how the book checks every backward.

A comparison module: it checks the engines, and no engine imports it except
`forward_mode`, whose `finite_difference_jacobian` (chapter 3's baseline) is
`numerical_gradient` applied to a function with several outputs.  PyTorch
is imported only inside `compare_with_torch`.

Numerical gradients.  `numerical_gradient(f, x)` moves one entry of `x` at
a time (minitorch's `central_difference` is the model):
    centered   (f(x + eps e_i) - f(x - eps e_i)) / (2 eps)
               error O(eps^2) from truncation
    one-sided  (f(x + eps e_i) - f(x)) / eps
               error O(eps)
both plus a rounding error of about machine epsilon * |f| / eps, so centered
differences with eps = 1e-6 agree with the true gradient to about 1e-10
relative in float64.  `x` is a list of floats (the scalar form) or a NumPy
array (the array form, moved in place and restored exactly).

Check tables.  Every comparison is a `CheckTable` of `CheckRow`s with one set
of fields: name, shape, max_abs_diff, rel_error, tol, passed.  Tolerances go
per row, chosen by name, never one global number (llm.c found bugs hidden by
a global tolerance).  The printed table shows each error against its row's
tolerance, `< 1e-12  PASS` or `3.1e-02 > 1e-06  FAIL`, never the round-off
digits themselves: those change with the CPU's SIMD kernels, the BLAS and
the thread count, while the verdict and the tolerance do not.  The raw
numbers stay available as attributes for code.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

from .validate import flag, real_array

if TYPE_CHECKING:  # the engines load when a function here uses them
    from .scalar import Value

__all__ = [
    "numerical_gradient",
    "f_at",
    "numerical_param_gradients",
    "directional_derivative",
    "largest_difference",
    "scaled_difference",
    "close",
    "relative_error",
    "CheckRow",
    "CheckTable",
    "compare_arrays",
    "compare_gradients",
    "check_scalar_gradients",
    "gradcheck",
    "dot_product_test",
    "random_direction_checks",
    "compare_with_torch",
]


# ---- numerical gradients ----------------------------------------------------

SCHEMES = ("centered", "one-sided")


def _output(y):
    """f's value as a float, or as a float64 array when f has several outputs."""
    if isinstance(y, (list, tuple, np.ndarray)) and np.ndim(y) > 0:
        return np.asarray(y, dtype=np.float64)
    return float(y)


def f_at(f, x, index, step: float):
    """f at x with entry `index` moved by `step` (index None: f at x itself).

    A list is copied, so f sees a new list; an array is changed in place, in
    its own dtype, and restored exactly, so f may read it from elsewhere (a
    model's parameter dict) and ignore its argument.
    """
    if index is None:
        return _output(f(x if isinstance(x, np.ndarray) else list(x)))
    if isinstance(x, np.ndarray):
        old = x[index]
        x[index] = old + step
        try:
            return _output(f(x))
        finally:
            x[index] = old
    moved = list(x)
    moved[index] += step
    return _output(f(moved))


def numerical_gradient(
    f: Callable, x, eps: float = 1e-6, scheme: str = "centered"
):
    """Every partial derivative of `f` at `x` by finite differences.

    Scalar form: `x` is a sequence of numbers, `f` takes a list of floats;
    returns a list with one derivative per entry.  Array form: `x` is a
    float NumPy array, `f` takes that array (moved in place one entry at a
    time, in the array's own dtype, so float32 shows float32 noise); returns
    a float64 array of x's shape.  When `f` returns several numbers, each
    entry's derivative is an array of theirs (a column of the Jacobian).
    """
    if scheme not in SCHEMES:
        raise ValueError(
            f"numerical_gradient: scheme must be one of {SCHEMES}, got {scheme!r}"
        )
    if not (isinstance(eps, numbers.Real) and eps > 0):
        raise ValueError(
            f"numerical_gradient: eps must be a positive number, got {eps!r}"
        )
    if isinstance(x, np.ndarray):
        if not np.issubdtype(x.dtype, np.floating):
            raise TypeError(
                "numerical_gradient: the array form needs a float "
                f"array (it is moved in place), got dtype {x.dtype}"
            )
        indices = list(np.ndindex(x.shape))
    else:
        x = [float(v) for v in x]
        indices = range(len(x))
    if scheme == "centered":
        # (f(x + eps e_i) - f(x - eps e_i)) / (2 eps): 2 passes per entry
        derivatives = [
            (f_at(f, x, i, eps) - f_at(f, x, i, -eps)) / (2 * eps)
            for i in indices
        ]
    else:
        # (f(x + eps e_i) - f(x)) / eps: 1 pass per entry, plus f(x) once
        base = f_at(f, x, None, 0.0)
        derivatives = [(f_at(f, x, i, eps) - base) / eps for i in indices]
    if isinstance(x, np.ndarray):
        tail = np.shape(derivatives[0]) if derivatives else ()
        return np.array(derivatives, dtype=np.float64).reshape(x.shape + tail)
    return [d.tolist() if isinstance(d, np.ndarray) else d for d in derivatives]


def directional_derivative(f: Callable, arrays, directions, eps: float = 1e-6):
    """d/dt f(x + t v) at t = 0, by centered differences: the change of `f`
    along the directions `v` (one per array of `arrays`), moved all at once.

    `f` takes a list of arrays (x moved along v) and returns a number or an
    array.  It is `numerical_gradient` of the one-variable function
    t -> f(x + t v): two passes of f, whatever the size (a Jacobian-vector
    product, or a Hessian-vector product when f is a gradient).
    """

    def along(t):
        return f([a + t[0] * v for a, v in zip(arrays, directions)])

    return np.asarray(numerical_gradient(along, [0.0], eps)[0])


def numerical_param_gradients(
    loss_fn: Callable[[], float], params: dict, eps: float = 1e-6, names=None
) -> dict:
    """`numerical_gradient` of `loss_fn()` for every array in `params`, by name.

    `loss_fn` takes no argument and reads the arrays of `params` (a model's
    parameter dict), which are moved in place one entry at a time and
    restored exactly.  `names` picks a subset.
    """
    names = list(params) if names is None else list(names)
    for name in names:
        if name not in params:
            raise KeyError(
                "numerical_param_gradients: no parameter named "
                f"{name!r} (have {list(params)})"
            )
    return {
        name: numerical_gradient(lambda _: loss_fn(), params[name], eps)
        for name in names
    }


# ---- how far apart two arrays are -------------------------------------------


def largest_difference(a, b) -> float:
    """max|a - b| over the entries of two numbers or arrays of one shape (0
    when they are empty): the package's one absolute difference, which
    `close`, `relative_error` and the check tables judge."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(
            f"largest_difference: shapes {a.shape} and {b.shape} differ"
        )
    return float(np.abs(a - b).max(initial=0.0))


def _scale(reference: np.ndarray, floor: float) -> float:
    return max(float(np.abs(reference).max(initial=0.0)), floor)


def scaled_difference(ours, reference, floor: float = 1.0) -> float:
    """max|ours - reference| / max(max|reference|, floor): the error `close`
    judges against its tolerance."""
    reference = np.asarray(reference, dtype=np.float64)
    return largest_difference(ours, reference) / _scale(reference, floor)


def close(ours, reference, tol: float, floor: float = 1.0) -> bool:
    """Whether `ours` is `reference` up to `tol`: the same shape, and
    max|ours - reference| <= tol * max(max|reference|, floor), relative to
    the reference's scale and absolute below `floor` (floor=0: relative
    throughout).  Any other shape is not close, so an answer of any shape
    can be judged; nan is close to nothing."""
    a = np.asarray(ours, dtype=np.float64)
    b = np.asarray(reference, dtype=np.float64)
    if a.shape != b.shape:
        return False
    return largest_difference(a, b) <= tol * _scale(b, floor)


def relative_error(a, b, floor: float = 1e-12, per_entry: bool = False) -> float:
    """How far apart two numbers or arrays are, relative to their size.

    Normwise (the default, the book's metric): max|a - b| / max(max|a|,
    max|b|, floor), the largest difference over the arrays' largest entry.
    It does not blow up where a gradient entry is near 0, and for the same
    reason it cannot see an entry far smaller than the largest: an entry
    1e-8 of the largest may be wrong, sign and all, while the error stays
    below 1e-8.

    per_entry=True: max over entries of |a_i - b_i| / max(|a_i|, |b_i|,
    floor), each entry against its own size.  It sees every wrong entry,
    and also the rounding noise of entries too small for a finite
    difference to resolve: choose `floor` above that noise (about
    machine epsilon * |f| / eps for centered differences of f).

    Both are 0 when the arrays are equal and scale free otherwise.
    """
    per_entry = flag("relative_error", "per_entry", per_entry)
    a = real_array("relative_error", "a", a, np.float64)
    b = real_array("relative_error", "b", b, np.float64)
    if a.shape != b.shape:
        raise ValueError(f"relative_error: shapes {a.shape} and {b.shape} differ")
    if a.size == 0 or np.array_equal(a, b):  # equal, inf included
        return 0.0
    if per_entry:
        scale = np.maximum(np.maximum(np.abs(a), np.abs(b)), floor)
        return float((np.abs(a - b) / scale).max())
    scale = max(float(np.abs(a).max()), float(np.abs(b).max()), floor)
    return largest_difference(a, b) / scale


# ---- check tables ------------------------------------------------------------


@dataclass(frozen=True)
class CheckRow:
    """One compared tensor: how far apart two versions are, against a tolerance.

    `values` holds the two numbers when the row compares scalars (chapter 1
    prints them).  A row passes when rel_error < tol.
    """

    name: str
    shape: tuple | str
    max_abs_diff: float
    rel_error: float
    tol: float
    values: tuple[float, float] | None = None

    @property
    def passed(self) -> bool:
        return bool(self.rel_error < self.tol)

    def __str__(self) -> str:
        """One line: `name: rel error < 1e-12  PASS` (no round-off digits)."""
        return (
            f"{self.name}: rel error {self.error_text()}  "
            f"{'PASS' if self.passed else 'FAIL'}"
        )

    def error_text(self) -> str:
        """The error as printed: the tolerance it stays below, or the error
        and the tolerance it reached."""
        if self.passed:
            return f"< {self.tol:.0e}"
        return f"{self.rel_error:.1e} > {self.tol:.0e}"


@dataclass
class CheckTable:
    """Rows of compared tensors; prints `name | shape | rel error | check`.

    When every row compares two numbers, their values are printed too, headed
    by `value_labels`.  A last line counts the rows that FAIL (or says all
    PASS).  `passed` is True when every row passes.
    """

    title: str
    rows: list[CheckRow] = field(default_factory=list)
    value_labels: tuple[str, str] = ("ours", "reference")

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.rows)

    @property
    def max_rel_error(self) -> float:
        return max((r.rel_error for r in self.rows), default=0.0)

    def __getitem__(self, name: str) -> CheckRow:
        for r in self.rows:
            if r.name == name:
                return r
        raise KeyError(
            f"CheckTable: no row named {name!r} "
            f"(have {[r.name for r in self.rows]})"
        )

    def __str__(self) -> str:
        scalars = bool(self.rows) and all(r.values is not None for r in self.rows)
        name_w = max([4] + [len(r.name) for r in self.rows])
        err_w = max([9] + [len(r.error_text()) for r in self.rows])
        shape_w = max([5] + [len(str(r.shape)) for r in self.rows])
        if scalars:
            head = (
                f"{'name':<{name_w}}  {self.value_labels[0]:>12}  "
                f"{self.value_labels[1]:>12}  {'rel error':<{err_w}}  check"
            )
        else:
            head = (
                f"{'name':<{name_w}}  {'shape':<{shape_w}}  "
                f"{'rel error':<{err_w}}  check"
            )
        lines = ([self.title] if self.title else []) + [head, "-" * len(head)]
        for r in self.rows:
            verdict = "PASS" if r.passed else "FAIL"
            if scalars:
                lines.append(
                    f"{r.name:<{name_w}}  {r.values[0]:>12.6f}  "
                    f"{r.values[1]:>12.6f}  {r.error_text():<{err_w}}  "
                    f"{verdict}"
                )
            else:
                lines.append(
                    f"{r.name:<{name_w}}  {str(r.shape):<{shape_w}}  "
                    f"{r.error_text():<{err_w}}  {verdict}"
                )
        failed = sum(not r.passed for r in self.rows)
        if len(self.rows) != 1:  # one row speaks for itself
            lines.append(
                f"{failed} of {len(self.rows)} FAIL"
                if failed
                else f"all {len(self.rows)} PASS"
            )
        return "\n".join(lines)

    def _repr_pretty_(self, p, cycle) -> None:
        p.text(str(self))


def compare_arrays(
    name: str, ours, reference, tol: float, per_entry: bool = False
) -> CheckRow:
    """A CheckRow for two arrays (or numbers) that should be equal up to `tol`.

    Two numbers keep their values in the row (a table of such rows prints
    them).  A shape mismatch is a failing row (not an exception), so a table
    always shows every tensor.  `per_entry` picks `relative_error`'s metric.
    """
    a = np.asarray(ours, dtype=np.float64)
    b = np.asarray(reference, dtype=np.float64)
    if a.shape != b.shape:
        return CheckRow(name, f"{a.shape} vs {b.shape}", math.inf, math.inf, tol)
    diff = largest_difference(a, b)
    values = (float(a), float(b)) if a.ndim == 0 else None
    error = relative_error(a, b, per_entry=per_entry)
    return CheckRow(name, a.shape, diff, error, tol, values)


def _tolerance(tol, name: str, default: float) -> float:
    """`tol` itself, or its entry for `name` when it is a dict name -> tol."""
    if isinstance(tol, dict):
        return tol.get(name, tol.get("default", default))
    return tol


def compare_gradients(
    analytic: dict, reference: dict, tol=1e-4, title: str = "", names=None
) -> CheckTable:
    """One row per name, matched by name (never by position): `compare_arrays`.

    `tol` is one number or a dict name -> tolerance ("default" for the
    rest).  A name missing from `reference` is a failing row.
    """
    names = list(analytic) if names is None else list(names)
    rows = []
    for name in names:
        limit = _tolerance(tol, name, 1e-4)
        if name not in reference:
            shape = np.shape(analytic[name])
            rows.append(
                CheckRow(name, f"{shape} vs missing", math.inf, math.inf, limit)
            )
        else:
            rows.append(
                compare_arrays(name, analytic[name], reference[name], limit)
            )
    return CheckTable(title, rows)


# ---- scalar functions (the Value engine) ------------------------------------


def check_scalar_gradients(
    f: Callable[..., Value],
    xs: Sequence[float],
    names: Sequence[str] | None = None,
    eps: float = 1e-6,
    tol: float = 1e-6,
) -> CheckTable:
    """The engine's gradients of `f(*values)` next to centered differences.

    `f` takes one `Value` per entry of `xs` and returns a `Value`.  One row
    per input, showing both numbers.
    """
    from .scalar import Value  # the engines load when used

    names = [f"x{i}" for i in range(len(xs))] if names is None else list(names)
    if len(names) != len(xs):
        raise ValueError(
            f"check_scalar_gradients: {len(names)} names for {len(xs)} inputs"
        )
    values = [Value(x, label=n) for x, n in zip(xs, names)]
    f(*values).backward()
    numeric = numerical_gradient(
        lambda v: f(*[Value(x) for x in v]).data, xs, eps
    )
    rows = [
        CheckRow(
            n,
            (),
            largest_difference(v.grad, g),
            relative_error(v.grad, g),
            tol,
            (v.grad, g),
        )
        for n, v, g in zip(names, values, numeric)
    ]
    return CheckTable("", rows, ("analytic", "numeric"))


# ---- Tensor functions (the NumPy engine) ------------------------------------
# A function of tensors with a non-scalar output is reduced to the scalar
# L = sum(out * dout) with a fixed random `dout` (a random projection), so every
# entry of the output is checked.


def _named_inputs(inputs, names, where: str):
    """(names, float64 arrays) from a dict name -> array, or from a sequence
    of arrays or Tensors (named x0, x1, ... unless `names` is given)."""
    from .tensor import Tensor  # the engines load when used

    if isinstance(inputs, dict):
        names, arrays = list(inputs), list(inputs.values())
    else:
        arrays = list(inputs)
        names = (
            [f"x{i}" for i in range(len(arrays))]
            if names is None
            else list(names)
        )
    if len(names) != len(arrays):
        raise ValueError(f"{where}: {len(names)} names for {len(arrays)} inputs")
    arrays = [
        np.array(a.data if isinstance(a, Tensor) else a, dtype=np.float64)
        for a in arrays
    ]
    return names, arrays


def _projection(shape: tuple, seed: int) -> np.ndarray:
    """The fixed output weights `dout` of L = sum(out * dout): ones for a
    scalar output, else random."""
    if int(np.prod(shape)) == 1:
        return np.ones(shape)
    return np.random.default_rng(seed).standard_normal(shape)


def gradcheck(
    f,
    inputs,
    eps: float = 1e-6,
    tol=1e-6,
    names=None,
    seed: int = 0,
    dot_product: bool = False,
) -> CheckTable:
    """The engine's gradients of `f(*tensors)` next to centered differences.

    `f` takes one Tensor per input and returns a Tensor; `inputs` is a dict
    name -> array or a sequence of arrays (then named x0, x1, ...).  All
    arithmetic is float64 (a float32 difference quotient is mostly noise).
    One row per input; `tol` is one number or a dict name -> tolerance.
    Costs two forward passes per input entry: use small arrays.

    dot_product=True adds the row "dot product" (`dot_product_test`):
    <J v, u> = <v, J^T u> for a random direction v of all inputs at once,
    J v by one centered difference along v, J^T u the backward pass.  It
    costs two forward passes whatever the size, so it also works where the
    entry-by-entry rows are too slow (pass it a large input and look at that
    row only).
    """
    from .tensor import Tensor  # the engines load when used

    dot_product = flag("gradcheck", "dot_product", dot_product)
    names, arrays = _named_inputs(inputs, names, "gradcheck")
    tensors = [Tensor(a, requires_grad=True) for a in arrays]
    out = f(*tensors)
    dout = _projection(out.shape, seed)
    out.backward(dout)

    def projected_loss(_) -> float:  # reads `arrays`, one of which is being moved
        return float((f(*[Tensor(a) for a in arrays]).data * dout).sum())

    rows = []
    for name, x, t in zip(names, arrays, tensors):
        analytic = t.grad if t.grad is not None else np.zeros_like(x)
        numeric = numerical_gradient(projected_loss, x, eps)
        rows.append(
            compare_arrays(name, analytic, numeric, _tolerance(tol, name, 1e-6))
        )
    if dot_product:

        def jvp(vs):  # J v by one centered difference along v (all inputs)
            return directional_derivative(
                lambda moved: f(*[Tensor(a) for a in moved]).data, arrays, vs, eps
            )

        def vjp(u):  # J^T u: the backward pass already run with u = dout
            return [
                t.grad if t.grad is not None else np.zeros_like(a)
                for a, t in zip(arrays, tensors)
            ]

        rows.append(
            dot_product_test(
                jvp,
                vjp,
                [a.shape for a in arrays],
                u=dout,
                seed=seed + 1,
                tol=_tolerance(tol, "dot product", 1e-6),
            )
        )
    return CheckTable("backward vs centered differences (float64)", rows)


def dot_product_test(
    jvp,
    vjp,
    shapes,
    u=None,
    seed: int = 0,
    tol: float = 1e-10,
    name: str = "dot product",
) -> CheckRow:
    """The dot-product test of a JVP against a VJP: <J v, u> = <v, J^T u>.

    jvp(vs) -> J v, an array of the output's shape, for a list `vs` of one
    tangent per input (shapes `shapes`); vjp(u) -> J^T u, a list of one array
    per input.  Random v (and u, unless given) from `seed`; the row compares
    the two numbers (relative error against `tol`).  Both sides are sums over
    the same entries of J, with v and u on opposite sides, so a backward that
    uses J where J^T belongs fails it even when J is square (unless J is
    symmetric, when the two are the same map).  One JVP and one VJP whatever
    the size: it checks large operations that entry-by-entry differences
    cannot afford, and with an exact JVP (forward mode) it needs no eps.
    """
    shapes = [tuple(s) for s in shapes]
    rng = np.random.default_rng(seed)
    vs = [rng.standard_normal(s) for s in shapes]
    jv = np.asarray(jvp(vs), dtype=np.float64)
    if u is None:
        u = rng.standard_normal(jv.shape)
    u = np.asarray(u, dtype=np.float64)
    if u.shape != jv.shape:
        raise ValueError(
            f"dot_product_test: J v has shape {jv.shape} but u has shape "
            f"{u.shape}; they must be equal (the output's shape)"
        )
    jtu = [np.asarray(g, dtype=np.float64) for g in vjp(u)]
    if [g.shape for g in jtu] != shapes:
        raise ValueError(
            "dot_product_test: vjp(u) must return one array per input with "
            f"the input's shape {shapes}, got {[g.shape for g in jtu]}"
        )
    lhs = float((jv * u).sum())
    rhs = float(sum((v * g).sum() for v, g in zip(vs, jtu)))
    diff = largest_difference(lhs, rhs)
    return CheckRow(name, "()", diff, relative_error(lhs, rhs), tol, (lhs, rhs))


def random_direction_checks(
    f, arrays: dict, grads: dict, seed: int = 0, eps: float = 1e-6, tol=1e-6
) -> CheckTable:
    """The gradient of a scalar `f` checked along random directions.

    `f` takes a dict name -> array (`arrays`, moved) and returns a number;
    `grads` holds the backward's gradients under the same names.  Each row
    is the dot-product test with a one-number output: <grad, v> from the
    backward against d/dt f(x + t v) by centered differences
    (`directional_derivative`), two passes of f.  One row per name, v
    random on that array and 0 elsewhere, so a wrong gradient is named;
    then "all at once", v random on every array.  `tol` is one number or a
    dict name -> tolerance.  The cost does not grow with the arrays' size:
    2 (len(arrays) + 1) passes, where entry-by-entry differences need two
    per entry.
    """
    names = list(arrays)
    missing = [n for n in names if n not in grads]
    if missing:
        raise KeyError(f"random_direction_checks: no gradient for {missing}")
    xs = [np.asarray(arrays[n], dtype=np.float64) for n in names]
    gs = [np.asarray(grads[n], dtype=np.float64) for n in names]

    def row(moved: list[int], name: str, row_seed: int) -> CheckRow:
        def jvp(vs):  # d/dt f(x + t v), v on the arrays `moved`
            fixed = dict(zip(names, xs))

            def f_of_moved(parts):
                return f({**fixed, **{names[i]: p for i, p in zip(moved, parts)}})

            return directional_derivative(
                f_of_moved, [xs[i] for i in moved], vs, eps
            )

        checked = dot_product_test(
            jvp,
            lambda u: [float(u) * gs[i] for i in moved],
            [xs[i].shape for i in moved],
            u=np.float64(1.0),
            seed=row_seed,
            tol=_tolerance(tol, name, 1e-6),
            name=name,
        )
        # the shape moved, not the two numbers: their last digits are noise
        shape = xs[moved[0]].shape if len(moved) == 1 else "every array"
        return replace(checked, shape=shape, values=None)

    rows = [row([i], n, seed + i) for i, n in enumerate(names)]
    rows.append(row(list(range(len(names))), "all at once", seed + len(names)))
    return CheckTable("gradient along random directions", rows)


def compare_with_torch(
    f, inputs, torch_f=None, names=None, tol=1e-12, seed: int = 0
) -> CheckTable:
    """Run `f` on Tensors and `torch_f` (default: `f`) on torch float64
    tensors made from the same arrays; compare the outputs and every input's
    gradient of sum(out * dout).

    `tol` is the relative error that must not be reached: one number, or a
    dict name -> tolerance (rows are named "output" and "grad <input name>";
    missing names use "default", else 1e-12).
    """
    import torch  # only this helper needs PyTorch

    from .tensor import Tensor  # the engines load when used

    names, arrays = _named_inputs(inputs, names, "compare_with_torch")
    torch_f = f if torch_f is None else torch_f
    ours = [Tensor(a, requires_grad=True) for a in arrays]
    theirs = [
        torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in arrays
    ]
    out, ref = f(*ours), torch_f(*theirs)
    dout = _projection(out.shape, seed)
    out.backward(dout)
    (ref * torch.from_numpy(dout.reshape(tuple(ref.shape)))).sum().backward()

    rows = [
        compare_arrays(
            "output",
            out.data,
            ref.detach().numpy(),
            _tolerance(tol, "output", 1e-12),
        )
    ]
    for name, t, r in zip(names, ours, theirs):
        g = t.grad if t.grad is not None else np.zeros(t.shape)
        rg = r.grad.numpy() if r.grad is not None else np.zeros(tuple(r.shape))
        rows.append(
            compare_arrays(
                f"grad {name}", g, rg, _tolerance(tol, f"grad {name}", 1e-12)
            )
        )
    return CheckTable("backprop_lessons.tensor vs PyTorch (float64)", rows)
