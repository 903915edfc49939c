"""The self-check questions of the chapters, kept as data out of the reader's
view.

A self-check is a question the reader answers on the page, checked in the
browser (`widgets.NumberCheck`, `widgets.ChoiceCheck`).  Written in a
notebook cell, its `answer=` and `explanation=` would be in view wherever
the reader types: Colab shows every code cell but a form cell, and
JupyterLab every cell it is not told to hide.  So each chapter's exercises
module holds its questions in a table, `SELF_CHECKS`, keyed by a stable
name, and the notebook cell only names one:

    self_check("gpt_layers", "wte-used-twice")

`Number(...)` and `Choice(...)` take exactly the arguments of
`NumberCheck` and `ChoiceCheck`; `widgets.self_check` builds the widget
from them (and a test builds every question of every table, so a wrong
argument fails there, not on a reader's page).  This module imports
nothing: a table costs nothing to import.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["Question", "Number", "Choice"]


class Question(NamedTuple):
    """A self-check as data: its kind ("number" or "choice") and the
    arguments of its widget."""

    kind: str
    args: tuple
    kwargs: dict


def Number(*args, **kwargs) -> Question:
    """A question with a numeric answer: the arguments of `NumberCheck`."""
    return Question("number", args, kwargs)


def Choice(*args, **kwargs) -> Question:
    """A multiple-choice question: the arguments of `ChoiceCheck`."""
    return Question("choice", args, kwargs)
