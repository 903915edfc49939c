"""Every notebook runs as on Colab: alone, with the package installed by its own
setup cell.

Each notebook is copied alone into an empty directory and executed top to
bottom in a kernel whose Python sees the pinned requirements but *not*
`backprop_lessons`, with Colab's own older versions of the widget and
IPython stack (`colab_versions.txt`: ipywidgets 7.7, IPython 7.34, ...)
installed in front of them; `BACKPROP_LESSONS_SOURCE` points at this checkout, so
the setup cell must `%pip install` the package itself.  One throwaway
environment serves every notebook, in every xdist worker: the first worker
builds it under a file lock while the others wait for it.  The first
notebook to run installs the package into it and later ones find it
installed (each still runs with no repository files around it); setup
cells run one at a time under that lock, so two workers never install at
once.
"""

from __future__ import annotations

import json
import shutil
import site
import subprocess
import tempfile
import venv
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from traitlets.config import Config

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
KERNEL = "backprop-colab-check"
COLAB_VERSIONS = Path(__file__).with_name("colab_versions.txt")
SETUP = "# Setup: the book's package"  # the first line of every setup cell


@pytest.fixture(scope="session")
def colab_env(build_once) -> Path:
    """The run's one Colab-style venv, built by the first worker to ask."""
    return build_once("colab-env", _build_colab_env)


def _build_colab_env(env: Path) -> None:
    """A venv that reaches the requirements through a .pth file, not the
    package."""
    venv.EnvBuilder(with_pip=True).create(env)
    python = env / "bin" / "python"
    purelib = subprocess.check_output(
        [
            python,
            "-c",
            "import sysconfig; print(sysconfig.get_paths()['purelib'])",
        ],
        text=True,
    ).strip()
    # A plain path in a .pth file: the requirements' packages become importable,
    # but the .pth files inside that folder (the editable install of
    # backprop_lessons among them) are not processed.
    (Path(purelib) / "requirements.pth").write_text(
        "\n".join(site.getsitepackages()) + "\n"
    )
    # Colab's versions go into the env's own site-packages, which comes before
    # the .pth paths on sys.path; pip leaves the requirements' copies alone
    # ("outside environment") and takes missing dependencies from PyPI.
    subprocess.run(
        [
            python,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "-r",
            COLAB_VERSIONS,
        ],
        check=True,
    )
    pins = dict(
        line.split("==")
        for line in COLAB_VERSIONS.read_text().splitlines()
        if line and not line.startswith("#")
    )
    check = subprocess.run(
        [
            python,
            "-c",
            "import importlib.util as u, importlib.metadata as m, json; "
            "print(json.dumps([u.find_spec('backprop_lessons') is None, "
            f"{{n: m.version(n) for n in {sorted(pins)!r}}}]))",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(check.stdout) == [True, pins], check.stdout
    kernels = env / "share" / "jupyter" / "kernels" / KERNEL
    kernels.mkdir(parents=True)
    (kernels / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [
                    str(python),
                    "-m",
                    "ipykernel_launcher",
                    "-f",
                    "{connection_file}",
                ],
                "display_name": "Colab-style check",
                "language": "python",
            }
        )
    )


@pytest.fixture(scope="session")
def package_source(tmp_path_factory):
    """A copy of what pip needs to build the package: pip writes
    `*.egg-info` into the source it builds, never into the checkout."""
    source = tmp_path_factory.mktemp("package-source")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(
        ROOT / "src",
        source / "src",
        ignore=shutil.ignore_patterns("*.egg-info", "__pycache__"),
    )
    return source


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_alone(
    path, colab_env, build_once, package_source, tmp_path, monkeypatch
):
    shutil.copy(path, tmp_path / path.name)
    monkeypatch.setenv("JUPYTER_PATH", str(colab_env / "share" / "jupyter"))
    monkeypatch.setenv("BACKPROP_LESSONS_SOURCE", str(package_source))
    monkeypatch.setenv("PIP_DISABLE_PIP_VERSION_CHECK", "1")
    nb = nbformat.read(tmp_path / path.name, as_version=4)
    # The kernel talks over Unix sockets, not TCP ports: jupyter_client picks
    # a free port, then the kernel binds it, and in between another suite's
    # process (a torch.distributed worker) once took it ("Address already in
    # use": the kernel died before it started).  A short folder: a socket's
    # path has a length limit.
    sockets = Path(tempfile.mkdtemp(prefix="kernel-"))
    client = NotebookClient(
        nb,
        kernel_name=KERNEL,
        timeout=600,
        resources={"metadata": {"path": str(tmp_path)}},
        config=Config(
            {"KernelManager": {"transport": "ipc", "ip": str(sockets / "k")}}
        ),
    )
    # raises CellExecutionError, naming the cell, on any error
    try:
        with client.setup_kernel():
            for index, cell in enumerate(nb.cells):
                if cell.source.startswith(SETUP):
                    with build_once.lock("colab-env"):
                        client.execute_cell(cell, index)
                else:
                    client.execute_cell(cell, index)
    finally:
        shutil.rmtree(sockets, ignore_errors=True)
    spec = subprocess.run(
        [
            colab_env / "bin" / "python",
            "-c",
            "import backprop_lessons; print(backprop_lessons.__file__)",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert str(colab_env) in spec, (
        f"backprop_lessons was not installed into the Colab-style env: {spec}"
    )
