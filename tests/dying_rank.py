"""Test support for `scale.ddp_train`: the program with a rank that dies on
purpose, and torchrun's report of what failed first.

    torchrun --standalone --nproc-per-node 2 tests/dying_rank.py \\
        --crash-rank R --crash-after-step K [ddp_train's options]

runs `ddp_train`'s program with one addition: rank R kills itself with
SIGKILL after step K (and its checkpoint), as a failing machine would.
`root_cause(stderr)` reads torchrun's "Root Cause" block, and
`marked_processes` finds what a test's launch started (test_ddp_train's
and chapter12_launch's launchers wait for or kill them with it).

The ranks that survive must not be named as the root cause.  torchrun names
the failure with the earliest timestamp: a SIGKILLed worker's is the moment
the launcher's poll (every 0.1 s) sees it gone, a raising worker's the
moment it raises; a survivor whose collective failed could raise before
that poll.  So a survivor does not raise on its own: it waits for the sign
that the launcher has seen the dead rank, torchrun's SIGTERM to the
workers left, and ends by it (with a deadline, after which it raises).
"""

from __future__ import annotations

import argparse
import os
import re
import signal
from pathlib import Path

#: this file, as `ddp_train.launch(program=...)` and torchrun run it
SCRIPT = (str(Path(__file__).resolve()),)
#: how long a survivor waits for torchrun's SIGTERM before it raises
STOP_DEADLINE_S = 60.0


def crash_after(rank: int, step: int):
    """An `after_step` for `ddp_train.train`: that rank SIGKILLs itself
    after that step."""

    def after_step(this_rank: int, this_step: int) -> None:
        if (this_rank, this_step) == (rank, step):
            print(
                f"rank {rank}: crashing on purpose after step {step} (SIGKILL)",
                flush=True,
            )
            os.kill(os.getpid(), signal.SIGKILL)

    return after_step


def end_when_stopped(deadline: float) -> None:
    """Wait until torchrun's SIGTERM arrives, then end by it (as a worker it
    stops does); return if `deadline` seconds pass first."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    if signal.sigtimedwait({signal.SIGTERM}, deadline) is not None:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
        os.kill(os.getpid(), signal.SIGTERM)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})


def root_cause(stderr: str) -> dict | None:
    """The failure torchrun observed first, from the "Root Cause" block of
    its report: {"rank", "exitcode", "signal" (a name, or None)}; None if
    the report has no such block."""
    _, found, block = stderr.rpartition("Root Cause")
    rank = re.search(r"^\s*rank\s*: (\d+)", block, re.M)
    code = re.search(r"^\s*exitcode\s*: (-?\d+).*?(\((SIG\w+)\))?$", block, re.M)
    if not found or not rank or not code:
        return None
    return {
        "rank": int(rank.group(1)),
        "exitcode": int(code.group(1)),
        "signal": code.group(3),
    }


def main(argv=None) -> int:
    """ddp_train's program with `--crash-rank R --crash-after-step K`."""
    p = argparse.ArgumentParser(
        prog="tests/dying_rank.py",
        description="ddp_train, with a rank that dies on purpose.",
    )
    p.add_argument(
        "--crash-rank",
        type=int,
        default=None,
        help="with --crash-after-step: this rank SIGKILLs itself",
    )
    p.add_argument("--crash-after-step", type=int, default=None)
    args, rest = p.parse_known_args(argv)
    if (args.crash_rank is None) != (args.crash_after_step is None):
        p.error("--crash-rank and --crash-after-step go together")
    after_step = (
        None
        if args.crash_rank is None
        else crash_after(args.crash_rank, args.crash_after_step)
    )
    from backprop_lessons.scale import ddp_train  # torch: only when run

    try:
        return ddp_train.main(rest, after_step=after_step)
    except RuntimeError:
        if after_step is not None and "TORCHELASTIC_RUN_ID" in os.environ:
            end_when_stopped(STOP_DEADLINE_S)
        raise


if __name__ == "__main__":
    from torch.distributed.elastic.multiprocessing.errors import record

    from backprop_lessons.scale.ddp_train import exit_program

    exit_program(record(main)())


def marked_processes(variable: str, value: str) -> list:
    """Every live process whose environment has `variable` set to `value`:
    what a test's launch started (its workers inherit the environment),
    found to be waited for or killed at the end."""
    import psutil

    found = []
    for p in psutil.process_iter():
        try:
            if (
                p.environ().get(variable) == value
                and p.status() != psutil.STATUS_ZOMBIE
            ):
                found.append(p)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found
