"""How every exercise check reports: one line, and a verdict the code can use.

An exercise cell holds a stub for the reader to fill in (a function whose
body is `...` or `raise NotImplementedError`, or a value written as `...`);
the cell after it calls the chapter's check with the reader's answer as its
argument.  The check prints one of

    Exercise N: not attempted yet - <what to write>
    Exercise N: not yet - <what is wrong, and a hint>
    Exercise N: correct

and returns the same as a `Verdict`.  A check is written as a function
that raises `NotYet(hint)` at the first thing it finds wrong and returns
when the answer is right; `run_check` turns that into the verdict.  A stub
is recognised wherever the answer is used: `attempt(fn, ...)` calls the
reader's function and raises `NotAttempted` when it raises
NotImplementedError or returns `...` or None, and `require_filled(value)`
does the same for a value that still holds `...`.  Any other exception of
the reader's code (inside `attempt` or a `readers_code` block) is a "not
yet" that names it and says where it happened: the line of the reader's
code that raised, and the reader's calls that led there (a capstone's
layer call), quoted under the verdict.

A check names what an answer may not call (`run_check(..., refuse=...)`):
the book's own implementation of the same thing, and, where the exercise is
to compute a gradient by hand, `AUTOGRAD` (PyTorch's ways of computing it
for you) and `BOOKS_AUTODIFF` (the book's own: its engines' backward passes
and rules, forward mode's dual numbers, finite differences).  While the
reader's code runs (inside `readers_code`), a call to one of them stops it,
and the verdict is "not yet", saying what was called.

`record_verdicts(path)` makes `run_check` also write each verdict to a file,
as data: the channel through which `python -m backprop_lessons.grade` learns
a verdict, never from the printed text.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import io
import json
import sys
import sysconfig
import textwrap
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ..gradcheck import close

__all__ = [
    "Verdict",
    "NotYet",
    "NotAttempted",
    "attempt",
    "readers_code",
    "readers_file",
    "record_verdicts",
    "require_filled",
    "run_check",
    "AUTOGRAD",
    "BOOKS_AUTODIFF",
    "where_it_raised",
    "yours_or_the_solution",
    "assert_correct",
    "mismatched",
]

CORRECT, NOT_YET, NOT_ATTEMPTED = "correct", "not yet", "not attempted yet"


#: A printed line is broken between words before this many characters:
#: JupyterLab breaks a longer output line wherever the column ends, in the
#: middle of a word, and the book's column holds about 88.
WIDTH = 79


def wrapped(text: str, indent: str = "") -> str:
    """`text` with each of its lines broken between words to at most WIDTH
    characters, the continuations indented by four spaces (every line
    starting with `indent`)."""
    return "\n".join(
        textwrap.fill(
            line,
            WIDTH,
            initial_indent=indent,
            subsequent_indent=indent + "    ",
            break_long_words=False,
            break_on_hyphens=False,
        )
        or line
        for line in text.split("\n")
    )


@dataclass(frozen=True)
class Verdict:
    """The outcome of one check: `status` is "correct", "not yet" or "not
    attempted yet"; `hint` says what to do next (empty when correct)."""

    exercise: int
    status: str
    hint: str = ""
    #: where the reader's code raised: one line per call of theirs, the
    #: outermost first ("in my_gpt_backward, line 21: ...")
    where: tuple[str, ...] = ()

    @property
    def correct(self) -> bool:
        return self.status == CORRECT

    @property
    def attempted(self) -> bool:
        return self.status != NOT_ATTEMPTED

    def __str__(self) -> str:
        line = f"Exercise {self.exercise}: {self.status}"
        line = f"{line} - {self.hint}" if self.hint else line
        return "\n".join([wrapped(line), *(f"    {w}" for w in self.where)])

    def _ipython_display_(self) -> None:
        """Show nothing: the check has printed the verdict already, and a
        check at the end of a cell would otherwise show it twice."""


class NotYet(Exception):
    """The answer is wrong; the message is the hint the reader sees, `where`
    the lines of the reader's code that raised (see `readers_code`), and
    `refused` whether the reader's code called what the check refuses (then
    the hint says what, and a check adds nothing about its inputs)."""

    def __init__(
        self, hint: str, where: tuple[str, ...] = (), refused: bool = False
    ):
        super().__init__(hint)
        self.where = tuple(where)
        self.refused = refused


class NotAttempted(Exception):
    """The answer is still the stub; the message says what to write."""


def _holds_ellipsis(value) -> bool:
    """`...` itself, or a dict, list or tuple holding a `...` anywhere."""
    if value is Ellipsis:
        return True
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        return any(_holds_ellipsis(v) for v in value)
    return False


