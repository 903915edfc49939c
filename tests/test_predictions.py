"""exercises.predictions: a prediction is graded against the chapter's
measured number, and each common slip gets its own hint."""

from __future__ import annotations

import numpy as np
import pytest

from backprop_lessons.exercises import predictions as E


def _status(verdict, status, *words):
    assert verdict.status == status, verdict
    for word in words:
        assert word in verdict.hint, verdict.hint


def test_prediction():
    check = E.check_prediction
    tp = {"measured": 16384, "n_layer": 2}
    _status(check("tp-elements", ..., exercise=4, **tp), "not attempted yet")
    assert check("tp-elements", 16384, exercise=4, **tp).correct
    _status(check("tp-elements", 16390, exercise=4, **tp), "not yet", "lower")
    _status(check("tp-elements", 8192, exercise=4, **tp), "not yet", "half")
    _status(check("tp-elements", 2048, exercise=4, **tp), "not yet", "B x T x C")
    _status(check("tp-elements", 1000, exercise=4, **tp), "not yet", "higher")
    _status(check("tp-elements", "1", exercise=4, **tp), "not yet", "one number")
    sp = {
        "measured": 149760,
        "whole": 299264,
        "tensor_parallel": 184576,
        "mask": 256,
    }
    assert check("sequence-bytes", 149760, exercise=5, **sp).correct
    _status(check("sequence-bytes", 149632, exercise=5, **sp), "not yet", "mask")
    _status(check("sequence-bytes", 184576, exercise=5, **sp), "not yet", "plain")
    bubble = {"measured": 0.2, "p": 2, "m": 4}
    assert check("bubble", 0.2, exercise=7, **bubble).correct
    assert check("bubble", 1 / 5, exercise=7, **bubble).correct
    _status(check("bubble", 0.25, exercise=7, **bubble), "not yet", "the work")
    _status(check("bubble", 20, exercise=7, **bubble), "not yet", "percentage")
    _status(check("bubble", 0, exercise=7, **bubble), "not yet", "reorders")
    assert check("bubble", np.float32(0.2), exercise=7, **bubble).correct
    assert check("tp-elements", np.int64(16384), exercise=4, **tp).correct
    _status(check("tp-elements", 131072, exercise=4, **tp), "not yet", "bytes")
    _status(
        check("sequence-bytes", 149504, exercise=5, **sp), "not yet", "mask back"
    )
    _status(check("bubble", 0.5, exercise=7, **bubble), "not yet", "one batch")
    with pytest.raises(ValueError, match="no prediction 'nope'"):
        check("nope", 1, measured=1, exercise=1)


def test_ddp_bytes():
    check = E.check_prediction
    ddp = {"measured": 2952, "world": 2}
    assert check("ddp-bytes", 369 * 8, exercise=4, **ddp).correct
    _status(check("ddp-bytes", 369, exercise=4, **ddp), "not yet", "elements")
    _status(check("ddp-bytes", 5904, exercise=4, **ddp), "not yet", "one rank")
    _status(check("ddp-bytes", 1476, exercise=4, **ddp), "not yet", "8 bytes")
