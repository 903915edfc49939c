"""Figures sized for the book's text column, in one style and palette for every
chapter.

    use_style()                                  the book's matplotlib settings
    figure(nrows, ncols, width=..., height=...)  a Figure sized in column widths
    CLASS_COLORS, CLASS_FILLS                    class 0, 1, 2 in every chapter
    class_scatter, decision_regions              two- and three-class data
    ratio_bars                                   ratios, log axis, bars from 1
    png(fig)                                     the PNG the notebook stores

Why a helper: a matplotlib figure is shown as a PNG that the page scales to
the text column, so the text on it renders at font size x (the page's
width for the figure / the figure's width).  A 13-inch figure squeezed
into a 688-pixel column renders 10-point tick labels at 6 pixels.  Here a
figure is sized in *column widths* instead: one column is 6.88 inches, and
an inch is shown as 100 CSS pixels, so the page never scales a figure down
at a 1280-pixel window and a point of text renders as 100/72 CSS pixels.
The style's smallest text is 8.5 points, 11.8 CSS pixels; `png` records
the smallest text it finds in the figure (and the dpi) in the PNG, and a
browser test checks every figure on every page from those numbers.

The PNG is drawn at twice that resolution (sharp on high-density screens)
and shown at the column's width through the output's `width` metadata.
Figures made here (`figure()` returns a `BookFigure`) display that way in
Jupyter, Colab and the book with a plain `plt.show()` or as a cell's last
value.

matplotlib is imported inside the functions: importing `backprop_lessons.viz`
never imports it, and no engine imports `viz`.
"""

from __future__ import annotations

import functools
import io
import math
import struct
import zlib
from collections.abc import Callable, Sequence

__all__ = [
    "COLUMN_INCHES",
    "PX_PER_INCH",
    "MIN_FONT_PT",
    "CLASS_COLORS",
    "CLASS_FILLS",
    "SERIES_COLORS",
    "style",
    "use_style",
    "figure",
    "png",
    "png_text",
    "min_font_size",
    "class_scatter",
    "decision_regions",
    "ratio_bars",
]

#: Width of the book's text column (a code cell's output) at a 1280-pixel
#: window, in CSS pixels; measured in Chromium (tests/browser/test_figures.py).
COLUMN_PX = 688
#: CSS pixels per figure inch: a figure W inches wide is shown W * 100 px wide.
PX_PER_INCH = 100
COLUMN_INCHES = COLUMN_PX / PX_PER_INCH
#: The PNG's resolution: twice PX_PER_INCH, for high-density screens.
DPI = 2 * PX_PER_INCH
#: The smallest text the style uses, in points: 8.5 pt = 11.8 CSS px.
MIN_FONT_PT = 8.5
#: Text smaller than this on a 1280-pixel window is too small (the browser
#: test's bar).
MIN_TEXT_PX = 11.0

# Okabe & Ito's colour-blind-safe palette.  Class k has the same colour in
# every chapter: class 0 blue, class 1 vermilion, class 2 bluish green.
CLASS_COLORS = ("#0072B2", "#D55E00", "#009E73")
#: Light tints of the class colours, for decision regions behind the points.
CLASS_FILLS = ("#c7dff0", "#f8d9c4", "#c2ebde")
#: Lines and bars that are not classes, in order.
SERIES_COLORS = (
    "#0072B2",
    "#D55E00",
    "#009E73",
    "#CC79A7",
    "#E69F00",
    "#56B4E9",
    "#000000",
)

# PNG text chunks written by `png` and read by the browser test.
KEY_MIN_FONT = "backprop_lessons:min_font_pt"
KEY_DPI = "backprop_lessons:dpi"


def style() -> dict:
    """The book's matplotlib settings (rcParams): sizes in points, colours,
    layout."""
    from cycler import cycler

    return {
        "figure.figsize": (COLUMN_INCHES, COLUMN_INCHES * 0.56),
        "figure.dpi": PX_PER_INCH,
        "figure.facecolor": "white",
        "savefig.dpi": DPI,
        "savefig.facecolor": "white",
        "font.size": 10.5,
        "axes.titlesize": 11,
        "axes.labelsize": 10.5,
        "xtick.labelsize": 9.5,
        "ytick.labelsize": 9.5,
        "legend.fontsize": 9.5,
        "legend.title_fontsize": 9.5,
        "figure.titlesize": 12,
        "axes.prop_cycle": cycler(color=list(SERIES_COLORS)),
        "axes.spines.top": False,
        "axes.spines.right": False,
        "axes.grid": True,
        "axes.axisbelow": True,
        "grid.color": "#dddddd",
        "grid.linewidth": 0.6,
        "lines.linewidth": 1.8,
    }


def use_style() -> None:
    """Apply `style()` to matplotlib for the rest of the session (`figure` does
    this too)."""
    import matplotlib

    matplotlib.rcParams.update(style())


