"""What `make chapter CH=...` works on: one chapter's notebook, and the tests
of the package modules it imports.

    python scripts/chapter.py notebook 06      notebooks/06_gpt_backward.ipynb
    python scripts/chapter.py tests 06         the test files, one per line

CH is the start of the notebook's name: "06", "6", "06_gpt" or "appendix".
The tests are found the way the repository lays them out (tests mirror the
package, ARCHITECTURE.md): a module `backprop_lessons.X` or
`backprop_lessons.pkg.X` that the notebook imports is tested by
`tests/test_X.py`, an exercises module by `tests/test_exercises_X.py` (or
`tests/test_exercises.py`, which tests every check); and every chapter's
conventions are in `tests/test_notebooks.py` and
`tests/test_live_workbench.py`, run for this notebook only.
"""

from __future__ import annotations

import ast
import importlib
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
TESTS = ROOT / "tests"


def notebook(ch: str) -> Path:
    """The one notebook whose name starts with `ch` (a bare number is padded:
    "6" is "06")."""
    prefix = ch.zfill(2) if ch.isdigit() else ch
    found = sorted(NOTEBOOKS.glob(f"{prefix}*.ipynb"))
    if len(found) != 1:
        names = ", ".join(p.stem for p in sorted(NOTEBOOKS.glob("*.ipynb")))
        raise SystemExit(
            f"make chapter: CH={ch!r} names {len(found)} notebooks; use the "
            f"start of one of: {names}"
        )
    return found[0]


def imported_modules(path: Path) -> set[str]:
    """Every `backprop_lessons...` module the notebook's code imports."""
    modules = set()
    for cell in json.loads(path.read_text())["cells"]:
        if cell["cell_type"] != "code":
            continue
        source = re.sub(
            r"^(\s*)[%!].*$", r"\1pass", "".join(cell["source"]), flags=re.M
        )
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ImportFrom) and node.module:
                base = node.module
                modules.add(base)
                modules |= {f"{base}.{a.name}" for a in node.names}
            elif isinstance(node, ast.Import):
                modules |= {a.name for a in node.names}
    return {m for m in modules if m.startswith("backprop_lessons")}


def _module_of(name: str) -> str | None:
    """`name` if it is a module of the package, else the module that defines
    the object it names (`backprop_lessons.Value` -> backprop_lessons.scalar)."""
    try:
        return importlib.import_module(name).__name__
    except ImportError:
        pass
    parent, _, attr = name.rpartition(".")
    try:
        obj = getattr(importlib.import_module(parent), attr)
    except (ImportError, AttributeError):
        return None
    return getattr(obj, "__module__", None) or parent


def tests(path: Path) -> list[Path]:
    found = set()
    for name in imported_modules(path):
        module = _module_of(name)
        parts = (module or "").split(".")[1:]
        if not parts:
            continue
        leaf, package = parts[-1], parts[0] if len(parts) > 1 else None
        candidates = [TESTS / f"test_{leaf}.py"]
        if package:
            candidates.append(TESTS / f"test_{package}_{leaf}.py")
            candidates.append(TESTS / f"test_{package}.py")
        if package == "exercises" or parts == ["exercises"]:
            candidates = [  # the checks, and the chapter topic's machinery
                TESTS / f"test_exercises_{leaf}.py",
                TESTS / "test_exercises.py",
                TESTS / f"test_{leaf}.py",
            ]
        found |= {c for c in candidates if c.exists()}
    return sorted(found)


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("notebook", "tests"):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    path = notebook(argv[1])
    if argv[0] == "notebook":
        print(path.relative_to(ROOT))
    else:
        print("\n".join(str(p.relative_to(ROOT)) for p in tests(path)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
