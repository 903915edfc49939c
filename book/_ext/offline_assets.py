"""Sphinx extension: make the rendered book self-contained, quiet and up to date.

Copies anywidget's front-end bundle from the installed Python package into
`_static/vendor/anywidget/index.js`, where `vendor/widgets-config.js` points
RequireJS.  Taking it from the installed package (rather than a stored copy)
keeps it the same version as the one that wrote the widget state stored in
the notebooks.

The widget manager's stylesheet loads its icon fonts from
`@jupyter-widgets/<hash>.<ext>` next to the page that shows a widget (the
bundle's public path is the page's folder); the vendored fonts are copied
there, so no page asks for a file that is not in the book.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from sphinx.application import Sphinx


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
    shutil.copyfile(source, target)
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
    return {"parallel_read_safe": True, "parallel_write_safe": True}
