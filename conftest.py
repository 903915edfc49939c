"""pytest's set-up for the notebooks, which `make test` checks with nbval in
the same run as the tests (tests/conftest.py holds the tests' own).

- nbval's kernels talk over Unix sockets, not TCP ports.  jupyter_client
  picks a free port and the kernel binds it later; in between another
  process (a torch.distributed worker of a test beside it) once took it, and
  the kernel died before it started ("Address already in use").  A socket
  file in a folder of its own cannot be taken.
- Each notebook's cells stay together, in order, on one xdist worker: they
  form an xdist group (`--dist loadgroup`), named after the notebook.  A
  notebook that starts processes (chapters 8 and 12: `launch(`,
  `run_workers(`, `train_in_group(` in its code) is marked `multiprocess`
  and joins the tests that start processes in their group
  (tests/conftest.py): two launches side by side can break a gloo mesh, and
  did, in chapter 8's `--fsdp --accumulate 2` run beside
  test_ddp_train's (a rank aborted).
"""

from __future__ import annotations

import atexit
import functools
import json
import re
import shutil
import tempfile
from pathlib import Path

import pytest


def _ipc_kernels() -> None:
    """Make nbval start its kernels with the ipc transport."""
    try:
        from jupyter_client.manager import KernelManager
        from nbval import kernel
    except ImportError:  # nbval not installed: nothing to set up
        return

    def start_new_kernel(startup_timeout=60, kernel_name="python", **kwargs):
        # a short folder: a socket's path has a length limit (108 bytes)
        folder = Path(tempfile.mkdtemp(prefix="nbk-"))
        manager = KernelManager(
            kernel_name=kernel_name,
            kernel_spec_manager=kernel.NbvalKernelspecManager(),
            transport="ipc",
            ip=str(folder / "k"),
        )
        manager.start_kernel(**kwargs)
        client = manager.client()
        client.start_channels()
        try:
            client.wait_for_ready(timeout=startup_timeout)
        except RuntimeError:
            client.stop_channels()
            manager.shutdown_kernel()
            shutil.rmtree(folder, ignore_errors=True)
            raise
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        return manager, client

    kernel.start_new_kernel = start_new_kernel


def pytest_configure(config):
    if config.getoption("nbval", default=False) or config.getoption(
        "nbval_lax", default=False
    ):
        _ipc_kernels()


#: a call in a notebook's code that starts processes
STARTS_PROCESSES = re.compile(r"\b(launch|run_workers|train_in_group)\(")


@functools.cache
def starts_processes(notebook: Path) -> bool:
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    return any(
        STARTS_PROCESSES.search("".join(cell["source"]))
        for cell in cells
        if cell["cell_type"] == "code"
    )


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    for item in items:
        path = Path(str(item.fspath))
        if path.suffix != ".ipynb":
            continue
        if starts_processes(path):
            item.add_marker(pytest.mark.multiprocess)
            item.add_marker(pytest.mark.xdist_group("multiprocess"))
        else:
            item.add_marker(pytest.mark.xdist_group(path.stem))
