"""Sphinx extension: make the rendered book self-contained, quiet and up to date.

Copies anywidget's front-end bundle from the installed Python package into
`_static/vendor/anywidget/index.js`, where `vendor/widgets-config.js` points
RequireJS.  Taking it from the installed package (rather than a stored copy)
keeps it the same version as the one that wrote the widget state stored in
the notebooks.  One change: anywidget gives a widget's model 2 seconds to
load its module and start, then reports "[anywidget] Failed to initialize
model" and never draws the widget.  A page busy for longer (MathJax
typesetting a long chapter on a phone or a loaded machine: it happened in
CI) was left with empty space where a stepper belongs; the book's copy
waits 60 seconds.  If an anywidget upgrade changes that code, the build
says so (a warning: an error under -W).

The widget manager's stylesheet loads its icon fonts from
`@jupyter-widgets/<hash>.<ext>` next to the page that shows a widget (the
bundle's public path is the page's folder); the vendored fonts are copied
there, so no page asks for a file that is not in the book.

The book's own widgets (steppers, self-checks, source reveals) show the
package's current front end.  anywidget stores a widget's JavaScript and CSS
(`_esm`, `_css`) in the widget state a notebook keeps, so a chapter last
executed before a fix of `widgets/*.js` or `*.css` would show the old code.
Every page's widget state gets the `_esm` and `_css` of the installed
package's classes instead (by `_anywidget_id`; a widget of the package that
no longer exists fails the build); the frames and answers stay those the
notebook stored.  The browser tests then check the front end that the next
`make notebooks` will store.
"""

from __future__ import annotations

import importlib
import json
import shutil
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.util import logging

logger = logging.getLogger(__name__)


#: anywidget's time limit for a model to start, and the book's (see the top)
INIT_TIMEOUT = "AbortSignal.timeout(2e3)"
BOOK_INIT_TIMEOUT = "AbortSignal.timeout(6e4)"


def _copy_anywidget(app: Sphinx, exception: Exception | None) -> None:
    if exception is not None or app.builder.format != "html":
        return
    import anywidget

    source = Path(anywidget.__file__).parent / "nbextension" / "index.js"
    if not source.exists():
        raise RuntimeError(
            f"offline_assets: anywidget's front end not found at {source}"
        )
    target = Path(app.outdir) / "_static" / "vendor" / "anywidget" / "index.js"
    target.parent.mkdir(parents=True, exist_ok=True)
    code = source.read_text()
    if code.count(INIT_TIMEOUT) != 1:
        logger.warning(
            f"offline_assets: anywidget's front end ({source}) no longer "
            f"holds {INIT_TIMEOUT!r} once: see the top of this module",
            type="offline_assets",
            subtype="anywidget",
        )
    target.write_text(code.replace(INIT_TIMEOUT, BOOK_INIT_TIMEOUT))
    _copy_widget_fonts(Path(app.confdir), Path(app.outdir))


FONT_SUFFIXES = {".woff", ".woff2", ".ttf", ".eot", ".svg"}


def _copy_widget_fonts(confdir: Path, outdir: Path) -> None:
    """The html-manager's fonts into `@jupyter-widgets/` of every folder of
    pages (see the top)."""
    fonts = [
        p
        for p in (
            confdir / "book" / "_static" / "vendor" / "html-manager"
        ).iterdir()
        if p.suffix in FONT_SUFFIXES
    ]
    folders = {page.parent for page in outdir.rglob("*.html")}
    for folder in folders:
        if "_static" in folder.relative_to(outdir).parts:
            continue
        target = folder / "@jupyter-widgets"
        target.mkdir(exist_ok=True)
        for font in fonts:
            shutil.copyfile(font, target / font.name)


def _drop_thebe(app: Sphinx, pagename, templatename, context, doctree) -> None:
    """Remove sphinx-thebe's scripts: the book does not use Thebe, and
    Jupyter Book adds its config script twice, which is a console error
    ("Identifier 'THEBE_JS_URL' has already been declared")."""
    scripts = context.get("script_files")
    if scripts is None:
        return
    context["script_files"] = [
        s
        for s in scripts
        if "sphinx-thebe" not in str(s)
        and "THEBE_JS_URL" not in getattr(s, "attributes", {}).get("body", "")
    ]


WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
OUR_WIDGETS = "backprop_lessons.widgets."


def _widget_class(anywidget_id: str):
    """The class named by an `_anywidget_id` ("module.Class"), or None."""
    module, _, name = anywidget_id.rpartition(".")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        return None


def _current_widget_front_end(
    app: Sphinx, pagename, templatename, context, doctree
) -> None:
    """Give the package's widgets in the page's stored state the installed
    package's `_esm` and `_css` (see the top)."""
    scripts = context.get("script_files")
    if not scripts:
        return
    for i, script in enumerate(scripts):
        attributes = getattr(script, "attributes", {})
        if attributes.get("type") != WIDGET_STATE:
            continue
        state = json.loads(attributes["body"])
        for model in state.get("state", {}).values():
            fields = model.get("state", {})
            anywidget_id = fields.get("_anywidget_id") or ""
            if not anywidget_id.startswith(OUR_WIDGETS):
                continue
            cls = _widget_class(anywidget_id)
            if cls is None:
                logger.warning(
                    f"{pagename}: the stored widget {anywidget_id} is not in "
                    "the package (re-run the notebook: make notebooks)",
                    type="offline_assets",
                    subtype="widget",
                )
                continue
            fields["_esm"], fields["_css"] = cls._esm, cls._css
        body = json.dumps(state).replace("</script>", r"<\/script>")
        scripts[i] = type(script)(
            script.filename,
            priority=script.priority,
            **{**attributes, "body": body},
        )


def _refresh_static_files(app: Sphinx) -> None:
    """Bring outdated copies of the book's static files in the output up to date.

    Sphinx copies static files only while it writes pages, and an
    incremental build (`make book`) writes no page when only a static file
    changed, so an edited book.css or book.js would not reach the book.
    """
    if app.builder.format != "html":
        return
    target_root = Path(app.outdir) / "_static"
    for entry in app.config.html_static_path:
        source_root = Path(app.confdir) / entry
        for source in source_root.rglob("*"):
            target = target_root / source.relative_to(source_root)
            if source.is_file() and (
                not target.is_file() or target.read_bytes() != source.read_bytes()
            ):
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source, target)


def setup(app: Sphinx) -> dict:
    app.connect("builder-inited", _refresh_static_files)
    app.connect("build-finished", _copy_anywidget)
    app.connect("html-page-context", _drop_thebe)
    app.connect("html-page-context", _current_widget_front_end)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
