"""Every private PyTorch API the package calls, in one place.

Written against PyTorch 2.13.0 (`WRITTEN_AGAINST`).  Private APIs change
without notice: when PyTorch is upgraded, `tests/test_torch_private.py`
fails with the name of whatever disappeared, and only this file needs
fixing.  Used by `debug.measure_memory` (the profiler's allocation events),
`scale.scale_out` (DDP's buckets, the profiler's trace start), `traced`
(AOTAutograd, the dispatch mode that sees every operator, an operator's
schema) and `scale.pipeline` (a multi-stage schedule's timetable, computed
without a process group).
"""

from __future__ import annotations

__all__ = [
    "WRITTEN_AGAINST",
    "aot_autograd",
    "dispatch_mode",
    "schema_arguments",
    "schedule_timetable",
    "cpu_allocations",
    "ddp_buckets",
    "trace_start_ns",
    "missing",
]

WRITTEN_AGAINST = "2.13.0"


def cpu_allocations(prof) -> list[tuple[int, int, int]]:
    """(time ns, address, bytes) of every CPU allocation (bytes > 0) and
    free (bytes < 0) a `torch.autograd.profiler.profile(profile_memory=True)`
    recorded, in the order of its event tree (sort by time to replay)."""
    from torch._C._profiler import _EventType

    events = []
    stack = list(prof.kineto_results.experimental_event_tree())
    while stack:
        event = stack.pop()
        stack.extend(event.children)
        kind, extra = event.typed
        if kind == _EventType.Allocation and extra.device.type == "cpu":
            events.append((event.start_time_ns, extra.ptr, extra.alloc_size))
    return events


def ddp_buckets(ddp) -> list:
    """DDP's current gradient buckets (each has `.parameters()` and
    `.buffer()`), from its reducer."""
    return list(ddp.reducer._get_zeros_like_grad_buckets())


def trace_start_ns(prof) -> int:
    """When a `torch.profiler.profile` trace started, in ns (its events'
    times are microseconds after this)."""
    return prof.profiler.kineto_results.trace_start_ns()


def aot_autograd():
    """(aot_function, make_boxed_func): AOTAutograd, which traces a function's
    forward and backward graphs.  Its home in PyTorch 2 (functorch.compile is
    the legacy re-export of the same functions)."""
    from torch._functorch.aot_autograd import aot_function, make_boxed_func

    return aot_function, make_boxed_func


def dispatch_mode():
    """TorchDispatchMode: a context whose `__torch_dispatch__` sees every ATen
    operator that runs."""
    from torch.utils._python_dispatch import TorchDispatchMode

    return TorchDispatchMode


def schema_arguments(func) -> list:
    """The arguments of an ATen operator's schema (`OpOverload._schema`), as
    a dispatch mode's `__torch_dispatch__` receives it: each has `.name`,
    `.kwarg_only` and `.alias_info` (None, or `.is_write` for an argument
    written in place)."""
    return func._schema.arguments


def schedule_timetable(schedule_class, n_ranks: int, n_micro: int) -> list:
    """For every rank, the list of actions (None where it waits) that
    `schedule_class` (torch.distributed.pipelining's ScheduleZBVZeroBubble
    or ScheduleInterleaved1F1B, two stages per rank) orders, computed as
    its constructor does but without the stages and the process group the
    constructor wants: the object is made without `__init__`, given the
    fields `_calculate_single_rank_operations` reads, and asked for each
    rank's list."""
    from torch.distributed.pipelining import schedules as S

    sched = schedule_class.__new__(schedule_class)
    if issubclass(schedule_class, S.ScheduleZBVZeroBubble):
        sched.num_stages = 2 * n_ranks
    else:
        sched.n_local_stages, sched._num_stages = 2, 2 * n_ranks
        sched.number_of_rounds = max(1, n_micro // n_ranks)
        sched.microbatches_per_round = n_micro // sched.number_of_rounds
    sched.pp_group_size, sched._n_microbatches = n_ranks, n_micro
    return [sched._calculate_single_rank_operations(r) for r in range(n_ranks)]


def missing() -> list[str]:
    """The private names above that this PyTorch no longer has."""
    import torch
    import torch._C._profiler as profiler_c
    from torch.autograd.profiler import profile
    from torch.nn.parallel import DistributedDataParallel

    gone = []
    for name, get in (("AOTAutograd", aot_autograd), ("dispatch", dispatch_mode)):
        try:
            get()
        except ImportError:
            gone.append(f"{name} ({get.__doc__.split(':')[0]})")
    if not hasattr(profiler_c, "_EventType") or not hasattr(
        profiler_c._EventType, "Allocation"
    ):
        gone.append("torch._C._profiler._EventType.Allocation")
    with profile(profile_memory=True) as prof:
        torch.ones(4)
    results = getattr(prof, "kineto_results", None)
    for name in ("experimental_event_tree", "trace_start_ns"):
        if not hasattr(results, name):
            gone.append(f"profiler kineto_results.{name}")
    try:
        add_ = torch.ops.aten.add_.Tensor
        if not any(
            a.alias_info and a.alias_info.is_write for a in schema_arguments(add_)
        ):
            gone.append("OpOverload._schema.arguments[].alias_info.is_write")
    except AttributeError:
        gone.append("OpOverload._schema.arguments")
    from torch.distributed.pipelining import schedules as S

    for kind in (S.ScheduleZBVZeroBubble, S.ScheduleInterleaved1F1B):
        try:
            works = any(a is not None for a in schedule_timetable(kind, 2, 4)[0])
        except (AttributeError, TypeError, IndexError):
            works = False
        if not works:
            gone.append(
                f"{kind.__name__}._calculate_single_rank_operations (a "
                "timetable from an object made without __init__)"
            )
    reducer = getattr(torch._C._distributed_c10d, "Reducer", None)
    if reducer is None or not hasattr(reducer, "_get_zeros_like_grad_buckets"):
        gone.append("DDP reducer._get_zeros_like_grad_buckets")
    del DistributedDataParallel
    return gone
