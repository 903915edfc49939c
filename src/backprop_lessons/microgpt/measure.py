"""The chapter's measurements of microgpt on Values: its parameter table,
the nodes and chain-rule steps one name creates, what finite differences
would cost instead, gradients against centered differences, time per name.
The model itself is `microgpt.model`; its NumPy twin `microgpt.numpy_twin`.
"""

from __future__ import annotations

import contextlib
import math
import random
import time
from dataclasses import dataclass

from ..gradcheck import CheckTable, compare_arrays, numerical_gradient
from ..graph_stats import GraphCount, count_graph
from ..scalar import zero_grad
from ..validate import instance_of
from .model import (
    MicroGPT,
    MicroGPTConfig,
    num_parameters,
    parameter_shapes,
    paused_gc,
)

__all__ = [
    "parameter_table",
    "count_name_graph",
    "FiniteDifferenceCost",
    "finite_difference_cost",
    "check_gradients",
    "StepTime",
    "time_per_name",
]


# ---- measurements the chapter prints -----------------------------------------


def parameter_table(config: MicroGPTConfig) -> str:
    """Name, shape and count of every matrix, and the total, as text."""
    instance_of("parameter_table", "config", config, MicroGPTConfig)
    lines = [f"{'name':<16} {'shape':>9} {'numbers':>8}"]
    for name, (r, c) in parameter_shapes(config).items():
        lines.append(f"{name:<16} {f'({r}, {c})':>9} {r * c:>8,}")
    lines.append(f"{'total':<16} {'':>9} {num_parameters(config):>8,}")
    return "\n".join(lines)


def count_name_graph(model: MicroGPT, name: str) -> GraphCount:
    """What one name's forward builds and its backward will do (counts)."""
    instance_of("count_name_graph", "model", model, MicroGPT)
    return count_graph(model.loss(name), model.params)


@dataclass(frozen=True)
class FiniteDifferenceCost:
    """One gradient by finite differences vs by backprop, counted.

    forward_ops     primitive operations in one forward pass (graph nodes
                    made by an operation)
    backward_steps  chain-rule steps of one backward (graph edges)
    """

    parameters: int
    forward_ops: int
    backward_steps: int

    @property
    def one_sided_passes(self) -> int:
        """f(x) once, then f(x + eps e_i) for every parameter i."""
        return self.parameters + 1

    @property
    def centered_passes(self) -> int:
        """f(x + eps e_i) and f(x - eps e_i) for every parameter i."""
        return 2 * self.parameters

    @property
    def backprop_ops(self) -> int:
        return self.forward_ops + self.backward_steps

    def ratio(self, scheme: str = "one-sided", unit: str = "operations") -> float:
        """Finite differences' cost over backprop's, counted in forward
        `passes` (a backward counted as one pass, as the literature does) or
        in elementary `operations`."""
        passes = {
            "one-sided": self.one_sided_passes,
            "centered": self.centered_passes,
        }[scheme]
        if unit == "passes":
            return passes / 2
        return passes * self.forward_ops / self.backprop_ops

    def __str__(self) -> str:
        N, F, B = self.parameters, self.forward_ops, self.backward_steps
        rows = [
            ("", "passes", "operations", "vs backprop"),
            ("backprop: 1 forward + 1 backward", "2", f"{F + B:,}", "1 x"),
            (
                "one-sided differences: N + 1",
                f"{N + 1:,}",
                f"{(N + 1) * F:,}",
                f"{self.ratio('one-sided'):,.0f} x",
            ),
            (
                "centered differences: 2N",
                f"{2 * N:,}",
                f"{2 * N * F:,}",
                f"{self.ratio('centered'):,.0f} x",
            ),
        ]
        return "\n".join(f"{a:<34} {b:>7} {c:>14} {d:>12}" for a, b, c, d in rows)

    def _repr_pretty_(self, p, cycle) -> None:
        p.text(str(self))


def finite_difference_cost(model: MicroGPT, name: str) -> FiniteDifferenceCost:
    """Count what one gradient of `name`'s loss costs each way (N = every
    parameter of the model)."""
    instance_of("finite_difference_cost", "model", model, MicroGPT)
    counts = count_name_graph(model, name)
    return FiniteDifferenceCost(
        len(model.params), counts.operations, counts.backward_steps
    )


def check_gradients(
    model: MicroGPT,
    name: str,
    per_matrix: int = 4,
    eps: float = 1e-5,
    tol: float = 1e-6,
    seed: int = 0,
) -> CheckTable:
    """Compare `name`'s backprop gradients with centered differences
    (L(p + eps) - L(p - eps)) / 2 eps, evaluated on floats, one row per
    matrix (`gradcheck.numerical_gradient`, `gradcheck.compare_arrays`).

    eps = 1e-5 balances the two errors of a centered difference here: the
    truncation error, about eps^2, and the rounding error of a loss made of
    some 45,000 operations, about 1e-15 / eps.

    `per_matrix` entries of each matrix, drawn by random.Random(seed) among
    the entries the name's loss depends on (nonzero gradient).  Leaves the
    parameters and their gradients as backprop left them.
    """
    instance_of("check_gradients", "model", model, MicroGPT)
    zero_grad(model.params)
    model.loss(name).backward()
    rng, state = random.Random(seed), model.float_state()
    table = CheckTable(
        f"backprop vs centered differences, {per_matrix} entries per matrix"
    )
    for key, matrix in model.state.items():
        used = [
            (i, j)
            for i, row in enumerate(matrix)
            for j, p in enumerate(row)
            if p.grad != 0.0
        ]
        picked = rng.sample(used, min(per_matrix, len(used)))

        def loss_at(values, key=key, picked=picked):
            for (i, j), v in zip(picked, values, strict=True):
                state[key][i][j] = v
            return model.loss_value(name, state)

        start = [state[key][i][j] for i, j in picked]
        numeric = numerical_gradient(loss_at, start, eps=eps)
        for (i, j), v in zip(picked, start, strict=True):
            state[key][i][j] = v  # the weights as they were
        analytic = [matrix[i][j].grad for i, j in picked]
        table.rows.append(compare_arrays(key, analytic, numeric, tol))
    return table


@dataclass(frozen=True)
class StepTime:
    """Seconds for one name, best of several runs (an illustration: it
    depends on the machine and its load)."""

    forward: float  # Values: builds the graph
    backward: float  # loss.backward()
    float_forward: float  # the same forward on floats, no graph

    @property
    def forward_backward(self) -> float:
        return self.forward + self.backward


def time_per_name(
    model: MicroGPT, name: str, repeats: int = 3, pause_gc: bool = True
) -> StepTime:
    """Time the forward (on Values), the backward, and a float forward,
    with the cyclic garbage collector paused (`paused_gc`) unless
    `pause_gc=False`."""
    instance_of("time_per_name", "model", model, MicroGPT)
    best = [math.inf] * 3
    state = model.float_state()
    pause = paused_gc() if pause_gc else contextlib.nullcontext()
    with pause:
        for _ in range(repeats):
            best = _time_once(model, name, state, best)
    return StepTime(*best)


def _time_once(model, name, state, best) -> list[float]:
    """One timed forward, backward and float forward; the minima so far."""
    zero_grad(model.params)
    t0 = time.perf_counter()
    loss = model.loss(name)
    t1 = time.perf_counter()
    loss.backward()
    t2 = time.perf_counter()
    model.loss_value(name, state)
    t3 = time.perf_counter()
    return [min(b, dt) for b, dt in zip(best, (t1 - t0, t2 - t1, t3 - t2))]