def require_filled(value, todo: str):
    """`value` itself, or NotAttempted(todo) when it still holds `...` (or is
    None)."""
    if value is None or _holds_ellipsis(value):
        raise NotAttempted(todo)
    return value


#: Folders whose code is not the reader's: this package, the standard
#: library and the installed packages (NumPy, PyTorch, ...).
_NOT_READERS = tuple(
    {
        str(Path(__file__).resolve().parents[1]),
        *(
            str(Path(p).resolve())
            for key in ("stdlib", "platstdlib", "purelib", "platlib")
            if (p := sysconfig.get_paths().get(key))
        ),
    }
)
#: A quoted line is cut to this many characters (the verdict's lines fit the
#: book's column).
_QUOTE = 72


def readers_file(filename: str) -> bool:
    """Is the code of this file the reader's (a notebook cell, a script of
    theirs), not the package's, the standard library's or an installed
    package's?  (A frame's `f_code.co_filename`, a traceback's filename.)"""
    if filename.startswith("<") and "ipython-input" not in filename:
        return False  # <string>, <frozen ...>: nothing to quote
    try:
        path = str(Path(filename).resolve())
    except (OSError, ValueError):
        return True
    return not path.startswith(_NOT_READERS)


def where_it_raised(error: BaseException) -> tuple[str, ...]:
    """The reader's frames of `error`'s traceback, outermost first, each as
    "in NAME, line N: SOURCE": the line that raised last, and before it the
    calls of theirs that led there (in a capstone, the layer call)."""
    lines = []
    for frame in traceback.extract_tb(error.__traceback__):
        if not readers_file(frame.filename):
            continue
        name = "your cell" if frame.name == "<module>" else frame.name
        text = " ".join((frame.line or "").split())
        if len(text) > _QUOTE:
            text = text[: _QUOTE - 3] + "..."
        lines.append(f"in {name}, line {frame.lineno}: {text}".rstrip(": "))
    return tuple(lines)


#: In a check's `refuse=`: PyTorch's ways of computing a gradient for you
#: (`.backward()`, `torch.autograd.grad`, `torch.autograd.functional`,
#: `torch.func`), refused where an exercise asks for a gradient by hand.
AUTOGRAD = "PyTorch's autograd"

#: In a check's `refuse=`: the book's own ways of computing a gradient (the
#: scalar, tensor and higher-order engines' backward passes and the tensor
#: engine's rules; forward mode's jvp, Jacobians and rules, which dual
#: numbers and `linearize` run; `gradcheck`'s finite differences;
#: `example_graphs`' backward), refused with AUTOGRAD where an exercise
#: asks for a gradient by hand.
BOOKS_AUTODIFF = "the book's own differentiation"

#: what the reader's code may not call now: code object -> what to say
_REFUSED: contextvars.ContextVar[dict | None] = contextvars.ContextVar(
    "refused", default=None
)
#: the entry points AUTOGRAD stands for
_GRADIENT_FUNCTIONS = ("jacobian", "hessian", "vjp", "jvp", "hvp", "vhp",
                       "grad", "grad_and_value", "jacrev", "jacfwd",
                       "linearize")  # fmt: skip
#: what a refusal of one of the book's functions says by default
_BOOKS_VERSION = "the book's own version of what this exercise asks you to write"


class Refused(BaseException):
    """Raised into the reader's code at a refused call.  A BaseException, so
    that the reader's own `except Exception` does not swallow it."""


def _qualified(fn) -> str:
    return f"{fn.__module__}.{fn.__qualname__}"


@functools.cache
def _autograd() -> dict:
    """The code objects of PyTorch's gradient entry points (torch imported
    here, when a check refuses them)."""
    import torch
    import torch.autograd.functional as functional
    import torch.func as func

    found = {
        torch.Tensor.backward: "Tensor.backward",
        torch.autograd.backward: "torch.autograd.backward",
        torch.autograd.grad: "torch.autograd.grad",
    }
    for module, prefix in ((functional, "torch.autograd.functional"),
                           (func, "torch.func")):  # fmt: skip
        for name in _GRADIENT_FUNCTIONS:
            fn = getattr(module, name, None)
            if fn is not None:
                found[fn] = f"{prefix}.{name}"
    return {
        fn.__code__: f"{name}, PyTorch's autograd: this exercise asks for "
        "the gradient by hand"
        for fn, name in found.items()
        if hasattr(fn, "__code__")
    }


