"""The hand-written NumPy GPT vs its PyTorch twin: one full training step each,
on the CPU.

What it measures
    One training step - forward, backward and an AdamW update of every
    parameter - of the same small GPT written three times:
      numpy  backprop_lessons.gpt: gpt_forward, gpt_backward (the layer
             backwards written by hand, chapter 6) and train.AdamW: the
             book's code
      tuned  gpt_tuned.TunedGPT, next to this file: the same step laid out
             for speed as llm.c is (flat parameter and gradient arrays,
             buffers made once and written with out=, elementwise chains in
             cache-sized blocks); not shown in the book
      torch  backprop_lessons.gpt.reference.torch_gpt_loss (the PyTorch twin,
             eager mode), loss.backward() and torch.optim.AdamW
    The target, a hand-written step no slower than PyTorch's, is judged on
    the tuned step; the book's step is timed beside it, so the price of
    writing the layers to be read stays on the table.
    Same config (vocab 65, block 64, batch 16, 4 layers, 4 heads, 128
    channels: a small character-level GPT), float32, the same initial
    parameters and the same batch; AdamW with the same hyperparameters on
    both sides (lr 1e-3, betas (0.9, 0.95), eps 1e-8, weight decay 0.1 on
    the matrices in train.DECAYED and none on biases and layernorm gains).

    Validation first, for each NumPy side; nothing is timed if it fails:
      float64, small batch  loss, every gradient and every updated parameter
                            after one step agree to 1e-10 (relative)
      float32, full config  loss and every gradient agree to the float32
                            tolerances of reference.DEFAULT_TOLERANCES, and
                            every updated parameter to a tenth of the
                            learning rate (absolute)
    (relative: max|a - b| / max|b| per tensor).  Why the float32 update is
    compared on the scale of lr: Adam's first step is lr * g / (|g| + eps),
    about lr * sign(g), so an entry whose gradient is at the level of
    float32 rounding noise (the key bias, whose exact gradient is 0 because
    softmax ignores a shift of a whole row of scores, or weights that meet
    only such noise) moves by a different fraction of lr on each side.
    Measured: at most a few hundredths of lr, on entries with |g| near 1e-9.

    Timing: after a warm-up the three sides take turns, one step each, R
    times (a change of load on a shared machine then hits all alike).
    Printed and stored: the fastest and the median step of each side, in
    wall-clock time and in process CPU time, and the ratios numpy / torch
    and tuned / torch (below 1: the hand-written step is faster).  The
    headline ratio is the one of the fastest steps, the better estimate of
    the cost on a machine shared with other work.

    Memory, measured on one extra step of each side (not timed):
      numpy  peak bytes traced by `tracemalloc` during the step above what
             was allocated before it: every NumPy array the step creates
             (layer caches, gradient buffers, temporaries) plus Python
             objects.  Parameters and AdamW moments exist before the step
             and are not counted.
      tuned  the same, plus the buffers it made once before any step
             (activations, their gradients, scratch, the gradients):
             `TunedGPT.buffer_bytes`.
      torch  `backprop_lessons.debug.measure_memory`: the peak bytes of
             tensor storage handed out by PyTorch's CPU allocator during the
             step (saved activations, gradients, temporaries), from the
             profiler's allocation events; parameters and optimizer state
             exist before the step and are not counted.  `tracemalloc` does
             not see PyTorch's allocations.
    Neither counts memory a BLAS library allocates for itself.  Also
    printed: the minor page faults per step of each side (from getrusage):
    memory the C library returned to the operating system and takes back
    costs one fault per 4 KB page.

Threads
    Each thread setting runs in a fresh subprocess, because OpenBLAS fixes
    its thread count when NumPy loads:
      1        OPENBLAS/OMP/MKL_NUM_THREADS=1 and torch.set_num_threads(1)
      default  none of those set: each library picks its own count
    The threads each library really uses are read back and stored.

How to run
    make bench      or      .venv/bin/python benchmarks/gpt_step.py
    Options: --settings 1 default, --repeats R (default 25).  Takes about a
    minute.  Writes benchmarks/results/gpt_step.json (benchmarks/report.py
    turns it into the table of the book's performance appendix).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from harness import (
    parse_args_or_run_worker,
    rel_diff,
    run_worker,
    start_threads,
    write_results,
)
from harness import print_table as print_table_of

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "gpt_step.json"
CONFIG = {
    "vocab_size": 65,
    "block_size": 64,
    "n_layer": 4,
    "n_head": 4,
    "n_embd": 128,
}
BATCH = 16
ADAMW = {"lr": 1e-3, "betas": (0.9, 0.95), "eps": 1e-8, "weight_decay": 0.1}
PARAM_TOLERANCE = {
    "float64": 1e-10,
    "float32": 0.1,
}  # relative; in units of lr (see above)


# ---- the two sides -------------------------------------------------------------


def numpy_side(params, config, idx, targets):
    """A step function of the book's hand-written GPT, returning the loss and
    the gradients, and the parameters it updates (`params` itself, in
    place)."""
    from backprop_lessons.gpt import gpt_backward, gpt_forward
    from backprop_lessons.gpt.train import AdamW

    opt = AdamW(params, **ADAMW)

    def step():
        loss, cache = gpt_forward(params, config, idx, targets)
        grads = gpt_backward(params, config, cache)
        opt.step(params, grads)
        return loss, grads

    return step, params


def tuned_side(params, config, idx, targets):
    """The same for gpt_tuned.TunedGPT, which copies `params` into its own flat
    array: the parameters returned are views of it."""
    from gpt_tuned import TunedGPT

    model = TunedGPT(params, config, *idx.shape, **ADAMW)

    def step():
        return model.step(idx, targets), model.grads

    step.buffer_bytes = model.buffer_bytes()  # made once, before any step
    return step, model.params


NUMPY_SIDES = {"numpy": numpy_side, "tuned": tuned_side}


def torch_side(params, config, idx, targets):
    """A step function of the PyTorch twin, and its parameters (leaf tensors,
    copies of `params`)."""
    import torch

    from backprop_lessons.gpt.reference import torch_gpt_loss
    from backprop_lessons.gpt.train import DECAYED

    tp = {name: torch.tensor(a, requires_grad=True) for name, a in params.items()}
    wd = ADAMW["weight_decay"]
    groups = [
        {
            "params": [t for n, t in tp.items() if n in DECAYED],
            "weight_decay": wd,
        },
        {
            "params": [t for n, t in tp.items() if n not in DECAYED],
            "weight_decay": 0.0,
        },
    ]
    opt = torch.optim.AdamW(
        groups, lr=ADAMW["lr"], betas=ADAMW["betas"], eps=ADAMW["eps"]
    )
    idx_t, targets_t = torch.as_tensor(idx), torch.as_tensor(targets)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = torch_gpt_loss(tp, config, idx_t, targets_t)
        loss.backward()
        opt.step()
        return loss

    return step, tp


def make_problem(dtype: str, batch: int, seq_len: int, seed: int = 0):
    """Config, parameters (GPT-2 init plus noise, so no gradient is trivially
    zero) and a batch."""
    import numpy as np

    from backprop_lessons.gpt import GPTConfig, init_params

    config = GPTConfig(**CONFIG)
    rng = np.random.default_rng(seed)
    params = {
        k: (v + 0.05 * rng.standard_normal(v.shape)).astype(dtype)
        for k, v in init_params(config, seed=seed, dtype=np.float64).items()
    }
    idx = rng.integers(0, config.vocab_size, size=(batch, seq_len))
    targets = rng.integers(0, config.vocab_size, size=(batch, seq_len))
    return config, params, idx, targets


# ---- validation ----------------------------------------------------------------


def validate(side: str, dtype: str, batch: int, seq_len: int) -> dict:
    """One step of a NumPy side and of PyTorch from the same parameters: loss,
    gradients, updated parameters."""
    from backprop_lessons.gpt.reference import DEFAULT_TOLERANCES
    from backprop_lessons.gradcheck import largest_difference

    config, params, idx, targets = make_problem(dtype, batch, seq_len)
    np_step, np_params = NUMPY_SIDES[side](
        {k: v.copy() for k, v in params.items()}, config, idx, targets
    )
    np_loss, np_grads = np_step()
    t_step, tp = torch_side(params, config, idx, targets)
    t_loss = t_step().item()
    tol = DEFAULT_TOLERANCES[dtype]
    grad_errors = {k: rel_diff(np_grads[k], tp[k].grad.numpy()) for k in params}
    param_errors = {
        k: rel_diff(np_params[k], tp[k].detach().numpy()) for k in params
    }
    param_abs_diff = max(
        largest_difference(np_params[k], tp[k].detach().numpy()) for k in params
    )
    result = {
        "side": side,
        "dtype": dtype,
        "batch": batch,
        "seq_len": seq_len,
        "loss_rel_diff": rel_diff(np_loss, t_loss),
        "grad_max_rel_diff": max(grad_errors.values()),
        "param_max_rel_diff": max(param_errors.values()),
        "param_max_abs_diff_over_lr": param_abs_diff / ADAMW["lr"],
        "dtypes_kept": all(np_params[k].dtype == dtype for k in params),
    }
    result["ok"] = bool(
        result["loss_rel_diff"] <= tol["loss"]
        and all(e <= tol.get(k, tol["default"]) for k, e in grad_errors.items())
        and (
            result["param_max_rel_diff"]
            if dtype == "float64"
            else result["param_max_abs_diff_over_lr"]
        )
        <= PARAM_TOLERANCE[dtype]
        and result["dtypes_kept"]
    )
    return result


# ---- time and memory -----------------------------------------------------------


def time_sides(steps: dict, repeats: int) -> dict:
    """Wall-clock and CPU seconds of every step, the sides taking turns."""
    import resource

    for step in steps.values():  # warm-up
        for _ in range(3):
            step()
    wall = {name: [] for name in steps}
    cpu = {name: [] for name in steps}
    faults = dict.fromkeys(steps, 0)
    for _ in range(repeats):
        for name, step in steps.items():
            f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            t0, c0 = time.perf_counter(), time.process_time()
            step()
            wall[name].append(time.perf_counter() - t0)
            cpu[name].append(time.process_time() - c0)
            faults[name] += (
                resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0
            )
    return {
        "best_s": {n: min(v) for n, v in wall.items()},
        "median_s": {n: statistics.median(v) for n, v in wall.items()},
        "best_cpu_s": {n: min(v) for n, v in cpu.items()},
        "median_cpu_s": {n: statistics.median(v) for n, v in cpu.items()},
        "page_faults_per_step": {n: f / repeats for n, f in faults.items()},
    }


def numpy_peak_bytes(step) -> int:
    """Peak bytes traced by tracemalloc during one call of `step`, above what was
    there before."""
    import tracemalloc

    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        step()
        return tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()


def worker(setting: str, repeats: int) -> dict:
    """Run in a fresh process whose environment `run_setting` prepared."""
    from backprop_lessons.debug import measure_memory
    from machine_info import machine_info

    counts = start_threads(setting, setting)

    checks = [
        validate(side, dtype, batch, seq_len)
        for side in NUMPY_SIDES
        for dtype, batch, seq_len in [
            ("float64", 2, 16),
            ("float32", BATCH, CONFIG["block_size"]),
        ]
    ]
    for c in checks:
        print(
            f"  check {c['side']} {c['dtype']} (B={c['batch']}, "
            f"T={c['seq_len']}): "
            f"one step agrees: {c['ok']} (max relative difference: loss "
            f"{c['loss_rel_diff']:.1e}, gradients {c['grad_max_rel_diff']:.1e}, "
            f"updated parameters {c['param_max_rel_diff']:.1e}; largest "
            f"parameter difference {c['param_max_abs_diff_over_lr']:.1e} lr)",
            flush=True,
        )
    if not all(c["ok"] for c in checks):
        raise SystemExit("the two sides disagree: not timing")

    config, params, idx, targets = make_problem(
        "float32", BATCH, CONFIG["block_size"]
    )
    steps = {
        side: make(
            {k: v.copy() for k, v in params.items()}, config, idx, targets
        )[0]
        for side, make in NUMPY_SIDES.items()
    }
    steps["torch"] = torch_side(params, config, idx, targets)[0]
    timing = time_sides(steps, repeats)
    memory = {
        side: numpy_peak_bytes(steps[side])
        + getattr(steps[side], "buffer_bytes", 0)
        for side in NUMPY_SIDES
    }
    memory["torch"] = measure_memory(steps["torch"]).peak_bytes
    best, med, cpu = timing["best_s"], timing["median_s"], timing["best_cpu_s"]
    ratios = {}
    for side in NUMPY_SIDES:
        suffix = "" if side == "numpy" else f"_{side}"
        ratios[f"ratio_best{suffix}"] = best[side] / best["torch"]
        ratios[f"ratio_median{suffix}"] = med[side] / med["torch"]
        ratios[f"ratio_best_cpu{suffix}"] = cpu[side] / cpu["torch"]
    return {
        "setting": setting,
        "thread_counts": counts,
        "validation": checks,
        **timing,
        **ratios,
        "peak_bytes": memory,
        "machine": machine_info(),
    }


# ---- the driver ----------------------------------------------------------------


def run_setting(setting: str, repeats: int) -> dict:
    """Run the worker in a subprocess with the thread count of `setting`."""
    return run_worker(__file__, setting, setting, repeats)


def print_table(rows: list[dict]) -> None:
    head = [
        "threads (numpy/torch)",
        "ms best book/tuned/torch",
        "ratio best book/tuned",
        "ms median book/tuned/torch",
        "ratio median book/tuned",
        "CPU ratio book/tuned",
        "peak MB book/tuned/torch",
        "faults/step book/tuned/torch",
    ]
    sides = (*NUMPY_SIDES, "torch")
    body = []
    for r in rows:
        c, b, m, p, f = (
            r["thread_counts"],
            r["best_s"],
            r["median_s"],
            r["peak_bytes"],
            r["page_faults_per_step"],
        )
        body.append(
            [
                f"{r['setting']} ({c['numpy_blas']}/{c['torch']})",
                "/".join(f"{b[s] * 1e3:.1f}" for s in sides),
                f"{r['ratio_best']:.2f}/{r['ratio_best_tuned']:.2f}",
                "/".join(f"{m[s] * 1e3:.1f}" for s in sides),
                f"{r['ratio_median']:.2f}/{r['ratio_median_tuned']:.2f}",
                f"{r['ratio_best_cpu']:.2f}/{r['ratio_best_cpu_tuned']:.2f}",
                "/".join(f"{p[s] / 2**20:.1f}" for s in sides),
                "/".join(f"{f[s]:.0f}" for s in sides),
            ]
        )
    print_table_of(head, body)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--settings",
        nargs="+",
        default=["1", "default"],
        help="thread settings to run: a thread count or 'default'",
    )
    parser.add_argument(
        "--repeats",
        type=int,
        default=25,
        help="timed steps per side (default 25)",
    )
    args = parse_args_or_run_worker(parser, worker)
    if args is None:  # this process was a worker
        return 0

    rows = [run_setting(s, args.repeats) for s in args.settings]
    print_table(rows)
    print(
        f"\nconfig: {CONFIG}, batch {BATCH}, float32; "
        f"{args.repeats} alternating steps per side"
    )
    for r in rows:
        print(
            f"threads {r['setting']}: hand-written step no slower than "
            f"PyTorch (fastest steps): tuned {r['ratio_best_tuned'] <= 1.0} "
            f"(ratio {r['ratio_best_tuned']:.2f}; medians "
            f"{r['ratio_median_tuned']:.2f}), the book's layers "
            f"{r['ratio_best'] <= 1.0} (ratio {r['ratio_best']:.2f}; medians "
            f"{r['ratio_median']:.2f})"
        )
    machine = {
        **rows[0]["machine"],
        "torch_threads": None,
        "numpy_blas_threads": None,
        "threads_per_setting": {r["setting"]: r["thread_counts"] for r in rows},
    }
    payload = {
        "benchmark": "gpt_step",
        "description": "one training step (forward, backward, AdamW) of a "
        "small GPT: hand-written NumPy vs the PyTorch twin in eager mode, CPU, "
        "float32",
        "config": {
            **CONFIG,
            "batch_size": BATCH,
            "seq_len": CONFIG["block_size"],
            "dtype": "float32",
        },
        "adamw": ADAMW,
        "timer": "time.perf_counter per step; best and median over steps "
        "taken in alternation",
        "memory": {
            "numpy": "tracemalloc peak during one step, above the memory "
            "before it",
            "torch": "backprop_lessons.debug.measure_memory peak_bytes (profiler "
            "allocation events of the CPU allocator) during one step",
        },
        "repeats": args.repeats,
        "rows": [{k: v for k, v in r.items() if k != "machine"} for r in rows],
        "machine": machine,
    }
    write_results(RESULTS, payload)
    return 0


if __name__ == "__main__":
    sys.exit(main())
