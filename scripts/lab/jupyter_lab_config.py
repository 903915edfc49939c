"""JupyterLab's configuration for `make lab` (`jupyter lab --config=...`).

- Widget state is saved with the notebook (`overrides.json` beside this file
  turns on the widget manager's `saveState`), and a hook run before every
  save keeps the state of exactly the widgets the outputs show
  (`lab_form.keep_widget_state`): a reader who runs a chapter and saves it
  finds its steppers and self-checks working at the next open, and a
  chapter saved unchanged stays byte for byte as stored.
- anywidget's front end waits 60 seconds, not 2, for a widget's model to
  start.  After 2 seconds anywidget reports "[anywidget] Failed to
  initialize model" and never draws the widget. That happens when
  JupyterLab is still busy laying out a long chapter on a slow or loaded
  machine (it happened in CI); the book's pages have the same change
  (book/_ext/offline_assets.py).  A copy of the installed extension with
  that one number changed goes into the venv, and JupyterLab takes the
  extension from the first path that has it.
"""

import json
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # scripts/, for lab_form

import lab_form  # noqa: E402


def keep_widget_state(model, path, contents_manager, **kwargs):
    """FileContentsManager.pre_save_hook: see lab_form.keep_widget_state."""
    if model.get("type") != "notebook" or not isinstance(
        model.get("content"), dict
    ):
        return
    on_disk = Path(contents_manager.root_dir) / path
    try:
        stored = json.loads(on_disk.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        stored = None
    lab_form.keep_widget_state(model["content"], stored)


#: anywidget's time limit for a model to start, and ours (see the top)
INIT_TIMEOUT = "AbortSignal.timeout(2000)"
LAB_INIT_TIMEOUT = "AbortSignal.timeout(60000)"
LABEXTENSIONS = Path(sys.prefix) / "share" / "jupyter" / "labextensions"
PATIENT = Path(sys.prefix) / "share" / "backprop-lessons" / "labextensions"


def patient_anywidget() -> list[str]:
    """The folder holding the patched copy of anywidget's extension, or no
    folder (with a note) if its code no longer has the time limit."""
    source, target = LABEXTENSIONS / "anywidget", PATIENT / "anywidget"
    if not source.is_dir():
        return []
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(source, target)
    patched = 0
    for js in (target / "static").glob("*.js"):
        code = js.read_text(encoding="utf-8")
        if INIT_TIMEOUT in code:
            js.write_text(code.replace(INIT_TIMEOUT, LAB_INIT_TIMEOUT), "utf-8")
            patched += 1
    if not patched:
        print(
            f"make lab: anywidget's front end no longer holds {INIT_TIMEOUT}; "
            "it runs unchanged (scripts/lab/jupyter_lab_config.py)",
            file=sys.stderr,
        )
        shutil.rmtree(target)
        return []
    return [str(PATIENT)]


c = get_config()  # noqa: F821 (Jupyter's configuration loader defines it)
c.LabApp.extra_labextensions_path = patient_anywidget()
c.FileContentsManager.pre_save_hook = keep_widget_state
c.LabApp.app_settings_dir = str(HERE)  # overrides.json
