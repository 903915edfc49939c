"""Rewrite MyST-only markup in notebook markdown cells as CommonMark + HTML.

    python scripts/commonmark_notebooks.py [--check] [NOTEBOOK ...]

Jupyter Book renders MyST, but JupyterLab and Colab render notebook markdown
as CommonMark (plus HTML): there a ```` ```{admonition} Why ```` dropdown is
a code block that prints its explanation in full, and a `{doc}` role is raw
text.  This script rewrites, in markdown cells only (code cells, outputs and
metadata are left byte for byte as they were):

- a collapsed admonition (```` ```{admonition} TITLE ```` or ``:::{admonition}``
  with ``:class: dropdown``, or sphinx-design's ``{dropdown}``) as

      <details class="why"><summary>Why</summary>

      the body, unchanged (converted too, if it holds more of the same)

      </details>

  with the class from the title: "Why" -> `why`, "Hint..." -> `hint`,
  "Deeper..." -> `deeper`, any other title -> `why` (the title is kept as
  the summary).  book/_static/book.css styles the three alike, as the
  book's dropdowns looked;
- a `{doc}` role as a relative markdown link to the page's file
  (``{doc}`notation <../book/notation>` `` -> ``[notation](../book/notation.md)``;
  without a text, the page's title is the link text).  Jupyter Book turns
  such links into page links; JupyterLab opens the file.

It is idempotent (a converted notebook is left as it is) and writes the
notebook back in nbformat's own layout, so a re-run after a merge changes
only cells that still carry MyST markup.  Anything MyST-only it cannot
rewrite (another directive, a non-collapsed admonition, `{ref}`, `{eq}`,
a `(label)=` target) is listed and makes the exit status 1, for a person to
rewrite by hand.  `--check` changes nothing and exits 1 when a notebook
would change or holds such leftovers.

Default notebooks: notebooks/*.ipynb and tests/browser/demo_book/*.ipynb.
tests/conventions/test_notebooks.py checks that no MyST-only markup is left.
"""

from __future__ import annotations

import argparse
import html
import json
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ["notebooks/*.ipynb", "tests/browser/demo_book/*.ipynb"]

FENCE_OPEN = re.compile(
    r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,}|:{3,})\{(?P<name>[\w-]+)\}"
    r"[ \t]*(?P<arg>.*?)[ \t]*$"
)
OPTION = re.compile(r"^\s*:(?P<key>[\w-]+):[ \t]*(?P<value>.*?)[ \t]*$")
DOC_ROLE = re.compile(r"(?<!`)\{doc\}`(?P<body>[^`]+)`")
TITLED = re.compile(r"^(?P<text>.*?)\s*<(?P<target>[^<>]+)>$", re.DOTALL)
# What CommonMark shows as raw text (the test in
# tests/conventions/test_notebooks.py looks for the same).
LEFTOVERS = [
    (re.compile(r"^ {0,3}(`{3,}|~{3,}|:{3,})\{[\w-]+\}.*$", re.M), "directive"),
    (re.compile(r"(?<!`)\{[a-z][\w:.-]*\}`[^`]+`"), "role"),
    (re.compile(r"^\([\w.:-]+\)=\s*$", re.M), "target"),
]


def details_class(title: str) -> str:
    t = title.strip().lower()
    if t.startswith("hint"):
        return "hint"
    if t.startswith("deeper"):
        return "deeper"
    return "why"


def _is_close(line: str, fence: str) -> bool:
    stripped = line.strip()
    return (
        len(line) - len(line.lstrip(" ")) <= 3
        and len(stripped) >= len(fence)
        and set(stripped) == {fence[0]}
    )


