"""What `make chapter CH=...` works on: one chapter's notebook, and the tests
of the package modules it imports.

    python scripts/chapter.py notebook 06      notebooks/06_gpt_backward.ipynb
    python scripts/chapter.py tests 06         the test files, one per line

CH is the start of the notebook's name: "06", "6", "06_gpt" or "appendix".

The tests are found from the notebook's import statements, not from file
names that happen to match: each `import` and `from ... import` of the
package names modules (a name imported from a module is a name of the
module that defines it: `from backprop_lessons.gpt import init_params` uses
`backprop_lessons.gpt.model`), importing a module imports its packages too,
and every module's tests are in one file, `test_file(module)`:

    backprop_lessons.X            tests/test_X.py     (a module or a
                                                       subpackage)
    backprop_lessons.P.X          tests/test_X.py, or tests/test_P_X.py
                                  when another module or subpackage of
                                  the package is also named X
                                  (gpt.model, microgpt.model)

`tests/conventions/test_layout.py` holds every test file to this rule.  The
chapter's conventions (tests/conventions/test_notebooks.py,
test_live_workbench.py, test_show_targets.py) are run by the Makefile for
this notebook only.
"""

from __future__ import annotations

import ast
import collections
import importlib
import inspect
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
TESTS = ROOT / "tests"
PACKAGE = ROOT / "src" / "backprop_lessons"


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


def package_modules() -> list[str]:
    """Every module and subpackage of the package, dotted
    ("backprop_lessons.gpt", "backprop_lessons.gpt.model", ...)."""
    names = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names.append(".".join(parts))
    return names


def test_file(module: str, modules: list[str] | None = None) -> str:
    """The name of the file that holds `module`'s tests (see the module
    docstring); "" for the package itself."""
    modules = package_modules() if modules is None else modules
    parts = module.split(".")[1:]
    if not parts:
        return ""
    leaves = collections.Counter(m.split(".")[-1] for m in modules)
    if len(parts) == 1 or leaves[parts[-1]] == 1:
        return f"test_{parts[-1]}.py"
    return f"test_{parts[-2]}_{parts[-1]}.py"


def imported_names(path: Path) -> set[str]:
    """Every `backprop_lessons...` name the notebook's code imports: the
    modules of `import` statements, and `module.name` for each name of a
    `from module import name`."""
    names = set()
    for cell in json.loads(path.read_text())["cells"]:
        if cell["cell_type"] != "code":
            continue
        source = re.sub(
            r"^(\s*)[%!].*$", r"\1pass", "".join(cell["source"]), flags=re.M
        )
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ImportFrom) and node.module:
                names |= {f"{node.module}.{a.name}" for a in node.names}
            elif isinstance(node, ast.Import):
                names |= {a.name for a in node.names}
    return {n for n in names if n.split(".")[0] == "backprop_lessons"}


def module_of(name: str) -> str:
    """`name` if it is a module of the package, else the module that defines
    the object it names (`backprop_lessons.Value` -> backprop_lessons.scalar)."""
    try:
        return importlib.import_module(name).__name__
    except ImportError:
        pass
    parent, _, attr = name.rpartition(".")
    obj = getattr(importlib.import_module(parent), attr)
    defined = inspect.isclass(obj) or inspect.isroutine(obj)
    if defined and obj.__module__.split(".")[0] == "backprop_lessons":
        return obj.__module__
    return parent  # a constant (or another library's): where it came from


def imported_modules(path: Path) -> set[str]:
    """The package's modules the notebook imports, with their packages."""
    modules = set()
    for name in imported_names(path):
        parts = module_of(name).split(".")
        modules |= {".".join(parts[:k]) for k in range(2, len(parts) + 1)}
    return modules


def tests(path: Path) -> list[Path]:
    """The existing test files of the modules the notebook imports."""
    modules = package_modules()
    found = {TESTS / test_file(m, modules) for m in imported_modules(path)}
    return sorted(p for p in found if p.exists())


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