@functools.cache
def _books_autodiff() -> dict:
    """The code objects of the book's own ways of differentiating (its
    engines, imported here): the entry points a reader calls first, so that
    the refusal names them, then the rules and loops underneath, which
    catch any other way in."""
    from .. import (
        example_graphs,
        forward_mode,
        gradcheck,
        higher_order,
        linearize,
        tensor,
    )
    from ..scalar import Value

    found = [
        Value.backward,
        tensor.Tensor.backward,
        tensor.grad,
        higher_order.Node.backward,
        higher_order.gradient,
        higher_order.hvp_forward_over_reverse,
        higher_order.hvp_reverse_over_reverse,
        example_graphs.backward_in_order,
        forward_mode.jvp,
        forward_mode.vjp,
        forward_mode.jacobian_forward,
        forward_mode.jacobian_reverse,
        forward_mode.finite_difference_jacobian,
        linearize.linearize,
        linearize.vjp,
        gradcheck.numerical_gradient,
        gradcheck.numerical_param_gradients,
        gradcheck.directional_derivative,
        gradcheck.check_scalar_gradients,
        gradcheck.gradcheck,
        gradcheck.f_at,  # any other finite difference of gradcheck's
        tensor.cross_entropy_backward,
        *(
            getattr(fn, "__func__", fn)  # the tensor engine's VJP rules
            for name, fn in vars(tensor.Tensor).items()
            if name.endswith("_backward")
        ),
        *(  # forward mode's rules: dual numbers' arithmetic (the module's
            # functions, not `jvp_rules`, where a check may put the reader's)
            fn
            for name, fn in vars(forward_mode).items()
            if name.endswith("_jvp")
            and getattr(fn, "__module__", None) == forward_mode.__name__
        ),
    ]
    return {
        fn.__code__: f"{_qualified(fn)}, the book's own differentiation: "
        "this exercise asks for the gradient by hand"
        for fn in found
        if hasattr(fn, "__code__")
    }


def _refusals(refuse) -> dict:
    """code object -> message, for `run_check`'s `refuse=` entries: AUTOGRAD,
    BOOKS_AUTODIFF, a function or method of the book's, or a pair (function,
    what to say of it) for a message of the check's own.  A function named
    on its own is told as named, also when a group holds it."""
    groups, named = {}, {}
    for item in refuse:
        if item is AUTOGRAD:
            groups.update(_autograd())
            continue
        if item is BOOKS_AUTODIFF:
            groups.update(_books_autodiff())
            continue
        item, why = item if isinstance(item, tuple) else (item, _BOOKS_VERSION)
        fn = getattr(item, "__func__", item)
        named[fn.__code__] = f"{_qualified(fn)}, {why}"
    return {**groups, **named}


@contextlib.contextmanager
def _refusing(refuse) -> Iterator[None]:
    """Within the block, the reader's code (inside `readers_code`) may not
    call what `refuse` names (`run_check`'s `refuse=`)."""
    token = _REFUSED.set(_refusals(refuse))
    try:
        yield
    finally:
        _REFUSED.reset(token)


@contextlib.contextmanager
def _watching() -> Iterator[None]:
    """While the block runs, a call to a refused function raises Refused."""
    codes = _REFUSED.get()
    if codes is None or not codes:
        yield
        return
    previous = sys.getprofile()

    def watch(frame, event, arg):
        if event == "call" and frame.f_code in codes:
            sys.setprofile(previous)
            raise Refused(codes[frame.f_code])
        if previous is not None:
            previous(frame, event, arg)

    sys.setprofile(watch)
    try:
        yield
    finally:
        sys.setprofile(previous)


@contextlib.contextmanager
def readers_code(todo: str) -> Iterator[None]:
    """Whatever raises inside the block is the reader's code: NotImplementedError
    means not attempted (NotAttempted(todo)); any other exception becomes a
    "not yet" that names it and quotes the reader's line that raised
    (`where_it_raised`).  A call to what the check refuses (`run_check`'s
    `refuse=`) stops the block: "not yet", naming what was called.  The
    checks' own code stays outside such blocks, so a bug in a check still
    fails loudly."""
    try:
        with _watching():
            yield
    except (NotYet, NotAttempted):
        raise
    except Refused as refused:
        raise NotYet(
            f"your code called {refused}",
            where=where_it_raised(refused),
            refused=True,
        ) from None
    except NotImplementedError:
        raise NotAttempted(todo) from None
    except Exception as error:
        raise NotYet(
            f"your code raised {type(error).__name__}: {error}",
            where=where_it_raised(error),
        ) from error


