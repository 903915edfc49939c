"""The background launches of the multiprocess tests take turns.

Two launchers start programs in the background and let the tests in the
pytest process go on meanwhile: test_ddp_train's (five runs, 9 processes)
and chapter12_launch's trainer runs (three runs, 9 processes), which
outlive the module that starts them (their fixture is the session's).
Started over each other, the two sets put 18 interpreters with torch on
two cores at once, while the ranks of a collective must each get a core
within the runs' 30-second collective timeout; taking turns, at most 9
(when the sets were 15 and 20 processes, taking turns also made the
multiprocess tests 163 CPU-seconds instead of 171, 88 s instead of 92,
alone on this machine).

So a launcher calls `take_turn()` before it starts a set: it returns once
every process registered by an earlier set (`started`) has ended, or after
`limit` seconds, when the set starts anyway and the earlier set's own time
limit reports its hang.  Both launchers run in one pytest process (their
tests are one xdist group), so a module-level list is the whole registry.
"""

from __future__ import annotations

import contextlib
import subprocess
import threading
import time

_started: list[subprocess.Popen | threading.Thread] = []


def started(run: subprocess.Popen | threading.Thread) -> None:
    """Register a process (or a thread that runs one) of the current set."""
    _started.append(run)


def take_turn(limit: float) -> None:
    """Wait until every registered run has ended, at most `limit` seconds."""
    deadline = time.monotonic() + limit
    for run in _started:
        left = max(deadline - time.monotonic(), 0.0)
        if isinstance(run, threading.Thread):
            run.join(left)
        else:
            with contextlib.suppress(subprocess.TimeoutExpired):
                run.wait(timeout=left)
    _started[:] = [run for run in _started if _alive(run)]


def _alive(run: subprocess.Popen | threading.Thread) -> bool:
    if isinstance(run, threading.Thread):
        return run.is_alive()
    return run.poll() is None
