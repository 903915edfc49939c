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
(`from backprop_lessons.microgpt import MicroGPT`).
"""

from .measure import *  # noqa: F403
from .measure import __all__ as _measure_all
from .model import *  # noqa: F403
from .model import __all__ as _model_all

__all__ = [*_model_all, *_measure_all]
