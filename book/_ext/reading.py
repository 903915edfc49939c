"""Sphinx extension: what the reader of the rendered book sees.

Exercise solutions stay hidden until the reader asks for them
    A notebook code cell tagged `solution` is collapsed in the page: its
    source and output sit in a closed <details> element whose summary reads
    "Show the solution" (myst-nb's `hide-cell` mechanism; the tag alone is
    enough, and nothing else a chapter does can show it).  Closed <details>
    content is not rendered, so neither the code nor its "correct" verdict
    is visible, selectable or read aloud before the click.

Detour code sits in its Deeper box
    A notebook code cell tagged `deeper` belongs to the detour described by
    the markdown Deeper box just above it (`<details class="deeper">` ...
    `</details>` at the end of the markdown cell before it; several tagged
    cells in a row follow the same box).  In the page the cells move inside
    that box, after its text, so a detour with code is one closed box with
    one look and one name (its summary, "Deeper: ..."), exactly like a
    detour without code.  JupyterLab and Colab cannot put a cell inside a
    markdown box: there the box closes over its text and the cells follow
    it, so the box's text says what the cells below do.  A `deeper` cell
    with no box above it, or one also tagged to be hidden another way,
    fails the build (a warning under -W).

A solution's Colab title line is left out
    A solution cell starts with `# @title Exercise N: a solution`, the line
    that makes it a form cell in Colab (shown there as its title, with the
    code hidden).  In the book the cell is already behind "Show the
    solution", so the line is dropped from the code shown.

Links to the published book stay in this book
    Notebook markdown links to the book's own pages (glossary, notation,
    ...) by their published address, `html_baseurl` + `book/glossary.html`,
    the one link that opens a readable page in JupyterLab and Colab too.
    Here each such link becomes a relative link to the local page, so the
    built book never leaves itself (offline, or on another host); a link to
    a page the book does not have fails the build.

Hidden cells are named by their visible text
    myst-nb gives every hidden cell's summary the accessible name "Toggle
    hidden content"; here the summary's own text ("Show the solution",
    "Show code cell source") is its name, so a screen reader says what the
    button reveals.  The box is written as the notebooks' own collapsed
    blocks are (<details class="hide ..."><summary>, the prompt as text),
    so that book.css gives every collapsed block one look.

`show_source` blocks use the book's own code colours
    `backprop_lessons.show` emits Pygments classes *and* inline light-theme
    styles (for Jupyter and Colab).  In the book the inline styles are
    removed, so the theme's light and dark code styles apply, exactly as
    for code cells; so are those of the blocks that "Show the book's
    version" boxes (widgets/reveal.py) keep in their widget state.  A
    block's dotted title (`backprop_lessons.scale.tensor_parallel.TPGPT...`)
    may break before its dots.

Printed sentences wrap; printed tables keep their columns
    A cell's printed output is a <pre>, which keeps each line whole: a
    verdict, a check's line or an error message wider than the column ran
    off its right edge, the part the reader needed cut.  Jupyter and Colab
    wrap such lines.  Here each line of a printed output that is a sentence
    (no run of two spaces between its words) becomes a span that wraps
    inside the box, its continuation lines indented under it (book.css);
    the lines of a printed table (runs of spaces that line columns up, on
    two lines or more) stay whole and the box scrolls sideways for them,
    except a table's verdicts and errors (`Exercise N: ...`, `ValueError`),
    which wrap: the reader needs all of their words.
    The text is unchanged: the spans add no character.

Inline formulas keep their punctuation
    MathJax draws a formula as one box, and a line may break between that
    box and the comma after it, which then starts the next line.  A formula
    and the punctuation right after it are kept together.

Inline code breaks between its words, and at its dots and underscores
    Short inline code (`b.grad = 2`, `(B, C)`) stays on one line.  In
    longer code a line breaks at its spaces, and a long name
    (`torch.utils.checkpoint.checkpoint_sequential`) also before its dots
    and after its underscores and slashes (<wbr>), never inside a word
    unless a single word is wider than the line.

Every figure opens at its full size
    A figure or graph drawing is scaled down to the text column (on a phone
    a third of its size); each is a link to its image file, so a tap shows
    it at full size.  (Sphinx links the figures it scales itself; this does
    the same for the rest.)
"""

from __future__ import annotations

import json
import re
from html import escape, unescape
from urllib.parse import quote

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.transforms.post_transforms import SphinxPostTransform
from sphinx.util import logging
from sphinx.util.osutil import relative_uri

logger = logging.getLogger(__name__)

