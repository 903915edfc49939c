"""What the benchmark scripts share: thread settings, worker subprocesses,
checks, tables.

A thread count must be fixed before NumPy's OpenBLAS starts, so each
setting of a benchmark runs in a fresh subprocess: `run_worker` starts the
script again with `--worker SETTING OUT` in an environment that pins the
thread count, and reads back the JSON the worker wrote.  In the worker,
`start_threads` sets PyTorch's thread count to match and reports what both
libraries actually use.

Not a benchmark itself.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

THREAD_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
# The "+malloc" settings: glibc's malloc told to keep the memory it frees for
# the next allocation instead of handing it back to the OS.  Each fresh page
# costs a fault (in a virtual machine, a trip to the host as well), so a
# step that frees and allocates the same arrays again pays for its memory
# every time.  MALLOC_MMAP_MAX_=0 is what keeps the large arrays: glibc gives
# every block above its mmap threshold its own mapping, unmapped on free,
# and it caps that threshold at 32 MiB (a larger MALLOC_MMAP_THRESHOLD_ is
# ignored), so without it every array of more than 32 MiB is fresh memory.
MALLOC_VARS = {
    "MALLOC_MMAP_MAX_": "0",  # no mmap: every block from the heap
    "MALLOC_TRIM_THRESHOLD_": str(2**40),  # never give the heap's top back
    "MALLOC_TOP_PAD_": str(2**26),  # grow the heap 64 MiB beyond each need
}


def run_worker(
    script: str,
    setting: str,
    threads: str,
    repeats: int,
    extra_env: dict[str, str] | None = None,
    drop_env: tuple[str, ...] = (),
) -> dict:
    """Run `script --worker setting OUT` with `threads` pinned ('default': not
    pinned)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in THREAD_VARS and k not in drop_env
    }
    if threads != "default":
        env.update(dict.fromkeys(THREAD_VARS, threads))
    env.update(extra_env or {})
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        subprocess.run(
            [
                sys.executable,
                script,
                "--worker",
                setting,
                str(out),
                "--repeats",
                str(repeats),
            ],
            env=env,
            check=True,
        )
        return json.loads(out.read_text())


def start_threads(setting: str, threads: str) -> dict:
    """In a worker: match PyTorch's threads to `threads`, start OpenBLAS,
    report both counts."""
    import numpy as np
    import torch

    from machine_info import openblas_threads

    if threads != "default":
        torch.set_num_threads(int(threads))
    np.zeros((64, 64)) @ np.zeros((64, 64))  # make OpenBLAS start its threads
    counts = {"numpy_blas": openblas_threads(), "torch": torch.get_num_threads()}
    print(
        f"setting {setting}: NumPy's OpenBLAS uses {counts['numpy_blas']} "
        "thread(s), "
        f"torch uses {counts['torch']}",
        flush=True,
    )
    return counts


def rel_diff(a, b) -> float:
    """max|a - b| / max(max|a|, max|b|): the book's one relative error
    (`gradcheck.relative_error`), imported when a worker compares."""
    from backprop_lessons.gradcheck import relative_error

    return relative_error(a, b)


def print_table(
    head: list[str], body: list[list[str]], left_columns: int = 0
) -> None:
    """A plain-text table: the first `left_columns` columns left-aligned, the
    rest right-aligned."""
    widths = [
        max(len(str(row[k])) for row in [head] + body) for k in range(len(head))
    ]

    def line(cells) -> str:
        return " | ".join(
            str(c).ljust(w) if k < left_columns else str(c).rjust(w)
            for k, (c, w) in enumerate(zip(cells, widths))
        )

    print()
    print(line(head))
    print("-+-".join("-" * w for w in widths))
    for row in body:
        print(line(row))


def write_results(path: Path, payload: dict) -> None:
    """Write a benchmark's results as JSON and say where (relative to the
    working directory)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2) + "\n")
    shown = (
        path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path
    )
    print(f"wrote {shown}")


def parse_args_or_run_worker(parser, worker) -> argparse.Namespace | None:
    """Parse the command line; in a worker subprocess run `worker` and return
    None.

    `run_worker` starts the script with `--worker SETTING OUT`: the worker's
    result goes to OUT as JSON, and the script has nothing else to do.
    """
    parser.add_argument(
        "--worker", nargs=2, metavar=("SETTING", "OUT"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    if not args.worker:
        return args
    setting, out = args.worker
    Path(out).write_text(json.dumps(worker(setting, args.repeats)))
    return None
