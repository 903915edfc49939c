"""Build the readers' runtime: a Python environment with what a Colab reader has.

    python scripts/reader_runtime.py ENV

builds ENV (unless it holds a build from the same inputs), then installs the
package into it the way a Colab reader gets it: by running a chapter's setup
cell in a kernel of ENV, with BACKPROP_LESSONS_SOURCE naming a copy of this
checkout.

`make test` executes every notebook once, in this runtime (ARCHITECTURE.md,
"How the notebooks are checked"), so that what differs on Colab is what the
one run meets: Colab's preinstalled versions, the package installed by the
notebooks' own setup cell, and nothing but the package's declared
dependencies.  ENV gets:

- Colab's pip and setuptools;
- the packages of Colab's preinstalled set that the package and the chapters
  use (`tests/colab/colab_preinstalled.txt`), installed by pip with every
  package they need at the version of Colab's published manifest
  (`tests/colab/colab_pip_freeze.txt`, given to pip as constraints; one
  that Colab lacks at requirements.txt's pin), so the runtime is the same
  on every run;
- PyTorch and the packages it needs, taken from `.venv` (the interpreter
  running this script) through a `.pth` file that names a folder of links to
  exactly their files: a multi-GB download avoided, and nothing else of
  `.venv` visible (a `.pth` to `.venv`'s whole site-packages would show every
  pin of requirements.txt, and hid a missing dependency: the Pygments style of
  the book's theme, `accessible-pygments`, which the package does not
  declare);
- a Jupyter kernel named `backprop-reader` (in ENV/share/jupyter: put it on
  JUPYTER_PATH);
- the package, installed anew on every run by the setup cell of the first
  chapter (every chapter's is the same: tests/test_notebooks.py), which
  `%pip install`s it from BACKPROP_LESSONS_SOURCE, here a copy of this
  checkout, with `PIP_CONSTRAINT` set to ENV/constraints.txt so that any
  declared dependency Colab lacked would come at a fixed version too.  The
  other chapters' setup cells then find it, as on a Colab runtime where an
  earlier chapter ran.

ENV/.built records a digest of the inputs (this script, the two lists, the
package's pyproject.toml, the interpreter); a run with the same inputs
leaves ENV as it is.
"""

from __future__ import annotations

import hashlib
import importlib.metadata as metadata
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import venv
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
COLAB = ROOT / "tests" / "colab"
PREINSTALLED = COLAB / "colab_preinstalled.txt"
FREEZE = COLAB / "colab_pip_freeze.txt"
REQUIREMENTS = ROOT / "requirements.txt"
COMPILE = ROOT / "scripts" / "compile_site.py"
KERNEL = "backprop-reader"
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
SETUP = "# Setup: the book's package"  # the first line of every setup cell
#: taken from the interpreter running this script instead of pip
FROM_VENV = ("torch",)


def canonical_name(text: str) -> str:
    return re.sub(r"[-_.]+", "-", text).lower()


def requirement_lines(path: Path) -> list[str]:
    """The lines of a requirements file, comments and blanks dropped."""
    lines = (
        line.split("#", 1)[0].strip() for line in path.read_text().splitlines()
    )
    return [line for line in lines if line]


def pins(path: Path) -> dict[str, str]:
    """name -> `name==version` line of a pin file."""
    return {
        canonical_name(Requirement(line).name): line
        for line in requirement_lines(path)
    }


def _closure(names) -> dict[str, metadata.Distribution]:
    """The installed distributions of `names` and of everything they need."""
    found: dict[str, metadata.Distribution] = {}
    todo = list(names)
    while todo:
        dist = metadata.distribution(todo.pop())
        key = canonical_name(dist.metadata["Name"])
        if key in found:
            continue
        found[key] = dist
        for text in dist.requires or []:
            req = Requirement(text)
            if req.marker and not req.marker.evaluate({"extra": ""}):
                continue
            todo.append(req.name)
    return found


def _purelib(env: Path) -> Path:
    python = env / "bin" / "python"
    code = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    return Path(subprocess.check_output([python, "-c", code], text=True).strip())


def link_from_venv(env: Path, names) -> list[str]:
    """Make the distributions `names`, and everything they need, importable
    in the venv `env` from this interpreter's environment: a folder of links
    to exactly their files (code and .dist-info), named by a `.pth` file.
    Those `env` has already (pip, setuptools) stay its own.  Their
    `name==version`s."""
    purelib = _purelib(env)
    own = {
        canonical_name(d.metadata["Name"])
        for d in metadata.distributions(path=[str(purelib)])
    }
    here = Path(sysconfig.get_paths()["purelib"])
    folder = env / "from-venv"
    folder.mkdir()
    linked = []
    for key, dist in sorted(_closure(names).items()):
        if key in own:
            continue
        for top in sorted({Path(f).parts[0] for f in dist.files or ()}):
            if top.endswith(".pth") or top in ("..", "__pycache__"):
                continue
            if (here / top).exists() and not (folder / top).exists():
                (folder / top).symlink_to(here / top)
        linked.append(f"{dist.metadata['Name']}=={dist.version}")
    (purelib / "from-venv.pth").write_text(f"{folder}\n")
    return linked


def _digest() -> str:
    h = hashlib.sha256()
    for path in (Path(__file__), COMPILE, PREINSTALLED, FREEZE, REQUIREMENTS):
        h.update(path.read_bytes())
    h.update(sys.version.encode())
    h.update(sys.prefix.encode())
    return h.hexdigest()


