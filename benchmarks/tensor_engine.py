"""The NumPy Tensor engine vs PyTorch eager (CPU): one training step of an MLP.

What it measures
    One training step - forward, cross-entropy loss, backward, and an SGD
    update of every weight - of the same MLP written twice, once with
    `backprop_lessons.tensor.Tensor` and once with plain torch tensors
    (`x @ W + b`, `relu`, `F.cross_entropy`, no nn.Module), from the same
    initial weights and on the same batch:
      large  batch 1024, 64 -> 256 -> 256 -> 10 (ReLU), the chapter 4 benchmark:
             most of the time is spent inside matrix products
      small  batch 200, 2 -> 16 -> 16 -> 2 (ReLU), the two-moons size of
             chapter 4: the arrays are tiny, so the cost per operation
             (Python for the engine, the C++ dispatcher for torch) dominates
    each in float32 and float64.

    Before timing, every configuration is validated: one step on both sides
    from the same weights must give the same loss, the same gradient of
    every weight and the same updated weights (the largest relative
    difference, max|a - b| / max|b|, is printed; it must stay below 1e-4 in
    float32 and 1e-10 in float64).

    Timing: after a warm-up, the two sides take turns (engine, torch,
    engine, torch, ...) so that a change of load on a shared machine hits
    both alike; each turn runs a block of steps and the figure kept is the
    best (smallest) time per step over all turns.

Threads
    NumPy multiplies matrices with OpenBLAS, torch with MKL/oneDNN, so the
    two sides do not share a BLAS; each must get the same number of threads.
    The thread count of OpenBLAS is fixed when NumPy loads, so every thread
    setting runs in a fresh subprocess:
      1        OPENBLAS/OMP/MKL_NUM_THREADS=1 and torch.set_num_threads(1)
      default  none of those variables set: both libraries pick their own
               default (one thread per core on this kind of machine)
      1+malloc 1 thread, and glibc's malloc told to keep freed memory for
               reuse instead of returning it to the OS (harness.MALLOC_VARS).
               A step allocates and frees many arrays of about 1 MB; by
               default each new one costs fresh pages, and a page fault per
               4 KB page - costly in a virtual machine - can take longer than
               the arithmetic.
    The threads each library really uses are read back (OpenBLAS through
    its C API, torch.get_num_threads()) and printed and stored.

How to run
    make bench      or      .venv/bin/python benchmarks/tensor_engine.py
    Options: --settings 1 default 1+malloc (the settings to run), --repeats N.
    Takes about a minute.  Prints a table
        config | dtype | setting | threads | engine ms | torch ms |
            ratio (engine/torch)
    and writes the figures and the machine description to
    benchmarks/results/tensor_engine.json (benchmarks/report.py turns it into
    the tables and the chart of the book's performance appendix).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from harness import (
    MALLOC_VARS,
    parse_args_or_run_worker,
    rel_diff,
    run_worker,
    start_threads,
    write_results,
)
from harness import print_table as print_table_of

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "tensor_engine.json"
CONFIGS = {  # name: (batch, layer sizes)
    "large": (1024, [64, 256, 256, 10]),
    "small": (200, [2, 16, 16, 2]),
}
DTYPES = ("float32", "float64")
TOLERANCE = {"float32": 1e-4, "float64": 1e-10}
LR = 0.05
TARGET_BLOCK_S = 0.05  # each timed turn runs enough steps to last about this long


# ---- the model, twice ----------------------------------------------------------


def make_problem(batch: int, sizes: list[int], dtype: str, seed: int = 0):
    """Initial weights {W1, b1, ...} (He-scaled, small random biases), inputs
    (B, n0)
    and integer targets (B,), as NumPy arrays of `dtype`."""
    import numpy as np

    rng = np.random.default_rng(seed)
    init = {}
    for i, (fan_in, fan_out) in enumerate(zip(sizes[:-1], sizes[1:]), start=1):
        init[f"W{i}"] = (
            rng.standard_normal((fan_in, fan_out)) * np.sqrt(2 / fan_in)
        ).astype(dtype)
        init[f"b{i}"] = (0.1 * rng.standard_normal(fan_out)).astype(dtype)
    x = rng.standard_normal((batch, sizes[0])).astype(dtype)
    y = rng.integers(0, sizes[-1], size=batch)
    return init, x, y


def forward(params: dict, x, n_layers: int, relu):
    """The same code for both engines: x (B, n0) -> logits (B, n_last)."""
    h = x
    for i in range(1, n_layers + 1):
        h = h @ params[f"W{i}"] + params[f"b{i}"]
        if i < n_layers:
            h = relu(h)
    return h


def engine_side(init, x, y):
    """A step function for the Tensor engine and its parameters."""
    from backprop_lessons.tensor import Tensor, cross_entropy

    params = {k: Tensor(v, requires_grad=True) for k, v in init.items()}
    xt, n = Tensor(x), len(init) // 2
    relu = Tensor.relu

    def step():
        loss = cross_entropy(forward(params, xt, n, relu), y)
        for p in params.values():
            p.grad = None
        loss.backward()
        for p in params.values():
            p.data -= LR * p.grad
        return loss

    return step, params


def torch_side(init, x, y):
    """A step function for PyTorch eager and its parameters."""
    import torch
    import torch.nn.functional as F

    params = {k: torch.tensor(v, requires_grad=True) for k, v in init.items()}
    xt, yt, n = torch.from_numpy(x), torch.from_numpy(y), len(init) // 2

    def step():
        loss = F.cross_entropy(forward(params, xt, n, torch.relu), yt)
        for p in params.values():
            p.grad = None
        loss.backward()
        with torch.no_grad():
            for p in params.values():
                p -= LR * p.grad
        return loss

    return step, params


# ---- validation and timing -----------------------------------------------------


def validate(batch, sizes, dtype) -> dict:
    """One step on both sides from the same weights: loss, gradients and
    updated weights."""
    init, x, y = make_problem(batch, sizes, dtype)
    e_step, e_params = engine_side(init, x, y)
    t_step, t_params = torch_side(init, x, y)
    e_loss, t_loss = e_step(), t_step()
    diffs = {
        "loss": rel_diff(e_loss.item(), t_loss.item()),
        "grad": max(
            rel_diff(e_params[k].grad, t_params[k].grad.numpy()) for k in init
        ),
        "weights": max(
            rel_diff(e_params[k].data, t_params[k].detach().numpy()) for k in init
        ),
    }
    assert all(e_params[k].data.dtype == dtype for k in init), (
        "the engine changed the dtype"
    )
    return diffs


def time_pair(batch, sizes, dtype, repeats: int) -> dict:
    """Best seconds per step of each side, the sides taking turns.  Wall-clock
    time is
    the measure; the process's CPU time is kept too (with one thread it is less
    disturbed by other programs competing for the cores)."""
    init, x, y = make_problem(batch, sizes, dtype)
    sides = {
        "engine": engine_side(init, x, y)[0],
        "torch": torch_side(init, x, y)[0],
    }
    inner = {}
    for name, step in sides.items():  # warm-up, and the block size
        for _ in range(3):
            step()
        t0 = time.perf_counter()
        step()
        inner[name] = max(
            1, int(TARGET_BLOCK_S / max(time.perf_counter() - t0, 1e-6))
        )
    best = {name: float("inf") for name in sides}
    cpu = dict(best)
    for _ in range(repeats):
        for name, step in sides.items():
            k = inner[name]
            t0, c0 = time.perf_counter(), time.process_time()
            for _ in range(k):
                step()
            best[name] = min(best[name], (time.perf_counter() - t0) / k)
            cpu[name] = min(cpu[name], (time.process_time() - c0) / k)
    return {
        "engine_s": best["engine"],
        "torch_s": best["torch"],
        "ratio": best["engine"] / best["torch"],
        "engine_cpu_s": cpu["engine"],
        "torch_cpu_s": cpu["torch"],
        "cpu_ratio": cpu["engine"] / cpu["torch"],
        "steps_per_turn": inner,
    }


def worker(setting: str, repeats: int) -> dict:
    """Run in a fresh process whose environment `run_setting` prepared."""
    from machine_info import machine_info

    counts = start_threads(setting, setting.split("+")[0])
    rows = []
    for name, (batch, sizes) in CONFIGS.items():
        for dtype in DTYPES:
            diffs = validate(batch, sizes, dtype)
            ok = all(d <= TOLERANCE[dtype] for d in diffs.values())
            print(
                f"  check {name} {dtype}: loss, gradients and updated weights "
                f"agree: {ok} "
                f"(max relative difference: loss {diffs['loss']:.1e}, gradients "
                f"{diffs['grad']:.1e}, weights {diffs['weights']:.1e})",
                flush=True,
            )
            if not ok:
                raise SystemExit(
                    f"{name} {dtype}: the engines disagree; not timing"
                )
            rows.append(
                {
                    "config": name,
                    "batch": batch,
                    "sizes": sizes,
                    "dtype": dtype,
                    "setting": setting,
                    "thread_counts": counts,
                    "max_rel_diff": diffs,
                    **time_pair(batch, sizes, dtype, repeats),
                }
            )
    return {"rows": rows, "machine": machine_info()}


# ---- the driver ----------------------------------------------------------------


def run_setting(setting: str, repeats: int) -> dict:
    """Run the worker in a subprocess with the thread count (and malloc) of
    `setting`."""
    threads, *extra = setting.split("+")
    return run_worker(
        __file__,
        setting,
        threads,
        repeats,
        drop_env=tuple(MALLOC_VARS),
        extra_env=MALLOC_VARS if "malloc" in extra else None,
    )


def print_table(rows: list[dict]) -> None:
    head = [
        "config",
        "dtype",
        "setting",
        "threads",
        "engine ms",
        "torch ms",
        "ratio (engine/torch)",
        "CPU-time ratio",
    ]
    body = [
        [
            f"{r['config']} (B={r['batch']}, {'-'.join(map(str, r['sizes']))})",
            r["dtype"],
            r["setting"],
            str(r["thread_counts"]["torch"]),
            f"{r['engine_s'] * 1e3:.3f}",
            f"{r['torch_s'] * 1e3:.3f}",
            f"{r['ratio']:.2f}",
            f"{r['cpu_ratio']:.2f}",
        ]
        for r in rows
    ]
    print_table_of(head, body, left_columns=3)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--settings",
        nargs="+",
        default=["1", "default", "1+malloc"],
        help="settings to run: a thread count or 'default', "
        "optionally followed by '+malloc'",
    )
    parser.add_argument(
        "--repeats", type=int, default=15, help="turns per side (default 15)"
    )
    args = parse_args_or_run_worker(parser, worker)
    if args is None:  # this process was a worker
        return 0

    runs = {t: run_setting(t, args.repeats) for t in args.settings}
    rows = [r for run in runs.values() for r in run["rows"]]
    print_table(rows)
    large = [
        r["ratio"] for r in rows if r["config"] == "large" and r["setting"] == "1"
    ]
    if large:
        print(
            f"\nlarge MLP, 1 thread: the engine's step within 1.5x of PyTorch's: "
            f"{max(large) <= 1.5} (worst ratio {max(large):.2f})"
        )
    first = runs[args.settings[0]]["machine"]
    payload = {
        "benchmark": "tensor_engine",
        "description": "one training step (forward, backward, SGD update) "
        "of an MLP: "
        "the NumPy Tensor engine vs PyTorch eager on the CPU",
        "timer": "time.perf_counter, "
        "best seconds per step over turns taken in alternation",
        "repeats": args.repeats,
        "learning_rate": LR,
        "rows": rows,
        "machine": {
            **first,
            "torch_threads": None,
            "numpy_blas_threads": None,
            "threads_per_setting": {
                t: run["rows"][0]["thread_counts"] for t, run in runs.items()
            },
        },
    }
    write_results(RESULTS, payload)
    return 0


if __name__ == "__main__":
    sys.exit(main())
