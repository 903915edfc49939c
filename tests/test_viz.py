"""Tests of `backprop_lessons.viz.graph`: stable, deterministic graph drawings.

nbval compares stored SVG outputs across runs, so the same graph must give
the same SVG text every time: node names from the topological order, never
from id().
"""

from __future__ import annotations

import re

import graphviz
import pytest

from backprop_lessons.scalar import Value, topological_order
from backprop_lessons.viz import graph as viz_graph
from backprop_lessons.viz.graph import HIGHLIGHT, RECEIVED, draw_graph, require_dot


def worked_example():
    """f = relu(a * b + d), with labels, after backward()."""
    a, b, d = Value(2.0, "a"), Value(-3.0, "b"), Value(10.0, "d")
    e = a * b; e.label = "e"
    c = e + d; c.label = "c"
    f = c.relu(); f.label = "f"
    f.backward()
    return f, (a, b, c, d, e)


def svg(drawing) -> str:
    return drawing.pipe(format="svg").decode()


def test_same_graph_gives_identical_svg_twice():
    f, _ = worked_example()
    assert svg(draw_graph(f)) == svg(draw_graph(f))


def test_identically_built_graphs_give_identical_svg():
    f1, _ = worked_example()
    f2, _ = worked_example()
    assert draw_graph(f1).source == draw_graph(f2).source
    assert svg(draw_graph(f1)) == svg(draw_graph(f2))


def test_node_names_follow_the_topological_order():
    f, _ = worked_example()
    n = len(topological_order(f))
    source = draw_graph(f).source
    names = set(re.findall(r"^\s*(v\d+)(?:_op)?\s*\[", source, flags=re.MULTILINE))
    assert names == {f"v{i}" for i in range(n)}
    for v in topological_order(f):
        assert str(id(v)) not in source
    assert "0x" not in repr(draw_graph(f))


def test_records_show_label_data_and_grad():
    f, _ = worked_example()
    source = draw_graph(f).source
    assert "{ f | data 4.0000 | grad 1.0000 }" in source
    assert "{ a | data 2.0000 | grad -3.0000 }" in source
    assert "grad" not in draw_graph(f, show_grad=False).source
    assert "data 4.00 " in draw_graph(f, digits=2).source


def test_negative_zero_prints_as_zero():
    v = Value(-1e-9, "tiny")
    assert "data 0.0000" in draw_graph(v).source
    assert "-0.0000" not in draw_graph(v).source


def test_operations_are_drawn_between_values():
    f, _ = worked_example()
    source = draw_graph(f).source
    for op in ("+", "*", "relu"):
        assert f'label="{op}"' in source or f"label={op}" in source


def test_highlight_and_marked_colours_appear():
    f, (a, b, c, d, e) = worked_example()
    plain = svg(draw_graph(f))
    assert HIGHLIGHT not in plain and RECEIVED not in plain
    drawn = svg(draw_graph(f, highlight=c, marked=[a, b]))
    assert drawn.count(HIGHLIGHT) == 1
    assert drawn.count(RECEIVED) == 2


def test_highlight_wins_over_marked():
    f, (a, *_) = worked_example()
    source = draw_graph(f, highlight=a, marked=[a]).source
    assert HIGHLIGHT in source and RECEIVED not in source


def test_precomputed_order_gives_the_same_drawing():
    f, _ = worked_example()
    assert draw_graph(f, order=topological_order(f)).source == draw_graph(f).source


@pytest.mark.parametrize("rankdir", ["LR", "TB", "RL", "BT"])
def test_rankdir(rankdir):
    f, _ = worked_example()
    assert f"rankdir={rankdir}" in draw_graph(f, rankdir=rankdir).source


@pytest.mark.parametrize("rankdir", ["lr", "XY", ""])
def test_bad_rankdir_raises(rankdir):
    f, _ = worked_example()
    with pytest.raises(ValueError, match=r"draw_graph: rankdir must be LR, TB, RL or BT"):
        draw_graph(f, rankdir=rankdir)


@pytest.fixture
def no_dot(monkeypatch):
    """Pretend graphviz's `dot` is not installed (and forget the cached answer)."""
    def missing():
        raise graphviz.ExecutableNotFound(["dot", "-V"])

    monkeypatch.setattr(graphviz, "version", missing)
    require_dot.cache_clear()
    yield
    require_dot.cache_clear()  # the next caller sees the real `dot` again


def test_missing_dot_raises_with_an_install_hint(no_dot):
    with pytest.raises(RuntimeError, match=r"`dot` program was not found") as info:
        require_dot()
    assert "apt-get install graphviz" in str(info.value)
    assert "brew install graphviz" in str(info.value)


def test_draw_graph_without_dot_raises_the_install_hint(no_dot):
    with pytest.raises(RuntimeError, match=r"Install graphviz"):
        draw_graph(Value(1.0))


def test_require_dot_returns_the_version():
    require_dot.cache_clear()
    version = require_dot()
    assert isinstance(version, tuple) and all(isinstance(p, int) for p in version)
    assert viz_graph.require_dot() is version  # cached


def test_labels_with_record_syntax_are_escaped():
    """|, braces and angle brackets in a label are text, not record structure."""
    a = Value(1.0, label="x|y {z}")
    b = a * 2
    b.label = "<out>"
    svg = draw_graph(b).pipe(format="svg", encoding="utf-8")
    assert "x|y {z}" in svg and "&lt;out&gt;" in svg
