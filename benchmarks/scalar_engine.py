"""Our scalar engine vs micrograd 0.1.0: forward and backward time, side by side.

What it measures
    Three cases, each run on both engines in the same process:
    graph  a random layered expression graph of about 100,000 nodes
           (100 layers of about 1,000 nodes, each made with +, * or relu from
           nodes of the previous layer, then a pairwise sum).  Its depth stays
           near 300 so that micrograd's recursive topological sort works.
    chain  a chain of 100,000 additions, v = v + x.  Ours walks it with an
           explicit stack; micrograd's recursion raises RecursionError.
    mlp    forward and backward of a squared-error loss of an MLP
           2 -> 16 -> 16 -> 1 (ReLU) over 100 points: micrograd's own
           `nn.MLP` against our `scalar_nn.MLP` with the same weights.
    Before timing anything it checks that both engines compute the same
    output and the same gradients (within 1e-9) on the same graph.  Forward
    (building the graph) and backward (`.backward()`) are timed separately
    with time.perf_counter; each figure is the best of several repeats, and
    the two engines take turns within each repeat.

    The garbage collector stays enabled, as in any normal program.  That is
    the point: micrograd's `_backward` closures refer to their own output
    node, one reference cycle per node, and the collector's passes over those
    objects take most of micrograd's forward time.  Our nodes only point to
    their inputs (no cycles).  Between repeats, outside the timed region,
    the previous graph is deleted and `gc.collect()` runs, so every repeat
    starts from the same heap (this leaves micrograd's cost of collecting
    its dead graphs out of the figures; they are in the JSON as "free_s").

How to run
    make bench      or      .venv/bin/python benchmarks/scalar_engine.py
    Needs `micrograd==0.1.0` (`make bench` installs it).  Takes a minute or two.
    Prints a table and writes the same figures to
    benchmarks/results/scalar_engine.json for the book to include.
"""

from __future__ import annotations

import gc
import platform
import random
import sys
import time
from pathlib import Path

from micrograd import nn as micrograd_nn
from micrograd.engine import Value as MicrogradValue

from backprop_lessons import scalar_nn
from backprop_lessons.scalar import Value, topological_order
from harness import (
    print_table as print_table_of,
)  # next to this file
from harness import (
    write_results,
)
from machine_info import machine_info

RESULTS = Path(__file__).resolve().parent / "results" / "scalar_engine.json"
REPEATS = {"graph": 5, "chain": 5, "mlp": 5}
TOLERANCE = 1e-9


# ---- the cases: one builder, used with either engine's Value class -------------


def random_graph_plan(layers: int = 100, width: int = 570, seed: int = 0):
    """The recipe of the random graph, independent of any engine.

    Each layer has `width` units; unit i reads node perm[i] of the previous
    layer (so every node is used and reachable from the output) and one more
    random node.  The four kinds of unit keep values in [-1, 1] without
    collapsing to 0, so the output and gradients are meaningful numbers:
      mean   (a + b) * 0.5          2 nodes
      mul    a * b                  1 node
      relu   relu(a)                1 node
      cheb   a * a * 2 + (-1)       3 nodes (the Chebyshev polynomial 2a^2 - 1)
    On average 1.75 nodes per unit, so a layer of 570 units is ~1,000 nodes.
    """
    rng = random.Random(seed)
    inputs = [rng.uniform(-1.0, 1.0) for _ in range(width)]
    plan = []
    for _ in range(layers):
        perm = list(range(width))
        rng.shuffle(perm)
        plan.append(
            [
                (rng.randrange(4), perm[i], rng.randrange(width))
                for i in range(width)
            ]
        )
    return inputs, plan


