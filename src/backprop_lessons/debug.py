"""Debugging helpers for backward passes in PyTorch (chapter 7).

A comparison module, like `gradcheck`: it imports torch, and no engine
imports it. It holds the reusable parts of the chapter:

- `gradient_flow_table(model)`: per-parameter gradient norm, parameter norm
  and their ratio, flagged VANISHING / EXPLODING / NAN/INF / NO GRAD, as a
  fixed-format text table.
- `GradientRecorder`: a context manager that registers backward hooks on
  tensors (parameters, module outputs, any tensor you name), records the
  norm and the NaN / Inf count of every gradient as backward produces it,
  and removes every hook on exit.
- `measure_memory(fn)`: the peak and the retained bytes of tensor storage
  that PyTorch's CPU allocator handed out while `fn` ran, read from the
  profiler's allocation events.
- `find_nan_origin(fn)`: run `fn` under `torch.autograd.detect_anomaly` and
  keep only the stable parts of what it reports (the backward node that
  produced NaN and the line of forward code that created it).
- `assert_finite(**tensors)`: refuse NaN and inf at a boundary (the data, a
  loss), naming the tensor, the count and the first bad index.

What it is not: a profiler or a training framework. Every helper works on
CPU and on small models; each prints text that stays the same from run to
run when the computation does.
"""

from __future__ import annotations

import math
import os
import re
import sys
import warnings
from collections.abc import Callable, Iterable
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch

__all__ = [
    "VANISHING_RATIO",
    "EXPLODING_RATIO",
    "GradFlowRow",
    "GradFlowTable",
    "gradient_flow_table",
    "GradRecord",
    "GradientRecorder",
    "MemoryReport",
    "measure_memory",
    "AnomalyReport",
    "find_nan_origin",
    "assert_finite",
    "gradient_flag",
]

# ---------------------------------------------------------------------------
# Gradient-flow table
# ---------------------------------------------------------------------------

# Thresholds on ratio = ||grad|| / ||param|| (Frobenius norms). An SGD step
# changes a parameter by lr * ratio of its own size:
# - below 1e-5, even lr = 0.1 moves it by less than one part in a million
#   per step: the parameter is effectively frozen (VANISHING);
# - above 1e2, lr = 0.01 already moves it by more than its own size in one
#   step: training is about to blow up (EXPLODING).
VANISHING_RATIO = 1e-5
EXPLODING_RATIO = 1e2

# A parameter whose norm is below this (e.g. a bias initialised to zero) has
# no meaningful ratio; it is flagged only if its gradient is zero or not finite.
_ZERO_NORM = 1e-12


@dataclass(frozen=True)
class GradFlowRow:
    """One parameter's line of the table; `ratio` is None when it is undefined."""

    name: str
    shape: tuple
    grad_norm: float | None
    param_norm: float
    ratio: float | None
    flag: str


@dataclass
class GradFlowTable:
    """Rows of `GradFlowRow`; prints as a fixed-format table."""

    rows: list[GradFlowRow]
    vanishing_below: float = VANISHING_RATIO
    exploding_above: float = EXPLODING_RATIO

    @property
    def flags(self) -> dict[str, str]:
        """Parameter name -> flag ("" when healthy)."""
        return {r.name: r.flag for r in self.rows}

    @property
    def flagged(self) -> list[GradFlowRow]:
        return [r for r in self.rows if r.flag]

    def __str__(self) -> str:
        width = max([len("parameter")] + [len(r.name) for r in self.rows])
        head = (
            f"{'parameter':<{width}}  {'shape':<12} {'grad norm':>10} "
            f"{'param norm':>10} {'grad/param':>10}  flag"
        )
        lines = [head, "-" * len(head)]
        for r in self.rows:
            shape = "(" + ", ".join(str(s) for s in r.shape) + ")"
            lines.append(
                f"{r.name:<{width}}  {shape:<12} {_fmt(r.grad_norm):>10} "
                f"{_fmt(r.param_norm):>10} {_fmt(r.ratio):>10}  {r.flag}".rstrip()
            )
        lines.append(
            f"flags: VANISHING if grad/param < {self.vanishing_below:.0e}, "
            f"EXPLODING if grad/param > {self.exploding_above:.0e}"
        )
        return "\n".join(lines)

    __repr__ = __str__

    def _repr_pretty_(self, p, cycle) -> None:
        p.text(str(self))


def _fmt(x: float | None) -> str:
    if x is None:
        return "-"
    if math.isnan(x) or math.isinf(x):
        return str(x)
    return f"{x:.2e}"


