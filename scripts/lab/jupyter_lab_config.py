"""JupyterLab's configuration for `make lab` (`jupyter lab --config=...`).

- Widget state is saved with the notebook (`overrides.json` beside this file
  turns on the widget manager's `saveState`), and a hook run before every
  save keeps the state of exactly the widgets the outputs show
  (`lab_form.keep_widget_state`): a reader who runs a chapter and saves it
  finds its steppers and self-checks working at the next open, and a
  chapter saved unchanged stays byte for byte as stored.  The same hook
  hides the solution cells again (`lab_form.keep_solutions_hidden`):
  JupyterLab shows a cell's output once it runs it.
- Two front-end extensions are copied into the venv with a fix each
  (`extension_fixes.py` beside this file).  The widget manager no longer
  marks a notebook modified when it restores the notebook's stored
  widgets, so a chapter opened and left alone, or saved, stays unmodified.
  anywidget's front end waits 60 seconds, not 2, for a widget's model to
  start: after 2 seconds it reports "[anywidget] Failed to initialize
  model" and never draws the widget, which happened when JupyterLab was
  still laying out a long chapter on a loaded machine (in CI); the book's
  pages have the same change (book/_ext/offline_assets.py).
"""

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]  # extension_fixes, lab_form

import extension_fixes  # noqa: E402
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
    lab_form.keep_solutions_hidden(model["content"])


c = get_config()  # noqa: F821 (Jupyter's configuration loader defines it)
c.LabApp.extra_labextensions_path = extension_fixes.patched_extensions(sys.prefix)
c.FileContentsManager.pre_save_hook = keep_widget_state
c.LabApp.app_settings_dir = str(HERE)  # overrides.json
