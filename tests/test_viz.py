"""Tests of `backprop_lessons.viz`: stable graph drawings, figures sized for the
column.

nbval compares stored SVG outputs across runs, so the same graph must give
the same SVG text every time: node names from the topological order, never
from id().
"""

from __future__ import annotations

import re
import subprocess
import sys

import graphviz
import numpy as np
import pytest

from backprop_lessons.example_graphs import relu_example
from backprop_lessons.scalar import Value, topological_order
from backprop_lessons.viz import graph as viz_graph
from backprop_lessons.viz import plots
from backprop_lessons.viz.graph import (
    HIGHLIGHT,
    RECEIVED,
    draw_graph,
    require_dot,
)


def worked_example():
    """f = relu(a * b + d), with labels, after backward(); and its values
    a, b, c = a * b, d, e = c + d."""
    f = relu_example()
    f.backward()
    by_label = {v.label: v for v in topological_order(f)}
    return f, tuple(by_label[name] for name in "abcde")


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
    names = set(
        re.findall(r"^\s*(v\d+)(?:_op)?\s*\[", source, flags=re.MULTILINE)
    )
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
    assert (
        draw_graph(f, order=topological_order(f)).source == draw_graph(f).source
    )


@pytest.mark.parametrize("rankdir", ["LR", "TB", "RL", "BT"])
def test_rankdir(rankdir):
    f, _ = worked_example()
    assert f"rankdir={rankdir}" in draw_graph(f, rankdir=rankdir).source


@pytest.mark.parametrize("rankdir", ["lr", "XY", ""])
def test_bad_rankdir_raises(rankdir):
    f, _ = worked_example()
    with pytest.raises(
        ValueError, match=r"draw_graph: rankdir must be LR, TB, RL or BT"
    ):
        draw_graph(f, rankdir=rankdir)


@pytest.fixture
def no_dot(monkeypatch):
    """Pretend graphviz's `dot` is not installed (and forget the cached
    answer)."""

    def missing():
        raise graphviz.ExecutableNotFound(["dot", "-V"])

    monkeypatch.setattr(graphviz, "version", missing)
    require_dot.cache_clear()
    yield
    require_dot.cache_clear()  # the next caller sees the real `dot` again


def test_missing_dot_raises_with_an_install_hint(no_dot):
    with pytest.raises(
        RuntimeError, match=r"`dot` program was not found"
    ) as info:
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


# ---- plots: figures sized for the text column ----------------------------------


def test_importing_viz_does_not_import_matplotlib():
    code = "import sys, backprop_lessons.viz; print('matplotlib' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "False"


def test_every_font_size_of_the_style_renders_at_least_11_px():
    import matplotlib.font_manager as fm

    style = plots.style()
    base = style["font.size"]
    sizes = []
    for key, value in style.items():
        if key.endswith(("size", "fontsize")) and key != "figure.figsize":
            sizes.append(
                fm.font_scalings.get(value, 1) * base
                if isinstance(value, str)
                else value
            )
    assert min(sizes) >= plots.MIN_FONT_PT
    assert plots.MIN_FONT_PT * plots.PX_PER_INCH / 72 >= plots.MIN_TEXT_PX


