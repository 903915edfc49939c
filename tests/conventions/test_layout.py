"""The maps of the repository cannot drift (issue 45): every subpackage's
`__init__` names each of its modules; every test file under tests/ holds
the tests of one module or subpackage, named by the rule `make chapter`
follows (scripts/chapter.py's `test_file`), and the tests of the
repository's conventions live in tests/conventions/; the tests that start
processes are the Makefile's MULTIPROCESS_TESTS, all of them, and
ARCHITECTURE.md names each.
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


def _multiprocess_tests() -> list[str]:
    makefile = (ROOT / "Makefile").read_text()
    block = re.search(r"^MULTIPROCESS_TESTS :=((?:.*\\\n)*.*)$", makefile, re.M)
    return block.group(1).replace("\\\n", " ").split()


def test_the_multiprocess_lane_holds_every_marked_test():
    """A test marked `multiprocess` runs in `make multiprocess` (the unit run
    leaves out the files of MULTIPROCESS_TESTS), and every file listed
    exists."""
    listed = _multiprocess_tests()
    assert all((ROOT / t).is_file() for t in listed), listed
    marked = [
        str(p.relative_to(ROOT))
        for p in sorted(TESTS.glob("test_*.py"))
        if "pytest.mark.multiprocess" in p.read_text()
    ]
    assert set(marked) <= set(listed), set(marked) - set(listed)


def test_architecture_names_every_multiprocess_test():
    text = (ROOT / "ARCHITECTURE.md").read_text()
    missing = [
        Path(t).stem for t in _multiprocess_tests() if Path(t).stem not in text
    ]
    assert not missing, f"ARCHITECTURE.md does not name {missing}"
