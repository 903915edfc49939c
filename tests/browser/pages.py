"""The book's pages, and which chapters still owe a reader-facing convention.

Each PENDING list names the chapters not yet brought to a convention; their
tests are marked `xfail(strict=True)`, so a pending chapter that starts to
pass fails the suite until it is removed from the list.  Chapter editors
shrink these lists; nobody adds to them.  The conventions themselves are in
CONTRIBUTING.md.
"""

from __future__ import annotations

import pytest
import yaml

from .conftest import ROOT


def _toc_files(node) -> list[str]:
    """Every page named in _toc.yml, in reading order."""
    found = []
    if isinstance(node, dict):
        for key in ("root", "file"):
            if key in node:
                found.append(node[key])
        for value in node.values():
            if isinstance(value, (list, dict)):
                found += _toc_files(value)
    elif isinstance(node, list):
        for item in node:
            found += _toc_files(item)
    return found


PAGES = _toc_files(yaml.safe_load((ROOT / "_toc.yml").read_text()))
CHAPTERS = [p for p in PAGES if p.startswith("notebooks/")]
# Appendix notebooks (a detour moved out of a chapter) follow every chapter
# convention except graded exercises: they end in self-checks only.
APPENDICES = {p for p in CHAPTERS if p.startswith("notebooks/appendix_")}

ALL_CHAPTERS = {
    "notebooks/01_value_nodes",
    "notebooks/02_topological_sort",
    "notebooks/03_forward_vs_reverse",
    "notebooks/04_matmul_vjp",
    "notebooks/05_mlp_by_hand",
    "notebooks/06_gpt_backward",
    "notebooks/07_debugging_backward",
    "notebooks/08_backprop_at_scale",
    "notebooks/09_gpt2_124m",
    "notebooks/appendix_microgpt",
    "notebooks/10_memory_and_precision",
    "notebooks/11_higher_order",
    "notebooks/12_model_parallel",
}

PENDING = {
    # Exercises: a stub that prints "not attempted yet", the solution in a
    # cell tagged `solution` (collapsed), nothing "correct" before a click.
    "exercises": set(),
    # At least two kernel-free self-checks (NumberCheck / ChoiceCheck).
    "selfchecks": set(),
    # No `# NBVAL_...` comment lines in the displayed code (use cell tags).
    "nbval_text": set(),
    # Figures drawn with backprop_lessons.viz.plots (text >= 11 CSS px at
    # 1280 px) and graph drawings whose text renders >= 11 CSS px.
    "figures": {},
    # Printed tables (lines whose columns line up) no wider than the text
    # column at 1280 px: at 88 characters of 13px code, a line fits.
    "wide_output": set(),
    # Display math no wider than the text column at 1280 px (a long formula
    # is split over lines, `aligned`, or into two displays).
    "wide_math": set(),
    # Tables no wider than the text column at 1280 px.
    "wide_tables": set(),
    # The chapter's sections in the book's order (CONTRIBUTING.md, "Each
    # chapter's shape"): Overview, Prerequisites, the sections, Summary,
    # Exercises, What's next.  (The appendix too, without exercises of its
    # own: it ends with self-checks.)
    "sections": set(),
}


def chapter_params(convention: str, pages=None) -> list:
    """`pages` (default: every chapter) as pytest params, pending ones
    xfail(strict)."""
    pending = PENDING[convention]
    return [
        pytest.param(
            page,
            marks=pytest.mark.xfail(
                strict=True,
                reason=f"{page} is pending for '{convention}' "
                "(tests/browser/pages.py)",
            ),
        )
        if page in pending
        else page
        for page in (CHAPTERS if pages is None else pages)
        if not (convention == "exercises" and page in APPENDICES)
    ]
