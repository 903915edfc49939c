"""Tests of `backprop_lessons.show`: the package's real source, shown in notebooks."""

from __future__ import annotations

import inspect
import textwrap

import pytest

from backprop_lessons.scalar import Value, topological_order
from backprop_lessons.show import show_source


def test_show_source_returns_the_real_source_of_value_backward():
    shown = show_source(Value.backward)
    expected = textwrap.dedent(inspect.getsource(Value.backward)).rstrip()
    assert shown.text == expected
    assert shown.text.startswith("def backward(self) -> None:")
    assert "child.grad += local * g" in shown.text
    assert shown.title == "backprop_lessons.scalar.Value.backward"


def test_plain_text_repr_is_title_then_source():
    shown = show_source(topological_order)
    assert repr(shown) == f"# backprop_lessons.scalar.topological_order\n{shown.text}"
    assert "0x" not in repr(shown)


def test_html_repr_contains_highlighted_code():
    html = show_source(Value.backward)._repr_html_()
    assert html.startswith('<div class="bl-source">')
    assert "backprop_lessons.scalar.Value.backward" in html
    assert '<pre class="bl-source-code"' in html
    # pygments wraps tokens in inline-styled spans: the code is highlighted
    assert '<span style="' in html
    assert "backward" in html and "topological_order" in html


def test_html_repr_is_stable():
    assert show_source(Value.backward)._repr_html_() == show_source(Value.backward)._repr_html_()


def test_show_source_of_a_class():
    shown = show_source(Value)
    assert shown.text.startswith("class Value:")
    assert shown.title == "backprop_lessons.scalar.Value"


def test_show_source_of_a_builtin_raises():
    with pytest.raises(TypeError, match=r"show_source: cannot get the source of"):
        show_source(len)


def test_show_source_of_a_module():
    import backprop_lessons.scalar as scalar_module
    shown = show_source(scalar_module)
    assert shown.title == "backprop_lessons.scalar"
    assert shown.text == inspect.getsource(scalar_module).rstrip()
