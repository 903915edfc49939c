"""Show the package's real source in a notebook, so the text never drifts from the
code."""

from __future__ import annotations

import html
import inspect
import re
import textwrap

__all__ = ["show_source"]


def _code_style():
    """The Pygments style of the highlighted HTML (built on first use, so
    that importing this module does not import Pygments).

    The colours of accessible-pygments' high-contrast light style (BSD
    licence; the book's theme uses it, with its dark twin in dark mode):
    every token at least 6.7:1 against the background, where WCAG AA asks
    4.5:1.  Written out here because that package comes with the book's
    theme, not with this package: on Colab, whose runtime has only what
    the package declares, asking Pygments for it by name failed.
    """
    from pygments.style import Style
    from pygments.token import (
        Comment,
        Error,
        Generic,
        Keyword,
        Literal,
        Name,
        Number,
        Operator,
        Other,
        Punctuation,
        String,
        Text,
    )  # fmt: skip

    black, comment, red = "#080808", "#515151", "#a12236"
    orange, magenta, green = "#7f4707", "#912583", "#00622f"
    blue, purple = "#005b82", "#6730c5"

    class BookCodeStyle(Style):
        name = "backprop-lessons"
        background_color = "#fefefe"
        highlight_color = "#fae4c2"
        styles = {
            Text: black, Error: red, Other: "", Comment: comment,
            Keyword: purple, Keyword.Constant: purple, Keyword.Type: orange,
            Operator: green, Operator.Word: purple, Punctuation: black,
            Name: black, Name.Attribute: magenta, Name.Builtin: orange,
            Name.Builtin.Pseudo: orange, Name.Class: blue, Name.Constant: blue,
            Name.Decorator: orange, Name.Entity: green, Name.Exception: purple,
            Name.Function: blue, Name.Property: blue, Name.Label: orange,
            Name.Namespace: black, Name.Tag: blue, Name.Variable: red,
            Name.Variable.Magic: orange, Number: orange, Literal: orange,
            String: green, String.Backtick: green, String.Regex: red,
            String.Symbol: blue, Generic.Deleted: blue, Generic.Emph: "italic",
            Generic.Heading: blue, Generic.Subheading: blue,
            Generic.Strong: "bold",
        }  # fmt: skip

    return BookCodeStyle


class Source:
    """Source text that renders highlighted in Jupyter and as plain text
    elsewhere.

    The HTML carries each token's colour twice: as a Pygments class (`k`,
    `nf`, ...) inside a `highlight` block, which the rendered book styles
    with its own light and dark code colours (book/_ext/reading.py removes
    the inline styles there), and as an inline style on a light background,
    which Jupyter and Colab keep even in untrusted notebooks, so the block
    reads the same on a light or a dark notebook theme.
    """

    def __init__(self, text: str, title: str):
        self.text, self.title = text, title

    def __repr__(self) -> str:  # the text/plain that nbval compares
        return f"# {self.title}\n{self.text}"

    def _repr_html_(self) -> str:
        from pygments import highlight
        from pygments.formatters import HtmlFormatter
        from pygments.lexers import PythonLexer

        style = _code_style()
        formatter = HtmlFormatter(nowrap=True, style=style)
        # Quotes in text need no escaping, and Pygments 2.21 stopped escaping
        # them (2.20, Colab's, writes &quot; and &#39;): the same HTML from both
        body = (
            highlight(self.text, PythonLexer(), formatter)
            .replace("&quot;", '"')
            .replace("&#39;", "'")
        )
        styles = {cls: css for cls, (css, _, _) in formatter.class2style.items()}

        text_color = styles.get("", "")

        def inline(match: re.Match) -> str:
            css = styles.get(match.group(1), "")
            if not css or css == text_color:  # plain text: the block's colour
                return match.group(0)
            return f'<span style="{css}" class="{match.group(1)}">'

        body = re.sub(r'<span class="([\w-]+)">', inline, body)
        pre_css = (
            f"overflow-x:auto; background:{style.background_color}; "
            f"{text_color}; padding:0.5em"
        )
        title = html.escape(self.title)
        return (
            f'<div class="bl-source"><div class="bl-source-title">{title}</div>'
            '<div class="highlight">'
            f'<pre class="bl-source-code" style="{pre_css}">'
            f"<code>{body}</code></pre></div></div>"
        )


def show_source(obj) -> Source:
    """The source of a function, class or method from the package, ready to
    display."""
    try:
        text = inspect.getsource(obj)
    except (TypeError, OSError) as e:
        raise TypeError(
            f"show_source: cannot get the source of {obj!r} ({e})"
        ) from None
    module = inspect.getmodule(obj)
    if inspect.ismodule(obj):  # a whole file: modules have no __qualname__
        title = obj.__name__
    else:
        title = (
            f"{module.__name__}.{obj.__qualname__}"
            if module
            else obj.__qualname__
        )
    return Source(textwrap.dedent(text).rstrip(), title)