def gradient_flag(
    grad_norm: float | None,
    param_norm: float,
    ratio: float | None,
    vanishing_below: float,
    exploding_above: float,
) -> str:
    if grad_norm is None:
        return "NO GRAD"
    if not math.isfinite(grad_norm):
        return "NAN/INF"
    if grad_norm == 0.0:
        return "VANISHING"
    if ratio is None:
        return ""
    if ratio < vanishing_below:
        return "VANISHING"
    if ratio > exploding_above:
        return "EXPLODING"
    return ""


def gradient_flow_table(
    params: torch.nn.Module | Iterable[tuple[str, torch.Tensor]],
    vanishing_below: float = VANISHING_RATIO,
    exploding_above: float = EXPLODING_RATIO,
) -> GradFlowTable:
    """The gradient-flow table of a module (or of `(name, parameter)` pairs)
    after backward.

    Reads each parameter's `.grad`; call it after `loss.backward()`.
    Flags: NO GRAD (`.grad` is None: backward never reached it), NAN/INF,
    VANISHING (ratio below `vanishing_below`, or a gradient of exactly zero),
    EXPLODING (ratio above `exploding_above`).
    """
    if not 0 < vanishing_below < exploding_above:
        raise ValueError(
            "gradient_flow_table: expected 0 < vanishing_below < "
            f"exploding_above, got vanishing_below={vanishing_below}, "
            f"exploding_above={exploding_above}"
        )
    is_module = isinstance(params, torch.nn.Module)
    named = params.named_parameters() if is_module else params
    rows = []
    for pair in named:
        if not (isinstance(pair, tuple) and len(pair) == 2):
            raise TypeError(
                "gradient_flow_table: expected a torch.nn.Module or "
                "(name, parameter) pairs such as model.named_parameters(), "
                f"got an item of type {type(pair).__name__} (pass "
                "model.named_parameters(), not model.parameters())"
            )
        name, p = pair
        if not isinstance(p, torch.Tensor):
            raise TypeError(
                "gradient_flow_table: expected (name, tensor) pairs, "
                f"got {name!r} -> {type(p).__name__}"
            )
        param_norm = float(p.detach().norm())
        grad_norm = None if p.grad is None else float(p.grad.detach().norm())
        ratio = None
        if (
            grad_norm is not None
            and math.isfinite(grad_norm)
            and param_norm > _ZERO_NORM
        ):
            ratio = grad_norm / param_norm
        rows.append(
            GradFlowRow(
                name,
                tuple(p.shape),
                grad_norm,
                param_norm,
                ratio,
                gradient_flag(
                    grad_norm, param_norm, ratio, vanishing_below, exploding_above
                ),
            )
        )
    if not rows:
        raise ValueError("gradient_flow_table: no parameters given")
    return GradFlowTable(rows, vanishing_below, exploding_above)


# ---------------------------------------------------------------------------
# Backward hooks
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class GradRecord:
    """The gradient of one watched tensor, as it arrived during backward."""

    name: str
    shape: tuple
    norm: float
    n_nan: int
    n_inf: int

    @property
    def finite(self) -> bool:
        return self.n_nan == 0 and self.n_inf == 0


