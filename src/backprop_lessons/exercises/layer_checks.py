"""The machinery of the checks in which the reader writes a layer's backward
(chapter 6's layers in `gpt_layers`, chapter 10's FlashAttention and fused
classifier in `memory_and_precision`, and any later layer).

    LayerCase             one call of the reader's backward: the buffers,
                          dout, the cache, the right gradients, the bugs
    run_layer_check(fn, cases, todo)
                          call fn once per case; NotYet at the first wrong
                          gradient, with its diagnosis
    what_to_write(fn, rest)   a stub's "not attempted yet" text
    readers_calls_with(objects)
                          while a model's backward runs, the reader's
                          functions it calls with one of `objects` (a layer's
                          cache): how a capstone finds the reader's layers
    torch_vjp(forward, inputs, dout)
                          the right gradients, from PyTorch in float64
    random_buffers(rng, **shapes), label_at(**sizes), LAYER_SHAPES
                          what a case is built from
    wrong_thirds          the detail of a (B, T, 3C) dinp: which of the q,
                          k, v thirds is wrong
    TOL                   the relative tolerance of a layer's gradient

A layer's `fn` has exactly the signature of the book's backward: the
gradient buffers first, then dout (dloss for a loss) and the cache made by
the book's forward; it adds into the buffers and returns nothing.  The
check fills the buffers with random numbers first (a buffer may already
hold the gradient of another use of the same input), calls `fn` once per
case, and compares what it added (buffer after minus buffer before) with
PyTorch's gradient in float64, one gradient at a time in the order of the
signature.  The first wrong one is named in the hint, with the largest
difference, and what is wrong with it when the check can tell: each case
also carries the classic bugs (a missing term, a transpose, `=` for `+=`,
...) and the check says which one the answer matches.  When it matches
none, the hint points to the exercise's Hint 3 for the formula: no check
prints the formula the reader is asked to derive.  A backward that leaves
every buffer as it was is a stub ("not attempted yet"), unless its code
assigns to a buffer's name (`dinp = ...`), which only rebinds the name:
then it is told so.  PyTorch is imported only when `torch_vjp` runs.
"""

from __future__ import annotations

import contextlib
import dis
import gc
import inspect
import sys
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np

from ..gradcheck import close, largest_difference
from .checking import NotAttempted, NotYet, attempt, readers_file

__all__ = [
    "TOL",
    "LayerCase",
    "run_layer_check",
    "what_to_write",
    "readers_calls_with",
    "LayerCall",
    "SEE_HINT_3",
    "torch_vjp",
    "random_buffers",
    "label_at",
    "LAYER_SHAPES",
    "wrong_thirds",
]

# Relative tolerance of a layer's gradient (max difference over the larger
# of 1 and the right gradient's largest entry).  The book's layers agree with
# PyTorch to 8e-16 or better on these inputs; the nearest bug, the erf
# GELU's derivative in place of the tanh GELU's, is off by 3.3e-4 on the
# GELU check's inputs (the two slopes differ by up to 8.7e-4, at |x| = 2.0,
# and still by 1.3e-6 at |x| = 0.1).  1e-9 lies between, with margins of
# 10^5 to 10^6 on either side.
TOL = 1e-9

#: What a check says of a wrong gradient when it recognises no slip: the
#: formula is the exercise's Hint 3, never the check's to print.
SEE_HINT_3 = "see Hint 3 for the formula"


@dataclass
class LayerCase:
    """One call of the reader's backward: `fn(*buffers, dout, cache)`.

    `buffers` maps each gradient's name (dinp, dweight, ...) to its starting
    content, random and non-zero, or None for a gradient not wanted;
    `expected` maps the same names to what the backward must add;
    `bugs` maps a name to (what a classic bug would add, what it is);
    `on_error` is added to the hint when the reader's code raises.
    """

    buffers: dict[str, np.ndarray | None]
    dout: object
    cache: object
    expected: dict[str, np.ndarray]
    shapes: str
    label: str = ""
    on_error: str = ""
    bugs: dict[str, list[tuple[np.ndarray, str]]] = field(default_factory=dict)


def what_to_write(fn, rest: str) -> str:
    """What a stub still has to do, in the reader's own name for it:
    "write my_gelu_backward(dinp, dout, cache)"."""
    name = getattr(fn, "__name__", "")
    return f"write {name if name.isidentifier() else 'your function'}{rest}"


def _arrays_in(value) -> list[np.ndarray]:
    """Every ndarray in a cache (an array, or tuples and lists of them)."""
    if isinstance(value, np.ndarray):
        return [value]
    if isinstance(value, (tuple, list)):
        return [a for v in value for a in _arrays_in(v)]
    return []


