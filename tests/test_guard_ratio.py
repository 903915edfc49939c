"""The engines read like micrograd (issue 26): in each engine file at most 10%
of the lines are input guards, i.e. `raise` statements or `if ...: raise`
blocks.  The checks themselves are `validate`'s validators, called at the
public boundary; the formulas inside stay free of them.

Measured with `ast`: an `if` whose body raises counts from its first line to
the end of its body (a multi-line condition or message included, an `else`
not); a `raise` anywhere else counts its own lines.  The denominator is every
line of the file.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "backprop_lessons"
ENGINES = [
    "scalar.py",
    "tensor.py",
    "forward_mode.py",
    "higher_order.py",
    "linearize.py",
    "mlp3.py",
    "deep_mlp.py",
    "scalar_nn.py",
    "gpt/layers.py",
    "gpt/model.py",
]
LIMIT = 0.10


def guard_lines(source: str) -> set[int]:
    """The line numbers of `source` that are raises or `if ...: raise` blocks."""
    lines: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.If) and any(
            isinstance(s, ast.Raise) for s in node.body
        ):
            end = max(s.end_lineno for s in node.body)
            lines |= set(range(node.lineno, end + 1))
        elif isinstance(node, ast.Raise):
            lines |= set(range(node.lineno, node.end_lineno + 1))
    return lines


def guard_ratio(source: str) -> float:
    return len(guard_lines(source)) / len(source.splitlines())


def test_the_measure_counts_whole_if_blocks_and_bare_raises():
    source = (
        "def f(x):\n"  # 1
        "    if (x <\n"  # 2  guard
        "            0):\n"  # 3  guard
        "        raise ValueError(\n"  # 4  guard
        "            'x')\n"  # 5  guard
        "    try:\n"  # 6
        "        return 1 / x\n"  # 7
        "    except ZeroDivisionError:\n"  # 8
        "        raise\n"  # 9  guard
        "    if x:\n"  # 10 (its body does not raise)
        "        return x\n"  # 11
    )
    assert guard_lines(source) == {2, 3, 4, 5, 9}


@pytest.mark.parametrize("name", ENGINES)
def test_at_most_a_tenth_of_an_engine_is_guards(name):
    source = (PACKAGE / name).read_text()
    ratio = guard_ratio(source)
    assert ratio <= LIMIT, (
        f"{name}: {len(guard_lines(source))} of {len(source.splitlines())} "
        f"lines are raises or `if ...: raise` blocks ({ratio:.1%}, limit "
        f"{LIMIT:.0%}); move the checks into validate's validators"
    )
