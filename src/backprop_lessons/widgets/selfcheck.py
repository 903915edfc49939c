"""Self-checks: questions the reader answers on the page, checked without a
kernel.

    NumberCheck   a question with a numeric answer, right within a tolerance
    ChoiceCheck   a multiple-choice question, with feedback per wrong choice
    self_check    a chapter's question by name: `self_check(topic, key)`
                  builds the widget of `exercises.<topic>.SELF_CHECKS[key]`,
                  so the notebook cell holds no answer (exercises.questions)

The question, the answer and the feedback live in the widget's state, and a
small ES module (`selfcheck.js`, run by anywidget) checks what the reader
types, in the browser.  So a check works the same in Jupyter, in Colab and
in the rendered book, where no Python runs.  The rule the browser applies is
`judge` in selfcheck.js; `SelfCheck.check` below is the same rule in Python
(a browser test compares the two on a table of answers), so a notebook or a
test can ask what the page would say.

Text fields (question, choices, hints, explanation) are plain text with
`backticks` for code; `$...$` is typeset as math where the page has MathJax
(the rendered book), so prefer Unicode (∂f/∂a, x², ≤) where the check must
read well in Jupyter and Colab too.

A check reveals nothing until the reader answers: a wrong answer says so
(with the hint), a right one confirms (with the explanation), and after a
wrong answer a "Show the answer" button appears.  The answer is in the page's
source, as in any check that runs without a server: these checks are for
learning, not for grading.
"""

from __future__ import annotations

import html
import importlib
import math
import numbers
import pathlib
import re
from collections.abc import Sequence
from typing import NamedTuple

import anywidget
import traitlets

from .text import plain_text

__all__ = [
    "SelfCheck",
    "NumberCheck",
    "ChoiceCheck",
    "Verdict",
    "parse_number",
    "self_check",
]

_HERE = pathlib.Path(__file__).parent

# The same patterns as selfcheck.js (ASCII digits only, as JavaScript's \d).
_SPACES = re.compile("[ \t\n\r\f\v\u00a0\u2009\u202f]")
_NUMBER = re.compile(
    r"[+-]?(\d+\.?\d*|\.\d+)(e[+-]?\d+)?", re.IGNORECASE | re.ASCII
)
_THOUSANDS = re.compile(r"[+-]?\d{1,3}(,\d{3})+(\.\d*)?", re.ASCII)


class Verdict(NamedTuple):
    """What the page says about one response.

    status:  "empty", "invalid", "correct" or "wrong"
    message: the verdict's first words ("Correct.", "Not right yet.", ...)
    detail:  the explanation (correct) or hint (wrong), as HTML
    """

    status: str
    message: str
    detail: str


def parse_number(text: str) -> float | None:
    """The reader's text as a number, or None: -3, 0.25, .5, 2e-3, 1/4, -3/2,
    a Unicode minus (−), spaces, commas between thousands (1,000)."""
    s = _SPACES.sub("", str(text)).replace("\u2212", "-")
    if _THOUSANDS.fullmatch(s):
        s = s.replace(",", "")
    parts = s.split("/")
    if len(parts) > 2 or not all(_NUMBER.fullmatch(p) for p in parts):
        return None
    try:
        value = (
            float(parts[0]) / float(parts[1])
            if len(parts) == 2
            else float(parts[0])
        )
    except ZeroDivisionError:
        return None
    return value if math.isfinite(value) else None


def _inline(text: str) -> str:
    """Plain text to HTML: escaped, with `code` spans."""
    return re.sub(
        r"`([^`]+)`", r"<code>\1</code>", html.escape(str(text), quote=False)
    )


def _plain(text: str) -> str:
    return " ".join(str(text).replace("`", "").split())


def _check_text(who: str, name: str, value) -> str:
    if not isinstance(value, str):
        raise TypeError(
            f"{who}: {name} must be a string, got {type(value).__name__}"
        )
    return value


class SelfCheck(anywidget.AnyWidget):
    """The widget both kinds of check share: state, front end, and `check`."""

    _esm = (_HERE / "selfcheck.js").read_text(encoding="utf-8")
    _css = (_HERE / "selfcheck.css").read_text(encoding="utf-8")

    kind = traitlets.Unicode("number").tag(sync=True)
    question = traitlets.Unicode("").tag(sync=True)  # HTML (from plain text)
    hint = traitlets.Unicode("").tag(sync=True)  # HTML, shown with a wrong answer
    explanation = traitlets.Unicode("").tag(
        sync=True
    )  # HTML, shown with a right answer
    # Written by the front end when the reader checks an answer (a live
    # kernel sees them; the static page has nothing to send them to).
    response = traitlets.Unicode("").tag(sync=True)
    status = traitlets.Unicode("").tag(sync=True)

    def check(self, response) -> Verdict:
        """What the page says to `response` (typed text, or a choice's index)."""
        raise NotImplementedError


