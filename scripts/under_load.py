"""Run a command several times while CPU-bound processes keep every core busy.

    python scripts/under_load.py [--burners N] [--repeat R] -- COMMAND ...

`make nbval-load` uses it to show that the chapters' timing-based
conclusions survive a loaded machine: it starts N busy-looping Python
processes (default: one per core), runs COMMAND R times in a row (default
3; it stops at the first failure), and always stops the busy processes
again - on success, on failure, on Ctrl-C or SIGTERM.  A busy process also
exits by itself once this script is gone, so none can outlive it.
Prints the wall time of each run; exits with COMMAND's status.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time

# Spin until the parent (this script) goes away: checking the parent id
# between bursts of work means an orphaned burner stops within a second.
BURNER = """
import os
parent = os.getppid()
while os.getppid() == parent:
    sum(i * i for i in range(200_000))
"""


def start_burners(n: int) -> list[subprocess.Popen]:
    """`n` busy-looping Python processes."""
    return [subprocess.Popen([sys.executable, "-c", BURNER]) for _ in range(n)]


def stop_burners(burners: list[subprocess.Popen]) -> None:
    """Terminate, then kill what is left; wait for all of them."""
    for p in burners:
        if p.poll() is None:
            p.terminate()
    for p in burners:
        try:
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--burners",
        type=int,
        default=os.cpu_count() or 1,
        help="busy processes to start (default: one per core)",
    )
    parser.add_argument(
        "--repeat", type=int, default=3, help="runs of the command (default: 3)"
    )
    parser.add_argument(
        "command", nargs=argparse.REMAINDER, help="the command, after --"
    )
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given (put it after --)")
    if args.burners < 1 or args.repeat < 1:
        parser.error("--burners and --repeat must be at least 1")

    # Turn SIGTERM into an exception, so that `finally` stops the burners.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    burners = start_burners(args.burners)
    status = 0
    try:
        for run in range(1, args.repeat + 1):
            start = time.perf_counter()
            status = subprocess.call(command)
            seconds = time.perf_counter() - start
            print(
                f"under_load: run {run} of {args.repeat} with {args.burners} "
                f"busy processes: exit {status} after {seconds:.0f} s",
                flush=True,
            )
            if status != 0:
                break
    finally:
        stop_burners(burners)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
