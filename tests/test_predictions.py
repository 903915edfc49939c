"""exercises.predictions: a prediction is what a function of the reader's
returns, graded against the number the check measures itself (here stood
in for); each common slip gets its own hint; the measuring code may not be
called, and a prediction that reads a variable holding the measured number
is told so.  The measurements themselves (a launch in chapter 8, one in
chapter 12) run where the chapters' solution cells grade the book's
predictions, under nbval: a test here would launch them a second time."""

from __future__ import annotations

import numpy as np
import pytest

from backprop_lessons.exercises import predictions as E
from verdicts import refused

#: what the chapters' launches measure (chapter 8's bytes, chapter 12's
#: elements, saved bytes and bubble), and the context of their slips
MEASURED = {
    "ddp-bytes": (2952.0, {"world": 2}),
    "tp-elements": (16384.0, {"n_layer": 2}),
    "sequence-bytes": (
        149760.0,
        {"whole": 299264, "tensor_parallel": 184576, "mask": 256},
    ),
    "bubble": (0.2, {"p": 2, "m": 4}),
}

#: a notebook's variable holding a launch's results, as chapter 12's `ranks`
RANKS = [{"manual": {"comm": {"all-reduce": 16384}}, "grads": np.ones(3)}]
CONFIG_SIZE = 16  # a variable of the notebook's that is not a measurement


@pytest.fixture(autouse=True)
def measured(monkeypatch):
    """The measurements stood in for (the chapters' numbers)."""
    for name, value in MEASURED.items():
        monkeypatch.setitem(E._MEASURED, name, value)


def check(name, value, exercise=4):
    """check_prediction on a function returning `value` (a default, not a
    closure: a closure over the measured number is reading it)."""
    return E.check_prediction(name, lambda v=value: v, exercise=exercise)


def _status(verdict, status, *words):
    assert verdict.status == status, verdict
    for word in words:
        assert word in verdict.hint, verdict.hint


def test_prediction(capsys):
    def my_elements():
        return ...  # your prediction

    _status(
        E.check_prediction("tp-elements", my_elements, exercise=4),
        "not attempted yet",
        "make my_elements() return your prediction",
    )
    assert check("tp-elements", 16384).correct
    _status(check("tp-elements", 16390), "not yet", "lower")
    _status(check("tp-elements", 8192), "not yet", "half")
    _status(check("tp-elements", 2048), "not yet", "B x T x C")
    _status(check("tp-elements", 1000), "not yet", "higher")
    _status(check("tp-elements", "1"), "not yet", "one number")
    assert check("sequence-bytes", 149760, 5).correct
    _status(check("sequence-bytes", 149632, 5), "not yet", "mask")
    _status(check("sequence-bytes", 184576, 5), "not yet", "plain")
    assert check("bubble", 0.2, 7).correct
    assert check("bubble", 1 / 5, 7).correct
    _status(check("bubble", 0.25, 7), "not yet", "the work")
    _status(check("bubble", 20, 7), "not yet", "percentage")
    _status(check("bubble", 0, 7), "not yet", "reorders")
    assert check("bubble", np.float32(0.2), 7).correct
    assert check("tp-elements", np.int64(16384)).correct
    _status(check("tp-elements", 131072), "not yet", "bytes")
    _status(check("sequence-bytes", 149504, 5), "not yet", "mask back")
    _status(check("bubble", 0.5, 7), "not yet", "one batch")
    with pytest.raises(ValueError, match="no prediction 'nope'"):
        check("nope", 1)


def test_ddp_bytes(capsys):
    assert check("ddp-bytes", 369 * 8, 1).correct
    _status(check("ddp-bytes", 369, 1), "not yet", "elements")
    _status(check("ddp-bytes", 5904, 1), "not yet", "one rank")
    _status(check("ddp-bytes", 1476, 1), "not yet", "8 bytes")


def test_a_prediction_is_a_function_whose_failing_line_is_quoted(capsys):
    def my_bytes():
        return 8 * n_params  # noqa: F821 (a typo of the reader's)

    verdict = E.check_prediction("ddp-bytes", my_bytes, exercise=1)
    _status(verdict, "not yet", "NameError")
    assert verdict.where and "return 8 * n_params" in verdict.where[-1]
    for value in (2952, None):
        _status(
            E.check_prediction("ddp-bytes", value, exercise=1),
            "not yet" if value else "not attempted yet",
        )
    _status(E.check_prediction("ddp-bytes", 2952, exercise=1), "not yet", "pass")


def test_the_measuring_code_is_refused(capsys):
    """Calling what measures is not predicting (each call below would be
    refused before it ran: nothing is launched)."""
    pytest.importorskip("torch")
    from backprop_lessons.exercises.model_parallel import simulate_schedule
    from backprop_lessons.scale import distributed, tensor_parallel
    from backprop_lessons.scale.pipeline import bubble_fraction  # bound

    def launches():
        return distributed.run_workers(distributed.ddp_bucket_bytes)[0][1]

    def the_formula():
        return bubble_fraction(2, 4)

    def plays():
        return simulate_schedule([["F0", "B0"]], 1).bubble[0]

    def counts():
        return tensor_parallel.comm_per_step(None, 128, 0)["tensor parallel"]

    scale = "backprop_lessons.scale."
    for name, fn, called in (
        ("ddp-bytes", launches, scale + "distributed.run_workers"),
        ("bubble", the_formula, scale + "pipeline.bubble_fraction"),
        ("bubble", plays, "backprop_lessons.exercises.model_parallel.simulate"),
        ("tp-elements", counts, scale + "tensor_parallel.comm_per_step"),
    ):
        refused(E.check_prediction(name, fn, exercise=4), called)


def test_reading_the_measurement_is_not_predicting_it(capsys):
    def copied():  # chapter 12's `ranks`, read
        return RANKS[0]["manual"]["comm"]["all-reduce"]

    def helper():
        return RANKS[0]["manual"]["comm"]["all-reduce"]

    def through_a_helper():
        return int(helper())

    measured = 16384

    def closed_over():
        return measured

    for fn, name in (
        (copied, "RANKS"),
        (through_a_helper, "RANKS"),
        (closed_over, "measured"),
    ):
        verdict = E.check_prediction("tp-elements", fn, exercise=4)
        _status(verdict, "not yet", f"reads `{name}`, which holds the number")

    def from_the_sizes():  # reads variables, none holding the measurement
        return 4 * 2 * 8 * 16 * CONFIG_SIZE

    assert E.check_prediction("tp-elements", from_the_sizes, exercise=4).correct
