"""Benchmark: the hand-written NumPy GPT forward+backward vs its PyTorch twin (eager autograd).

Run from the repository root:

    .venv/bin/python benchmarks/gpt_backward.py [--threads N] [--repeats R]

Both sides run on the CPU in float32 with the same config, the same
parameters and the same batch (vocab 65, block 64, batch 16, 4 layers,
4 heads, 128 channels: a small character-level GPT).  Before timing
anything the script checks that both compute the same loss and the same
gradients (per-tensor relative error within float32 tolerances, and the
float64 check at a tolerance of 1e-10).  It then times one forward+backward
of each, alternating the two sides, R times, and reports the fastest and the
median run of each and the ratio numpy / torch of the fastest runs (below
1.0: the hand-written version is faster).  The fastest run is the better
estimate of the cost on a machine shared with other work, where the median
mostly measures the neighbours.  The process CPU time of each run is
printed too: with one thread it does not count time spent waiting for a
core; with several it adds up the threads' work.

Both libraries get the same number of threads (`--threads`, default: all
cores, which is what each library uses out of the box; set before NumPy's
BLAS starts, and `torch.set_num_threads`).  `--threads 1` compares the
single-core code paths.  Results go to benchmarks/results/gpt_backward.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=os.cpu_count(),
                        help="BLAS / torch threads (default: all cores, as both libraries do)")
    parser.add_argument("--repeats", type=int, default=15, help="timed runs per side (default 15)")
    args = parser.parse_args()
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[name] = str(args.threads)  # before numpy and torch load their BLAS

    import numpy as np
    import torch

    from backprop_lessons.gpt import GPTConfig, gpt_backward, gpt_forward, init_params
    from backprop_lessons.gpt.reference import compare_with_torch, torch_gpt_loss

    torch.set_num_threads(args.threads)
    config = GPTConfig(vocab_size=65, block_size=64, n_layer=4, n_head=4, n_embd=128)
    B, T = 16, config.block_size
    rng = np.random.default_rng(0)
    idx = rng.integers(0, config.vocab_size, size=(B, T))
    targets = rng.integers(0, config.vocab_size, size=(B, T))

    # 1. Validate: the same numbers on both sides, in float64 and in float32.
    params64 = {k: v + 0.05 * rng.standard_normal(v.shape)
                for k, v in init_params(config, seed=0, dtype=np.float64).items()}
    table64 = compare_with_torch(params64, config, idx[:2, :16], targets[:2, :16])
    params = {k: v.astype(np.float32) for k, v in params64.items()}
    table32 = compare_with_torch(params, config, idx, targets)
    print(table64.format(coarse=True))
    print()
    print(table32)
    if not (table64.ok and table32.ok):
        print("validation FAILED: not timing", file=sys.stderr)
        return 1

    # 2. Time one forward+backward of each side, alternating.
    tp = {k: torch.tensor(v, requires_grad=True) for k, v in params.items()}
    idx_t, targets_t = torch.as_tensor(idx), torch.as_tensor(targets)

    def numpy_step():
        _, cache = gpt_forward(params, config, idx, targets)
        gpt_backward(params, config, cache)

    def torch_step():
        for t in tp.values():
            t.grad = None
        torch_gpt_loss(tp, config, idx_t, targets_t).backward()

    for fn in (numpy_step, torch_step):  # warm-up
        fn(), fn()
    wall = {"numpy": [], "torch": []}
    cpu = {"numpy": [], "torch": []}
    for _ in range(args.repeats):
        for name, fn in (("numpy", numpy_step), ("torch", torch_step)):
            start, start_cpu = time.perf_counter(), time.process_time()
            fn()
            cpu[name].append(time.process_time() - start_cpu)
            wall[name].append(time.perf_counter() - start)
    best = {k: min(v) for k, v in wall.items()}
    med = {k: statistics.median(v) for k, v in wall.items()}
    best_cpu = {k: min(v) for k, v in cpu.items()}
    ratio = best["numpy"] / best["torch"]
    ratio_cpu = best_cpu["numpy"] / best_cpu["torch"]
    print()
    print(f"config: {config}, B={B}, T={T}, float32, threads={args.threads}, runs={args.repeats}")
    for name, label in (("numpy", "hand-written NumPy"), ("torch", "PyTorch eager     ")):
        print(f"{label} forward+backward: wall best {best[name] * 1e3:7.1f} ms, "
              f"median {med[name] * 1e3:7.1f} ms; CPU best {best_cpu[name] * 1e3:7.1f} ms")
    print(f"ratio numpy / torch, wall (best runs): {ratio:.2f}; CPU time (best runs): "
          f"{ratio_cpu:.2f}; wall medians: {med['numpy'] / med['torch']:.2f}")
    print(f"numpy no slower: {ratio <= 1.0}")

    out = Path(__file__).resolve().parent / "results" / "gpt_backward.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({
        "benchmark": "gpt_backward",
        "config": {**config.__dict__, "batch_size": B, "seq_len": T, "dtype": "float32"},
        "threads": args.threads,
        "repeats": args.repeats,
        "best_seconds": best,
        "best_cpu_seconds": best_cpu,
        "ratio_cpu_time": ratio_cpu,
        "median_seconds": med,
        "ratio_numpy_over_torch": med["numpy"] / med["torch"],  # matches median_seconds
        "ratio_best_runs": ratio,
        "validated": {"float64_max_rel_err": table64.max_rel_err,
                      "float32_max_rel_err": table32.max_rel_err},
        "versions": {"python": platform.python_version(), "numpy": np.__version__,
                     "torch": torch.__version__},
        "machine": platform.machine(), "cpus": os.cpu_count(),
    }, indent=2) + "\n")
    print(f"wrote {out.relative_to(Path.cwd()) if out.is_relative_to(Path.cwd()) else out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
