"""Predict, then measure: a number the reader predicts before a chapter
measures it with one of its deterministic counters.

    def my_tp_elements():
        return ...  # your prediction: a number, or the arithmetic that gives it

    check_prediction("tp-elements", my_tp_elements, exercise=4)

The reader's prediction is what a function of theirs returns: a line of
theirs that raises (a typo in the arithmetic) is then the check's "not yet",
quoting the line, and never stops Run All.  The check says "not attempted
yet" while the function returns `...`, "correct" within the prediction's
tolerance of the measured number, and otherwise "not yet" with a hint: the
hint of the first common slip the number matches, or which way the
measurement lies.

The check measures the number itself, with the package's own measuring code
and the chapter's arguments (`Prediction.measure`: chapter 8's DDP
communication hook and chapter 12's collective counter, saved-tensor hooks
and recorded pipeline order, each in a launch of two processes of its own),
never from a variable of the notebook's; a launch runs once per process
(`measured`, cached), and only once the reader's function returns a number.
A prediction may not call that measuring code (`Prediction.refused`: it is
the answer), and one that reads a variable of the notebook's holding the
measured number (the chapter's own launch results) is told so: a prediction
comes from the sizes, before the measurement.

The slips live here, with the tolerance, in `PREDICTIONS` (name ->
`Prediction`), not in the notebook: in view they would give the answer
away.
"""

from __future__ import annotations

import dis
import functools
import numbers
import types
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..gradcheck import close
from .checking import (
    NotAttempted,
    NotYet,
    Verdict,
    attempt,
    readers_file,
    run_check,
)

__all__ = ["Prediction", "PREDICTIONS", "check_prediction", "measured"]


@dataclass(frozen=True)
class Prediction:
    """How one prediction is graded.

    `measure()` -> (the measured number, the context the slips are computed
    from), by the package's measuring code with the chapter's arguments;
    `slips(measured, **context)` -> [(wrong value, hint)]; `rel` the
    relative tolerance (counts are exact; a fraction is read to a few
    digits); `refused()` -> the measuring code, which a prediction may not
    call (`run_check`'s `refuse=`)."""

    measure: Callable[[], tuple[float, dict]]
    slips: Callable[..., list[tuple[float, str]]]
    rel: float
    refused: Callable[[], tuple]


# ---- chapter 8: the bytes one rank all-reduces in a DDP backward -------------


def _ddp_measure() -> tuple[float, dict]:
    """Chapter 8's launch of the bucket-bytes hook: the MLP (`make_mlp`,
    float64) on two ranks, a batch of 16, buckets of 256 bytes; rank 0's
    bytes in its second backward (DDP has rebuilt its buckets by then)."""
    from ..scale import distributed

    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(16, 4)), rng.normal(size=(16, 1))
    ranks = distributed.run_workers(
        distributed.ddp_bucket_bytes, x, y, 256, world_size=2
    )
    return float(ranks[0][1]), {"world": 2}


def _ddp_refused() -> tuple:
    from ..scale import distributed

    return (
        distributed.run_workers,
        distributed.ddp_bucket_bytes,
        distributed.ddp_bucket_log,
    )


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


# ---- chapter 12: one launch for its three predictions ------------------------


