"""microgpt on the scalar engine vs its NumPy twin: one name's forward + backward.

What it measures
    The same model and weights (MicroGPT(seed=0): 4,192 parameters, 1 layer,
    4 heads, 16 channels) on two engines:
      scalar  backprop_lessons.microgpt: every number a Value, the loss built
              one token at a time through the KV cache, then loss.backward()
      numpy   backprop_lessons.microgpt.numpy_twin: micro_forward /
              micro_backward, the hand-written layer backwards of gpt.layers
              on (1, T, C) arrays
    for names of 2, 5 and 11 letters (3, 6 and 12 positions).  Also timed:
    the scalar forward alone on Values and on plain floats (no graph), and
    the scalar step with Python's cyclic garbage collector on (its default)
    and paused (as microgpt.train runs it).

    Validation first, nothing is timed if it fails: for every name, the loss
    and every gradient agree to 1e-12 (relative, per matrix), and the float
    forward gives the Value forward's loss bit for bit.

    Timing: the two engines take turns, R times; each figure is the fastest
    run (the better estimate on a shared machine).  The NumPy step is timed
    as the fastest of 20 back-to-back runs per turn.  One BLAS thread: the
    arrays are (1, T <= 16, 64) at most, far too small for threads to help.
    Also printed: what one gradient by finite differences would take, timed
    as (P + 1) float forwards (one-sided differences, P = 4,192).

How to run
    make bench      or      .venv/bin/python benchmarks/microgpt_step.py
    Options: --repeats R (default 7).  Takes about a minute.  Writes
    benchmarks/results/microgpt_step.json.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import platform
import time
from pathlib import Path

for _name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_name] = "1"  # before NumPy loads: OpenBLAS fixes its threads then

# NumPy, and the package that imports it, only now (E402 is off for this
# file in pyproject.toml for this reason)
import numpy as np

from backprop_lessons.microgpt import MicroGPT, numpy_twin, paused_gc
from backprop_lessons.scalar import zero_grad
from harness import print_table, write_results

RESULTS = Path(__file__).resolve().parent / "results" / "microgpt_step.json"
NAMES = ("jo", "emily", "christopher")
NUMPY_RUNS = 20


def validate(model: MicroGPT, name: str) -> None:
    """Both engines agree before anything is timed."""
    check = numpy_twin.compare_with_scalar(model, name, tol=1e-12)
    if not check.passed:
        raise SystemExit(f"{name}: the engines disagree, nothing timed\n{check}")
    if model.loss(name).data != model.loss_value(name):
        raise SystemExit(f"{name}: the float forward differs from the Value one")


def time_scalar(
    model: MicroGPT, name: str, gc_paused: bool
) -> tuple[float, float]:
    """(forward, backward) seconds of one scalar step."""
    zero_grad(model.params)
    with paused_gc() if gc_paused else contextlib.nullcontext():
        t0 = time.perf_counter()
        loss = model.loss(name)
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
    return t1 - t0, t2 - t1


def time_numpy(params, config, tokens) -> float:
    """The fastest of NUMPY_RUNS NumPy forward + backward steps."""
    best = float("inf")
    for _ in range(NUMPY_RUNS):
        t0 = time.perf_counter()
        _, cache = numpy_twin.micro_forward(params, config, tokens)
        numpy_twin.micro_backward(params, config, cache)
        best = min(best, time.perf_counter() - t0)
    return best


def measure(model: MicroGPT, name: str, repeats: int) -> dict:
    params, tokens = numpy_twin.params_from_model(model), model.encode(name)
    state = model.float_state()
    names = ("fwd", "bwd", "step_gc_on", "float_fwd", "numpy")
    best = dict.fromkeys(names, float("inf"))
    for _ in range(repeats):  # the engines take turns
        fwd, bwd = time_scalar(model, name, gc_paused=True)
        best["fwd"], best["bwd"] = min(best["fwd"], fwd), min(best["bwd"], bwd)
        best["step_gc_on"] = min(
            best["step_gc_on"], sum(time_scalar(model, name, gc_paused=False))
        )
        t0 = time.perf_counter()
        model.loss_value(name, state)
        best["float_fwd"] = min(best["float_fwd"], time.perf_counter() - t0)
        best["numpy"] = min(
            best["numpy"], time_numpy(params, model.config, tokens)
        )
        gc.collect()
    best["step"] = best["fwd"] + best["bwd"]
    best["positions"] = len(tokens) - 1
    best["fd_one_sided"] = (len(model.params) + 1) * best["float_fwd"]
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    model = MicroGPT(seed=0)
    print(
        f"Python {platform.python_version()}, NumPy {np.__version__}, "
        f"{model}, {args.repeats} repeats, 1 BLAS thread"
    )
    for name in NAMES:
        validate(model, name)
    print(
        "validated: loss and every gradient equal to 1e-12 on both engines, "
        "float forward = Value forward bit for bit"
    )
    results = {name: measure(model, name, args.repeats) for name in NAMES}

    def ms(seconds: float) -> str:
        return f"{seconds * 1e3:.2f}"

    print_table(
        [
            "name",
            "positions",
            "scalar fwd ms",
            "scalar bwd ms",
            "scalar step ms",
            "step, gc on ms",
            "numpy step ms",
            "scalar / numpy",
        ],
        [
            [
                name,
                r["positions"],
                ms(r["fwd"]),
                ms(r["bwd"]),
                ms(r["step"]),
                ms(r["step_gc_on"]),
                f"{r['numpy'] * 1e3:.3f}",
                f"{r['step'] / r['numpy']:.0f} x",
            ]
            for name, r in results.items()
        ],
        left_columns=1,
    )
    print_table(
        [
            "name",
            "float fwd ms",
            "finite differences s",
            "vs scalar step",
            "vs numpy step",
        ],
        [
            [
                name,
                ms(r["float_fwd"]),
                f"{r['fd_one_sided']:.1f}",
                f"{r['fd_one_sided'] / r['step']:.0f} x",
                f"{r['fd_one_sided'] / r['numpy']:,.0f} x",
            ]
            for name, r in results.items()
        ],
        left_columns=1,
    )
    write_results(
        RESULTS,
        {
            "python": platform.python_version(),
            "numpy": np.__version__,
            "parameters": len(model.params),
            "repeats": args.repeats,
            "seconds": results,
        },
    )


if __name__ == "__main__":
    main()
