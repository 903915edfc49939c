"""The self-check questions of the appendix, "microgpt on the scalar engine"
(it has no exercises: the appendix measures).

    SELF_CHECKS    the questions `widgets.self_check("microgpt", key)` shows
"""

from __future__ import annotations

from .questions import Number

__all__ = ["SELF_CHECKS"]


# ---- self-checks -------------------------------------------------------------

#: The chapter's self-check questions, shown by `widgets.self_check`.
SELF_CHECKS = {
    "parameters-at-32-positions": Number(
        "microgpt has V = 27, C = 16, one layer and 16 positions: 4,192 "
        "parameters. How many does it have with 32 positions?",
        answer=4192 + 16 * 16,
        hint="Only wpe, (positions, C), depends on the number of positions.",
        explanation="wpe grows by 16 rows of 16 numbers: 4,192 + 256 = 4,448.",
    ),
    "finite-difference-passes": Number(
        "One name's loss has 45,571 nodes and its backward takes 89,202 steps. "
        "How many forward passes would one-sided finite differences need for "
        "the gradient of all 4,192 parameters?",
        answer=4193,
        hint="One pass per parameter, plus one unperturbed pass.",
        explanation="N + 1 = 4,193 passes, against one forward and one "
        "backward for backpropagation.",
    ),
}
