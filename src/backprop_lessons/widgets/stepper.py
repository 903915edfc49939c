"""The frame-switching widget that both steppers are built on.

A `FrameStepper` holds a list of precomputed frames (dicts with at least
`caption`, `svg` and `html`) and the index of the one on screen.  Its front
end is `stepper.js` + `stepper.css`, shipped with the package and read here
with pathlib.  Only anywidget's portable API is used (`render({model, el})`,
`model.get/set/save_changes/on/off`), which anywidget 0.9 (Colab, with
ipywidgets 7.7) and anywidget 0.11 (ipywidgets 8) both provide.
"""

from __future__ import annotations

import html
import math
import pathlib
import re
from collections.abc import Sequence

import anywidget
import traitlets

from ..numerics import format_fixed
from ..scalar import Value
from ..validate import positive_int
from ..viz.graph import draw_graph
from ..viz.plots import MIN_TEXT_PX

__all__ = ["FrameStepper", "MAX_VALUES", "draw_frame"]

_HERE = pathlib.Path(__file__).parent

#: Largest graph a stepper draws: every frame is a full drawing, so the
#: widget's stored state grows with (values x steps).
MAX_VALUES = 60


class FrameStepper(anywidget.AnyWidget):
    """Shows one of `frames` at a time; next / previous / play / reset /
    slider."""

    _esm = (_HERE / "stepper.js").read_text(encoding="utf-8")
    _css = (_HERE / "stepper.css").read_text(encoding="utf-8")

    frames = traitlets.List(traitlets.Dict()).tag(sync=True)
    index = traitlets.Int(0).tag(sync=True)
    title = traitlets.Unicode("").tag(sync=True)
    legend = traitlets.Unicode("").tag(sync=True)  # HTML under the controls
    interval = traitlets.Int(1200).tag(
        sync=True
    )  # milliseconds per frame when playing

    @traitlets.validate("index")
    def _check_index(self, proposal):
        i = proposal["value"]
        n = len(self.frames)
        if n and not 0 <= i < n:
            raise traitlets.TraitError(
                f"{type(self).__name__}.index: {i} is out of range; frames are "
                f"numbered 0 to {n - 1}"
            )
        return i

    # Python-side controls, mirroring the buttons (they clamp instead of raising).
    def next(self) -> None:
        """Show the next frame (stays on the last one)."""
        self.index = min(self.index + 1, len(self.frames) - 1)

    def previous(self) -> None:
        """Show the previous frame (stays on the first one)."""
        self.index = max(self.index - 1, 0)

    def reset(self) -> None:
        """Back to the first frame."""
        self.index = 0

    @property
    def current(self) -> dict:
        """The frame on screen (a dict; its `svg` and `html` are what the page
        shows)."""
        return self.frames[self.index]

    @property
    def steps(self) -> int:
        """How many steps follow the first frame."""
        return len(self.frames) - 1


# ---- helpers shared by the frame builders -----------------------------------


def value_names(order: Sequence[Value]) -> dict[int, str]:
    """A unique display name per value: its label, or `v{i}` (its position) if it
    has none."""
    labels = [v.label for v in order]
    names = {}
    for i, v in enumerate(order):
        if not v.label:
            names[id(v)] = f"v{i}"
        elif labels.count(v.label) > 1:
            names[id(v)] = f"{v.label}_{i}"
        else:
            names[id(v)] = v.label
    return names


def check_size(order: Sequence[Value], who: str) -> None:
    if len(order) > MAX_VALUES:
        raise ValueError(
            f"{who}: the graph has {len(order)} values; a stepper draws every "
            "frame, "
            f"so it takes graphs of at most {MAX_VALUES} values (step through a "
            "smaller example)"
        )


def check_digits(digits, who: str) -> int:
    """Frames draw numbers with `digits` decimals: an int from 0 to 8."""
    digits = positive_int(who, "digits", digits, minimum=0)
    if digits > 8:
        raise ValueError(
            f"{who}: digits must be at most 8 decimals, got {digits}"
        )
    return digits


def minify_svg(svg: str) -> str:
    """graphviz SVG without the XML prolog, comments, tooltips and inter-tag
    whitespace."""
    svg = re.sub(r"<\?xml[^>]*>|<!DOCTYPE[^>]*>|<!--.*?-->", "", svg, flags=re.S)
    svg = re.sub(r"<title>[^<]*</title>", "", svg)
    # The page's CSS sets the font (`.bl-stepper-graph text`); ids and classes are
    # unused.
    svg = re.sub(
        r' font-family="[^"]*"'
        r'| id="(?:node|edge|a_node|graph)\d+"'
        r'| class="(?:node|edge|graph)"',
        "",
        svg,
    )
    svg = svg.replace(' xmlns:xlink="http://www.w3.org/1999/xlink"', "")
    return re.sub(r">\s+<", "><", svg).strip()


