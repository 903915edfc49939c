"""The package as a reader installs it: `pip install .` into an empty virtual
environment (by .venv's pip, `--python`), with nothing but what
pyproject.toml declares (from PyPI, through pip's cache).  PyTorch, an
optional extra, comes from `.venv` through a `.pth` file that names a folder
of links to exactly its files and its dependencies'
(scripts/reader_runtime.py builds it), not a multi-GB download, and nothing
else of `.venv` is visible: a `.pth` to `.venv`'s whole site-packages hid a
missing dependency once (show.py asked Pygments for a style that only the
book's theme brings).

In that environment, a probe imports every module of the package whose
extras are present (Hugging Face's are not: the modules that need them must
say so by failing on exactly them), renders `show_source`'s and
`reveal_source`'s highlighted HTML, and builds every self-check widget of
every chapter; the engines import without torch.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

pytestmark = pytest.mark.package

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location(
    "reader_runtime", ROOT / "scripts" / "reader_runtime.py"
)
reader_runtime = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(reader_runtime)

ENGINES = [
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
#: the top-level modules of the extras left out here (pip install .[hf])
ABSENT_EXTRAS = {"transformers", "safetensors"}

PROBE = """
import importlib, json, pkgutil, sys
import backprop_lessons
from backprop_lessons import exercises, scalar, show
from backprop_lessons.gpt import layers
from backprop_lessons.widgets import reveal_source, self_check

imported, needs_extra = [], {}
package = backprop_lessons.__name__
for module in pkgutil.walk_packages(backprop_lessons.__path__, package + "."):
    try:
        importlib.import_module(module.name)
        imported.append(module.name)
    except ModuleNotFoundError as error:
        if error.name.split(".")[0] not in ABSENT:
            raise
        needs_extra[module.name] = error.name

html = show.show_source(scalar.Value.backward)._repr_html_()
revealed = reveal_source(layers.layernorm_backward).source_html
checks = 0
for topic in sorted(m.name for m in pkgutil.iter_modules(exercises.__path__)):
    module = importlib.import_module(f"backprop_lessons.exercises.{topic}")
    table = getattr(module, "SELF_CHECKS", {})
    for key in table:
        widget = self_check(topic, key)
        assert repr(widget), (topic, key)
        checks += 1
print(json.dumps({"imported": imported, "needs_extra": needs_extra,
                  "html": html, "revealed": revealed, "self_checks": checks,
                  "location": backprop_lessons.__file__}))
"""


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


def test_pip_install_brings_what_the_package_needs(tmp_path):
    # a copy of what pip builds from (building writes *.egg-info and build/
    # next to the code)
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(
        ROOT / "src",
        source / "src",
        ignore=shutil.ignore_patterns("*.egg-info", "__pycache__"),
    )
    env = tmp_path / "env"
    venv.EnvBuilder().create(env)
    python = env / "bin" / "python"
    # this venv's pip, installing into env (env's own would take longer
    # to be installed and to resolve)
    _run(sys.executable, "-m", "pip", "--python", python, "install",
         "--quiet", "--no-compile", "--disable-pip-version-check",
         source)  # fmt: skip

    # the engines import without torch (outside the checkout, so that only
    # the installed copy can be found)
    imports = "; ".join(f"import {m}" for m in ENGINES)
    out = _run(
        python, "-c",
        f"{imports}; import sys; print('torch' in sys.modules)",
        cwd=tmp_path,
    )  # fmt: skip
    assert out.split() == ["False"]  # the engines never import torch

    # then torch, as the `torch` extra would bring it
    reader_runtime.link_from_venv(env, ["torch"])
    probe = PROBE.replace("ABSENT", repr(ABSENT_EXTRAS))
    found = json.loads(_run(python, "-c", probe, cwd=tmp_path))
    assert found["location"].startswith(str(env))
    assert "backprop_lessons.scale.ddp_train" in found["imported"]
    assert set(found["needs_extra"].values()) <= ABSENT_EXTRAS
    assert '<span style="color: #6730C5" class="k">for</span>' in found["html"]
    assert 'class="nf">layernorm_backward</span>' in found["revealed"]
    assert found["self_checks"] >= 2 * 13  # two or more per chapter
    # what the package does not declare stays missing here
    missing = _run(
        python, "-c",
        "import importlib.util as u; print(u.find_spec('a11y_pygments'))",
    )  # fmt: skip
    assert missing.strip() == "None"


def test_this_test_sees_a_missing_dependency(tmp_path):
    """The folder of links exposes torch and what torch needs, nothing more
    of .venv (whose accessible-pygments the package once needed unawares)."""
    env = tmp_path / "env"
    venv.EnvBuilder(with_pip=False).create(env)
    reader_runtime.link_from_venv(env, ["torch"])
    python = env / "bin" / "python"
    out = _run(
        python, "-c",
        "import importlib.util as u, json; print(json.dumps([u.find_spec(m) "
        "is not None for m in ('torch', 'sympy', 'a11y_pygments', 'pygments', "
        "'backprop_lessons')]))",
        cwd=tmp_path,
    )  # fmt: skip
    assert json.loads(out) == [True, True, False, False, False]
    assert sys.prefix not in out
