"""Tests of `backprop_lessons.show`: the package's real source, shown in
notebooks.

The expected texts are written out here, so a change in how the source is
cut, dedented, titled or highlighted makes a test fail.
"""

from __future__ import annotations

import html
import re

import pytest

from backprop_lessons.scalar import Value, topological_order
from backprop_lessons.show import show_source


class Holder:
    """A class whose method is indented, as methods are."""

    def method(self, x):
        """Doc."""
        return x < 1 and "a & b"  # a comment


def plain(x):
    return x + 1


def test_the_text_is_the_definition_dedented_and_nothing_else():
    shown = show_source(Holder.method)
    assert shown.text == (
        "def method(self, x):\n"
        '    """Doc."""\n'
        '    return x < 1 and "a & b"  # a comment'
    )
    assert show_source(plain).text == "def plain(x):\n    return x + 1"


def test_the_title_names_module_and_qualified_name():
    assert show_source(Holder.method).title == f"{__name__}.Holder.method"
    assert (
        show_source(Value.backward).title
        == "backprop_lessons.scalar.Value.backward"
    )
    assert show_source(Value).title == "backprop_lessons.scalar.Value"


def test_plain_text_repr_is_title_then_source():
    shown = show_source(topological_order)
    assert (
        repr(shown)
        == f"# backprop_lessons.graph_order.topological_order\n{shown.text}"
    )
    assert "0x" not in repr(shown)


def test_html_holds_exactly_the_source_highlighted():
    shown = show_source(Holder.method)
    page = shown._repr_html_()
    assert page.startswith('<div class="bl-source"><div class="bl-source-title">')
    code = re.search(r"<code>(.*)</code>", page, flags=re.S).group(1)
    assert '<span style="' in code  # pygments coloured some tokens
    # every character of the source, and nothing else, once the markup goes
    assert html.unescape(re.sub(r"<[^>]+>", "", code)).rstrip("\n") == shown.text
    assert "&lt;" in code and "&amp;" in code  # < and & are escaped
    assert not re.search(r'\bid="|0x[0-9a-f]{6,}', page)  # nothing run-dependent


def test_show_source_of_a_builtin_raises():
    with pytest.raises(TypeError, match=r"show_source: cannot get the source of"):
        show_source(len)


def test_show_source_of_a_module_is_the_whole_file():
    import backprop_lessons.scalar as scalar_module

    shown = show_source(scalar_module)
    assert shown.title == "backprop_lessons.scalar"
    assert shown.text.startswith('"""The scalar reverse-mode engine')
    assert shown.text.endswith("v.grad = 0.0")
