"""What machine a benchmark ran on: shared by the benchmark scripts and report.py.

`machine_info()` returns a JSON-ready dict: CPU model and core count (from
/proc/cpuinfo and os), memory (from /proc/meminfo), OS, Python, NumPy and
the BLAS it was built with, the number of threads that BLAS uses right now,
PyTorch's version, BLAS and thread count (if torch is installed), the load
average and the date.  Nothing here imports the book's package.

Not a benchmark itself; `python benchmarks/machine_info.py` prints the dict.
"""

from __future__ import annotations

import ctypes
import datetime
import json
import os
import platform
import re
from pathlib import Path


def _cpuinfo() -> dict:
    model, physical = None, set()
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return {"cpu_model": platform.processor() or platform.machine()}
    for block in text.split("\n\n"):
        fields = dict(
            line.split(":", 1) for line in block.splitlines() if ":" in line
        )
        fields = {k.strip(): v.strip() for k, v in fields.items()}
        model = model or fields.get("model name")
        if "physical id" in fields and "core id" in fields:
            physical.add((fields["physical id"], fields["core id"]))
    return {
        "cpu_model": model or platform.machine(),
        "physical_cores": len(physical) or None,
    }


def _memory_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return None


def openblas_threads() -> int | None:
    """Threads NumPy's OpenBLAS will use, asked from the loaded library itself
    (what threadpoolctl does), or None if NumPy is not loaded or not on
    OpenBLAS."""
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return None
    paths = sorted(
        {
            line.split()[-1]
            for line in maps.splitlines()
            if "openblas" in line.lower() and line.split()[-1].startswith("/")
        }
    )
    for path in paths:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for symbol in (
            "scipy_openblas_get_num_threads64_",
            "openblas_get_num_threads64_",
            "openblas_get_num_threads",
        ):
            fn = getattr(lib, symbol, None)
            if fn is not None:
                fn.restype = ctypes.c_int
                return int(fn())
    return None


def _openblas_kernel() -> str | None:
    """The architecture of the kernel OpenBLAS runs on, as threadpoolctl
    reads it from the loaded library (e.g. SkylakeX, Haswell)."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return None
    for module in threadpool_info():
        if module.get("internal_api") == "openblas":
            return module.get("architecture")
    return None


def _numpy_info() -> dict:
    try:
        import numpy as np
    except ImportError:
        return {}
    blas = {}
    try:
        deps = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        blas = {"name": deps.get("name"), "version": deps.get("version")}
    except Exception:  # older NumPy: no dict mode
        pass
    # The kernel OpenBLAS chose for this CPU when it loaded (threadpoolctl);
    # show_config names only the build's baseline target, whatever the CPU.
    kernel = _openblas_kernel()
    if kernel:
        blas["kernel"] = kernel
    return {
        "numpy": np.__version__,
        "numpy_blas": blas,
        "numpy_blas_threads": openblas_threads(),
    }


def _torch_info() -> dict:
    try:
        import torch
    except ImportError:
        return {}
    config = torch.__config__.show()
    blas = re.search(r"BLAS_INFO=(\w+)", config)
    return {
        "torch": torch.__version__,
        "torch_blas": blas.group(1) if blas else None,
        "torch_threads": torch.get_num_threads(),
    }


def machine_info() -> dict:
    """The machine and software, as a flat JSON-ready dict (threads as of this
    call)."""
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        load = None
    return {
        **_cpuinfo(),
        "logical_cpus": os.cpu_count(),
        "memory_gib": _memory_gib(),
        "os": f"{platform.system()} {platform.release()}",
        "machine": platform.machine(),
        "python": platform.python_version(),
        **_numpy_info(),
        **_torch_info(),
        "load_average": load,
        "date": datetime.datetime.now(datetime.UTC).strftime(
            "%Y-%m-%d %H:%M UTC"
        ),
    }


if __name__ == "__main__":
    print(json.dumps(machine_info(), indent=2))