@functools.cache
def _model_parallel_launch() -> dict:
    """Chapter 12's tiny GPT (n_layer 2, C 16, 2 heads, float64) on a batch
    of 8 sequences of 16 tokens of the book's corpus, on two ranks: plain
    tensor parallelism, sequence parallelism and the 1F1B pipeline over 4
    micro-batches; and one block alone in this process.  Returns the
    numbers the predictions are graded by."""
    from ..data.corpus import CharVocab, load_corpus
    from ..gpt import GPTConfig, init_params
    from ..gpt.train import get_batch
    from ..scale import distributed, pipeline, tensor_parallel
    from .model_parallel import simulate_schedule

    text = load_corpus()
    data = CharVocab(text).encode(text)
    config = GPTConfig(
        vocab_size=28, block_size=16, n_layer=2, n_head=2, n_embd=16
    )
    params = init_params(config, seed=0, dtype=np.float64)
    x, y = get_batch(data, config.block_size, 8, np.random.default_rng(0))
    args = (params, config, x, y)
    tasks = {
        "manual": (tensor_parallel.tp_gradients, (*args, "manual")),
        "sequence": (tensor_parallel.tp_gradients, (*args, "manual", True)),
        "1f1b": (pipeline.pipeline_run, (*args, "1f1b", 4)),
    }
    ranks = distributed.run_workers(
        distributed.run_tasks, tasks, world_size=2, timeout=180
    )
    single = tensor_parallel.tp_gradients(0, 1, *args, "single")
    played = simulate_schedule([r["1f1b"]["order"] for r in ranks], 4)
    T = x.shape[1]
    return {
        "tp-elements": ranks[0]["manual"]["comm"]["all-reduce"],
        "n_layer": config.n_layer,
        "sequence-bytes": ranks[0]["sequence"]["block_activation_bytes"],
        "tensor_parallel": ranks[0]["manual"]["block_activation_bytes"],
        "whole": single["block_activation_bytes"],
        "mask": T * T,  # the causal mask, bool: every rank keeps it whole
        "bubble": played.bubble[0],  # stage 0's idle share of the step
        "p": 2,
        "m": 4,
    }


def _launched(name: str, *context: str) -> Callable[[], tuple[float, dict]]:
    def measure():
        found = _model_parallel_launch()
        return float(found[name]), {key: found[key] for key in context}

    return measure


def _tp_refused() -> tuple:
    from ..scale import distributed, tensor_parallel

    return (
        distributed.run_workers,
        tensor_parallel.tp_gradients,
        tensor_parallel.comm_per_step,
    )


def _sequence_refused() -> tuple:
    from ..scale import backward_cost, distributed, tensor_parallel

    return (
        distributed.run_workers,
        tensor_parallel.tp_gradients,
        backward_cost.saved_tensor_bytes,
    )


def _bubble_refused() -> tuple:
    from ..scale import distributed, pipeline
    from .model_parallel import simulate_schedule

    return (
        distributed.run_workers,
        pipeline.pipeline_run,
        pipeline.bubble_fraction,
        pipeline.schedule_grid,
        simulate_schedule,
    )


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
    "ddp-bytes": Prediction(_ddp_measure, _ddp_bytes, 1e-9, _ddp_refused),
    # chapter 12: tensor parallelism's elements, sequence parallelism's
    # saved bytes, the 1F1B bubble
    "tp-elements": Prediction(
        _launched("tp-elements", "n_layer"), _tp_elements, 1e-9, _tp_refused
    ),
    "sequence-bytes": Prediction(
        _launched("sequence-bytes", "whole", "tensor_parallel", "mask"),
        _sequence_bytes,
        1e-9,
        _sequence_refused,
    ),
    "bubble": Prediction(
        _launched("bubble", "p", "m"), _bubble, 1e-2, _bubble_refused
    ),
}

#: name -> (measured, context), each prediction measured once per process
_MEASURED: dict[str, tuple[float, dict]] = {}


def measured(name: str) -> tuple[float, dict]:
    """The number prediction `name` is graded against, and the context of
    its slips: measured by its `Prediction.measure` the first time it is
    asked for in this process, remembered after."""
    if name not in _MEASURED:
        _MEASURED[name] = PREDICTIONS[name].measure()
    return _MEASURED[name]


# ---- a prediction that reads the measurement ----------------------------------

#: how deep and how much of a notebook's variable is searched for a number
_DEPTH, _ITEMS = 6, 100_000


