"""The engines read like micrograd (issues 26 and 45): in each engine file at
most 10% of the code lines are input guards, i.e. `raise` statements or
`if ...: raise` blocks.  The checks themselves are `validate`'s validators,
called at the public boundary; the formulas inside stay free of them.

Measured with `ast` and `tokenize`: an `if` whose body raises counts from
its first line to the end of its body (a multi-line condition or message
included, an `else` not); a `raise` anywhere else counts its own lines.
Both sides count code lines only: not blank lines, not comment lines, not
docstrings (the string that opens a module, class or function), so that
neither a long docstring nor a comment inside a guard changes the ratio.
"""

from __future__ import annotations

import ast
import io
import tokenize
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "backprop_lessons"
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
    "gpt/train.py",
]
LIMIT = 0.10
NOT_CODE = {
    tokenize.COMMENT,
    tokenize.NL,
    tokenize.NEWLINE,
    tokenize.INDENT,
    tokenize.DEDENT,
    tokenize.ENDMARKER,
}


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


def docstring_lines(source: str) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(
                node,
                (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef),
            )
            and ast.get_docstring(node, clean=False) is not None
        ):
            first = node.body[0]
            lines |= set(range(first.lineno, first.end_lineno + 1))
    return lines


def code_lines(source: str) -> set[int]:
    """The lines holding code: a token that is not a comment or layout, on
    a line outside every docstring."""
    lines: set[int] = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type not in NOT_CODE:
            lines |= set(range(token.start[0], token.end[0] + 1))
    return lines - docstring_lines(source)


def guard_ratio(source: str) -> float:
    code = code_lines(source)
    return len(guard_lines(source) & code) / len(code)


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


def test_the_measure_counts_code_lines_only():
    source = (
        '"""A module.\n'  # 1  docstring
        "\n"  # 2  docstring
        'More."""\n'  # 3  docstring
        "\n"  # 4  blank
        "# a comment\n"  # 5  comment
        "def f(x):\n"  # 6  code
        '    """f."""\n'  # 7  docstring
        "    if x < 0:  # bad\n"  # 8  code, guard
        "        # say why\n"  # 9  comment inside the guard
        "        raise ValueError('x')\n"  # 10 code, guard
        "    s = '''a\n"  # 11 code: a string, not a docstring
        "b'''\n"  # 12 code
        "    return s\n"  # 13 code
    )
    assert code_lines(source) == {6, 8, 10, 11, 12, 13}
    assert guard_ratio(source) == pytest.approx(2 / 6)


@pytest.mark.parametrize("name", ENGINES)
def test_at_most_a_tenth_of_an_engine_is_guards(name):
    source = (PACKAGE / name).read_text()
    code = code_lines(source)
    guards = guard_lines(source) & code
    ratio = len(guards) / len(code)
    assert ratio <= LIMIT, (
        f"{name}: {len(guards)} of {len(code)} code lines are raises or "
        f"`if ...: raise` blocks ({ratio:.1%}, limit {LIMIT:.0%}); move the "
        f"checks into validate's validators"
    )