def figure(
    nrows: int = 1,
    ncols: int = 1,
    *,
    width: float = 1.0,
    height: float | None = None,
    **subplots_kw,
):
    """`(fig, axes)` like `plt.subplots`, sized for the text column and in the
    book's style.

    width:  the figure's width as a fraction of the column (0 < width <= 1).
    height: its height in inches (default: panels about 0.6 as tall as wide,
            at most 3.6 inches per row).
    Other keyword arguments go to `plt.subplots` (sharex, subplot_kw, ...).
    Several panels share one column: prefer rows of at most two panels.
    Applies the book's style (`use_style`) first.
    """
    import matplotlib.pyplot as plt

    for name, n in (("nrows", nrows), ("ncols", ncols)):
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(
                f"figure: {name} must be a positive integer, got {n!r}"
            )
    if not (isinstance(width, (int, float)) and 0 < width <= 1):
        raise ValueError(
            "figure: width is a fraction of the text column, 0 < width <= 1; "
            f"got {width!r}"
        )
    inches = COLUMN_INCHES * width
    if height is None:
        height = nrows * min(3.6, 0.6 * inches / ncols) + 0.3
    elif not (isinstance(height, (int, float)) and height > 0):
        raise ValueError(
            f"figure: height must be a positive number of inches, got {height!r}"
        )
    use_style()
    _register_png_display()
    subplots_kw.setdefault("layout", "constrained")
    return plt.subplots(
        nrows,
        ncols,
        figsize=(inches, height),
        FigureClass=_book_figure_class(),
        **subplots_kw,
    )


# ---- the PNG, with the numbers the browser test needs --------------------------


def min_font_size(fig) -> float:
    """The smallest size (points) of any visible, non-empty text in `fig`."""
    from matplotlib.text import Text

    fig.canvas.draw()  # tick labels exist only once the figure is drawn
    sizes = [
        t.get_fontsize()
        for t in fig.findobj(Text)
        if t.get_visible() and t.get_text().strip() and _in_figure(t, fig)
    ]
    return min(sizes) if sizes else math.inf


def _in_figure(text, fig) -> bool:
    """Tick labels outside the axis limits are kept invisible-but-present by
    matplotlib."""
    box = text.get_window_extent()
    return box.width > 0 and fig.bbox.overlaps(box)


def png(fig) -> tuple[bytes, dict]:
    """`fig` as PNG bytes, and the display metadata that shows it PX_PER_INCH px
    per inch.

    The PNG records its smallest text size and its dpi (text chunks
    `backprop_lessons:min_font_pt` and `backprop_lessons:dpi`); it has no
    software-version chunk, so the bytes do not change with matplotlib's
    version.
    """
    smallest = min_font_size(fig)
    buffer = io.BytesIO()
    fig.savefig(
        buffer,
        format="png",
        dpi=DPI,
        facecolor=fig.get_facecolor(),
        metadata={
            "Software": None,
            KEY_MIN_FONT: f"{smallest:g}",
            KEY_DPI: f"{DPI:g}",
        },
    )
    data = buffer.getvalue()
    width_px, _ = struct.unpack(">II", data[16:24])
    return data, {"width": round(width_px * PX_PER_INCH / DPI)}


def png_text(data: bytes) -> dict[str, str]:
    """The text chunks (tEXt, zTXt, iTXt) of a PNG, as a dict."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("png_text: the data is not a PNG (bad signature)")
    found, pos = {}, 8
    while pos + 8 <= len(data):
        length, kind = struct.unpack(">I4s", data[pos : pos + 8])
        body = data[pos + 8 : pos + 8 + length]
        if kind == b"tEXt":
            key, _, value = body.partition(b"\0")
            found[key.decode("latin-1")] = value.decode("latin-1")
        elif kind == b"zTXt":
            key, _, rest = body.partition(b"\0")
            found[key.decode("latin-1")] = zlib.decompress(rest[1:]).decode(
                "latin-1"
            )
        elif kind == b"iTXt":
            key, _, rest = body.partition(b"\0")
            compressed, _method, rest = rest[0], rest[1], rest[2:]
            _lang, _, rest = rest.partition(b"\0")
            _translated, _, text = rest.partition(b"\0")
            found[key.decode("latin-1")] = (
                zlib.decompress(text) if compressed else text
            ).decode()
        pos += 12 + length
    return found


@functools.lru_cache(maxsize=1)
def _book_figure_class():
    from matplotlib.figure import Figure

    class BookFigure(Figure):
        """A Figure that displays as the book's PNG (see `png`)."""

        def __repr__(
            self,
        ) -> str:  # the same text as a plain Figure (nbval sanitizes it)
            return super().__repr__().replace("BookFigure", "Figure", 1)

        def _repr_png_(self):
            return png(self)

    return BookFigure


def _register_png_display() -> None:
    """Make IPython show BookFigures with `png` (also through `plt.show()`).

    matplotlib-inline registers its own PNG printer for `Figure`; a printer
    registered for the subclass comes first in IPython's lookup.
    """
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is None:
        return
    formatter = shell.display_formatter.formatters["image/png"]
    cls = _book_figure_class()
    if formatter.type_printers.get(cls) is not png:
        formatter.for_type(cls, png)


