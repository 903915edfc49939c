"""The maps of the repository cannot drift (issue 45): every subpackage's
`__init__` names each of its modules; every test file under tests/ holds
the tests of one module or subpackage, named by the rule `make chapter`
follows (scripts/chapter.py's `test_file`), and the tests of the
repository's conventions live in tests/conventions/; ARCHITECTURE.md names
every test file whose tests start processes (marked `multiprocess`).
"""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "backprop_lessons"
TESTS = ROOT / "tests"


def _chapter_script():
    spec = importlib.util.spec_from_file_location(
        "chapter_script", ROOT / "scripts" / "chapter.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


CHAPTER = _chapter_script()
MODULES = CHAPTER.package_modules()
SUBPACKAGES = sorted(p.parent for p in PACKAGE.glob("*/__init__.py"))


@pytest.mark.parametrize("package", SUBPACKAGES, ids=lambda p: p.name)
def test_every_subpackage_map_names_each_of_its_modules(package):
    doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text()))
    missing = [
        p.stem
        for p in sorted(package.glob("*.py"))
        if p.stem != "__init__" and not re.search(rf"\b{p.stem}\b", doc or "")
    ]
    assert not missing, (
        f"{package.name}/__init__.py's docstring does not name {missing}"
    )


def test_every_test_file_is_the_tests_of_one_module():
    """tests/test_X.py is `test_file(m)` of a module or subpackage m; a test
    of the repository as a whole goes in tests/conventions/."""
    names = {CHAPTER.test_file(m, MODULES) for m in MODULES}
    orphans = sorted(
        p.name for p in TESTS.glob("test_*.py") if p.name not in names
    )
    assert not orphans, (
        f"{orphans} test no module by scripts/chapter.py's rule: name each "
        f"after the module it tests (tests/test_<module>.py), or move a test "
        f"of the repository's conventions into tests/conventions/"
    )


def test_no_convention_test_takes_a_modules_name():
    names = {CHAPTER.test_file(m, MODULES) for m in MODULES}
    taken = sorted(
        p.name
        for p in (TESTS / "conventions").glob("test_*.py")
        if p.name in names
    )
    assert not taken, taken


@pytest.mark.parametrize(
    "module, expected",
    [
        ("backprop_lessons.scale.ddp_train", "test_ddp_train.py"),
        ("backprop_lessons.gpt.layers", "test_layers.py"),
        ("backprop_lessons.exercises.gpt_layers", "test_gpt_layers.py"),
        ("backprop_lessons.gpt.model", "test_gpt_model.py"),
        ("backprop_lessons.microgpt.model", "test_microgpt_model.py"),
        ("backprop_lessons.higher_order", "test_higher_order.py"),
        (
            "backprop_lessons.exercises.higher_order",
            "test_exercises_higher_order.py",
        ),
        ("backprop_lessons.gpt", "test_gpt.py"),
    ],
)
def test_the_rule_names_a_modules_test_file(module, expected):
    assert CHAPTER.test_file(module, MODULES) == expected


def test_make_chapter_finds_tests_from_the_imports(tmp_path):
    """A notebook that imports a scale module, a name from a subpackage and a
    name re-exported by the package gets the tests of the modules that
    define them, and of their packages."""
    import json

    cells = [
        "from backprop_lessons.scale import ddp_train",
        "from backprop_lessons.gpt import init_params\n%matplotlib inline",
        "import backprop_lessons.gradcheck as gc\n"
        "from backprop_lessons import Value",
    ]
    notebook = tmp_path / "nb.ipynb"
    notebook.write_text(
        json.dumps(
            {
                "cells": [
                    {"cell_type": "code", "source": c.splitlines(True)}
                    for c in cells
                ]
            }
        )
    )
    assert CHAPTER.imported_modules(notebook) == {
        "backprop_lessons.scale",
        "backprop_lessons.scale.ddp_train",
        "backprop_lessons.gpt",
        "backprop_lessons.gpt.model",
        "backprop_lessons.gradcheck",
        "backprop_lessons.scalar",
    }
    assert [p.name for p in CHAPTER.tests(notebook)] == [
        "test_ddp_train.py",
        "test_gpt.py",
        "test_gpt_model.py",
        "test_gradcheck.py",
        "test_scalar.py",
    ]


def _multiprocess_files() -> list[Path]:
    """The test files with tests marked `multiprocess` (they start worker
    processes or torchrun: `make multiprocess` runs them, one at a time)."""
    return [
        p
        for p in sorted(TESTS.glob("test_*.py"))
        if "pytest.mark.multiprocess" in p.read_text()
    ]


def test_architecture_names_every_multiprocess_test():
    text = (ROOT / "ARCHITECTURE.md").read_text()
    missing = [p.stem for p in _multiprocess_files() if p.stem not in text]
    assert not missing, f"ARCHITECTURE.md does not name {missing}"