def _globals_read(fn, seen=None) -> dict[str, object]:
    """The notebook's variables `fn` reads (name -> value): the global names
    its code (and the code nested in it) loads, and, through the reader's
    own functions among them, theirs; and what its closure holds."""
    seen = set() if seen is None else seen
    code = getattr(fn, "__code__", None)
    if code is None or code in seen:
        return {}
    seen.add(code)
    space = getattr(fn, "__globals__", {})
    found = {}
    stack = [code]
    while stack:
        current = stack.pop()
        stack += [c for c in current.co_consts if isinstance(c, types.CodeType)]
        for ins in dis.get_instructions(current):
            if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME") and ins.argval in space:
                found[ins.argval] = space[ins.argval]
    for i, cell in enumerate(getattr(fn, "__closure__", None) or ()):
        try:
            found[code.co_freevars[i]] = cell.cell_contents
        except ValueError:  # an empty cell
            continue
    for value in list(found.values()):
        if isinstance(value, types.FunctionType) and readers_file(
            value.__code__.co_filename
        ):
            found.update(_globals_read(value, seen))
    return found


def _holds(value, number: float, rel: float) -> bool:
    """Does `value` hold `number` (within `rel`): a number itself, or
    anywhere in the dicts, lists and tuples it nests (a one-element array
    counts as a number)?"""
    stack, items = [(value, 0)], 0
    while stack and items < _ITEMS:
        item, depth = stack.pop()
        items += 1
        if isinstance(item, np.ndarray) and item.size == 1:
            item = item.item()
        if isinstance(item, (numbers.Real, np.number)) and not isinstance(
            item, (bool, np.bool_)
        ):
            if _matches(float(item), number, rel):
                return True
        elif depth < _DEPTH and isinstance(item, dict):
            stack += [(v, depth + 1) for v in item.values()]
        elif depth < _DEPTH and isinstance(item, (list, tuple)):
            stack += [(v, depth + 1) for v in item]
    return False


def _matches(value: float, target: float, rel: float) -> bool:
    if target == 0:
        return value == 0
    return close(value, target, rel, floor=0.0)


def check_prediction(name: str, predict, *, exercise: int) -> Verdict:
    """Grade what `predict()` returns against the number the check measures
    (see the module)."""
    if name not in PREDICTIONS:
        raise ValueError(
            f"check_prediction: no prediction {name!r}; one of "
            f"{', '.join(PREDICTIONS)}"
        )
    prediction = PREDICTIONS[name]
    function = getattr(predict, "__name__", "")
    function = function if function.isidentifier() else "your function"
    todo = f"make {function}() return your prediction (a number) and run the cell"

    def check(predict):
        if predict is None or predict is Ellipsis:
            raise NotAttempted(todo)
        if not callable(predict):
            raise NotYet(
                "a prediction is what a function of yours returns (def "
                "my_prediction(): return ...): pass the function, not "
                f"a {type(predict).__name__}"
            )
        value = attempt(predict, todo=todo)
        if isinstance(value, (bool, np.bool_)) or not isinstance(
            value, (numbers.Real, np.number)
        ):
            kind = type(value).__name__
            raise NotYet(f"a prediction is one number, got {kind}")
        value = float(value)
        number, context = measured(name)
        if _matches(value, number, prediction.rel):
            read = [
                variable
                for variable, held in _globals_read(predict).items()
                if _holds(held, number, prediction.rel)
            ]
            if read:
                raise NotYet(
                    f"your prediction reads `{read[0]}`, which holds the "
                    "number the chapter measured: predict it from the sizes "
                    "the chapter gives, with the arithmetic in your function"
                )
            return f"    you predicted {value:,g}; measured {number:,g}"
        for slip, hint in prediction.slips(number, **context):
            if _matches(value, slip, prediction.rel):
                raise NotYet(f"{value:,g}: {hint}")
        raise NotYet(
            f"{value:,g} is not what the chapter measured; it is "
            f"{'higher' if number > value else 'lower'} (run the cells "
            f"after this one to see it, then find what your count missed)"
        )

    return run_check(exercise, check, predict, refuse=prediction.refused())