# ---- plots the chapters share --------------------------------------------------


def class_scatter(
    ax,
    X,
    y,
    *,
    classes: Sequence[int] | None = None,
    size: float = 16,
    labels: Sequence[str] | None = None,
    **kwargs,
) -> None:
    """Points of a classification data set, one colour per class (CLASS_COLORS).

    X: (N, 2) points; y: (N,) integer classes.
    """
    import numpy as np

    X, y = np.asarray(X), np.asarray(y)
    if X.ndim != 2 or X.shape[1] != 2 or y.shape != (X.shape[0],):
        raise ValueError(
            f"class_scatter: expected X of shape (N, 2) and y of shape (N,), "
            f"got {X.shape} and {y.shape}"
        )
    classes = sorted(set(y.tolist())) if classes is None else list(classes)
    if max(classes) >= len(CLASS_COLORS):
        raise ValueError(
            f"class_scatter: the palette has {len(CLASS_COLORS)} classes, "
            f"got class {max(classes)}"
        )
    for k in classes:
        label = labels[k] if labels is not None else f"class {k}"
        ax.scatter(
            X[y == k, 0],
            X[y == k, 1],
            s=size,
            color=CLASS_COLORS[k],
            label=label,
            edgecolors="white",
            linewidths=0.4,
            **kwargs,
        )


def decision_regions(
    ax,
    predict: Callable,
    xlim: tuple[float, float],
    ylim: tuple[float, float],
    *,
    n_classes: int = 2,
    resolution: int = 200,
) -> None:
    """Shade the plane by the class `predict` gives each point (CLASS_FILLS).

    predict: maps an (M, 2) array of points to (M,) integer classes.
    """
    import numpy as np

    if not 2 <= n_classes <= len(CLASS_FILLS):
        raise ValueError(
            f"decision_regions: n_classes must be 2..{len(CLASS_FILLS)}, got "
            f"{n_classes}"
        )
    gx, gy = np.meshgrid(
        np.linspace(*xlim, resolution), np.linspace(*ylim, resolution)
    )
    classes = np.asarray(
        predict(np.column_stack([gx.ravel(), gy.ravel()]))
    ).reshape(gx.shape)
    ax.contourf(
        gx,
        gy,
        classes,
        levels=np.arange(n_classes + 1) - 0.5,
        colors=CLASS_FILLS[:n_classes],
    )
    ax.set(xlim=xlim, ylim=ylim)


def ratio_bars(
    ax,
    labels: Sequence[str],
    ratios: Sequence[float],
    *,
    colors: Sequence[str] | None = None,
    xlabel: str = "",
    value_format: str = "{:.2f}\u00d7",
) -> None:
    """Horizontal bars of ratios on a log axis, each starting at 1.

    A ratio says "how many times": on a log axis 2 and 1/2 are equally far
    from 1, and a bar that starts at 1 shows its ratio's size and direction
    (right of 1: above 1).  Bars run top to bottom in the order given, each
    labelled with its value.
    """
    import matplotlib.ticker as ticker

    ratios = [float(r) for r in ratios]
    if len(labels) != len(ratios) or not ratios:
        raise ValueError(
            f"ratio_bars: expected one label per ratio, got {len(labels)} labels "
            f"and {len(ratios)} ratios"
        )
    if any(not (r > 0 and math.isfinite(r)) for r in ratios):
        raise ValueError(
            f"ratio_bars: ratios must be positive and finite, got {ratios}"
        )
    colors = (
        list(colors) if colors is not None else [SERIES_COLORS[0]] * len(ratios)
    )
    y = list(range(len(ratios)))
    ax.barh(y, [r - 1 for r in ratios], left=1, color=colors, height=0.7)
    ax.set_xscale("log")
    ax.set_yticks(y, labels)
    ax.invert_yaxis()  # first bar on top
    # Room for the value labels: right of bars above 1, left of bars below 1.
    lo = min(ratios) / 1.7 if min(ratios) < 1 else 1 / 1.25
    hi = max(ratios) * 1.7 if max(ratios) > 1 else 1.25
    ax.set_xlim(lo, hi)
    ax.axvline(1, color="black", linewidth=1)
    for yi, r in zip(y, ratios, strict=True):
        ax.text(
            r * (1.05 if r >= 1 else 1 / 1.05),
            yi,
            value_format.format(r),
            va="center",
            ha="left" if r >= 1 else "right",
            fontsize=9.5,
        )
    decades = [m * 10.0**e for e in range(-3, 4) for m in (1, 2, 5)]
    ticks = [t for t in decades if lo <= t <= hi]
    ax.xaxis.set_major_locator(ticker.FixedLocator(ticks))
    ax.xaxis.set_major_formatter(
        ticker.FixedFormatter([f"{t:g}\u00d7" for t in ticks])
    )
    ax.xaxis.set_minor_formatter(ticker.NullFormatter())
    ax.grid(axis="y", visible=False)
    if xlabel:
        ax.set_xlabel(xlabel)
