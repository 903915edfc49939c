"""Shared test configuration: the hypothesis profile `ci`, loaded by default,
`build_once`, for what one run builds once for all its xdist workers,
chapter 12's processes (`chapter12_launch`), shared by the test files of
the modules it exercises, and the tests' one launch of two ranks
(`two_ranks`).

`ci` has no deadline (shared CI machines are slow and noisy) and is
derandomized, so every run draws the same examples and a failure can be
reproduced exactly.  Select another profile with
`pytest --hypothesis-profile=NAME`.
"""

import gc
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from filelock import FileLock
from hypothesis import HealthCheck, settings

from chapter12_launch import (  # noqa: F401 (fixtures for every test file)
    alone_losses,
    chapter12_problem,
    chapter12_ranks,
    trainer_launcher,
    trainer_runs,
)
from two_ranks import rank_launch  # noqa: F401 (the tests' one launch of two)

settings.register_profile(
    "ci",
    deadline=None,
    derandomize=True,
    database=None,  # derandomized runs have nothing to replay
    max_examples=50,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
# Fresh random draws and more of them, e.g. before a release:
# `pytest --hypothesis-profile=thorough tests/test_scalar.py`.
settings.register_profile(
    "thorough",
    parent=settings.get_profile("ci"),
    derandomize=False,
    max_examples=1000,
)
settings.load_profile("ci")


@pytest.fixture(scope="session")
def build_once(tmp_path_factory) -> Callable[..., Path]:
    """`build_once("name", make)` -> a directory built by `make(directory)`
    once per run: the first xdist worker to ask builds it under a file lock
    in the workers' common base temp (each worker's own is inside it), the
    others wait for it.  Without xdist the run's base temp holds it.
    `build_once.lock("name")` is that lock, for later changes to the
    directory that must not overlap either."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base

    def lock(name: str) -> FileLock:
        return FileLock(shared / f"{name}.lock")

    def build(name: str, make: Callable[[Path], None]) -> Path:
        target = shared / name
        with lock(name):
            if not (target / ".built").exists():
                shutil.rmtree(target, ignore_errors=True)
                make(target)
                (target / ".built").touch()
        return target

    build.lock = lock
    return build


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """xdist groups (`--dist loadgroup`, make test): the tests that start
    processes run one at a time, on one worker (two side by side, a torchrun
    launch beside a group of run_workers, once broke a gloo mesh), and the
    JupyterLab tests share the one JupyterLab their module starts.

    First among the hooks: xdist reads the groups in its own hook (it adds
    "@group" to each grouped test's id), and a marker added after it is
    ignored.  Without `tryfirst` the groups were ignored: the tests that
    start processes ran on both workers at once (269 CPU-seconds instead
    of 163, and twice the risk of the broken mesh), and the JupyterLab
    tests could land on both workers, each of which then started a
    JupyterLab."""
    for item in items:
        if item.get_closest_marker("multiprocess"):
            item.add_marker(pytest.mark.xdist_group("multiprocess"))
        elif item.get_closest_marker("jupyterlab"):
            item.add_marker(pytest.mark.xdist_group("jupyterlab"))


def pytest_sessionfinish(session, exitstatus):
    """Collect the garbage now, while an xdist worker still counts as busy,
    and then set what is left aside.

    After a worker reports that it finished, pytest collects garbage five
    times over (to flush unraisable exceptions), and xdist's controller gives
    the worker 5 s before it sends it a SIGINT: on a loaded machine, with the
    large heaps the tests leave (torch, the scalar engines' graphs), the
    collections took longer, and the interrupt landed in hypothesis's
    garbage-collector callback (a "KeyboardInterrupt" warning at the end of
    the run).  Collected here, before the report, and frozen (gc.freeze: the
    collector skips what is left), pytest's collections cost nothing."""
    for _ in range(5):
        gc.collect()
    gc.freeze()