def convert_directives(text: str) -> str:
    """Collapsed admonitions and dropdowns -> <details>; others untouched."""
    lines = text.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        m = FENCE_OPEN.match(lines[i])
        if not m or m["name"] not in ("admonition", "dropdown"):
            out.append(lines[i])
            i += 1
            continue
        j = i + 1
        options = {}
        while j < len(lines) and (o := OPTION.match(lines[j])):
            options[o["key"]] = o["value"]
            j += 1
        end = next(
            (k for k in range(j, len(lines)) if _is_close(lines[k], m["fence"])),
            None,
        )
        collapsed = (
            m["name"] == "dropdown"
            or "dropdown" in options.get("class", "").split()
        )
        title = m["arg"] or ("Why" if m["name"] == "dropdown" else "")
        if end is None or not collapsed or not title:
            out.append(lines[i])  # left for a person (reported as a leftover)
            i += 1
            continue
        body = "\n".join(lines[j:end]).strip("\n")
        if out and out[-1].strip():
            out.append("")
        out += [
            f'<details class="{details_class(title)}">'
            f"<summary>{html.escape(title, quote=False)}</summary>",
            "",
            convert_directives(body),
            "",
            "</details>",
        ]
        i = end + 1
        if i < len(lines) and lines[i].strip():
            out.append("")  # an HTML block runs on until a blank line
    return "\n".join(out)


def page_title(path: Path) -> str:
    """The first `# ` heading of a markdown page or notebook."""
    if path.suffix == ".ipynb":
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        text = "\n".join(
            "".join(c["source"]) for c in cells if c["cell_type"] == "markdown"
        )
    else:
        text = path.read_text(encoding="utf-8")
    m = re.search(r"^# (.+?)\s*$", text, re.M)
    if not m:
        raise SystemExit(f"{path}: no '# ' title to use as a link's text")
    return m[1]


def convert_doc_roles(text: str, notebook: Path) -> str:
    def link(m: re.Match) -> str:
        body = m["body"].strip()
        t = TITLED.match(body)
        label, target = (t["text"], t["target"]) if t else (None, body)
        base = ROOT if target.startswith("/") else notebook.parent
        stem = (base / target.lstrip("/")).resolve()
        candidates = [stem] if stem.suffix in (".md", ".ipynb") else []
        candidates += [stem.with_name(stem.name + s) for s in (".md", ".ipynb")]
        found = next((c for c in candidates if c.exists()), None)
        if found is None:
            raise SystemExit(f"{notebook}: {{doc}} target {target!r} not found")
        href = Path(os.path.relpath(found, notebook.resolve().parent))
        return f"[{label or page_title(found)}]({href.as_posix()})"

    return DOC_ROLE.sub(link, text)


def convert_markdown(text: str, notebook: Path) -> str:
    return convert_doc_roles(convert_directives(text), notebook)


def leftovers(text: str) -> list[str]:
    return [
        f"{kind}: {m.group(0).strip()[:60]}"
        for pattern, kind in LEFTOVERS
        for m in pattern.finditer(text)
    ]


def dump(nb: dict) -> str:
    """nbformat's own layout (what Jupyter and nbconvert write)."""
    return json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def process(path: Path, write: bool) -> tuple[bool, list[str]]:
    """(whether the notebook changes, what MyST-only markup is left)."""
    before = path.read_text(encoding="utf-8")
    nb = json.loads(before)
    left = []
    for n, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "markdown":
            continue
        source = "".join(cell["source"])
        new = convert_markdown(source, path)
        if new != source:
            cell["source"] = new.splitlines(keepends=True)
        left += [f"cell {n}: {item}" for item in leftovers(new)]
    after = dump(nb)
    if write and after != before:
        path.write_text(after, encoding="utf-8")
    return after != before, left


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="*", type=Path)
    parser.add_argument(
        "--check", action="store_true", help="change nothing; exit 1 if needed"
    )
    args = parser.parse_args(argv)
    paths = args.notebooks or sorted(p for g in DEFAULT for p in ROOT.glob(g))
    status = 0
    for path in paths:
        changed, left = process(path, write=not args.check)
        name = path.resolve()
        name = name.relative_to(ROOT) if name.is_relative_to(ROOT) else path
        if changed:
            print(f"{name}: {'would change' if args.check else 'converted'}")
            status |= args.check
        for item in left:
            print(f"{name}: MyST-only markup left, rewrite by hand - {item}")
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
