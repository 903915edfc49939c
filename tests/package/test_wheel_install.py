"""The package as a reader installs it: the wheel, built from this checkout,
installed with its dependencies (from PyPI, through pip's cache) into an
empty virtual environment, imports every engine and the drawing and widget
modules.  `make package` runs it (its own lane of `make test`); the other
suites use the pinned environment, where a missing dependency goes unseen.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

pytestmark = pytest.mark.package

ROOT = Path(__file__).resolve().parents[2]
MODULES = [
    "backprop_lessons.scalar",
    "backprop_lessons.scalar_nn",
    "backprop_lessons.forward_mode",
    "backprop_lessons.tensor",
    "backprop_lessons.mlp3",
    "backprop_lessons.deep_mlp",
    "backprop_lessons.microgpt",
    "backprop_lessons.gpt",
    "backprop_lessons.data",
    "backprop_lessons.viz",
    "backprop_lessons.widgets",
    "backprop_lessons.show",
    "backprop_lessons.grade",  # its extra, nbclient, loads when it runs
]


def _run(*command, cwd=None) -> str:
    # nothing of this checkout on the path: only the installed copy counts
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [str(c) for c in command],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
    )
    assert done.returncode == 0, (
        f"{' '.join(map(str, command))} failed:\n{done.stdout}\n{done.stderr}"
    )
    return done.stdout


def test_the_wheel_installs_with_its_dependencies_and_imports(tmp_path):
    # a copy of what the wheel is built from (building writes *.egg-info and
    # build/ next to the code)
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(
        ROOT / "src",
        source / "src",
        ignore=shutil.ignore_patterns("*.egg-info", "__pycache__"),
    )
    wheels = tmp_path / "wheels"
    # the build backend (setuptools) from this environment: no download
    _run(
        sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
        "--no-build-isolation", "--disable-pip-version-check",
        "-w", wheels, source,
    )  # fmt: skip
    (wheel,) = wheels.glob("backprop_lessons-*.whl")
    env = tmp_path / "env"
    venv.EnvBuilder(with_pip=True).create(env)
    python = env / "bin" / "python"
    _run(
        python, "-m", "pip", "install", "--quiet",
        "--disable-pip-version-check", wheel,
    )  # fmt: skip
    imports = "; ".join(f"import {m}" for m in MODULES)
    # outside the checkout, so that only the installed copy can be found
    out = _run(
        python, "-c",
        f"{imports}; import sys; "
        "print('torch' in sys.modules, backprop_lessons.__file__)",
        cwd=tmp_path,
    )  # fmt: skip
    torch_loaded, location = out.split()
    assert torch_loaded == "False"  # the engines never import torch
    assert location.startswith(str(env))