SOLUTION_TAG = "solution"
PROMPT_SHOW = "Show the solution"
PROMPT_HIDE = "Hide the solution"


class HideSolutionCells(SphinxPostTransform):
    """Mark every `solution`-tagged code cell to be hidden whole (input and
    output).

    Runs just before myst-nb's HideInputCells (priority 199), which wraps
    the marked cells in <details>.
    """

    default_priority = 198
    formats = ("html",)

    def run(self, **kwargs) -> None:
        for node in self.document.findall(nodes.container):
            if (
                node.get("nb_element") == "cell_code"
                and f"tag_{SOLUTION_TAG}" in node["classes"]
            ):
                node["hide_mode"] = "all"
                node["prompt_show"] = PROMPT_SHOW
                node["prompt_hide"] = PROMPT_HIDE


COLAB_TITLE = re.compile(r"\A# @title [^\n]*\n")


class DropColabTitles(SphinxPostTransform):
    """Remove the `# @title ...` first line of every `solution` cell's code."""

    default_priority = 198
    formats = ("html",)

    def run(self, **kwargs) -> None:
        for cell in self.document.findall(nodes.container):
            if cell.get("nb_element") != "cell_code" or (
                f"tag_{SOLUTION_TAG}" not in cell["classes"]
            ):
                continue
            for block in cell.findall(nodes.literal_block):
                text = block.astext()
                if COLAB_TITLE.match(text):
                    kept = COLAB_TITLE.sub("", text, count=1).lstrip("\n")
                    block.children = [nodes.Text(kept)]
                    block.rawsource = kept
                break  # the first literal block is the cell's source


class PublishedLinksAreLocal(SphinxPostTransform):
    """Turn every link to `html_baseurl` + a page of this book into a relative
    link to that page; warn (an error under -W) when the page is missing."""

    default_priority = 199
    formats = ("html",)

    def run(self, **kwargs) -> None:
        base = self.config.html_baseurl
        if not base:
            return
        base = base.rstrip("/") + "/"
        for ref in self.document.findall(nodes.reference):
            uri = ref.get("refuri", "")
            if not uri.startswith(base):
                continue
            path, _, anchor = uri[len(base) :].partition("#")
            docname = path.removesuffix(".html")
            if docname not in self.env.found_docs:
                logger.warning(
                    f"a link to the published book names a page it does not "
                    f"have: {uri}",
                    location=ref,
                    type="reading",
                    subtype="published-link",
                )
                continue
            local = self.app.builder.get_relative_uri(self.env.docname, docname)
            ref["refuri"] = local + (f"#{anchor}" if anchor else "")
            ref["classes"] = [c for c in ref["classes"] if c != "external"]
            ref["internal"] = True


DEEPER_TAG = "deeper"
#: tags that hide a cell behind myst-nb's own toggle: not inside a Deeper box
_OTHER_HIDING = {"hide-cell", "hide-input", "hide-output", SOLUTION_TAG}
_DETAILS_OPEN = re.compile(r"<details\b")
_DETAILS_CLOSE = re.compile(r"</details\s*>")
_DEEPER_OPEN = re.compile(r'<details\s[^>]*class="[^"]*\bdeeper\b[^"]*"')


def _raw_html(node) -> str | None:
    """The text of a raw HTML node (a markdown HTML block), else None."""
    if isinstance(node, nodes.raw) and "html" in node.get("format", "").split():
        return node.astext()
    return None


def _closing_deeper_box(cell) -> nodes.raw | None:
    """The `</details>` that ends the Deeper box right before `cell`, or None
    when the cell does not follow one."""
    parent = cell.parent
    at = parent.index(cell)
    close = parent[at - 1] if at > 0 else None
    if close is None or (_raw_html(close) or "").strip() != "</details>":
        return None
    depth = 0
    for node in reversed(parent.children[:at]):
        text = _raw_html(node)
        if text is None:
            continue
        depth += len(_DETAILS_CLOSE.findall(text))
        depth -= len(_DETAILS_OPEN.findall(text))
        if depth <= 0:  # the <details> that this </details> closes
            return close if _DEEPER_OPEN.search(text) else None
    return None


