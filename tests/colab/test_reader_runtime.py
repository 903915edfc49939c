"""The readers' runtime, in which `make test` runs every notebook once
(scripts/reader_runtime.py builds it; ARCHITECTURE.md says why): what a
Colab reader has, and nothing more.

- The package in it was installed by a chapter's setup cell, from this
  checkout's copy, as a regular install (not an editable one pointing back
  at the checkout);
- the packages Colab preinstalls are at the versions of Colab's manifest;
- what Colab does not have stays missing: the Pygments styles of the book's
  theme (accessible-pygments), which the package once needed unawares;
  PyTorch comes from .venv, and only it and what it needs.

`make test` builds the runtime before this run and names it in
READER_RUNTIME (default: .venv/reader-runtime).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RUNTIME = Path(
    os.environ.get("READER_RUNTIME", ROOT / ".venv" / "reader-runtime")
)
_spec = importlib.util.spec_from_file_location(
    "reader_runtime", ROOT / "scripts" / "reader_runtime.py"
)
reader_runtime = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(reader_runtime)

PROBE = """
import importlib.metadata as m, importlib.util as u, json, sys
import backprop_lessons, torch
dist = m.distribution("backprop-lessons")
names = NAMES
print(json.dumps({
    "package": backprop_lessons.__file__,
    "version": dist.version,
    "direct_url": json.loads(dist.read_text("direct_url.json") or "{}"),
    "versions": {n: m.version(n) for n in names},
    "torch": [torch.__version__, torch.__file__],
    "a11y_pygments": u.find_spec("a11y_pygments") is not None,
    "prefix": sys.prefix,
}))
"""


@pytest.fixture(scope="module")
def runtime() -> dict:
    python = RUNTIME / "bin" / "python"
    if not python.exists():
        pytest.fail(f"no readers' runtime at {RUNTIME}: `make reader-runtime`")
    names = reader_runtime.requirement_lines(reader_runtime.PREINSTALLED)
    done = subprocess.run(
        [python, "-c", PROBE.replace("NAMES", repr(names))],
        capture_output=True,
        text=True,
        cwd="/",
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_setup_cell_installed_the_package(runtime):
    assert Path(runtime["package"]).is_relative_to(RUNTIME)
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert runtime["version"] == pyproject["project"]["version"]
    # installed from a copy of the checkout, not linked back to it
    url = runtime["direct_url"]
    assert url["url"].startswith("file://") and str(ROOT) not in url["url"]
    assert not url.get("dir_info", {}).get("editable", False)


def test_colabs_packages_at_colabs_versions(runtime):
    freeze = reader_runtime.pins(reader_runtime.FREEZE)
    for name, version in runtime["versions"].items():
        pin = freeze[reader_runtime.canonical_name(name)]
        assert pin.split("==")[1] == version, name


def test_what_colab_lacks_stays_missing(runtime):
    assert not runtime["a11y_pygments"]
    version, location = runtime["torch"]
    assert version.startswith("2.13.0")
    assert Path(location).is_relative_to(RUNTIME / "from-venv")
