"""Checking the hand-written backwards: one layer at a time, numerically, in float64.

`check_layer(name)` builds small random inputs for one layer of `layers.py`,
projects its output onto a fixed random direction `dout`
(loss = sum(out * dout), as llm.c's layernorm notes do), and compares the
layer's backward with centered differences of that loss, input by input.
`check_all_layers()` does it for every layer and returns one table.

`CheckTable` is the printed table used here and by `reference.py`
(name | shape | max abs diff | rel err | tol | ok), with a tolerance per row
chosen by the row's name, never one global number.  No PyTorch here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..gradcheck import array_relative_error as relative_error
from . import layers

__all__ = ["relative_error", "CheckRow", "CheckTable", "compare_arrays", "LAYER_NAMES",
           "check_layer", "check_all_layers"]


@dataclass
class CheckRow:
    """One compared tensor."""

    name: str
    shape: tuple
    max_abs_diff: float
    rel_err: float
    tol: float

    @property
    def ok(self) -> bool:
        return self.rel_err <= self.tol


def compare_arrays(name: str, ours, reference, tol: float) -> CheckRow:
    """A CheckRow for two arrays that must have the same shape."""
    ours, reference = np.asarray(ours, np.float64), np.asarray(reference, np.float64)
    if ours.shape != reference.shape:
        raise ValueError(f"compare_arrays: {name} has shape {ours.shape} here and "
                         f"{reference.shape} in the reference")
    diff = float(np.abs(ours - reference).max()) if ours.size else 0.0
    return CheckRow(name, ours.shape, diff, relative_error(ours, reference), tol)


COARSE_BOUNDS = (1e-14, 1e-12, 1e-10, 1e-8, 1e-6, 1e-4, 1e-2, 1.0)


@dataclass
class CheckTable:
    """Rows of compared tensors; prints as `name | shape | max abs diff | rel err | tol | ok`."""

    title: str
    rows: list[CheckRow] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.rows)

    @property
    def max_rel_err(self) -> float:
        return max((r.rel_err for r in self.rows), default=0.0)

    def __getitem__(self, name: str) -> CheckRow:
        for r in self.rows:
            if r.name == name:
                return r
        raise KeyError(f"CheckTable: no row named {name!r}")

    def format(self, digits: int = 1, coarse: bool = False) -> str:
        """The table as text, `digits` after the point in the error columns.

        `coarse=True` prints each error as a bound from a fixed ladder
        (< 1e-14, < 1e-12, ..., < 1): the exact last digits of a rounding
        error depend on the CPU and its BLAS kernels, the bound does not, so
        a stored notebook output stays valid on another machine.
        """
        def cell(x: float) -> str:
            if not coarse:
                return f"{x:.{digits}e}"
            for bound in COARSE_BOUNDS:
                if x < bound:
                    return f"< {bound:.0e}"
            return f"{x:.{digits}e}"

        w = max([4] + [len(r.name) for r in self.rows])
        head = f"{'name':<{w}} | {'shape':<13} | {'max abs diff':>12} | {'rel err':>9} | {'tol':>7} | ok"
        lines = [self.title, head, "-" * len(head)]
        for r in self.rows:
            lines.append(f"{r.name:<{w}} | {str(r.shape):<13} | {cell(r.max_abs_diff):>12} | "
                         f"{cell(r.rel_err):>9} | {r.tol:>7.0e} | {r.ok}")
        lines.append(f"all ok: {self.ok}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.format()

    def _repr_pretty_(self, p, cycle) -> None:
        p.text(str(self))


# ---- one layer at a time -----------------------------------------------------------
# Each spec: the float inputs (name -> array), a forward taking those arrays and
# returning (out, cache), and a backward that adds into buffers (name -> array).

def _layer_spec(name: str, rng: np.random.Generator):
    B, T, C, V, NH = 2, 3, 4, 5, 2
    r = rng.standard_normal
    if name == "encoder":
        idx = np.array([[0, 3, 3], [4, 0, 1]])  # token 3 twice and token 0 twice: scatter-add
        arrays = {"wte": r((V, C)), "wpe": r((T + 1, C))}
        fwd = lambda a: layers.encoder_forward(a["wte"], a["wpe"], idx)
        bwd = lambda g, dout, cache: layers.encoder_backward(g["wte"], g["wpe"], dout, cache)
    elif name == "layernorm":
        arrays = {"inp": r((B, T, C)), "weight": r(C), "bias": r(C)}
        fwd = lambda a: layers.layernorm_forward(a["inp"], a["weight"], a["bias"])
        bwd = lambda g, dout, cache: layers.layernorm_backward(g["inp"], g["weight"], g["bias"],
                                                               dout, cache)
    elif name == "matmul":
        arrays = {"inp": r((B, T, C)), "weight": r((3, C)), "bias": r(3)}
        fwd = lambda a: layers.matmul_forward(a["inp"], a["weight"], a["bias"])
        bwd = lambda g, dout, cache: layers.matmul_backward(g["inp"], g["weight"], g["bias"],
                                                            dout, cache)
    elif name == "attention":
        arrays = {"inp": r((B, T, 3 * C))}
        fwd = lambda a: layers.attention_forward(a["inp"], NH)
        bwd = lambda g, dout, cache: layers.attention_backward(g["inp"], dout, cache)
    elif name == "gelu":
        arrays = {"inp": 2 * r((B, T, C))}
        fwd = lambda a: layers.gelu_forward(a["inp"])
        bwd = lambda g, dout, cache: layers.gelu_backward(g["inp"], dout, cache)
    elif name == "residual":
        arrays = {"inp1": r((B, T, C)), "inp2": r((B, T, C))}
        fwd = lambda a: layers.residual_forward(a["inp1"], a["inp2"])
        bwd = lambda g, dout, cache: layers.residual_backward(g["inp1"], g["inp2"], dout, cache)
    elif name == "crossentropy_softmax":
        targets = np.array([[1, 4, 4], [0, 2, 1]])
        arrays = {"logits": r((B, T, V))}
        fwd = lambda a: layers.crossentropy_softmax_forward(a["logits"], targets)
        bwd = lambda g, dout, cache: layers.crossentropy_softmax_backward(g["logits"], float(dout),
                                                                          cache)
    else:
        raise ValueError(f"check_layer: unknown layer {name!r}; expected one of {LAYER_NAMES}")
    return arrays, fwd, bwd


LAYER_NAMES = ("encoder", "layernorm", "matmul", "attention", "gelu", "residual",
               "crossentropy_softmax")


def check_layer(name: str, seed: int = 0, eps: float = 1e-6, tol: float = 1e-7,
                backward=None) -> list[CheckRow]:
    """Compare one layer's backward with centered differences, in float64.

    Returns one row per float input, named "layer: d<input>".  `backward`
    replaces the layer's own backward (same signature as in the spec), which
    lets a notebook exercise check a deliberately broken one.
    """
    rng = np.random.default_rng(seed)
    arrays, fwd, bwd = _layer_spec(name, rng)
    bwd = backward or bwd
    out, cache = fwd(arrays)
    dout = rng.standard_normal(np.shape(out))  # loss = sum(out * dout)
    analytic = {k: np.zeros_like(a) for k, a in arrays.items()}
    bwd(analytic, dout, cache)
    rows = []
    for k, a in arrays.items():
        numeric = np.zeros_like(a)
        for i in np.ndindex(a.shape):
            old = a[i]
            a[i] = old + eps
            plus = float(np.sum(fwd(arrays)[0] * dout))
            a[i] = old - eps
            minus = float(np.sum(fwd(arrays)[0] * dout))
            a[i] = old
            numeric[i] = (plus - minus) / (2 * eps)
        rows.append(compare_arrays(f"{name}: d{k}", analytic[k], numeric, tol))
    return rows


def check_all_layers(seed: int = 0, eps: float = 1e-6, tol: float = 1e-7) -> CheckTable:
    """Every layer's backward against centered differences (float64, eps=1e-6), one table."""
    table = CheckTable("each layer's backward vs centered differences (float64)")
    for name in LAYER_NAMES:
        table.rows += check_layer(name, seed, eps, tol)
    return table