class DeeperCellsInTheirBox(SphinxPostTransform):
    """Move every `deeper`-tagged code cell into the markdown Deeper box
    above it (before the box's closing `</details>`)."""

    default_priority = 197
    formats = ("html",)

    def run(self, **kwargs) -> None:
        for cell in list(self.document.findall(nodes.container)):
            if cell.get("nb_element") != "cell_code" or (
                f"tag_{DEEPER_TAG}" not in cell["classes"]
            ):
                continue
            tags = set(cell.get("cell_metadata", {}).get("tags", []))
            close = _closing_deeper_box(cell)
            if tags & _OTHER_HIDING:
                problem = (
                    f"is also tagged {sorted(tags & _OTHER_HIDING)}: the box "
                    "already hides it"
                )
            elif close is None:
                problem = (
                    "does not follow a Deeper box (end the markdown cell "
                    'before it with <details class="deeper"><summary>Deeper: '
                    "...</summary> ... </details>)"
                )
            else:
                cell.parent.remove(cell)
                close.parent.insert(close.parent.index(close), cell)
                continue
            logger.warning(
                f"a code cell tagged `{DEEPER_TAG}` {problem}",
                location=cell,
                type="reading",
                subtype="deeper",
            )


def _visit_hidden_cell(self, node) -> None:
    # the same structure as the notebooks' <details class="why"> boxes, so
    # that book.css gives every collapsed block one look: the summary holds
    # its two prompts as text, the one for the current state shown
    classes = " ".join(node["classes"])
    self.body.append(f'<details class="hide {classes}">\n<summary>')
    for state, prompt in (
        ("collapsed", "prompt_show"),
        ("expanded", "prompt_hide"),
    ):
        title = escape(node[prompt])
        self.body.append(f'<span class="{state}">{title}</span>')
    self.body.append("</summary>\n")


def _depart_hidden_cell(self, node) -> None:
    self.body.append("</details>\n")


_SOURCE_BLOCK = re.compile(r'<div class="bl-source">.*?</pre>', re.DOTALL)
_STYLE_ATTR = re.compile(r' style="[^"]*"')


_SOURCE_TITLE = re.compile(r'(<div class="bl-source-title">)([^<]*)(</div>)')


def _source_blocks_for_the_book(html: str) -> str:
    """The show_source blocks in `html` without their inline colours, their
    dotted titles with break points (<wbr>) before the dots."""
    html = _SOURCE_BLOCK.sub(lambda m: _STYLE_ATTR.sub("", m.group(0)), html)
    return _SOURCE_TITLE.sub(
        lambda m: (
            m.group(1)
            + re.sub(r"(?<=\w)\.(?=\w)", "<wbr>.", m.group(2))
            + m.group(3)
        ),
        html,
    )


WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
SOURCE_REVEAL = "backprop_lessons.widgets.reveal.SourceReveal"


def _theme_colours_for_source_blocks(
    app, pagename, templatename, context, doctree
) -> None:
    body = context.get("body")
    if body and 'class="bl-source"' in body:
        context["body"] = _source_blocks_for_the_book(body)
    # the same for the blocks in the "Show the book's version" boxes, which
    # their widget draws from its stored state
    scripts = context.get("script_files") or []
    for i, script in enumerate(scripts):
        attributes = getattr(script, "attributes", {})
        if attributes.get("type") != WIDGET_STATE or SOURCE_REVEAL not in (
            attributes.get("body", "")
        ):
            continue
        state = json.loads(attributes["body"])
        for model in state.get("state", {}).values():
            fields = model.get("state", {})
            if fields.get("_anywidget_id") == SOURCE_REVEAL:
                fields["source_html"] = _source_blocks_for_the_book(
                    fields.get("source_html", "")
                )
        body = json.dumps(state).replace("</script>", r"<\/script>")
        scripts[i] = type(script)(
            script.filename,
            priority=script.priority,
            **{**attributes, "body": body},
        )


class ImagesLinkToTheirFiles(SphinxPostTransform):
    """Make every image that is not a link yet a link to its own file (as
    Sphinx does for the images it scales), so that a tap opens it at full
    size."""

    default_priority = 200
    formats = ("html",)

    def run(self, **kwargs) -> None:
        images = self.env.images
        folder = relative_uri(
            self.app.builder.get_target_uri(self.env.docname), "_images"
        )
        for image in list(self.document.findall(nodes.image)):
            if isinstance(image.parent, nodes.reference):
                continue
            uri = image["uri"]
            if uri not in images:  # not copied into the book (a remote URI)
                continue
            link = nodes.reference(
                "",
                "",
                internal=True,
                refuri=f"{folder}/{quote(images[uri][1])}",
            )
            image.replace_self(link)
            link.append(image)