def build(env: Path) -> None:
    stamp = env / ".built"
    digest = _digest()
    if stamp.exists() and stamp.read_text() == digest:
        return
    shutil.rmtree(env, ignore_errors=True)
    venv.EnvBuilder(with_pip=False).create(env)
    python = env / "bin" / "python"
    colab = pins(FREEZE)
    # PyTorch and what it needs, from this interpreter's environment
    linked = link_from_venv(env, FROM_VENV)
    # Colab's versions, and requirements.txt's pins for what Colab lacks
    constraints = list(colab.values()) + [
        pin for name, pin in pins(REQUIREMENTS).items() if name not in colab
    ]
    (env / "constraints.txt").write_text("\n".join(sorted(constraints)) + "\n")
    # Colab's pip and setuptools first, put there by this interpreter's pip
    # (ensurepip's, replaced at once, cost 3 CPU-seconds): Colab's pip is
    # the one its readers' setup cells run, and faster than the venv's own
    # (17 CPU-seconds for what follows, not 26)
    subprocess.run(
        [
            sys.executable, "-m", "pip", "--python", python, "install",
            "--quiet", "--disable-pip-version-check", "--no-compile",
            "-c", env / "constraints.txt", "pip", "setuptools",
        ],
        check=True,
    )  # fmt: skip
    subprocess.run(
        [
            python, "-m", "pip", "install", "--quiet",
            "--disable-pip-version-check", "--no-compile",
            "-c", env / "constraints.txt", *requirement_lines(PREINSTALLED),
        ],
        check=True,
    )  # fmt: skip
    # compiled here, once, not by the kernels as they import it
    subprocess.run([sys.executable, COMPILE, env], check=True)
    kernel = env / "share" / "jupyter" / "kernels" / KERNEL
    kernel.mkdir(parents=True)
    (kernel / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [
                    str(python),
                    "-m",
                    "ipykernel_launcher",
                    "-f",
                    "{connection_file}",
                ],
                "display_name": "Python 3 (the readers' runtime)",
                "language": "python",
                "env": {
                    "PIP_CONSTRAINT": str(env / "constraints.txt"),
                    # debugpy's note, at every start of ipykernel 6 on
                    # Python 3.11, that frozen modules hide breakpoints
                    "PYDEVD_DISABLE_FILE_VALIDATION": "1",
                },
            }
        )
    )
    (env / "from-venv.txt").write_text("\n".join(linked) + "\n")
    stamp.write_text(digest)


def install_package(env: Path) -> Path:
    """Install the package into `env` by running the setup cell of the first
    chapter in a kernel of `env`; where it was installed."""
    from jupyter_client.manager import KernelManager

    python = env / "bin" / "python"
    subprocess.run(
        [
            python,
            "-m",
            "pip",
            "uninstall",
            "--quiet",
            "--yes",
            "backprop-lessons",
        ],
        check=True,
        capture_output=True,
    )
    notebook = json.loads(NOTEBOOKS[0].read_text(encoding="utf-8"))
    setup = next(c for c in notebook["cells"] if c["cell_type"] == "code")
    setup = "".join(setup["source"])
    assert setup.startswith(SETUP), f"{NOTEBOOKS[0].name}: no setup cell first"
    with tempfile.TemporaryDirectory(prefix="rr-") as tmp:
        source = Path(tmp) / "source"
        source.mkdir()
        for name in ("pyproject.toml", "README.md", "LICENSE"):
            shutil.copy(ROOT / name, source / name)
        shutil.copytree(
            ROOT / "src",
            source / "src",
            ignore=shutil.ignore_patterns("*.egg-info", "__pycache__"),
        )
        os.environ["JUPYTER_PATH"] = str(env / "share" / "jupyter")
        manager = KernelManager(
            kernel_name=KERNEL, transport="ipc", ip=str(Path(tmp) / "k")
        )
        manager.start_kernel(
            env={**os.environ, "BACKPROP_LESSONS_SOURCE": str(source)}, cwd=tmp
        )
        client = manager.client()
        client.start_channels()
        try:
            client.wait_for_ready(timeout=300)
            reply = client.execute_interactive(
                setup + "\nprint(backprop_lessons.__file__)",
                timeout=600,
                output_hook=_collect(printed := []),
            )
        finally:
            client.stop_channels()
            manager.shutdown_kernel(now=True)
    text = "".join(printed)
    if reply["content"]["status"] != "ok":
        sys.exit(f"the setup cell failed in {env}:\n{text}")
    location = Path(text.strip().splitlines()[-1])
    if env not in location.parents:
        sys.exit(
            f"the setup cell did not install the package into {env}:\n{text}"
        )
    return location.parent


def _collect(printed: list[str]):
    """An output hook that keeps what a cell printed, tracebacks included."""

    def hook(message) -> None:
        content = message["content"]
        if message["msg_type"] == "stream":
            printed.append(content["text"])
        elif message["msg_type"] == "error":
            printed.append("\n".join(content["traceback"]))

    return hook


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__.split("\n\n")[1])
    runtime = Path(sys.argv[1]).resolve()
    build(runtime)
    where = install_package(runtime)
    print(f"reader runtime: the setup cell installed backprop_lessons at {where}")