def attempt(fn: Callable, *args, todo: str, may_return_none: bool = False):
    """fn(*args), the reader's code run once (inside `readers_code`).

    NotAttempted(todo) when fn raises NotImplementedError or returns `...`
    (a stub's body), or None unless `may_return_none` (a function that
    works by side effect, such as a backward that fills in `.grad`).
    """
    with readers_code(todo):
        result = fn(*args)
    if result is Ellipsis or (result is None and not may_return_none):
        raise NotAttempted(todo)
    return result


def mismatched(ours: dict, reference: dict, tol: float) -> list[str]:
    """The names of `reference` whose array in `ours` is not `close`
    (gradcheck's)."""
    return [
        name for name in reference if not close(ours[name], reference[name], tol)
    ]


def run_check(
    exercise: int, check: Callable[..., None], *answers, refuse=()
) -> Verdict:
    """Run `check(*answers)`, print its verdict and return it.

    `check` raises NotYet(hint) for a wrong answer and NotAttempted(todo)
    for a stub (`attempt` and `readers_code` raise them for the reader's
    code); any other exception is a bug of the check and propagates.  A
    check that passes may return a report (a table of what it compared),
    printed after the verdict.  `refuse` names what the reader's code may
    not call: the book's own functions (each alone, or as a pair with what
    to say of it), AUTOGRAD and BOOKS_AUTODIFF.
    """
    report = None
    try:
        with _refusing(refuse):
            report = check(*answers)
    except NotAttempted as todo:
        verdict = Verdict(exercise, NOT_ATTEMPTED, str(todo))
    except NotYet as hint:
        verdict = Verdict(exercise, NOT_YET, str(hint), hint.where)
    else:
        verdict = Verdict(exercise, CORRECT)
    _record(verdict, check)
    print(verdict)
    if report is not None:
        print(report)
    return verdict


def assert_correct(check: Callable[..., Verdict], *answers, **check_args) -> None:
    """Run `check(*answers, **check_args)` without printing anything, and
    raise AssertionError (quoting the verdict) unless it is correct.

    A solution cell ends with it: nbval runs every solution on every `make
    test`, so each is proven, and yet the cell shows nothing after a
    reader's Run All (a collapsed solution that printed "Exercise N:
    correct" sat right under the reader's own "not attempted yet")."""
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        verdict = check(*answers, **check_args)
    if not verdict.correct:
        raise AssertionError(f"{verdict}\n{printed.getvalue()}".rstrip())


#: The file `run_check` appends each verdict to (`record_verdicts`), or None.
_verdicts_file: Path | None = None


def record_verdicts(path) -> None:
    """From now on, also append each verdict `run_check` makes to the file
    `path`, one JSON object a line: the exercise, status, hint and quoted
    lines, and the check that made it (its module and name).

    The grader (`python -m backprop_lessons.grade`) calls this in the kernel
    it runs a notebook in, with a file in a folder it made, and reads the
    verdicts there after each cell: a printed "Exercise 6: correct" counts
    for nothing, and so does a verdict from a check outside this package."""
    global _verdicts_file
    _verdicts_file = Path(path)


def _record(verdict: Verdict, check: Callable) -> None:
    if _verdicts_file is None:
        return
    line = {
        "exercise": verdict.exercise,
        "status": verdict.status,
        "hint": verdict.hint,
        "where": list(verdict.where),
        "check": f"{getattr(check, '__module__', None)}."
        f"{getattr(check, '__qualname__', None)}",
    }
    with _verdicts_file.open("a", encoding="utf-8") as file:
        file.write(json.dumps(line, default=str) + "\n")


def yours_or_the_solution(
    yours: Callable, solution: Callable, check: Callable, **check_args
) -> Callable:
    """`yours` when `check(yours, **check_args)` passes, else `solution`; says
    which in one line.

    For the cells after an exercise that use its function (chapter 6 trains
    with the reader's gpt_backward): they run with the reader's own code
    once it passes, and until then with the book's version, so that Run
    All never stops at a stub and never replaces the reader's function.
    The check runs silently; its verdict is the exercise cell's to print.
    """
    with contextlib.redirect_stdout(io.StringIO()):
        verdict = check(yours, **check_args)
    name = getattr(yours, "__name__", "function")
    if verdict.correct:
        print(
            wrapped(f"Using your {name}: it passes exercise {verdict.exercise}.")
        )
        return yours
    # a method by its class too (Value.__mul__); a local function or a
    # lambda by its own name
    fallback = getattr(solution, "__qualname__", "")
    if not fallback or "<" in fallback:
        fallback = getattr(solution, "__name__", "the solution")
    print(
        wrapped(
            f"Using {fallback}, the book's version, until your {name} passes "
            f"exercise {verdict.exercise} (now: {verdict.status})."
        )
    )
    return solution