def test_figure_is_sized_in_column_widths():
    fig, axes = plots.figure(2, 2, width=0.5, height=3.0, sharex=True)
    assert axes.shape == (2, 2)
    assert fig.get_size_inches() == pytest.approx((plots.COLUMN_INCHES / 2, 3.0))
    fig, ax = plots.figure()
    assert fig.get_size_inches()[0] == pytest.approx(plots.COLUMN_INCHES)
    assert repr(fig).startswith(
        "<Figure size 688x"
    )  # as nbval's sanitizer expects


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (
            {"width": 1.5},
            "figure: width is a fraction of the text column, 0 < width <= 1; got "
            "1.5",
        ),
        ({"width": 0}, "figure: width is a fraction"),
        ({"nrows": 0}, "figure: nrows must be a positive integer, got 0"),
        ({"ncols": 2.0}, "figure: ncols must be a positive integer, got 2.0"),
        (
            {"height": -1},
            "figure: height must be a positive number of inches, got -1",
        ),
    ],
)
def test_figure_rejects_bad_sizes(kwargs, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        plots.figure(**kwargs)


def test_png_records_the_smallest_text_and_is_shown_at_the_column_width():
    fig, ax = plots.figure(width=0.8)
    ax.plot([0, 1], [0, 1], label="line")
    ax.legend(fontsize=6.5)  # too small on purpose: the record must say so
    data, metadata = plots.png(fig)
    records = plots.png_text(data)
    assert records[plots.KEY_MIN_FONT] == "6.5"
    assert records[plots.KEY_DPI] == str(plots.DPI)
    assert (
        "Software" not in records
    )  # no version string: bytes stable across matplotlib versions
    pixel_width = int.from_bytes(data[16:20], "big")
    assert pixel_width == pytest.approx(
        plots.COLUMN_INCHES * 0.8 * plots.DPI, abs=1
    )
    assert metadata == {"width": round(plots.COLUMN_PX * 0.8)}
    assert plots.png(fig)[0] == data  # deterministic


def test_min_font_size_ignores_empty_and_hidden_text():
    fig, ax = plots.figure()
    ax.set_title("")
    hidden = ax.text(0.5, 0.5, "hidden", fontsize=3)
    hidden.set_visible(False)
    assert plots.min_font_size(fig) == pytest.approx(9.5)  # the tick labels


def test_png_text_rejects_other_data():
    with pytest.raises(ValueError, match="png_text: the data is not a PNG"):
        plots.png_text(b"GIF89a")


def test_book_figures_display_with_the_book_png_before_matplotlib_inline():
    """A printer registered for the subclass wins over matplotlib-inline's Figure
    printer."""
    from IPython.core.formatters import PNGFormatter
    from matplotlib.figure import Figure

    formatter = PNGFormatter()
    formatter.for_type(Figure, lambda fig: b"generic")
    fig, _ = plots.figure()
    formatter.for_type(type(fig), plots.png)
    data, metadata = formatter(fig)
    assert (
        plots.KEY_MIN_FONT in plots.png_text(data)
        and metadata["width"] == plots.COLUMN_PX
    )


def test_class_colours_are_the_same_everywhere():
    fig, ax = plots.figure()
    X = np.array([[0.0, 0.0], [1.0, 1.0], [2.0, 0.0]])
    plots.class_scatter(ax, X, np.array([1, 0, 2]))
    colours = {c.get_label(): c.get_facecolor()[0][:3] for c in ax.collections}
    import matplotlib.colors as mcolors

    for k in range(3):
        assert tuple(colours[f"class {k}"]) == pytest.approx(
            mcolors.to_rgb(plots.CLASS_COLORS[k])
        )
    with pytest.raises(
        ValueError, match=r"class_scatter: expected X of shape \(N, 2\)"
    ):
        plots.class_scatter(ax, X[:, :1], np.array([0, 1, 0]))
    with pytest.raises(
        ValueError, match="class_scatter: the palette has 3 classes, got class 3"
    ):
        plots.class_scatter(ax, X, np.array([0, 1, 3]))


def test_decision_regions_shade_each_class_with_its_fill():
    fig, ax = plots.figure()
    plots.decision_regions(
        ax, lambda P: (P[:, 0] > 0).astype(int), (-1, 1), (-1, 1), resolution=20
    )
    import matplotlib.colors as mcolors

    fills = [tuple(c[:3]) for c in ax.collections[0].get_facecolor()]
    assert fills == [
        pytest.approx(mcolors.to_rgb(c)) for c in plots.CLASS_FILLS[:2]
    ]
    with pytest.raises(
        ValueError, match="decision_regions: n_classes must be 2..3, got 4"
    ):
        plots.decision_regions(
            ax, lambda P: P[:, 0], (-1, 1), (-1, 1), n_classes=4
        )


def test_ratio_bars_start_at_1_on_a_log_axis():
    fig, ax = plots.figure()
    plots.ratio_bars(ax, ["faster", "slower"], [4.0, 0.5])
    assert ax.get_xscale() == "log"
    spans = sorted(
        (round(b.get_x(), 12), round(b.get_x() + b.get_width(), 12))
        for b in ax.patches
    )
    assert spans == [(1.0, 0.5), (1.0, 4.0)]  # each bar runs from 1 to its ratio
    lo, hi = ax.get_xlim()
    assert lo < 0.5 and hi > 4.0
    labels = [t.get_text() for t in ax.texts]
    assert labels == ["4.00\u00d7", "0.50\u00d7"]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["faster", "slower"]


@pytest.mark.parametrize(
    "labels, ratios, message",
    [
        (
            ["a"],
            [1.0, 2.0],
            "ratio_bars: expected one label per ratio, got 1 labels and 2 ratios",
        ),
        (["a"], [0.0], "ratio_bars: ratios must be positive and finite"),
        (["a"], [float("inf")], "ratio_bars: ratios must be positive and finite"),
    ],
)
def test_ratio_bars_reject_bad_ratios(labels, ratios, message):
    fig, ax = plots.figure()
    with pytest.raises(ValueError, match=re.escape(message)):
        plots.ratio_bars(ax, labels, ratios)


def test_compact_neuron_drawing_fits_the_text_column_at_11_px():
    """Chapter 1's neuron, the widest compact drawing: its text renders >= 11 CSS
    px."""
    x1, x2 = Value(2.0, "x1"), Value(0.0, "x2")
    w1, w2, b = (
        Value(-3.0, "w1"),
        Value(1.0, "w2"),
        Value(6.8813735870195432, "b"),
    )
    o = ((x1 * w1 + x2 * w2) + b).tanh()
    svg = draw_graph(o, compact=True).pipe(format="svg", encoding="utf-8")
    smallest = min(float(s) for s in re.findall(r'font-size="([\d.]+)"', svg))
    width = float(re.search(r'viewBox="[\d.]+ [\d.]+ ([\d.]+)', svg).group(1))
    shown = min(
        plots.COLUMN_PX, width * 4 / 3
    )  # never wider than natural size (pt -> px)
    assert smallest * shown / width >= plots.MIN_TEXT_PX


def test_block_backward_drawing_forks_and_joins_the_residual_gradient():
    """Chapter 6's figure: every layer backward of a block, in backward
    order, two forks and two joins of the stream, and the same SVG twice."""
    from backprop_lessons.viz import draw_block_backward
    from backprop_lessons.viz.block_backward import BLOCK_BACKWARD_STEPS

    drawing = draw_block_backward()
    source = drawing.source
    assert source.count("fork: dx goes both ways") == 2
    assert source.count("join: dx_") == 2
    names = [name for name, _, _ in BLOCK_BACKWARD_STEPS]
    assert names == [
        "fcproj",
        "gelu",
        "fc",
        "ln2",
        "attproj",
        "att",
        "qkv",
        "ln1",
    ]
    for a, b in zip(names[:3], names[1:4], strict=True):  # the MLP branch
        assert f"{a} -> {b}" in source
    for a, b in zip(names[4:], names[5:], strict=False):  # the attention branch
        assert f"{a} -> {b}" in source
    # each branch starts at a fork and ends at a join
    assert "fork2 -> fcproj" in source and "ln2 -> join2" in source
    assert "fork1 -> attproj" in source and "ln1 -> join1" in source
    assert svg(drawing) == svg(draw_block_backward())
    assert "0x" not in repr(drawing)