class NumberCheck(SelfCheck):
    """A question whose answer is a number, checked within a tolerance.

    Right when |x - answer| <= max(tolerance, rel_tolerance * |answer|).
    The defaults accept only the exact value (up to float round-off): pass
    a tolerance when the reader is asked to round, and say so in the question.

    >>> NumberCheck(                                          # doctest: +SKIP
    ...     "For f = relu(a*b + d) at a = 2, b = -3, d = 10, what is ∂f/∂a?",
    ...     answer=-3, hint="The product sends b to a.")
    """

    answer = traitlets.Float(0.0).tag(sync=True)
    answer_text = traitlets.Unicode("").tag(
        sync=True
    )  # how "Show the answer" writes it
    tolerance = traitlets.Float(1e-9).tag(sync=True)
    rel_tolerance = traitlets.Float(1e-9).tag(sync=True)
    unit = traitlets.Unicode("").tag(
        sync=True
    )  # shown after the box, e.g. "bytes"

    def __init__(
        self,
        question: str,
        answer: float,
        *,
        tolerance: float = 1e-9,
        rel_tolerance: float = 1e-9,
        hint: str = "",
        explanation: str = "",
        unit: str = "",
        answer_text: str | None = None,
        **kwargs,
    ):
        who = "NumberCheck"
        _check_text(who, "question", question)
        if isinstance(answer, bool) or not isinstance(answer, numbers.Real):
            raise TypeError(
                f"{who}: answer must be a number, got {type(answer).__name__}"
            )
        if not math.isfinite(float(answer)):
            raise ValueError(f"{who}: answer must be finite, got {answer!r}")
        for name, tol in (
            ("tolerance", tolerance),
            ("rel_tolerance", rel_tolerance),
        ):
            if not (
                isinstance(tol, (int, float))
                and not isinstance(tol, bool)
                and math.isfinite(tol)
                and tol >= 0
            ):
                raise ValueError(
                    f"{who}: {name} must be a finite number >= 0, got {tol!r}"
                )
        if answer_text is None:
            answer_text = f"{float(answer):.12g}"
        super().__init__(
            kind="number",
            question=_inline(question),
            answer=float(answer),
            tolerance=float(tolerance),
            rel_tolerance=float(rel_tolerance),
            hint=_inline(_check_text(who, "hint", hint)),
            explanation=_inline(_check_text(who, "explanation", explanation)),
            unit=_inline(_check_text(who, "unit", unit)),
            answer_text=_inline(_check_text(who, "answer_text", answer_text)),
            **kwargs,
        )
        self._plain_question = _plain(question)

    def check(self, response) -> Verdict:
        text = _SPACES.sub(" ", str(response)).strip(" ")
        if text == "":
            return Verdict("empty", "Type an answer first.", "")
        x = parse_number(text)
        if x is None:
            return Verdict(
                "invalid",
                "That is not a number this check can read.",
                "Type for example -3, 0.25, 1/4 or 2e-3.",
            )
        a = self.answer
        allowed = max(self.tolerance, self.rel_tolerance * abs(a))
        if abs(x - a) <= allowed:
            return Verdict("correct", "Correct.", self.explanation)
        if a != 0 and abs(-x - a) <= allowed:
            return Verdict(
                "wrong",
                "Not right yet: the size is right, the sign is not.",
                self.hint,
            )
        return Verdict("wrong", "Not right yet.", self.hint)

    def __repr__(self) -> str:
        return plain_text(f"NumberCheck({self._plain_question!r})")