class GradientRecorder:
    """Record gradient norms and NaN / Inf counts during backward, through hooks.

    Use it as a context manager so that every hook is removed on exit:

        with GradientRecorder() as rec:
            rec.watch_parameters(model)     # hooks on each parameter
            rec.watch_activations(model)    # hooks on each leaf module's output
            loss = loss_fn(model(x), y)     # (activations must be made inside)
            loss.backward()
        print(rec)

    Records are kept in the order backward produced them, so the first
    record is the tensor closest to the loss. The hooks only read the
    gradient; they never change it.
    """

    def __init__(self) -> None:
        self.records: list[GradRecord] = []
        self._handles: list[Any] = []

    # -- registering -------------------------------------------------------
    def watch(self, name: str, tensor: torch.Tensor) -> torch.Tensor:
        """Hook `tensor`: its gradient is recorded under `name`. Returns the
        tensor."""
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(
                f"GradientRecorder.watch({name!r}): expected a tensor, "
                f"got {type(tensor).__name__}"
            )
        if not tensor.requires_grad:
            raise ValueError(
                f"GradientRecorder.watch({name!r}): the tensor does not require "
                "grad, "
                "so backward never computes a gradient for it"
            )
        shape = tuple(tensor.shape)
        self._handles.append(
            tensor.register_hook(lambda g: self._record(name, shape, g))
        )
        return tensor

    def watch_parameters(self, module: torch.nn.Module) -> None:
        """Hook every parameter of `module` that requires grad, under its
        qualified name."""
        for name, p in module.named_parameters():
            if p.requires_grad:
                self.watch(name, p)

    def watch_activations(self, module: torch.nn.Module) -> None:
        """Hook the output of every leaf submodule (e.g. each Linear, Tanh) of
        `module`.

        Registers forward hooks; the output tensors are hooked when the
        forward runs, so run the forward after this call.
        """
        for name, sub in module.named_modules():
            if name and not any(True for _ in sub.children()):
                self._handles.append(
                    sub.register_forward_hook(
                        self._activation_hook(f"{name} (out)")
                    )
                )

    def _activation_hook(self, name: str):
        def hook(module, inputs, output):
            if isinstance(output, torch.Tensor) and output.requires_grad:
                self.watch(name, output)

        return hook

    def _record(self, name: str, shape: tuple, grad: torch.Tensor) -> None:
        g = grad.detach()
        self.records.append(
            GradRecord(
                name,
                shape,
                float(g.norm()),
                int(torch.isnan(g).sum()),
                int(torch.isinf(g).sum()),
            )
        )

    # -- removing ----------------------------------------------------------
    @property
    def active_hooks(self) -> int:
        """How many hooks this recorder still has registered."""
        return len(self._handles)

    def remove(self) -> None:
        """Remove every hook this recorder registered (safe to call twice)."""
        while self._handles:
            self._handles.pop().remove()

    def __enter__(self) -> GradientRecorder:
        return self

    def __exit__(self, *exc) -> None:
        self.remove()

    # -- reading -----------------------------------------------------------
    @property
    def first_nonfinite(self) -> GradRecord | None:
        """The first record (closest to the loss) whose gradient holds NaN or
        Inf."""
        return next((r for r in self.records if not r.finite), None)

    def __str__(self) -> str:
        width = max([len("tensor")] + [len(r.name) for r in self.records])
        head = (
            f"{'#':>3}  {'tensor':<{width}}  {'shape':<12} {'grad norm':>10} "
            f"{'NaN':>5} {'Inf':>5}"
        )
        lines = [head, "-" * len(head)]
        for i, r in enumerate(self.records):
            shape = "(" + ", ".join(str(s) for s in r.shape) + ")"
            lines.append(
                f"{i:>3}  {r.name:<{width}}  {shape:<12} {_fmt(r.norm):>10} "
                f"{r.n_nan:>5} {r.n_inf:>5}"
            )
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (
            f"GradientRecorder({len(self.records)} records, "
            f"{self.active_hooks} active hooks)"
        )

    def _repr_pretty_(self, p, cycle) -> None:
        p.text(str(self))


# ---------------------------------------------------------------------------
# Memory on CPU
# ---------------------------------------------------------------------------


@dataclass
class MemoryReport:
    """Bytes of tensor storage allocated by PyTorch's CPU allocator while a
    function ran.

    peak_bytes: the most that was live at any moment, counting only blocks
        allocated during the call;
    retained_bytes: what was still live when the call returned (e.g. its
        result, or a graph it left behind);
    allocations: the number of blocks allocated.
    """

    peak_bytes: int
    retained_bytes: int
    allocations: int
    result: Any = field(default=None, repr=False)

    def __str__(self) -> str:
        return (
            f"peak {self.peak_bytes:,} bytes, "
            f"retained {self.retained_bytes:,} bytes, "
            f"{self.allocations} allocations"
        )


@contextmanager
def _quiet_native_stderr():
    """Send C-level stderr (fd 2) to /dev/null; Python's sys.stderr keeps working.

    The profiler's native code logs start/stop lines and a one-time
    allocator warning, with timestamps, straight to fd 2 (which Jupyter
    shows in the cell output).
    """
    try:
        fd = sys.__stderr__.fileno() if sys.__stderr__ is not None else 2
        saved = os.dup(fd)
    except (OSError, ValueError, AttributeError):
        yield
        return
    python_stderr = sys.stderr
    try:
        python_uses_fd = python_stderr.fileno() == fd
    except (OSError, ValueError, AttributeError):
        python_uses_fd = False
    if python_uses_fd:  # a plain terminal: give Python a copy of the real stderr
        python_stderr.flush()
        # not a `with` block: sys.stderr keeps it until the finally below
        sys.stderr = open(saved, "w", buffering=1, closefd=False)  # noqa: SIM115
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
        yield
    finally:
        if python_uses_fd:
            sys.stderr.flush()
            sys.stderr = python_stderr
        os.dup2(saved, fd)
        os.close(saved)
        os.close(devnull)


