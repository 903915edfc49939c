"""The layer functions chapter 6 shows (backprop_lessons.gpt.layers) read as
their formulas: at most 20 lines of code each, below the docstring."""

from __future__ import annotations

import ast
import inspect

import pytest

from backprop_lessons.gpt import layers

MAX_CODE_LINES = 20
FUNCTIONS = [name for name in layers.__all__ if callable(getattr(layers, name))]


def code_lines(fn) -> int:
    """Lines from the first statement after the docstring to the end."""
    node = ast.parse(inspect.getsource(fn)).body[0]
    body = node.body[1:] if ast.get_docstring(node) else node.body
    return node.end_lineno - body[0].lineno + 1


@pytest.mark.parametrize("name", FUNCTIONS)
def test_layer_function_is_short(name):
    assert code_lines(getattr(layers, name)) <= MAX_CODE_LINES


def test_every_forward_has_its_backward_next_to_it():
    source = inspect.getsource(layers)
    for name in FUNCTIONS:
        if name.endswith("_forward"):
            backward = name.replace("_forward", "_backward")
            between = source[
                source.index(f"def {name}(") : source.index(f"def {backward}(")
            ]
            assert between.count("\ndef ") == 0, (
                f"{name} and {backward} are not adjacent"
            )
