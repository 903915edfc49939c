"""Two revisions of the engines, timed side by side: did a change make them
slower?

What it measures
    The same workloads, run with the package's source as it is at REV_A and
    as it is at REV_B (B / A above 1: B is slower):
      scalar graph   a random layered graph of Values (38 layers of 1,000
                     units, each a product, a mean, a tanh or a relu of
                     nodes of the layer before, then their sum: 49,639
                     nodes), built and backpropagated
      scalar chain   v = v + x, 50,000 times, then backward
      scalar_nn MLP  scalar_nn.MLP(2, [16, 16, 1], relu): the squared error
                     of 100 points (68,138 nodes), then backward
      tensor small   tensor_engine.py's training step, batch 200,
                     2 -> 16 -> 16 -> 2, float64 (per step, of 500 a run)
      tensor large   the same, batch 1024, 64 -> 256 -> 256 -> 10 (of 10)
      gpt step       gpt_forward + gpt_backward of gpt_step.py's config
                     (4 layers, 128 channels), batch 4 x 64 tokens, float32
                     (per step, of 6)
      mlp3 step      ThreeLayerMLP(64, 128, 64, 10): loss_and_grads of a
                     batch of 256 and an sgd_step (per step, of 100)
      microgpt step  MicroGPT(seed=0): the loss of "emily" (49,267 nodes),
                     backward
    A run of a workload takes 0.1 to 0.3 s here.  They use only what both
    revisions define; the tensor and GPT ones call tensor_engine.py's and
    gpt_step.py's own set-up, from this checkout, so A and B run the same
    code around the engines.  Each worker also reports a result (an output,
    a loss): a line after the table says when A's and B's differ.

How it times
    Each revision's src/ is extracted with `git archive` into a temporary
    folder, and every run is a fresh subprocess with PYTHONPATH pointing at
    it (so the installed package is not the one timed: the workers report
    `backprop_lessons.__file__`, checked and printed), with one BLAS and
    OpenMP thread.  On a machine shared with other work an absolute time
    means little, so the revisions take turns: for each workload, one run
    of A and one of B back to back, in the order A, B in one round and
    B, A in the next, R rounds.  A run warms up once, then times the
    workload three times (the garbage collector on, emptied before each)
    and keeps the fastest, in process CPU time (time.process_time) and in
    wall-clock time (time.perf_counter).  The table:
      A ms, B ms   the fastest CPU time per step of each revision over the
                   R rounds: CPU time leaves out the time other programs
                   hold the core, which on a loaded machine is most of the
                   spread of wall-clock times
      B/A          their ratio
      B/A wall     the same ratio of the fastest wall-clock times
      B/A paired   the median over the rounds of B's CPU time / A's in the
                   same round (a second estimate, not swayed by one lucky run)
    and, for B/A and B/A paired, whether every ratio is within 10% of 1
    (the workloads outside, if any: above 1.10, B is slower).

    Noise, measured on two cores shared with CPU-bound jobs (load 2 to 10):
    comparing main with itself (R = 5) gave B/A from 0.93 to 1.08, B/A
    paired from 0.98 to 1.04.  A step that allocates arrays of more than
    128 KB (mlp3, the large tensor step, the GPT step) also pays page
    faults, and how many depends on glibc malloc's state, set by everything
    allocated before (imports included): two revisions running the same
    step code can differ by 10% in faults and a few % in time.
    --keep-memory runs the workers with harness.MALLOC_VARS (malloc keeps
    what it frees, as tensor_engine.py's "1+malloc" setting), which takes
    that out.  A ratio just outside 10% is worth a second run (--only that
    workload, more rounds) before it is read as a change of the code.

How to run
    .venv/bin/python benchmarks/compare_revisions.py REV_A REV_B [--repeats R]
    e.g. `... compare_revisions.py 52a56d4^1 main --repeats 7`; `--only
    "gpt step" ...` times some of the workloads, --keep-memory (above)
    takes the page faults out.  Not part of `make bench`: a tool for a
    change that may have cost speed.  With R = 7 it takes about two minutes
    of CPU.  Prints the table; writes nothing.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from harness import MALLOC_VARS, THREAD_VARS, print_table

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
TIMED_RUNS = 3  # per worker, after one warm-up run
WITHIN = 0.10  # B / A in [1 - WITHIN, 1 + WITHIN]: "within 10%"


# ---- the workloads: each a set-up returning (run, steps per run) -------------
# `run()` does the work once and returns a number that A and B should agree
# on.  They import the package only when called, in the worker.


def scalar_graph():
    from backprop_lessons.scalar import Value

    rng = random.Random(0)
    width, layers = 1000, 38
    start = [rng.uniform(-1.0, 1.0) for _ in range(width)]
    # per unit: which operation, and the two nodes of the previous layer
    plan = [
        [
            (rng.randrange(4), k, rng.randrange(width))
            for k in rng.sample(range(width), width)
        ]
        for _ in range(layers)
    ]

    def run():
        half = Value(0.5)
        prev = leaves = [Value(x) for x in start]
        for layer in plan:
            units = []
            for op, i, j in layer:
                a, b = prev[i], prev[j]
                if op == 0:
                    units.append(a * b)
                elif op == 1:
                    units.append((a + b) * half)
                elif op == 2:
                    units.append(a.tanh())
                else:
                    units.append(a.relu())
            prev = units
        out = sum(prev[1:], prev[0])
        out.backward()
        return out.data + sum(v.grad for v in leaves)

    return run, 1


def scalar_chain():
    from backprop_lessons.scalar import Value

    def run():
        x = Value(0.5)
        v = x
        for _ in range(50_000):
            v = v + x
        v.backward()
        return x.grad

    return run, 1


def scalar_nn_mlp():
    from backprop_lessons import scalar_nn
    from backprop_lessons.scalar import zero_grad

    model = scalar_nn.MLP(2, [16, 16, 1], nonlin="relu", seed=0)
    rng = random.Random(0)
    points = [(rng.uniform(-1, 1), rng.uniform(-1, 1)) for _ in range(100)]
    batch = [([a, b], 1.0 if a * b > 0 else -1.0) for a, b in points]

    def run():
        zero_grad(model.parameters())
        loss = sum((model(x) - y) ** 2 for x, y in batch)
        loss.backward()
        return loss.data + sum(p.grad for p in model.parameters())

    return run, 1


def tensor_mlp(config: str, steps: int):
    def setup():
        from tensor_engine import CONFIGS, engine_side, make_problem

        step = engine_side(*make_problem(*CONFIGS[config], "float64"))[0]

        def run():
            for _ in range(steps):
                loss = step()
            return loss.item()

        return run, steps

    return setup


def gpt_step(steps: int = 6):
    from backprop_lessons.gpt import gpt_backward, gpt_forward
    from gpt_step import make_problem

    config, params, idx, targets = make_problem("float32", 4, 64)

    def run():
        for _ in range(steps):
            loss, cache = gpt_forward(params, config, idx, targets)
            gpt_backward(params, config, cache)
        return float(loss)

    return run, steps


def mlp3_step(steps: int = 100):
    import numpy as np

    from backprop_lessons.mlp3 import ThreeLayerMLP, sgd_step

    model = ThreeLayerMLP(64, 128, 64, 10, seed=0)
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((256, 64)), rng.integers(0, 10, 256)

    def run():
        for _ in range(steps):
            loss, grads = model.loss_and_grads(X, y)
            sgd_step(model.params, grads, 0.1)
        return loss

    return run, steps


def microgpt_step():
    from backprop_lessons.microgpt import MicroGPT
    from backprop_lessons.scalar import zero_grad

    model = MicroGPT(seed=0)

    def run():
        zero_grad(model.params)
        loss = model.loss("emily")
        loss.backward()
        return loss.data + sum(p.grad for p in model.params)

    return run, 1


WORKLOADS = {
    "scalar graph": scalar_graph,
    "scalar chain": scalar_chain,
    "scalar_nn MLP": scalar_nn_mlp,
    "tensor small f64": tensor_mlp("small", 500),
    "tensor large f64": tensor_mlp("large", 10),
    "gpt step": gpt_step,
    "mlp3 step": mlp3_step,
    "microgpt step": microgpt_step,
}


def worker(name: str) -> dict:
    """In a subprocess: the fastest of TIMED_RUNS runs of one workload, in
    seconds of CPU and of wall-clock time per step, its result, and where
    the package came from."""
    import backprop_lessons

    run, steps = WORKLOADS[name]()
    result = run()  # warm-up
    wall = cpu = float("inf")
    for _ in range(TIMED_RUNS):
        gc.collect()
        c0, t0 = time.process_time(), time.perf_counter()
        run()
        wall = min(wall, time.perf_counter() - t0)
        cpu = min(cpu, time.process_time() - c0)
    return {
        "wall": wall / steps,
        "cpu": cpu / steps,
        "result": repr(result),
        "package": backprop_lessons.__file__,
    }


# ---- the revisions and the turns -----------------------------------------------


def git(*args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(ROOT), *args], capture_output=True, text=True
    )
    if done.returncode:
        raise SystemExit(f"git {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout.strip()


def extract(rev: str, into: Path) -> tuple[str, Path]:
    """`rev`'s src/ under `into`; returns its commit line and the src path."""
    commit = git("rev-parse", "--verify", f"{rev}^{{commit}}")
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", commit, "src"],
        check=True,
        capture_output=True,
    ).stdout
    with tempfile.TemporaryFile() as f:
        f.write(archive)
        f.seek(0)
        with tarfile.open(fileobj=f) as tar:
            tar.extractall(into, filter="data")
    return git("log", "-1", "--format=%h %s", commit), into / "src"