def build_random_graph(V, recipe):
    """Build the planned graph with Value class `V`; return (output, leaves)."""
    inputs, plan = recipe
    leaves = [V(x) for x in inputs]
    half, two, minus_one = (
        V(0.5),
        V(2.0),
        V(-1.0),
    )  # shared constants, same in both engines
    prev = leaves
    for layer in plan:
        cur = []
        for kind, i, j in layer:
            a = prev[i]
            if kind == 0:
                cur.append((a + prev[j]) * half)
            elif kind == 1:
                cur.append(a * prev[j])
            elif kind == 2:
                cur.append(a.relu())
            else:
                cur.append(a * a * two + minus_one)
        prev = cur
    while len(prev) > 1:  # pairwise sum: depth log2(width), not width
        pairs = [prev[k] + prev[k + 1] for k in range(0, len(prev) - 1, 2)]
        prev = pairs + ([prev[-1]] if len(prev) % 2 else [])
    return prev[0], leaves + [half, two, minus_one]


def build_chain(V, n: int = 100_000):
    """v = v + x, n times: a graph n nodes deep."""
    x = V(0.5)
    v = x
    for _ in range(n):
        v = v + x
    return v, [x]


def mlp_batch(n: int = 100, seed: int = 0):
    """n points in [-1, 1]^2 with targets +-1 (the sign of x0 * x1)."""
    rng = random.Random(seed)
    points = [[rng.uniform(-1, 1), rng.uniform(-1, 1)] for _ in range(n)]
    return [(p, 1.0 if p[0] * p[1] > 0 else -1.0) for p in points]


def make_mlps():
    """Our MLP and micrograd's with identical weights (copied from ours)."""
    ours = scalar_nn.MLP(2, [16, 16, 1], nonlin="relu", seed=0)
    theirs = micrograd_nn.MLP(2, [16, 16, 1])
    for p, q in zip(ours.parameters(), theirs.parameters(), strict=True):
        q.data = p.data
    return ours, theirs


def build_mlp_loss(V, model, batch):
    """sum over the batch of (model(x) - y)^2; returns (loss, parameters)."""
    loss = V(0.0)
    for x, y in batch:
        loss = loss + (model(x) - y) ** 2
    return loss, model.parameters()


# ---- checking and timing -------------------------------------------------------


def max_rel_diff(a: list[float], b: list[float]) -> float:
    """Largest |a - b| / max(1, |a|, |b|) over the pairs (the book's relative
    error, with 1 as its floor)."""
    from backprop_lessons.gradcheck import relative_error

    return max(relative_error(x, y, 1.0) for x, y in zip(a, b, strict=True))


def check_same(name: str, ours, theirs) -> None:
    """Both engines: same output and same gradients of every leaf, within
    TOLERANCE."""
    (out1, leaves1), (out2, leaves2) = ours(), theirs()
    out1.backward()
    out2.backward()
    diff = max_rel_diff(
        [out1.data] + [v.grad for v in leaves1],
        [out2.data] + [v.grad for v in leaves2],
    )
    ok = diff <= TOLERANCE
    print(
        f"check {name:<6} same output and {len(leaves1)} gradients: {ok} "
        f"(max relative difference {diff:.1e})"
    )
    if not ok:
        raise SystemExit(f"{name}: the engines disagree; not timing")


def time_once(build) -> tuple[float, float | None, float, str | None]:
    """Seconds for forward (build), backward and freeing; backward None if it
    raised."""
    gc.collect()
    t0 = time.perf_counter()
    out, leaves = build()
    t1 = time.perf_counter()
    error = None
    try:
        out.backward()
    except RecursionError:
        error = "RecursionError"
    t2 = time.perf_counter()
    del out, leaves
    # micrograd's graph is a heap of cycles: only the collector frees it
    gc.collect()
    t3 = time.perf_counter()
    return t1 - t0, (None if error else t2 - t1), t3 - t2, error


def time_side_by_side(engines: dict, repeats: int) -> dict:
    """Best-of-`repeats` forward/backward seconds per engine.

    The engines take turns within each repeat, so a change of load on a
    shared machine hits both alike.
    """
    runs = {name: [] for name in engines}
    for _ in range(repeats):
        for name, build in engines.items():
            runs[name].append(time_once(build))
    best = {}
    for name, rs in runs.items():
        bwd = [r[1] for r in rs if r[1] is not None]
        best[name] = {
            "fwd_s": min(r[0] for r in rs),
            "bwd_s": min(bwd) if bwd else None,
            "free_s": min(r[2] for r in rs),
            "error": rs[0][3],
        }
    return best