def measure_memory(fn: Callable, *args, **kwargs) -> MemoryReport:
    """Run `fn(*args, **kwargs)` and measure the CPU tensor memory it allocated.

    How: with `profile_memory=True`, PyTorch's profiler records every
    allocation and free of its CPU allocator with the block's address and
    size. We replay them in time order, counting only blocks allocated
    during the call (frees of older blocks are ignored), and keep the
    maximum. Native (C-level) stderr is silenced during the call, because
    the profiler logs timestamped lines there. This counts tensor storage
    (activations, saved tensors, gradients, temporaries); it does not count
    Python objects or memory a
    library (e.g. a BLAS) allocates for itself. For a deterministic
    computation the numbers are exact and repeat from run to run.

    `tracemalloc` cannot do this: torch's allocator does not report to it.
    """
    from torch.autograd import profiler

    from .torch_private import cpu_allocations

    with _quiet_native_stderr(), profiler.profile(profile_memory=True) as prof:
        result = fn(*args, **kwargs)
    events = sorted(cpu_allocations(prof), key=lambda e: e[0])
    live: dict[int, int] = {}
    current = peak = count = 0
    for _, ptr, size in events:
        if size > 0:
            live[ptr] = size
            current += size
            count += 1
            peak = max(peak, current)
        elif ptr in live:  # a free of a block allocated during the call
            current -= live.pop(ptr)
    return MemoryReport(peak, current, count, result)


# ---------------------------------------------------------------------------
# NaN hunting
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class AnomalyReport:
    """The stable parts of what `torch.autograd.detect_anomaly` reported.

    error: the RuntimeError's message, e.g.
        "Function 'LogBackward0' returned nan values in its 0th output.";
    backward_node: the node named there, e.g. "LogBackward0";
    forward_function / forward_line: the innermost frame of the forward
        traceback that anomaly mode stored for that node: the function and
        the line of code that created it.
    """

    error: str
    backward_node: str
    forward_function: str
    forward_line: str

    def __str__(self) -> str:
        return (
            f"error:           {self.error}\n"
            f"backward node:   {self.backward_node}\n"
            f"created in:      {self.forward_function}()\n"
            f"by the line:     {self.forward_line}"
        )


_FRAME = re.compile(
    r'File "[^"]*", line \d+, in (?P<func>[^\n]+)\n\s+(?P<code>[^\n]+)'
)


def find_nan_origin(fn: Callable, *args, **kwargs) -> AnomalyReport | None:
    """Run `fn` (which should call backward) under anomaly detection.

    Returns None if backward finished without NaN; otherwise an
    `AnomalyReport`. The raw warning holds file paths, line numbers and the
    whole Python stack, which change between machines; the report keeps
    only the node's name and the innermost forward frame.
    """
    if not callable(fn):
        raise TypeError(
            f"find_nan_origin: fn must be callable, got {type(fn).__name__}"
        )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with torch.autograd.detect_anomaly():
                fn(*args, **kwargs)
        except RuntimeError as e:
            error = str(e).strip().splitlines()[0]
            if "Function '" not in error:  # not anomaly mode's NaN report
                raise
        else:
            return None
    node = re.search(r"Function '(\w+)'", error)
    node_name = node.group(1) if node else "?"
    func = line = "?"
    for w in caught:
        text = str(w.message)
        if text.startswith(f"Error detected in {node_name}"):
            frames = _FRAME.findall(text)
            if frames:
                func, line = frames[-1][0].strip(), frames[-1][1].strip()
    return AnomalyReport(error, node_name, func, line)


# ---------------------------------------------------------------------------
# Finite inputs


def assert_finite(**tensors) -> None:
    """Raise a ValueError naming the first of `tensors` (name=tensor) that
    holds a NaN or an inf: how many entries, and the index of the first.

    Meant for a boundary (a batch of data, a loss, a gradient before the
    step), where a NaN is still close to its source.
    """
    for name, t in tensors.items():
        if not isinstance(t, torch.Tensor):
            raise TypeError(
                f"assert_finite: {name} must be a torch.Tensor, "
                f"got {type(t).__name__}"
            )
        bad = ~torch.isfinite(t.detach())
        if bad.any():
            first = tuple(int(i) for i in bad.nonzero()[0])
            raise ValueError(
                f"assert_finite: {name} has {int(bad.sum())} non-finite "
                f"entries of {t.numel()}, the first at index {first}"
            )
