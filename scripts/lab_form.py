"""Store notebooks in the form JupyterLab writes them, so that a reader who
opens and saves a chapter in JupyterLab (`make lab`) finds its file unchanged.

`jupyter nbconvert --execute` (make notebooks) and JupyterLab write the same
JSON layout (nbformat's: sorted keys, one-space indent, UTF-8), but three
things differ, measured by saving chapters 2, 6, 8 and 12 in JupyterLab 4.6:

- a code cell whose output is hidden (`jupyter.outputs_hidden`, the
  solutions) gets `"collapsed": true` in its metadata (JupyterLab keeps the
  old key in step with the new one);
- numbers in the widget state are JavaScript numbers: a float with an
  integer value, `0.0` or `150.0`, is written `0` or `150`;
- the kernel's name in `metadata.kernelspec.display_name` is the one of the
  kernel JupyterLab started, "Python 3 (ipykernel)".

It also holds what `make lab`'s JupyterLab runs when it saves a notebook
(scripts/lab/jupyter_lab_config.py): the widget state that the outputs
still show is kept (`keep_widget_state`), so that the steppers and
self-checks survive a reader's run and save, and an unchanged notebook saves
unchanged; and the solution cells are hidden again (`keep_solutions_hidden`),
as JupyterLab shows a cell's output once it runs.

    python scripts/lab_form.py notebooks/*.ipynb          rewrite in place
    python scripts/lab_form.py --check notebooks/*.ipynb  list those not so

`make notebooks` runs it after executing;
`tests/conventions/test_notebooks.py` checks every stored notebook is in
this form, and `tests/browser/test_jupyterlab.py` that JupyterLab, saving,
agrees.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

KERNEL_DISPLAY_NAME = "Python 3 (ipykernel)"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
_MODEL_REF = re.compile(r"IPY_MODEL_([0-9a-f]+)")


def _javascript_numbers(value):
    """`value` with every integral float as an int, as JSON.stringify writes
    a JavaScript number."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e21:
        return int(value)
    if isinstance(value, dict):
        return {k: _javascript_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_javascript_numbers(v) for v in value]
    return value


def lab_form(nb: dict) -> dict:
    """The notebook `nb` (parsed JSON) as JupyterLab would save it."""
    for cell in nb["cells"]:
        meta = cell.get("metadata", {})
        if cell["cell_type"] == "code" and meta.get("jupyter", {}).get(
            "outputs_hidden"
        ):
            meta["collapsed"] = True
    keep_widget_state(nb, None)  # no model that no output shows
    meta = nb.get("metadata", {})
    if "widgets" in meta:
        meta["widgets"] = _javascript_numbers(meta["widgets"])
    if "kernelspec" in meta:
        meta["kernelspec"]["display_name"] = KERNEL_DISPLAY_NAME
    return nb


def keep_solutions_hidden(nb: dict) -> dict:
    """`nb` with every solution cell (tagged `solution`) hidden again, source
    and output, as stored: JupyterLab drops `outputs_hidden` (and the old
    `collapsed`) from a cell it runs, so after Run All a save would store
    the solutions open for the next reader of the file.  `make lab`'s save
    hook runs it."""
    for cell in nb.get("cells", []):
        meta = cell.get("metadata", {})
        if cell.get("cell_type") == "code" and "solution" in meta.get("tags", []):
            meta["jupyter"] = {
                **meta.get("jupyter", {}),
                "source_hidden": True,
                "outputs_hidden": True,
            }
            meta["collapsed"] = True
    return nb


def _widget_block(nb: dict) -> dict:
    return nb.get("metadata", {}).get("widgets", {}).get(WIDGET_STATE, {})


def keep_widget_state(nb: dict, stored: dict | None) -> dict:
    """`nb` (about to be saved) with the state of exactly the widgets its
    outputs show: each widget view's model and the models it refers to
    (`IPY_MODEL_...`), taken from `nb`'s own state or else from the
    `stored` file's.

    JupyterLab's widget manager either saves no state (its default: the
    outputs of a reader's run then name models the file does not hold, and
    at the next open every self-check says "model not found") or, with
    `saveState`, only the state of the widgets live in the kernel (saving at
    open, before anything ran, would drop all the stored widgets).  With
    `saveState` on and this hook, both cases keep what the page shows, and
    models no output shows any more are dropped.
    """
    ours = dict(_widget_block(nb).get("state", {}))
    theirs = _widget_block(stored or {}).get("state", {})
    wanted = [
        out["data"][WIDGET_VIEW]["model_id"]
        for cell in nb.get("cells", [])
        for out in cell.get("outputs", [])
        if WIDGET_VIEW in out.get("data", {})
    ]
    state: dict = {}
    while wanted:
        model = wanted.pop()
        entry = ours.get(model, theirs.get(model))
        if model in state or entry is None:
            continue
        state[model] = entry
        wanted += _MODEL_REF.findall(json.dumps(entry))
    block = _widget_block(nb) or _widget_block(stored or {})
    if not state and not block:
        return nb
    meta = nb.setdefault("metadata", {})
    meta["widgets"] = {
        WIDGET_STATE: {
            "state": state,
            "version_major": block.get("version_major", 2),
            "version_minor": block.get("version_minor", 0),
        }
    }
    return nb


def dumps(nb: dict) -> str:
    """nbformat's layout, which JupyterLab's server writes too."""
    return json.dumps(nb, sort_keys=True, indent=1, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="+", type=Path)
    parser.add_argument(
        "--check", action="store_true", help="only list the notebooks not so"
    )
    args = parser.parse_args(argv)
    differ = []
    for path in args.notebooks:
        text = path.read_text(encoding="utf-8")
        wanted = dumps(lab_form(json.loads(text)))
        if wanted != text:
            differ.append(path)
            if not args.check:
                path.write_text(wanted, encoding="utf-8")
    for path in differ:
        print(f"{path}: {'not in' if args.check else 'rewritten in'} lab form")
    return 1 if args.check and differ else 0


if __name__ == "__main__":
    sys.exit(main())
