"""Fixes that `make lab` applies to two of JupyterLab's installed front-end
extensions (scripts/lab/jupyter_lab_config.py uses it; the browser tests
check what JupyterLab then serves).

Each extension is copied into the venv with its fixes applied, and
JupyterLab takes an extension from the first path that has it
(`LabApp.extra_labextensions_path`).  A fix is a pattern over the built
JavaScript: an upgrade that moves the code makes the copy unpatched, which
`make lab` reports and tests/browser/test_jupyterlab.py fails on.
"""

from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

#: (extension, pattern, its replacement, what it fixes)
PATCHES = [
    (
        "anywidget",
        re.escape("AbortSignal.timeout(2000)"),
        "AbortSignal.timeout(60000)",
        "a widget's model gets 60 s to start, not 2",
    ),
    (
        # The widget manager, with saveState on, marked the notebook modified
        # each time it registered a model, also the stored models it restores
        # about two seconds after a notebook opens (and, on a loaded machine,
        # after a save): a chapter opened and left alone asked to be saved.  A
        # model's registration edits nothing in the notebook: a run that
        # creates one changes its outputs, which marks it modified anyway.
        "@jupyter-widgets/jupyterlab-manager",
        r"register_model\((\w+),(\w+)\)\{super\.register_model\(\1,\2\),"
        r"this\.setDirty\(\)\}",
        r"register_model(\1,\2){super.register_model(\1,\2)}",
        "restoring a notebook's stored widgets leaves it unmodified",
    ),
]


def patched_extensions(prefix: str) -> list[str]:
    """The folder holding the patched copies of the extensions in PATCHES,
    made anew in the environment at `prefix` from its installed ones (one
    whose code no longer matches its pattern runs unchanged, with a note)."""
    installed = Path(prefix) / "share" / "jupyter" / "labextensions"
    patched_dir = Path(prefix) / "share" / "backprop-lessons" / "labextensions"
    shutil.rmtree(patched_dir, ignore_errors=True)
    for name, pattern, replacement, fixes in PATCHES:
        source, target = installed / name, patched_dir / name
        if not source.is_dir():
            continue
        shutil.copytree(source, target)
        patched = 0
        for js in (target / "static").glob("*.js"):
            code = js.read_text(encoding="utf-8")
            new, count = re.subn(pattern, replacement, code)
            if count:
                js.write_text(new, "utf-8")
                patched += count
        if not patched:
            print(
                f"make lab: {name}'s front end no longer matches {pattern!r}; "
                f"it runs unchanged, so not: {fixes} "
                "(scripts/lab/jupyter_lab_config.py)",
                file=sys.stderr,
            )
            shutil.rmtree(target)
    return [str(patched_dir)] if patched_dir.is_dir() else []
