"""Checking the hand-written backwards one layer at a time, numerically (float64).

`check_layer(name)` builds small random inputs for one layer of `layers.py`,
projects its output onto a fixed random direction `dout`
(loss = sum(out * dout), as llm.c's layernorm notes do), and compares the
layer's backward with `gradcheck.numerical_gradient` of that loss, input by
input.  `check_all_layers()` does it for every layer and returns one
`gradcheck.CheckTable`, the table type every check of the book prints.
No PyTorch here.
"""

from __future__ import annotations

import numpy as np

from ..gradcheck import CheckRow, CheckTable, compare_arrays, numerical_gradient
from . import layers

__all__ = ["LAYER_NAMES", "check_layer", "check_all_layers"]


# ---- one layer at a time -------------------------------------------------------
# Each spec: the float inputs (name -> array), a forward taking those arrays and
# returning (out, cache), and a backward that adds into buffers (name -> array).


def _layer_spec(name: str, rng: np.random.Generator):
    B, T, C, V, NH = 2, 3, 4, 5, 2
    r = rng.standard_normal
    if name == "encoder":
        idx = np.array(
            [[0, 3, 3], [4, 0, 1]]
        )  # token 3 twice and token 0 twice: scatter-add
        arrays = {"wte": r((V, C)), "wpe": r((T + 1, C))}

        def fwd(a):
            return layers.encoder_forward(a["wte"], a["wpe"], idx)

        def bwd(g, dout, cache):
            return layers.encoder_backward(g["wte"], g["wpe"], dout, cache)
    elif name == "layernorm":
        arrays = {"inp": r((B, T, C)), "weight": r(C), "bias": r(C)}

        def fwd(a):
            return layers.layernorm_forward(a["inp"], a["weight"], a["bias"])

        def bwd(g, dout, cache):
            return layers.layernorm_backward(
                g["inp"], g["weight"], g["bias"], dout, cache
            )
    elif name == "rmsnorm":
        arrays = {"inp": r((B, T, C)), "weight": r(C)}

        def fwd(a):
            return layers.rmsnorm_forward(a["inp"], a["weight"])

        def bwd(g, dout, cache):
            return layers.rmsnorm_backward(g["inp"], g["weight"], dout, cache)
    elif name == "matmul":
        arrays = {"inp": r((B, T, C)), "weight": r((3, C)), "bias": r(3)}

        def fwd(a):
            return layers.matmul_forward(a["inp"], a["weight"], a["bias"])

        def bwd(g, dout, cache):
            return layers.matmul_backward(
                g["inp"], g["weight"], g["bias"], dout, cache
            )
    elif name == "attention":
        arrays = {"inp": r((B, T, 3 * C))}

        def fwd(a):
            return layers.attention_forward(a["inp"], NH)

        def bwd(g, dout, cache):
            return layers.attention_backward(g["inp"], dout, cache)
    elif name == "gelu":
        arrays = {"inp": 2 * r((B, T, C))}

        def fwd(a):
            return layers.gelu_forward(a["inp"])

        def bwd(g, dout, cache):
            return layers.gelu_backward(g["inp"], dout, cache)
    elif name == "residual":
        arrays = {"inp1": r((B, T, C)), "inp2": r((B, T, C))}

        def fwd(a):
            return layers.residual_forward(a["inp1"], a["inp2"])

        def bwd(g, dout, cache):
            return layers.residual_backward(g["inp1"], g["inp2"], dout, cache)
    elif name == "crossentropy_softmax":
        targets = np.array([[1, 4, 4], [0, 2, 1]])
        arrays = {"logits": r((B, T, V))}

        def fwd(a):
            return layers.crossentropy_softmax_forward(a["logits"], targets)

        def bwd(g, dout, cache):
            return layers.crossentropy_softmax_backward(
                g["logits"], float(dout), cache
            )
    else:
        raise ValueError(
            f"check_layer: unknown layer {name!r}; expected one of {LAYER_NAMES}"
        )
    return arrays, fwd, bwd


LAYER_NAMES = (
    "encoder",
    "layernorm",
    "rmsnorm",
    "matmul",
    "attention",
    "gelu",
    "residual",
    "crossentropy_softmax",
)


def check_layer(
    name: str, seed: int = 0, eps: float = 1e-6, tol: float = 1e-7, backward=None
) -> list[CheckRow]:
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

    def loss(_) -> float:  # reads `arrays`, one of which is being moved
        return float(np.sum(fwd(arrays)[0] * dout))

    return [
        compare_arrays(
            f"{name}: d{k}", analytic[k], numerical_gradient(loss, a, eps), tol
        )
        for k, a in arrays.items()
    ]


def check_all_layers(
    seed: int = 0, eps: float = 1e-6, tol: float = 1e-7
) -> CheckTable:
    """Every layer's backward against centered differences (float64), one
    table."""
    table = CheckTable("each layer's backward vs centered differences (float64)")
    for name in LAYER_NAMES:
        table.rows += check_layer(name, seed, eps, tol)
    return table
