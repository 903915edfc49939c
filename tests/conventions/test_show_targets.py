"""Every function a chapter shows with `show_source` (or behind a click, with
`reveal_source`) exists and is public: renaming it must fail here, not
silently change a chapter.

Each notebook's import statements run in a fresh namespace; then each
`show_source(X)` or `reveal_source(X)` target X is evaluated there.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

NOTEBOOKS = sorted(
    (Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb")
)


def _code(cell) -> str:
    # IPython magics (%pip ...) are not Python: `pass` in their place
    return "\n".join(
        line[: len(line) - len(line.lstrip())] + "pass"
        if line.lstrip().startswith(("%", "!"))
        else line
        for line in "".join(cell["source"]).splitlines()
    )


def _imports_and_targets(path: Path):
    imports, targets = [], []
    for cell in json.loads(path.read_text())["cells"]:
        if cell["cell_type"] != "code":
            continue
        try:
            tree = ast.parse(_code(cell))
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                imports.append(ast.unparse(node))
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ("show_source", "reveal_source")
                and node.args
            ):
                targets.append(ast.unparse(node.args[0]))
    return imports, targets


CASES = [
    (path, target)
    for path in NOTEBOOKS
    for target in dict.fromkeys(_imports_and_targets(path)[1])
]


def test_the_notebooks_show_source():
    assert len(CASES) > 40


@pytest.mark.parametrize(
    "path, target", CASES, ids=[f"{p.stem}:{t}" for p, t in CASES]
)
def test_show_source_target_exists_and_is_public(path, target):
    namespace: dict = {}
    for statement in _imports_and_targets(path)[0]:
        if "backprop_lessons" in statement or statement.startswith("import "):
            exec(statement, namespace)
    found = eval(target, namespace)
    assert callable(found), f"{path.name}: {target} is not a function"
    private = [part for part in target.split(".") if part.startswith("_")]
    private = [
        p for p in private if not (p.startswith("__") and p.endswith("__"))
    ]
    assert not private, f"{path.name} shows private {target}"
