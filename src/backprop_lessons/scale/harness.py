"""Test support for `scale.ddp_train`: running the program from Python (a
notebook or a test), making a rank die on purpose, and reading torchrun's
report of what failed first.  Nothing here is part of what chapter 8 teaches.

    python -m backprop_lessons.scale.harness --crash-rank R \\
        --crash-after-step K [ddp_train's options]

runs `ddp_train`'s program with one addition: rank R kills itself with
SIGKILL after step K (and its checkpoint), as a failing machine would.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass

from . import ddp_train

__all__ = ["DDP_TRAIN", "HARNESS", "Finished", "launch", "main"]

DDP_TRAIN = "backprop_lessons.scale.ddp_train"
HARNESS = "backprop_lessons.scale.harness"

# How long a rank whose collective failed waits before it raises.  torchrun
# names as root cause the failure with the earliest timestamp, in whole
# seconds: a SIGKILLed worker's is the moment the launcher's poll (every
# 0.1 s) sees it gone, a raising worker's the moment it raises.  On a busy
# machine a survivor could raise within the same second, before the poll,
# and be named instead of the rank that died.  While it waits, the launcher
# sees the dead rank and stops this one (SIGTERM).
FIRST_FAILURE_GRACE_S = 2.0


@dataclass(frozen=True)
class Finished:
    """A finished run of the program: its command, exit code and output."""

    command: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    @property
    def final_loss(self) -> float:
        """The float rank 0 printed last; a clear error if the run failed."""
        lines = self.stdout.strip().splitlines()
        if (
            self.returncode
            or not lines
            or not lines[-1].startswith("final loss: ")
        ):
            raise RuntimeError(
                f"ddp_train: {' '.join(self.command)} ended with exit code "
                f"{self.returncode} and no final loss; its stderr ends:\n"
                f"{self.stderr[-2000:]}"
            )
        return float(lines[-1].removeprefix("final loss: "))

    def root_cause(self) -> dict | None:
        """The failure torchrun observed first, from the "Root Cause" block
        of its report: {"rank", "exitcode", "signal" (a name, or None)};
        None if the report has no such block."""
        _, found, block = self.stderr.rpartition("Root Cause")
        rank = re.search(r"^\s*rank\s*: (\d+)", block, re.M)
        code = re.search(
            r"^\s*exitcode\s*: (-?\d+).*?(\((SIG\w+)\))?$", block, re.M
        )
        if not found or not rank or not code:
            return None
        return {
            "rank": int(rank.group(1)),
            "exitcode": int(code.group(1)),
            "signal": code.group(3),
        }


def launch(
    args=(),
    nproc_per_node: int = 1,
    timeout: float = 300.0,
    env: dict[str, str] | None = None,
    module: str = DDP_TRAIN,
) -> Finished:
    """Run `python -m backprop_lessons.scale.ddp_train ARGS` as a reader
    would type it: alone when `nproc_per_node` is 1, else under `torchrun
    --standalone --nproc-per-node N`; wait for it and return its output.

    One thread per process (OMP_NUM_THREADS=1); `env` adds environment
    variables; `module=HARNESS` accepts the crash options.  After `timeout`
    seconds the run is stopped (torchrun passes SIGTERM on to its workers,
    then SIGKILL) and a TimeoutError is raised.
    """
    program = ["-m", module, *map(str, args)]
    if nproc_per_node == 1:
        command = [sys.executable, *program]
    else:
        command = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc-per-node",
            str(nproc_per_node),
            *program,
        ]
    proc = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1", **(env or {})},
        start_new_session=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.terminate()
        try:
            proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
        raise TimeoutError(
            f"ddp_train: {' '.join(command)} did not finish within {timeout} s"
        ) from None
    return Finished(tuple(command), proc.returncode, stdout, stderr)


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


def main(argv=None) -> int:
    """ddp_train's program with `--crash-rank R --crash-after-step K`."""
    p = argparse.ArgumentParser(
        prog=f"python -m {HARNESS}",
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
    try:
        return ddp_train.main(rest, after_step=after_step)
    except RuntimeError:
        # Let torchrun see the rank that died first (FIRST_FAILURE_GRACE_S).
        if "TORCHELASTIC_RUN_ID" in os.environ:
            time.sleep(FIRST_FAILURE_GRACE_S)
        raise


if __name__ == "__main__":
    from torch.distributed.elastic.multiprocessing.errors import record

    sys.exit(record(main)())