def run_once(name: str, src: Path, extra_env: dict) -> dict:
    """One fresh worker on the package at `src`; checks it was that one."""
    env = dict(os.environ, PYTHONPATH=str(src), PYTHONHASHSEED="0", **extra_env)
    env.update(dict.fromkeys(THREAD_VARS, "1"))
    done = subprocess.run(
        [sys.executable, __file__, "--worker", name],
        env=env,
        capture_output=True,
        text=True,
    )
    if done.returncode:
        raise SystemExit(f"{name} failed on {src}:\n{done.stderr}")
    report = json.loads(done.stdout.splitlines()[-1])
    if not Path(report["package"]).is_relative_to(src):
        raise SystemExit(
            f"{name}: the worker imported {report['package']}, not {src}"
        )
    return report


def take_turns(revs: dict, names: list[str], rounds: int, env: dict) -> dict:
    """{(name, label): [worker report of each round]}, A and B taking turns:
    A, B in even rounds and B, A in odd ones, each workload's pair of runs
    back to back."""
    reports = {(n, label): [] for n in names for label in revs}
    for k in range(rounds):
        order = ("A", "B") if k % 2 == 0 else ("B", "A")
        for name in names:
            for label in order:
                reports[name, label].append(run_once(name, revs[label], env))
        print(f"round {k + 1}/{rounds} done", flush=True)
    return reports


