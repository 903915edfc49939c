"""scripts/commonmark_notebooks.py: MyST markup in notebook markdown becomes
CommonMark + HTML, idempotently, touching nothing else."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location(
    "commonmark_notebooks", ROOT / "scripts" / "commonmark_notebooks.py"
)
cm = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cm)

CHAPTER = ROOT / "notebooks" / "01_value_nodes.ipynb"  # where links start from

WHY = """Text before.
````{admonition} Why
:class: dropdown
By the chain rule, $\\frac{d}{dx} e^x = e^x$.

```python
e = math.exp(x)  # a fence shorter than the admonition's
```
````
Text after."""

WHY_CONVERTED = """Text before.

<details class="why"><summary>Why</summary>

By the chain rule, $\\frac{d}{dx} e^x = e^x$.

```python
e = math.exp(x)  # a fence shorter than the admonition's
```

</details>

Text after."""


def test_dropdown_admonition_becomes_details():
    assert cm.convert_markdown(WHY, CHAPTER) == WHY_CONVERTED


@pytest.mark.parametrize(
    ("opening", "summary", "cls"),
    [
        ("```{admonition} Hint\n:class: dropdown", "Hint", "hint"),
        ("```{admonition} Hint 2\n:class: tip dropdown", "Hint 2", "hint"),
        (":::{admonition} Deeper: the <b> tag\n:class: dropdown", None, "deeper"),
        ("```{dropdown} Solution", "Solution", "why"),
    ],
)
def test_title_gives_the_class(opening, summary, cls):
    fence = opening[:3]
    out = cm.convert_markdown(f"{opening}\nBody.\n{fence}", CHAPTER)
    summary = summary or "Deeper: the &lt;b&gt; tag"
    head = f'<details class="{cls}"><summary>{summary}</summary>'
    assert out == f"{head}\n\nBody.\n\n</details>"


def test_nested_dropdowns_are_converted_too():
    text = (
        "````{admonition} Deeper: outer\n:class: dropdown\nOuter.\n"
        "```{admonition} Why\n:class: dropdown\nInner.\n```\n````"
    )
    out = cm.convert_markdown(text, CHAPTER)
    assert out.count("<details") == 2 and out.count("</details>") == 2
    assert cm.leftovers(out) == []


def test_doc_roles_become_relative_links():
    text = (
        "See {doc}`notation <../book/notation>`, {doc}`../book/two_am` and "
        "{doc}`the next chapter <02_topological_sort>`."
    )
    assert cm.convert_markdown(text, CHAPTER) == (
        "See [notation](../book/notation.md), [The 2 AM bug](../book/two_am.md) "
        "and [the next chapter](02_topological_sort.ipynb)."
    )


def test_a_missing_doc_target_is_an_error():
    with pytest.raises(SystemExit, match="no_such_page"):
        cm.convert_markdown("{doc}`../book/no_such_page`", CHAPTER)


def test_what_it_cannot_rewrite_is_left_and_reported():
    text = (
        "```{admonition} Note\nAn open admonition.\n```\n\n"
        "See {ref}`a-label` and {eq}`eq-1`.\n\n(a-label)=\n"
        "Inline code: `{doc}` stays."
    )
    out = cm.convert_markdown(text, CHAPTER)
    assert out == text
    kinds = [item.split(":")[0] for item in cm.leftovers(out)]
    assert kinds == ["directive", "role", "role", "target"]


@pytest.mark.parametrize("text", [WHY, WHY_CONVERTED, "plain *text*", ""])
def test_idempotent(text):
    once = cm.convert_markdown(text, CHAPTER)
    assert cm.convert_markdown(once, CHAPTER) == once


def _notebook(markdown: str, code: str) -> dict:
    return {
        "cells": [
            {
                "cell_type": "markdown",
                "id": "m1",
                "metadata": {},
                "source": markdown.splitlines(keepends=True),
            },
            {
                "cell_type": "code",
                "execution_count": 1,
                "id": "c1",
                "metadata": {"tags": ["solution"]},
                "outputs": [],
                "source": code.splitlines(keepends=True),
            },
        ],
        "metadata": {"kernelspec": {"name": "python3"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def test_notebook_markdown_only_and_check_mode(tmp_path, capsys):
    code = 'print("```{admonition} Why")  # code cells are left alone\n'
    path = tmp_path / "01_value_nodes.ipynb"  # same folder depth as chapters
    path.write_text(cm.dump(_notebook(WHY, code)), encoding="utf-8")
    assert cm.main(["--check", str(path)]) == 1  # would change
    assert cm.main([str(path)]) == 0
    nb = json.loads(path.read_text(encoding="utf-8"))
    assert "".join(nb["cells"][0]["source"]) == WHY_CONVERTED
    assert "".join(nb["cells"][1]["source"]) == code
    assert path.read_text(encoding="utf-8") == cm.dump(nb)  # nbformat's layout
    before = path.read_text(encoding="utf-8")
    assert cm.main(["--check", str(path)]) == 0
    assert cm.main([str(path)]) == 0
    assert path.read_text(encoding="utf-8") == before
    capsys.readouterr()


def test_leftovers_make_the_exit_status_1(tmp_path, capsys):
    path = tmp_path / "nb.ipynb"
    path.write_text(cm.dump(_notebook("See {ref}`x`.", "1\n")), encoding="utf-8")
    assert cm.main([str(path)]) == 1
    assert "rewrite by hand - cell 0: role: {ref}`x`" in capsys.readouterr().out


def test_the_book_notebooks_are_converted():
    """What the script would do to the repository is already done."""
    for path in sorted(p for pattern in cm.DEFAULT for p in ROOT.glob(pattern)):
        changed, left = cm.process(path, write=False)
        assert not changed and not left, (path.name, left)
