"""Each shared fact is written once (issue 37): one finite-difference routine,
one relative error, one absolute difference of two arrays (issue 45: what
every closeness test is built on), one table of the GPT's parameters, one
NumPy Adam, one PyTorch AdamW, one PyTorch attention, one rule per Tensor
operation, one map of the package.

Counted over the package's source (and, for the two formulas, the tests'
and the benchmarks' too): a second copy fails here, naming where it is, so
that it is folded into the one place instead.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "backprop_lessons"
SOURCES = sorted(PACKAGE.rglob("*.py"))
EVERYWHERE = (
    SOURCES
    + sorted((ROOT / "tests").glob("*.py"))
    + sorted((ROOT / "tests" / "conventions").glob("*.py"))
    + sorted((ROOT / "benchmarks").glob("*.py"))
)
THIS = Path(__file__).resolve()


def _where(paths, pattern: re.Pattern) -> list[str]:
    found = []
    for path in paths:
        if path == THIS:
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if pattern.search(line):
                found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    return found


def test_centered_differences_are_written_once():
    """(f(x + eps) - f(x - eps)) / (2 eps) lives in gradcheck.numerical_gradient
    (directional_derivative is that routine along a direction)."""
    found = _where(EVERYWHERE, re.compile(r"\)\s*/\s*\(2\s*\*\s*(eps|h|step)\)"))
    # a reader's answer, written as a reader would: chapter 11's check must
    # tell differences computed by hand from an exact HVP
    readers = "tests/test_exercises_higher_order.py:"
    found = [f for f in found if not f.startswith(readers)]
    assert [f for f in found if "gradcheck.py" not in f] == [], found
    # the one test that spells the formula out checks numerical_gradient itself
    assert all("gradcheck" in f for f in found), found


def test_the_relative_error_is_written_once():
    """max|a - b| / max(...): gradcheck.relative_error, nowhere else."""
    formula = re.compile(
        r"abs\([^)]*-[^)]*\)(\.max\(\))?\s*/\s*(max\(|np\.abs|abs\()"
    )
    found = _where(EVERYWHERE, formula)
    assert [f for f in found if "gradcheck.py" not in f] == [], found


# Where |a - b| may be written: gradcheck's largest_difference (which
# close, scaled_difference and the check tables judge) and relative_error's
# per-entry form; and the self-check widget's number check, the Python twin
# of the formula selfcheck.js runs in the browser.
ABSOLUTE_DIFFERENCE_AT = {
    ("gradcheck.py", "largest_difference"),
    ("gradcheck.py", "relative_error"),
    ("widgets/selfcheck.py", "check"),
}
ABS_NAMES = {"abs", "absolute", "fabs"}


def absolute_differences(source: str) -> list[tuple[int, str, str]]:
    """(line, enclosing function, code) of every |a - b| in `source`:
    abs(), np.abs(), np.absolute(), math.fabs() of a subtraction, or
    (a - b).abs(), wherever it sits (a max over it, a comparison with a
    tolerance, a division by a scale are all built on it)."""

    def is_difference(node) -> bool:
        return isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub)

    found = []

    def visit(node, function: str) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            function = node.name
        if isinstance(node, ast.Call):
            f = node.func
            name = getattr(f, "id", None) or getattr(f, "attr", None)
            if name in ABS_NAMES and (
                (node.args and is_difference(node.args[0]))
                or (isinstance(f, ast.Attribute) and is_difference(f.value))
            ):
                found.append((node.lineno, function, ast.unparse(node)))
        for child in ast.iter_child_nodes(node):
            visit(child, function)

    visit(ast.parse(source), "")
    return found


def test_the_absolute_difference_is_written_once():
    """How far apart two arrays (or numbers) are goes through gradcheck:
    largest_difference, close (the one closeness test: max|a - b| <= tol *
    max(max|b|, floor)), scaled_difference, relative_error.  Read from the
    syntax tree of the package and the benchmarks, so that no spelling of
    it escapes (np.abs(a - b).max(initial=0.0), abs(x - y) <= tol * ...,
    (a - b).abs())."""
    found = []
    for path in SOURCES + sorted((ROOT / "benchmarks").glob("*.py")):
        where = str(
            path.relative_to(PACKAGE if path.is_relative_to(PACKAGE) else ROOT)
        )
        for line, function, code in absolute_differences(path.read_text()):
            if (where, function) not in ABSOLUTE_DIFFERENCE_AT:
                found.append(f"{where}:{line} (in {function}): {code}")
    assert not found, f"use gradcheck.close or largest_difference: {found}"


@pytest.mark.parametrize(
    "source, functions",
    [
        (
            "def f(a, b):\n    return np.abs(a - b).max(initial=0.0) <= 1e-9",
            ["f"],
        ),
        (
            "def f(a, b, t):\n    if abs(a - b) > t * max(1.0, abs(b)): pass",
            ["f"],
        ),
        ("def f(a, b):\n    return (a - b).abs().max()", ["f"]),
        ("x = math.fabs(y - z)", [""]),
        ("def f(a):\n    return np.abs(a).max(), abs(-a), abs(a + 1)", []),
    ],
)
def test_the_difference_finder_sees_every_spelling(source, functions):
    assert [f for _, f, _ in absolute_differences(source)] == functions


PARAMETER_NAMES = {
    "wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb",
    "ln2w", "ln2b", "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb",
}  # fmt: skip


def test_the_gpt_parameters_are_listed_once():
    """No list, tuple, set or dict of parameter names besides the table in
    gpt/model.py (`PARAMETERS`): the shapes, the checkpoint's keys, the
    weight decay and the tensor-parallel split derive from it."""
    found = []
    for path in SOURCES:
        for node in ast.walk(ast.parse(path.read_text())):
            items = []
            if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
                items = node.elts
            elif isinstance(node, ast.Dict):
                items = [k for k in node.keys if k is not None]
            names = {
                e.value
                for e in items
                if isinstance(e, ast.Constant) and e.value in PARAMETER_NAMES
            }
            if len(names) >= 4:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not found, f"parameter names listed again at {found}"


def _classes(pattern: str) -> list[str]:
    return [
        f"{path.relative_to(PACKAGE)}:{node.name}"
        for path in SOURCES
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ClassDef) and re.search(pattern, node.name)
    ]


def test_one_numpy_adam():
    """gpt.train.AdamW on arrays (microgpt's NumPy twin uses it too); the
    scalar engine's microgpt keeps its Adam on Values."""
    assert sorted(_classes(r"Adam")) == [
        "gpt/train.py:AdamW",
        "microgpt/model.py:Adam",
    ]


def test_one_pytorch_adamw():
    """scale.optimizer.adamw builds torch.optim.AdamW for every mode of the
    trainer (data, tensor and pipeline parallelism, scale_out's
    measurements), its decay from the parameter table and its betas and eps
    from the book's AdamW: no other module of the package calls it."""
    found = _where(SOURCES, re.compile(r"\boptim\.AdamW\("))
    assert len(found) == 1 and "scale/optimizer.py" in found[0], found


def test_one_pytorch_attention():
    """gpt.reference.torch_attention: the model, the checks and tensor
    parallelism's blocks all call it."""
    found = _where(SOURCES, re.compile(r"\.masked_fill\(.*softmax"))
    assert len(found) == 1 and "gpt/reference.py" in found[0], found


def test_one_rule_per_tensor_operation():
    """tensor.py's backward rules serve backward() and grad(create_graph=True)
    alike: no second table of rules."""
    source = (PACKAGE / "tensor.py").read_text()
    assert "_TENSOR_RULES" not in source
    assert not re.search(r"^def rule_\w+\(", source, re.M)
    assert source.count("def unbroadcast(") == 1


def test_one_map_of_the_package():
    """ARCHITECTURE.md maps the package; every module is on it, and the
    package's __init__ points there instead of keeping a copy."""
    text = (ROOT / "ARCHITECTURE.md").read_text()
    section = text[text.index("## The package in layers") :]
    section = section[: section.index("\n## ", 5)]
    missing = [
        str(p.relative_to(PACKAGE))
        for p in SOURCES
        if p.name != "__init__.py"
        and not re.search(rf"\b{p.stem}\b", section)
        # the datasets, and the exercises' one module per chapter topic
        and p.parent not in (PACKAGE / "data", PACKAGE / "exercises")
    ]
    assert not missing, f"not on ARCHITECTURE.md's map: {missing}"
    init = (PACKAGE / "__init__.py").read_text()
    assert "ARCHITECTURE.md" in init and "forward_mode" not in init


@pytest.mark.parametrize(
    "line, hit",
    [
        ("return (f(x + eps) - f(x - eps)) / (2 * eps)", True),
        ("expected = (12 * L * C * C + V * C) / (2 * L * C)", False),
    ],
)
def test_the_formula_patterns_see_what_they_should(line, hit):
    pattern = re.compile(r"\)\s*/\s*\(2\s*\*\s*(eps|h|step)\)")
    assert bool(pattern.search(line)) == hit


def test_the_repository_cites_only_its_own_documents():
    """A file named as "see X.md" exists in the repository (the design notes
    the book grew from are not part of it)."""
    cited = re.compile(r"\b([A-Z][A-Z_]+\.md)\b")
    texts = [*SOURCES, *sorted((ROOT / "tests").rglob("*.py")), ROOT / "Makefile"]
    texts += [
        ROOT / n for n in ("README.md", "ARCHITECTURE.md", "CONTRIBUTING.md")
    ]
    missing = sorted(
        {
            f"{path.relative_to(ROOT)}: {name}"
            for path in texts
            for name in cited.findall(path.read_text())
            if path != THIS and not (ROOT / name).exists()
        }
    )
    assert not missing, missing