def milliseconds(seconds: float) -> str:
    """Two decimals, three below 1 ms."""
    return f"{seconds * 1e3:.{2 if seconds >= 1e-3 else 3}f}"


def print_comparison(reports: dict, names: list[str]) -> None:
    """The table, the workloads whose results differ, and the verdict."""
    rows, outside = [], {"B/A": [], "B/A paired": []}
    for name in names:
        a, b = reports[name, "A"], reports[name, "B"]
        cpu_a, cpu_b = min(r["cpu"] for r in a), min(r["cpu"] for r in b)
        ratios = {
            "B/A": cpu_b / cpu_a,
            "B/A wall": min(r["wall"] for r in b) / min(r["wall"] for r in a),
            "B/A paired": statistics.median(
                x["cpu"] / y["cpu"] for x, y in zip(b, a)
            ),
        }
        rows.append(
            [name, milliseconds(cpu_a), milliseconds(cpu_b)]
            + [f"{x:.3f}" for x in ratios.values()]
        )
        for column, found in outside.items():
            if not 1 - WITHIN <= ratios[column] <= 1 + WITHIN:
                found.append(f"{name} ({ratios[column]:.2f})")
    head = ["workload", "A ms", "B ms", "B/A", "B/A wall", "B/A paired"]
    print_table(head, rows, left_columns=1)
    print(
        "A ms, B ms: the fastest CPU time per step; B/A wall: the same "
        "ratio in wall-clock time;\nB/A paired: the median over rounds of "
        "B's CPU time / A's in the same round"
    )
    for name in names:
        a, b = reports[name, "A"][0]["result"], reports[name, "B"][0]["result"]
        if a != b:
            print(f"{name}: the results differ: A {a}, B {b}")
    for column, found in outside.items():
        if found:
            print(f"{column} NOT within {WITHIN:.0%} on {', '.join(found)}")
        else:
            print(f"every {column} within {WITHIN:.0%}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("revs", nargs="*", metavar="REV_A REV_B")
    parser.add_argument("--repeats", type=int, default=7, help="rounds (R)")
    parser.add_argument(
        "--only", nargs="+", choices=WORKLOADS, default=list(WORKLOADS)
    )
    parser.add_argument(
        "--keep-memory",
        action="store_true",
        help="glibc's malloc keeps freed memory (no page faults per step)",
    )
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker)))
        return
    if len(args.revs) != 2:
        parser.error("give two revisions, REV_A and REV_B")
    started, used = time.perf_counter(), os.times()
    with tempfile.TemporaryDirectory() as tmp:
        revs = {}
        for label, rev in zip("AB", args.revs):
            line, revs[label] = extract(rev, Path(tmp) / label)
            print(f"{label} = {rev}: {line}")
        env = MALLOC_VARS if args.keep_memory else {}
        reports = take_turns(revs, args.only, args.repeats, env)
    for label in revs:
        package = reports[args.only[0], label][0]["package"]
        print(f"{label}'s workers imported {package}")
    print_comparison(reports, args.only)
    cpu = sum(os.times()[:4]) - sum(used[:4])
    print(
        f"({args.repeats} round(s) of {TIMED_RUNS} timed runs per worker; "
        f"{time.perf_counter() - started:.0f} s wall, {cpu:.0f} s CPU)"
    )


if __name__ == "__main__":
    main()
