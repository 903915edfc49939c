"""microgpt's GPT on the scalar engine (chapter 6), in two files:

    model     the model: its parameter table, forward_token on Values or
              floats, MicroGPT, microgpt's Adam and training loop
    measure   what the chapter measures on it: parameters, graph size,
              finite differences' cost, gradient checks, time per name

Its NumPy twin is `gpt.micro`.  Every public name of both files is
importable from here (`from backprop_lessons.microgpt import MicroGPT`).
"""

from .measure import *  # noqa: F403
from .measure import __all__ as _measure_all
from .model import *  # noqa: F403
from .model import __all__ as _model_all

__all__ = [*_model_all, *_measure_all]
