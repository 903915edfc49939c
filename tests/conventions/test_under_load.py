"""Tests of scripts/under_load.py, the driver of `make nbval-load`: it runs a
command under CPU load, repeats it, stops at the first failure, and never
leaves a busy process behind."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import psutil

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "under_load.py"

# Printed by the command: the ids of the driver's other children (the burners).
REPORT_BURNERS = (
    "import json, os, psutil; me = os.getpid(); "
    "print(json.dumps([p.pid for p in psutil.Process(os.getppid()).children() "
    "if p.pid != me]))"
)


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_runs_the_command_under_load_and_stops_every_burner():
    done = run(
        "--burners",
        "2",
        "--repeat",
        "2",
        "--",
        sys.executable,
        "-c",
        REPORT_BURNERS,
    )
    assert done.returncode == 0, done.stderr
    reports = [
        json.loads(line)
        for line in done.stdout.splitlines()
        if line.startswith("[")
    ]
    assert len(reports) == 2 and all(len(pids) == 2 for pids in reports)
    assert "run 2 of 2 with 2 busy processes: exit 0" in done.stdout
    for pid in reports[0]:
        assert (
            not psutil.pid_exists(pid)
            or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
        )


def test_stops_at_the_first_failure_and_returns_its_status():
    done = run(
        "--burners",
        "1",
        "--repeat",
        "3",
        "--",
        sys.executable,
        "-c",
        "raise SystemExit(3)",
    )
    assert done.returncode == 3
    assert "run 1 of 3 with 1 busy processes: exit 3" in done.stdout
    assert "run 2 of 3" not in done.stdout


def test_needs_a_command():
    done = run("--burners", "1")
    assert done.returncode == 2 and "no command given" in done.stderr
