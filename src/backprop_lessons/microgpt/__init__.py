"""microgpt's GPT on the scalar engine (the appendix), in three files:

    model       the model: its parameter table, forward_token on Values or
                floats, MicroGPT, microgpt's Adam and training loop
    measure     what the appendix measures on it: parameters, graph size,
                finite differences' cost, gradient checks, time per name
    numpy_twin  the same model in NumPy, from chapter 6's layer pairs, with
                a hand-written backward (`from backprop_lessons.microgpt
                import numpy_twin`; its names stay in it: its Adam and train
                work on arrays)

Every public name of `model` and `measure` is importable from here
(`from backprop_lessons.microgpt import MicroGPT`); `measure`'s load on
first use, so that the model alone loads no measuring helper.
"""

import importlib

from .model import *  # noqa: F403
from .model import __all__ as _model_all

__all__ = list(_model_all)  # and measure's names, on first use


def _measure():
    return importlib.import_module(f"{__name__}.measure")


def __getattr__(name: str):
    if name != "measure" and name in _measure().__all__:
        return getattr(_measure(), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return [*globals(), *_measure().__all__]
