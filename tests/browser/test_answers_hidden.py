"""No answer in view before an attempt (issue 27): at page load, no visible
code on a chapter page shows the backward a reader is asked to write, or
the answer of a self-check.

Visible means rendered: code inside a closed <details> (a collapsed
solution, a collapsed package source) or a hidden element does not count.
A stub the reader fills in (its cell says "your code here") may carry the
function's name; only an implementation counts.
"""

from __future__ import annotations

import re

import pytest

from .pages import CHAPTERS

pytestmark = pytest.mark.browser

#: Text that must not be in view: the package's backward of every layer the
#: reader writes, the whole model's, chapter 4's matmul VJP (its body), and
#: the code that builds a self-check (its answer and explanation).
ANSWERS = {
    "layernorm backward": re.compile(r"def layernorm_backward\("),
    "GELU backward": re.compile(r"def gelu_backward\("),
    "cross-entropy backward": re.compile(r"def crossentropy_softmax_backward\("),
    "attention backward": re.compile(r"def attention_backward\("),
    "encoder backward": re.compile(r"def encoder_backward\("),
    "matmul backward": re.compile(r"def matmul_backward\("),
    "GPT backward": re.compile(r"def gpt_backward\("),
    "chapter 4's matmul VJP": re.compile(r"G\s*@\s*W\.T\s*,\s*X\.T\s*@\s*G"),
    # keyword arguments (`answer = {...}`, a stub's assignment, is not one)
    "a self-check's answer": re.compile(r"\banswer=(?!=)"),
    "a self-check's explanation": re.compile(r"\bexplanation=(?!=)"),
}
STUB = "your code here"


def visible_code(page) -> list[str]:
    """The text of every code block the reader can see now."""
    return page.evaluate(
        """() => Array.from(document.querySelectorAll('article pre'))
        .filter((el) => el.checkVisibility({checkOpacity: true,
                                            checkVisibilityCSS: true}))
        .map((el) => el.innerText)"""
    )


def shown_answers(blocks: list[str]) -> list[str]:
    found = []
    for block in blocks:
        if STUB in block:
            continue
        for name, pattern in ANSWERS.items():
            match = pattern.search(block)
            if match:
                line = block[: match.start()].count("\n") + 1
                found.append(f"{name}: {block.splitlines()[line - 1].strip()}")
    return found


def test_the_patterns_catch_what_they_should():
    assert shown_answers(["def gelu_backward(dinp, inp, dout):\n    pass"])
    assert shown_answers(["    return G @ W.T, X.T @ G"])
    assert shown_answers(['NumberCheck("q", answer=3, explanation="x")'])
    assert not shown_answers(
        [
            "def gelu_backward(dinp, inp, dout):\n    raise NotImplementedError"
            "  # your code here"
        ]
    )
    assert not shown_answers(["wrong = G @ W  # the transpose is missing"])
    assert not shown_answers(['answer = {"a": ..., "b": ...}  # your numbers'])


@pytest.mark.parametrize("page", CHAPTERS)
def test_no_answer_in_view_at_page_load(shared_page, page):
    p = shared_page(page + ".html")
    p.page.wait_for_function(
        "Array.from(document.querySelectorAll('article pre'))"
        ".some((el) => el.checkVisibility())"
    )
    blocks = visible_code(p.page)
    assert blocks, f"{page}: no visible code at all (did the page load?)"
    shown = shown_answers(blocks)
    assert not shown, f"{page}: answers in view at page load: {shown}"