def _diagnosis(name: str, added, after, case: LayerCase) -> str:
    """What is wrong with the gradient `name`, when the check can tell."""
    right = case.expected[name]
    if close(after, right, TOL):
        return (
            f"your backward assigns (=) where it must add (+=): {name} "
            f"already held a gradient (from another use of the same input) "
            f"and after your call it holds only this layer's part"
        )
    if not added.any():
        return (
            f"your backward added nothing into the {name} buffer (`{name} = "
            f"...` only rebinds the name inside your function: add in place, "
            f"`{name} += ...`)"
        )
    for wrong, what in case.bugs.get(name, []):
        if close(added, wrong, TOL):
            return what
    if close(added, -right, TOL):
        return "it has the wrong sign"
    if close(added, 2 * right, TOL):
        return "it is twice the right one: it is added twice"
    return ""


def _rebound_buffers(fn, count: int) -> list[str]:
    """The names among fn's first `count` parameters (its buffers) that its
    code assigns to with a plain `=` (`dinp = ...`, which only rebinds the
    name inside fn), not with an in-place `+=`."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return []
    buffers = code.co_varnames[: min(count, code.co_argcount)]
    rebound, previous = [], None
    for ins in dis.get_instructions(code):
        # `dinp += x` stores the name too, right after the in-place operator
        augmented = (
            previous is not None
            and previous.opname == "BINARY_OP"
            and previous.argrepr.endswith("=")
        )
        stores = ins.opname.startswith(("STORE_FAST", "STORE_DEREF"))
        if stores and not augmented:
            names = ins.argval if isinstance(ins.argval, tuple) else (ins.argval,)
            rebound += [n for n in names if n in buffers and n not in rebound]
        previous = ins
    return rebound


def _listed(names: list[str]) -> str:
    """ "dinp", "dinp and dweight", "dinp, dweight and dbias"."""
    return " and ".join(filter(None, [", ".join(names[:-1]), names[-1]]))


def run_layer_check(
    fn: Callable,
    cases: list[LayerCase],
    todo: str,
    detail: Callable | None = None,
) -> None:
    """Call fn once per case and raise NotYet at the first wrong gradient.

    The hint names the gradient and, when a known bug or a slip every layer
    can make matches, what is wrong with it; otherwise it points to the
    exercise's Hint 3 (`SEE_HINT_3`).  `detail(name, added, right)`, if
    given, adds to the hint."""
    for number, case in enumerate(cases):
        before = {
            n: None if b is None else b.copy() for n, b in case.buffers.items()
        }
        work = {n: None if b is None else b.copy() for n, b in before.items()}
        inputs = _arrays_in(case.dout) + _arrays_in(case.cache)
        inputs_before = [a.copy() for a in inputs]
        try:
            result = attempt(
                fn,
                *work.values(),
                case.dout,
                case.cache,
                todo=todo,
                may_return_none=True,
            )
        except NotYet as error:
            where = f"{case.label}, " if case.label else ""
            more = f"; {case.on_error}" if case.on_error else ""
            text = " ".join(str(error).split())  # one line
            raise NotYet(
                f"{where}{text} ({case.shapes}){more}", where=error.where
            ) from None
        names = [n for n in work if work[n] is not None]
        if all(np.array_equal(work[n], before[n]) for n in names):
            if result is not None:
                raise NotYet(
                    "a backward adds into the buffers it is given "
                    f"({names[0]} += ...) and returns nothing; yours returned "
                    f"a {type(result).__name__} and left them as they were"
                )
            rebound = _rebound_buffers(fn, len(work))
            if rebound:
                s = "s" if len(rebound) > 1 else ""
                raise NotYet(
                    f"your backward assigns to {_listed(rebound)} "
                    f"(`{rebound[0]} = ...`), which only rebinds the name{s} "
                    f"inside your function and leaves the buffer{s} you were "
                    f"given unchanged: add in place with +=: "
                    f"`{rebound[0]} += ...`"
                )
            if number == 0:
                raise NotAttempted(
                    f"{todo} (so far it adds nothing to the buffers)"
                )
        if any(not np.array_equal(a, b) for a, b in zip(inputs, inputs_before)):
            raise NotYet(
                "your backward changed dout or the cache in place: the "
                "caller still needs them; compute into new arrays "
                "(g = dout * weight, not dout *= weight)"
            )
        wrong = []
        for name in names:
            added = work[name] - before[name]
            if not np.isfinite(added).all():
                raise NotYet(f"{name} holds nan or inf after your backward")
            if not close(added, case.expected[name], TOL):
                wrong.append((name, added))
        if not wrong:
            continue
        name, added = wrong[0]
        diff = largest_difference(added, case.expected[name])
        where = f" {case.label}" if case.label else ""
        why = _diagnosis(name, added, work[name], case) or SEE_HINT_3
        if detail is not None:
            more = detail(name, added, case.expected[name])
            why = f"{why}; {more}" if more else why
        also = [n for n, _ in wrong[1:]]
        also_text = f" ({', '.join(also)} wrong too)" if also else ""
        raise NotYet(
            f"{name} is wrong{where} (largest difference {diff:.1e}): "
            f"{why}{also_text}"
        )


@dataclass
class LayerCall:
    """A call of one of the reader's functions with one of the objects a
    capstone watches (a layer's cache): the function, and what the object
    is (`about`, as `readers_calls_with` was given it)."""

    function: types.FunctionType | None
    about: object


def _function_of(code, caller) -> types.FunctionType | None:
    """The function whose code is `code`: the caller found it by a name of
    its own (a local or a global), or, failing that, any function object
    that holds the code."""
    spaces = (caller.f_locals, caller.f_globals) if caller is not None else ()
    for space in spaces:
        for value in list(space.values()):
            if getattr(value, "__code__", None) is code:
                return value
    for holder in gc.get_referrers(code):
        if isinstance(holder, types.FunctionType) and holder.__code__ is code:
            return holder
    return None


def _positional(frame) -> list:
    """The positional arguments a call's frame received, *args included."""
    code, values = frame.f_code, frame.f_locals
    args = [values.get(n) for n in code.co_varnames[: code.co_argcount]]
    if code.co_flags & inspect.CO_VARARGS:
        # *args is named right after the positional and keyword-only ones
        extra = code.co_varnames[code.co_argcount + code.co_kwonlyargcount]
        args += list(values.get(extra, ()))
    return args


@contextlib.contextmanager
def readers_calls_with(
    objects: dict[int, tuple[object, object, int]],
) -> Iterator[list[LayerCall]]:
    """Watch the code run inside the block and list, in the order of the
    calls, every call of one of the reader's functions (a notebook's, not
    this package's or a library's) made as a layer's backward is called:
    with one of `objects` as its argument number `n` (counting from 1)
    and no other of them.  `objects` maps id(obj) to (obj, about, n); each
    call is listed as a LayerCall.

    A capstone's check passes the layer caches of the model it runs, each
    with the position of the cache among its layer's arguments (the last),
    so it learns which of the reader's functions it called for which layer
    and can check each against its own exercise.  A helper of the reader's
    that takes several caches is not a layer; a helper that a listed layer
    calls with its cache is part of that layer.  Python's profiler hook
    does the watching (`sys.setprofile`); the one in place before is put
    back after."""
    calls: list[LayerCall] = []
    codes: set = set()
    readers: dict[str, bool] = {}

    def known(value) -> bool:
        return id(value) in objects and objects[id(value)][0] is value

    previous = sys.getprofile()

    def watch(frame, event, arg):
        if previous is not None:  # another watcher's (checking's refusals)
            previous(frame, event, arg)
        if event != "call":
            return
        code = frame.f_code
        if code.co_filename not in readers:
            readers[code.co_filename] = readers_file(code.co_filename)
        if not readers[code.co_filename]:
            return
        args = _positional(frame)
        found = [i for i, a in enumerate(args) if known(a)]
        if len(found) != 1 or objects[id(args[found[0]])][2] != found[0] + 1:
            return
        outer = frame.f_back
        while outer is not None:
            if outer.f_code in codes:
                return  # inside a call listed already
            outer = outer.f_back
        codes.add(code)
        function = _function_of(code, frame.f_back)
        calls.append(LayerCall(function, objects[id(args[found[0]])][1]))

    sys.setprofile(watch)
    try:
        yield calls
    finally:
        sys.setprofile(previous)


#: The shape sets every layer check runs the reader's backward on, (B, T, C)
#: or (B, T, V): a general one first (its diagnoses are the most telling),
#: then a single sequence and a single position, where an answer fitted to
#: one shape, or summing over the wrong axis, shows.
LAYER_SHAPES = [(2, 3, 5), (1, 4, 6), (3, 1, 4)]


def label_at(**sizes) -> str:
    """A case's label: "at B = 1, T = 4, C = 6"."""
    return "at " + ", ".join(f"{k} = {v}" for k, v in sizes.items())


def random_buffers(rng, **shapes) -> dict[str, np.ndarray]:
    """Random non-zero starting buffers of the given shapes."""
    return {n: rng.standard_normal(s) for n, s in shapes.items()}


def torch_vjp(forward: Callable, inputs: dict, dout) -> dict[str, np.ndarray]:
    """The gradients of sum(forward(**inputs) * dout) for every float input,
    by PyTorch's autograd in float64."""
    import torch

    leaves = {
        n: torch.tensor(a, dtype=torch.float64, requires_grad=True)
        if np.issubdtype(np.asarray(a).dtype, np.floating)
        else torch.as_tensor(a)
        for n, a in inputs.items()
    }
    out = forward(**leaves)
    out.backward(torch.as_tensor(dout, dtype=torch.float64))
    return {n: t.grad.numpy() for n, t in leaves.items() if t.requires_grad}


def wrong_thirds(name, added, right) -> str:
    """Which of dinp's q, k, v thirds differ: "its dq and dk parts are
    wrong"."""
    parts = zip(
        ("dq", "dk", "dv"),
        np.split(added, 3, axis=-1),
        np.split(right, 3, axis=-1),
    )
    wrong = [n for n, a, b in parts if not close(a, b, TOL)]
    if not wrong:
        return ""
    listed = ", ".join(wrong[:-1]) + " and " if len(wrong) > 1 else ""
    parts = "parts are" if len(wrong) > 1 else "part is"
    return f"its {listed}{wrong[-1]} {parts} wrong"
