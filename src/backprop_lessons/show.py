"""Show the package's real source in a notebook, so the text never drifts from the code."""

from __future__ import annotations

import inspect
import textwrap

__all__ = ["show_source"]


class Source:
    """Source text that renders highlighted in Jupyter and as plain text elsewhere."""

    def __init__(self, text: str, title: str):
        self.text, self.title = text, title

    def __repr__(self) -> str:  # the text/plain that nbval compares
        return f"# {self.title}\n{self.text}"

    def _repr_html_(self) -> str:
        from pygments import highlight
        from pygments.formatters import HtmlFormatter
        from pygments.lexers import PythonLexer

        body = highlight(self.text, PythonLexer(), HtmlFormatter(nowrap=True, noclasses=True, style="friendly"))
        return (f'<div class="bl-source"><div class="bl-source-title">{self.title}</div>'
                f'<pre class="bl-source-code" style="overflow-x:auto"><code>{body}</code></pre></div>')


def show_source(obj) -> Source:
    """The source of a function, class or method from the package, ready to display."""
    try:
        text = inspect.getsource(obj)
    except (TypeError, OSError) as e:
        raise TypeError(f"show_source: cannot get the source of {obj!r} ({e})") from None
    module = inspect.getmodule(obj)
    if inspect.ismodule(obj):  # a whole file: modules have no __qualname__
        title = obj.__name__
    else:
        title = f"{module.__name__}.{obj.__qualname__}" if module else obj.__qualname__
    return Source(textwrap.dedent(text).rstrip(), title)