def legible_svg(svg: str, min_text_px: float = MIN_TEXT_PX) -> str:
    """`svg` with a CSS min-width at which its smallest text is `min_text_px`
    CSS px.

    The page fits a wide drawing to the text column (`max-width: 100%`); the
    min-width stops that shrinking where the text would get too small to
    read, and the graph's box scrolls instead.  Text renders at font-size
    (in the SVG's user units) times the shown width over the viewBox width.
    """
    sizes = [float(s) for s in re.findall(r'font-size="([\d.]+)"', svg)]
    box = re.search(r'viewBox="[-\d.]+ [-\d.]+ ([\d.]+) [\d.]+"', svg)
    if not sizes or box is None or not svg.startswith("<svg "):
        raise ValueError(
            "legible_svg: expected graphviz SVG text, starting with <svg and "
            "with a viewBox and font sizes"
        )
    width = math.ceil(min_text_px * float(box.group(1)) / min(sizes))
    return f'<svg style="min-width:{width}px" ' + svg[len("<svg ") :]


def draw_frame(
    root: Value,
    order: Sequence[Value],
    names: dict[int, str],
    *,
    fills: dict[int, str],
    grads: dict[int, float] | None = None,
    op_fills: dict[int, str] | None = None,
    digits: int = 4,
) -> str:
    """One frame's drawing as compact SVG text.

    `draw_graph` lays out the graph; each value is then re-declared (a later
    DOT statement for the same node overrides its attributes) as a small
    stacked table - name, data, grad - so the drawing stays narrow enough
    to read at the width of a book page.  `fills` colours values and
    `op_fills` the operation node under a value; `grads` replaces the
    values' own `grad` (None: no grad row).
    """
    dot = draw_graph(root, order=order, show_grad=False)
    dot.graph_attr.update(ranksep="0.22", nodesep="0.14", pad="0.04")
    node_name = {id(v): f"v{i}" for i, v in enumerate(order)}
    op_fills = op_fills or {}
    for v in order:
        rows = [
            f"<B>{esc(names[id(v)])}</B>",
            f"data {format_fixed(v.data, digits)}",
        ]
        if grads is not None:
            grad = format_fixed(grads[id(v)], digits)
            rows.append(f'<FONT COLOR="#0a3069">grad {grad}</FONT>')
        table = (
            f'<TABLE BORDER="1" CELLBORDER="0" CELLSPACING="0" CELLPADDING="2" '
            f'COLOR="#57606a" BGCOLOR="{fills.get(id(v), "#ffffff")}">'
            + "".join(f"<TR><TD>{r}</TD></TR>" for r in rows)
            + "</TABLE>"
        )
        dot.node(node_name[id(v)], label=f"<{table}>", shape="plain")
        if v._op:
            dot.node(
                node_name[id(v)] + "_op",
                width="0.3",
                height="0.28",
                margin="0.03,0.01",
                style="filled",
                fillcolor=op_fills.get(id(v), "#f6f8fa"),
                color="#57606a",
            )
    return legible_svg(minify_svg(dot.pipe(format="svg", encoding="utf-8")))


def num(x: float) -> str:
    """A number for the explanation text: at most 4 decimals, no trailing zeros,
    no -0."""
    s = f"{x:.4f}".rstrip("0").rstrip(".")
    return "0" if s in ("-0", "") else s


def esc(s: str) -> str:
    return html.escape(s, quote=True)


def chips(items: Sequence[str], cls: str = "", empty: str = "(empty)") -> str:
    """A row of small boxed items (already-escaped HTML each)."""
    if not items:
        return f'<span class="bl-empty">{esc(empty)}</span>'
    return "".join(f'<span class="bl-chip {cls}">{it}</span>' for it in items)


def legend_html(entries: Sequence[tuple[str, str]]) -> str:
    """Colour swatches with their meaning."""
    return "".join(
        f'<span class="bl-legend-item">'
        f'<span class="bl-swatch" style="background:{color}"></span>'
        f"{esc(text)}</span>"
        for color, text in entries
    )
