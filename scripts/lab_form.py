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

    python scripts/lab_form.py notebooks/*.ipynb          rewrite in place
    python scripts/lab_form.py --check notebooks/*.ipynb  list those not so

`make notebooks` runs it after executing; `tests/test_notebooks.py` checks
every stored notebook is in this form, and `tests/browser/test_jupyterlab.py`
that JupyterLab, saving, agrees.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

KERNEL_DISPLAY_NAME = "Python 3 (ipykernel)"


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
    meta = nb.get("metadata", {})
    if "widgets" in meta:
        meta["widgets"] = _javascript_numbers(meta["widgets"])
    if "kernelspec" in meta:
        meta["kernelspec"]["display_name"] = KERNEL_DISPLAY_NAME
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
