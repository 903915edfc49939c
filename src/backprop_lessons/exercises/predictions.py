"""Predict, then measure: a number the reader predicts before a chapter
measures it with one of its deterministic counters.

    check_prediction("tp-elements", my_elements, measured=..., n_layer=2,
                     exercise=4)

A prediction cell holds `my_x = ...`; the check says "not attempted yet"
until the reader writes a number, "correct" within the prediction's
tolerance of `measured` (what the chapter's counter found), and otherwise
"not yet" with a hint: the hint of the first common slip the number
matches, or which way the measurement lies.  The slips live here, with the
tolerance, in `PREDICTIONS` (name -> `Prediction`), not in the notebook:
in view they would give the answer away.  `context` holds what the chapter
has told the reader (the sizes the slips are computed from).
"""

from __future__ import annotations

import numbers
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..gradcheck import close
from .checking import NotAttempted, NotYet, Verdict, run_check

__all__ = ["Prediction", "PREDICTIONS", "check_prediction"]


@dataclass(frozen=True)
class Prediction:
    """`slips(measured, **context)` -> [(wrong value, hint)], and the
    relative tolerance (counts are exact; a fraction is read to a few
    digits)."""

    slips: Callable[..., list[tuple[float, str]]]
    rel: float


def _ddp_bytes(measured, world):
    return [
        (
            measured * world,
            "that is every rank's together: count what one rank puts into "
            "its all-reduces",
        ),
        (measured / 8, "that is elements: a float64 number is 8 bytes"),
        (
            measured / 2,
            "half: float64 gradients take 8 bytes a number, not 4",
        ),
    ]


def _tp_elements(measured, n_layer):
    return [
        (
            measured / 2,
            f"half the count: every block sends its two all-reduces forward "
            f"(g) and its two backward (f), and there are {n_layer} blocks",
        ),
        (measured / 4, "a quarter: four all-reduces per block, in every block"),
        (
            measured / (4 * n_layer),
            "that is one all-reduce's input, B x T x C; count them all",
        ),
        (measured * 8, "that is bytes: count elements (numbers)"),
        (
            measured * 2,
            "that is both ranks together: count what one rank puts in",
        ),
    ]


def _sequence_bytes(measured, whole, tensor_parallel, mask):
    return [
        (whole / 2, "the causal mask is not split: every rank keeps all of it"),
        (
            tensor_parallel,
            "that is plain tensor parallelism's count: sequence parallelism "
            "also splits the layer norms' arrays along T",
        ),
        (whole, "that is one process's count: each rank keeps its share"),
        (
            (whole - mask) / 2,
            "you halved everything but the mask; add the mask back, whole",
        ),
    ]


def _bubble(measured, p, m):
    return [
        (
            0.0,
            "1F1B reorders the forwards and backwards, but the first stage "
            "still waits for the last backward to come back",
        ),
        (
            (p - 1) / p,
            "that is one batch without micro-batches: with m of them the "
            "stages overlap",
        ),
        (
            (p - 1) / m,
            "that is the idle time measured against the work; the question "
            "asks for a share of the whole step, idle time included",
        ),
        (
            100 * measured,
            "give the share as a fraction of the step, not a percentage",
        ),
    ]


#: Every chapter's predictions, by name.
PREDICTIONS = {
    # chapter 8: bytes one rank all-reduces in a DDP backward
    "ddp-bytes": Prediction(_ddp_bytes, 1e-9),
    # chapter 12: tensor parallelism's elements, sequence parallelism's
    # saved bytes, the 1F1B bubble
    "tp-elements": Prediction(_tp_elements, 1e-9),
    "sequence-bytes": Prediction(_sequence_bytes, 1e-9),
    "bubble": Prediction(_bubble, 1e-2),
}


def _matches(value: float, target: float, rel: float) -> bool:
    if target == 0:
        return value == 0
    return close(value, target, rel, floor=0.0)


def check_prediction(
    name: str, predicted, *, measured: float, exercise: int, **context
) -> Verdict:
    """Grade `predicted` against `measured` (see the module)."""
    if name not in PREDICTIONS:
        raise ValueError(
            f"check_prediction: no prediction {name!r}; one of "
            f"{', '.join(PREDICTIONS)}"
        )
    prediction = PREDICTIONS[name]
    slips = prediction.slips(measured, **context)
    todo = "replace ... with your prediction (a number) and run the cell"

    def check(value):
        if value is None or value is Ellipsis:
            raise NotAttempted(todo)
        if isinstance(value, (bool, np.bool_)) or not isinstance(
            value, (numbers.Real, np.number)
        ):
            kind = type(value).__name__
            raise NotYet(f"a prediction is one number, got {kind}")
        value = float(value)
        if _matches(value, measured, prediction.rel):
            return f"    you predicted {value:,g}; measured {measured:,g}"
        for slip, hint in slips:
            if _matches(value, slip, prediction.rel):
                raise NotYet(f"{value:,g}: {hint}")
        raise NotYet(
            f"{value:,g} is not what the chapter measured; it is "
            f"{'higher' if measured > value else 'lower'} (run the cells "
            f"after this one to see it, then find what your count missed)"
        )

    return run_check(exercise, check, predicted)