class ChoiceCheck(SelfCheck):
    """A multiple-choice question with one right choice.

    answer: the right choice, by index or by its text.
    hints:  feedback for wrong choices - a list parallel to `choices` or a
            dict keyed by index or text; `hint` is used for the others.

    >>> ChoiceCheck("Which order does backward visit the nodes in?",
    ...             ["topological", "reverse topological", "any"],
    ...             answer="reverse topological")               # doctest: +SKIP
    """

    answer = traitlets.Int(0).tag(sync=True)
    choices = traitlets.List(traitlets.Unicode()).tag(sync=True)
    choice_hints = traitlets.List(traitlets.Unicode()).tag(sync=True)

    def __init__(
        self,
        question: str,
        choices: Sequence[str],
        answer: int | str,
        *,
        hints: Sequence[str] | dict | None = None,
        hint: str = "",
        explanation: str = "",
        **kwargs,
    ):
        who = "ChoiceCheck"
        _check_text(who, "question", question)
        if isinstance(choices, str) or not isinstance(choices, Sequence):
            raise TypeError(
                f"{who}: choices must be a list of strings, got "
                f"{type(choices).__name__}"
            )
        choices = [
            _check_text(who, f"choices[{i}]", c) for i, c in enumerate(choices)
        ]
        if len(choices) < 2:
            raise ValueError(
                f"{who}: expected at least 2 choices, got {len(choices)}"
            )
        if len(set(choices)) != len(choices):
            raise ValueError(
                f"{who}: choices must be different from each other: {choices}"
            )
        index = self._index(who, "answer", answer, choices)
        per_choice = [""] * len(choices)
        if isinstance(hints, dict):
            for key, text in hints.items():
                per_choice[self._index(who, "hints key", key, choices)] = (
                    _check_text(who, f"hints[{key!r}]", text)
                )
        elif hints is not None:
            if len(hints) != len(choices):
                raise ValueError(
                    f"{who}: hints must have one entry per choice "
                    f"({len(choices)}), got {len(hints)}"
                )
            per_choice = [
                _check_text(who, f"hints[{i}]", h) for i, h in enumerate(hints)
            ]
        super().__init__(
            kind="choice",
            question=_inline(question),
            answer=index,
            choices=[_inline(c) for c in choices],
            choice_hints=[_inline(h) for h in per_choice],
            hint=_inline(_check_text(who, "hint", hint)),
            explanation=_inline(_check_text(who, "explanation", explanation)),
            **kwargs,
        )
        self._plain_question = _plain(question)

    @staticmethod
    def _index(who: str, name: str, key, choices: list[str]) -> int:
        if isinstance(key, str):
            if key not in choices:
                raise ValueError(
                    f"{who}: {name} {key!r} is not one of the choices {choices}"
                )
            return choices.index(key)
        if (
            isinstance(key, bool)
            or not isinstance(key, int)
            or not 0 <= key < len(choices)
        ):
            raise ValueError(
                f"{who}: {name} must be a choice's text or an index "
                f"0..{len(choices) - 1}, got {key!r}"
            )
        return key

    def check(self, response) -> Verdict:
        text = _SPACES.sub(" ", str(response)).strip(" ")
        if text == "":
            return Verdict("empty", "Choose an answer first.", "")
        try:
            chosen = float(text)
        except ValueError:
            chosen = math.nan
        if chosen == self.answer:
            return Verdict("correct", "Correct.", self.explanation)
        specific = ""
        if chosen.is_integer() and 0 <= chosen < len(self.choices):
            specific = self.choice_hints[int(chosen)]
        return Verdict("wrong", "Not right yet.", specific or self.hint)

    def __repr__(self) -> str:
        return plain_text(f"ChoiceCheck({self._plain_question!r})")


def self_check(topic: str, key: str) -> SelfCheck:
    """The self-check `key` of a chapter: the widget of the question
    `exercises.<topic>.SELF_CHECKS[key]` (`topic` is the chapter's exercises
    module, "value_nodes", "gpt_layers", ...)."""
    from ..exercises.questions import Question

    _check_text("self_check", "topic", topic)
    _check_text("self_check", "key", key)
    try:
        module = importlib.import_module(f"..exercises.{topic}", __package__)
    except ModuleNotFoundError:
        raise ValueError(
            f"self_check: no exercises module {topic!r} (topics are the "
            "modules of backprop_lessons.exercises, e.g. 'value_nodes')"
        ) from None
    table = getattr(module, "SELF_CHECKS", {})
    if key not in table:
        raise ValueError(
            f"self_check: {topic!r} has no self-check {key!r}; its keys are "
            f"{sorted(table)}"
        )
    question: Question = table[key]
    widget = {"number": NumberCheck, "choice": ChoiceCheck}[question.kind]
    return widget(*question.args, **question.kwargs)