# ---- the run -------------------------------------------------------------------


def main() -> None:
    assert gc.isenabled(), "run with the garbage collector in its default state"
    recipe = random_graph_plan()
    batch = mlp_batch()
    ours_mlp, micrograd_mlp = make_mlps()
    cases = {
        "graph": (
            lambda: build_random_graph(Value, recipe),
            lambda: build_random_graph(MicrogradValue, recipe),
        ),
        "chain": (
            lambda: build_chain(Value),
            lambda: build_chain(MicrogradValue),
        ),
        "mlp": (
            lambda: build_mlp_loss(Value, ours_mlp, batch),
            lambda: build_mlp_loss(MicrogradValue, micrograd_mlp, batch),
        ),
    }
    nodes = {
        name: len(topological_order(ours()[0]))
        for name, (ours, _) in cases.items()
    }

    print(
        f"Python {platform.python_version()} on {platform.machine()}, "
        f"micrograd 0.1.0, recursion limit {sys.getrecursionlimit()}, gc enabled"
    )
    print(
        f"nodes: graph {nodes['graph']:,}, chain {nodes['chain']:,}, "
        f"mlp {nodes['mlp']:,}"
    )
    check_same("graph", *cases["graph"])
    check_same("mlp", *cases["mlp"])
    chain, (x,) = build_chain(Value)
    chain.backward()
    assert x.grad == 100_001.0, x.grad  # d(x + x + ... + x)/dx, checked exactly
    # micrograd's forward of the chain is the same sum; its backward cannot run.
    assert chain.data == build_chain(MicrogradValue)[0].data
    del chain, x

    results = {}
    for name, (ours, theirs) in cases.items():
        results[name] = {
            "nodes": nodes[name],
            "repeats": REPEATS[name],
            **time_side_by_side(
                {"ours": ours, "micrograd": theirs}, REPEATS[name]
            ),
        }
        m = results[name]["micrograd"]
        if m["error"]:
            print(f"{name}: micrograd: {m['error']}")
        o = results[name]["ours"]
        results[name]["speedup"] = (
            None
            if m["error"]
            else (m["fwd_s"] + m["bwd_s"]) / (o["fwd_s"] + o["bwd_s"])
        )
    print_table(results)
    write_json(results)


def ms(seconds) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.1f} ms"


def print_table(results: dict) -> None:
    head = [
        "case",
        "ours fwd",
        "ours bwd",
        "micrograd fwd",
        "micrograd bwd",
        "speed-up (fwd+bwd)",
    ]
    rows = []
    for name, r in results.items():
        o, m = r["ours"], r["micrograd"]
        rows.append(
            [
                f"{name} ({r['nodes']:,} nodes)",
                ms(o["fwd_s"]),
                ms(o["bwd_s"]),
                ms(m["fwd_s"]),
                m["error"] or ms(m["bwd_s"]),
                "-" if r["speedup"] is None else f"{r['speedup']:.1f}x",
            ]
        )
    print_table_of(head, rows, left_columns=1)
    speedup = results["graph"]["speedup"]
    print(
        "\nours at least 2x faster than micrograd on the 100k graph: "
        f"{speedup >= 2.0}"
    )


def write_json(results: dict) -> None:
    payload = {
        "benchmark": "scalar_engine",
        "description": "forward and backward of scalar graphs: "
        "backprop_lessons.scalar "
        "vs micrograd 0.1.0, garbage collector enabled",
        "timer": "time.perf_counter, "
        "best seconds over repeats taken in alternation",
        "micrograd": "0.1.0",
        "gc_enabled": gc.isenabled(),
        "recursion_limit": sys.getrecursionlimit(),
        "cases": results,
        "machine": machine_info(),
    }
    write_results(RESULTS, payload)


if __name__ == "__main__":
    main()