#: a printed output's text (myst-nb: stream and text/plain outputs)
_OUTPUT_PRE = re.compile(
    r'(<div class="output (?:stream|text_plain)[^"]*">'
    r'<div class="highlight"><pre>(?:<span></span>)?)(.*?)(</pre>)',
    re.DOTALL,
)
#: two spaces or more between two characters: columns lined up
_COLUMN_GAP = re.compile(r"\S {2,}\S")
#: a line that wraps even in a table: an exercise's verdict, an error
_ALWAYS_WRAPS = re.compile(r"^\s*Exercise \d+:|\b[A-Z]\w*(?:Error|Exception)\b")
#: how much deeper than its first line a wrapped line continues (ch)
HANGING_INDENT = 2


def _wrap_output_lines(body: str) -> str:
    """Wrap each sentence line of every printed output in a span that wraps
    (book.css, `.bl-wrap`), its continuation indented by its own indent plus
    HANGING_INDENT; a table's lines (column gaps on two lines or more) stay
    as they are."""

    def lines(match: re.Match) -> str:
        text = match.group(2)
        if "<" in text:  # coloured (ANSI) output: left as printed
            return match.group(0)
        rows = text.split("\n")
        table = sum(bool(_COLUMN_GAP.search(unescape(r))) for r in rows) >= 2
        out = []
        for row in rows:
            plain = unescape(row)
            if not plain.strip() or (
                table
                and _COLUMN_GAP.search(plain)
                and not _ALWAYS_WRAPS.search(plain)
            ):
                out.append(row)
                continue
            indent = len(plain) - len(plain.lstrip(" ")) + HANGING_INDENT
            out.append(
                f'<span class="bl-wrap" style="--bl-indent: {indent}ch">'
                f"{row}</span>"
            )
        return match.group(1) + "\n".join(out) + match.group(3)

    return _OUTPUT_PRE.sub(lines, body)


#: an inline formula and the punctuation right after it
_MATH_THEN_PUNCTUATION = re.compile(
    r'(<span class="math notranslate nohighlight">[^<]*</span>)'
    r"([,.;:!?)\]\u2019\u201d]+)"
)


def _keep_punctuation_with_math(body: str) -> str:
    return _MATH_THEN_PUNCTUATION.sub(
        r'<span class="bl-nobreak">\1\2</span>', body
    )


_INLINE_CODE = re.compile(
    r'<code class="docutils literal notranslate">(.*?)</code>', re.DOTALL
)
_CODE_WORD = re.compile(r'(<span class="pre">)([^<]*)(</span>)')
#: inline code up to this many characters never breaks
SHORT_CODE = 24
#: a word of inline code longer than this gets break points (<wbr>)
LONG_WORD = 16
#: where a long word may break: before a dot, after _ / ( , =
_BREAK_POINT = re.compile(r"(?<=\w)(?=\.\w)|(?<=[_/(,=])(?=\w)")


def _inline_code_breaks(body: str) -> str:
    """Mark short inline code to stay whole (`bl-short`) and give the long
    words of longer inline code break points (see the module docstring)."""

    def word(match: re.Match) -> str:
        text = match.group(2)
        if len(unescape(text)) <= LONG_WORD:
            return match.group(0)
        return match.group(1) + _BREAK_POINT.sub("<wbr>", text) + match.group(3)

    def code(match: re.Match) -> str:
        inner = match.group(1)
        text = unescape(re.sub(r"<[^>]+>", "", inner))
        if len(text) <= SHORT_CODE:
            return (
                '<code class="docutils literal notranslate bl-short">'
                f"{inner}</code>"
            )
        return match.group(0).replace(inner, _CODE_WORD.sub(word, inner), 1)

    return _INLINE_CODE.sub(code, body)


def _reading_layout(app, pagename, templatename, context, doctree) -> None:
    body = context.get("body")
    if body:
        body = _wrap_output_lines(body)
        body = _keep_punctuation_with_math(body)
        context["body"] = _inline_code_breaks(body)


def setup(app: Sphinx) -> dict:
    app.setup_extension("myst_nb")
    from myst_nb.sphinx_ import HideCodeCellNode

    app.add_node(
        HideCodeCellNode,
        override=True,
        html=(_visit_hidden_cell, _depart_hidden_cell),
    )
    app.add_post_transform(HideSolutionCells)
    app.add_post_transform(DropColabTitles)
    app.add_post_transform(PublishedLinksAreLocal)
    app.add_post_transform(DeeperCellsInTheirBox)
    app.add_post_transform(ImagesLinkToTheirFiles)
    app.connect("html-page-context", _theme_colours_for_source_blocks)
    app.connect("html-page-context", _reading_layout)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
