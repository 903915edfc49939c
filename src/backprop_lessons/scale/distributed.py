"""Data-parallel backward on `torch.distributed` itself: local worker processes,
gloo, 127.0.0.1.

A comparison module, like `gradcheck`: it imports torch, and no engine
imports it.  It holds two kinds of things (chapter 8):

- The launcher.  `run_workers(fn, *args, world_size=2)` spawns
  `world_size` fresh Python processes, joins them into one process group
  (backend `gloo`, rendezvous on 127.0.0.1 at a free port picked by the
  operating system), calls `fn(rank, world_size, *args)` on every rank and
  returns the ranks' results, in rank order, converted to NumPy arrays.
  Tensors are never sent back as tensors: a tensor passed between processes
  lives in shared memory owned by the sender, and it breaks when the
  sender exits.  Every process is joined and every process group is
  destroyed, also when a rank fails; a failing rank's traceback is raised
  in the caller as a `WorkerError` that names the rank.
- The functions the chapter runs on the ranks.  `spawn` starts each worker
  as a new interpreter that imports the function by its module and name,
  so these must live in an importable module (here), not in a notebook:
  `allreduce_gradients` (each rank's backward on its shard, then an
  explicit `all_reduce` of every gradient), `ddp_gradients` (the same
  through `DistributedDataParallel`), `gpt_data_parallel_gradients` (the
  hand-written NumPy GPT of chapter 6, its gradients all-reduced as
  tensors) and `run_tasks` (several of these in one launch, because
  starting a process that imports torch costs seconds).

What it is not: a training framework, or fast.  Everything runs on CPU
with one thread per process.  References: the PyTorch tutorial "Writing
distributed applications with PyTorch"; Li et al. 2020, "PyTorch
Distributed: Experiences on Accelerating Data Parallel Training" (DDP's
gradient buckets).
"""

from __future__ import annotations

import datetime
import multiprocessing
import os
import queue as queue_module
import time
import traceback
from collections.abc import Callable
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

__all__ = [
    "WorkerError",
    "run_workers",
    "worker_main",
    "to_numpy",
    "shard",
    "make_mlp",
    "mse_loss",
    "full_batch_gradients",
    "allreduce_gradients",
    "ddp_gradients",
    "ddp_bucket_log",
    "ddp_bucket_bytes",
    "gpt_data_parallel_gradients",
    "run_tasks",
    "worker_info",
]

HOST = "127.0.0.1"
BACKEND = "gloo"
# Thread counts for the libraries a worker loads: N workers on N cores, one thread
# each.
_WORKER_ENV = {
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
}


# How long the workers may take to start (a fresh interpreter each, that
# imports torch) before `run_workers` gives up.  Generous on purpose: on a
# 2-core machine kept busy by other programs, two workers took 30 to 60 s to
# start; `timeout` counts only from the moment they are all up.
STARTUP_LIMIT_S = 300.0
ALL_UP = "backprop_lessons: all ranks up"  # the store key that says so


class WorkerError(RuntimeError):
    """A rank raised (or died); `rank` says which, `worker_traceback` holds its
    traceback text."""

    def __init__(self, message: str, rank: int, worker_traceback: str = ""):
        super().__init__(message)
        self.rank = rank
        self.worker_traceback = worker_traceback


# ---------------------------------------------------------------------------
# The launcher
# ---------------------------------------------------------------------------


def to_numpy(obj: Any) -> Any:
    """`obj` with every tensor replaced by a NumPy copy (through dicts, lists and
    tuples)."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().cpu().numpy().copy()
    if isinstance(obj, dict):
        return {k: to_numpy(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_numpy(v) for v in obj)
    return obj


def worker_main(
    rank: int,
    world_size: int,
    port: int,
    timeout: float,
    fn: Callable,
    args: tuple,
    results,
) -> None:
    """Body of every worker process: say it is up, join the group through
    the launcher's store at `port`, run `fn`, send back ("ok" | "error",
    rank, payload)."""
    results.put(("up", rank, None))  # torch imported: `timeout` starts now
    torch.set_num_threads(1)
    # for worker_info
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = HOST, str(port)
    try:
        wait = datetime.timedelta(seconds=timeout)
        store = dist.TCPStore(HOST, port, is_master=False, timeout=wait)
        # the launcher's word that every rank has started: `timeout` counts
        # from here (starting, each rank imports torch: slow on a busy machine)
        store.wait([ALL_UP], datetime.timedelta(seconds=STARTUP_LIMIT_S))
        dist.init_process_group(
            BACKEND, store=store, rank=rank, world_size=world_size, timeout=wait
        )
        result = fn(rank, world_size, *args)
        # Leave the group together: gloo's ranks connect pairwise, and a
        # rank that closed its connections while a slower peer was still
        # connecting broke that peer's start-up ("Connection closed by peer").
        dist.barrier()
        message = ("ok", rank, to_numpy(result))
    except BaseException:
        message = ("error", rank, traceback.format_exc())
    try:
        results.put(message)
        # Flush before leaving the group: the caller then sees this rank's
        # own error before the error its peers get when this rank's
        # connections close.
        results.close()
        results.join_thread()
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


@contextmanager
def _environment(**values: str):
    """Set environment variables for the duration (spawned children inherit
    them)."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _function_name(fn: Callable) -> str:
    module = getattr(fn, "__module__", "?")
    return f"{module}.{getattr(fn, '__qualname__', repr(fn))}"


def run_workers(
    fn: Callable, *args, world_size: int = 2, timeout: float = 60.0
) -> list:
    """Run `fn(rank, world_size, *args)` on `world_size` local processes in one
    gloo group.

    Returns the ranks' return values in rank order, with every tensor turned
    into a NumPy array.  `fn` and `args` are pickled, so `fn` must be a
    module-level function of an importable module.  Raises `WorkerError`
    (naming the rank, with its traceback) if a rank raises or dies, and
    `TimeoutError` if the ranks have not all answered `timeout` seconds
    after they were all up (started, torch imported), or were not all up
    after STARTUP_LIMIT_S.  In every case all processes are ended and
    joined before this returns.
    """
    if (
        not isinstance(world_size, int)
        or isinstance(world_size, bool)
        or world_size < 1
    ):
        raise ValueError(
            f"run_workers: world_size must be a positive int, got {world_size!r}"
        )
    if (
        not callable(fn)
        or getattr(fn, "__name__", "<lambda>") == "<lambda>"
        or "<locals>" in getattr(fn, "__qualname__", "")
    ):
        raise ValueError(
            "run_workers: fn must be a module-level function (spawned workers "
            "import "
            f"it by name), got {fn!r}"
        )
    if not timeout > 0:
        raise ValueError(
            f"run_workers: timeout must be positive seconds, got {timeout!r}"
        )
    ctx = multiprocessing.get_context("spawn")
    results = ctx.Queue()
    # The group's key-value store lives here, in the launcher, on a port the
    # OS picks and that stays bound until the run ends: no other program can
    # take it while the workers start (with a port chosen first and bound by
    # rank 0 later, another group's workers could, and connect to the wrong
    # group).
    store = dist.TCPStore(
        HOST,
        0,
        is_master=True,
        wait_for_workers=False,
        timeout=datetime.timedelta(seconds=timeout),
    )
    port = store.port
    processes = [
        ctx.Process(
            target=worker_main,
            name=f"backprop-lessons rank {rank}",
            args=(rank, world_size, port, timeout, fn, args, results),
            daemon=True,
        )
        for rank in range(world_size)
    ]
    answers: dict[int, Any] = {}
    failed = False
    try:
        with _environment(**_WORKER_ENV):
            for p in processes:
                p.start()
        up: set[int] = set()
        deadline = time.monotonic() + STARTUP_LIMIT_S
        while len(answers) < world_size:
            remaining = deadline - time.monotonic()
            if remaining <= 0 and len(up) < world_size:
                missing = [r for r in range(world_size) if r not in up]
                raise TimeoutError(
                    f"run_workers: ranks {missing} of {world_size} did not "
                    f"start within {STARTUP_LIMIT_S} s"
                )
            if remaining <= 0:
                missing = [r for r in range(world_size) if r not in answers]
                raise TimeoutError(
                    f"run_workers: ranks {missing} of {world_size} did not "
                    "finish "
                    f"{_function_name(fn)} within {timeout} s"
                )
            try:
                kind, rank, payload = results.get(timeout=min(remaining, 0.2))
            except queue_module.Empty:
                dead = [
                    r
                    for r, p in enumerate(processes)
                    if r not in answers and p.exitcode is not None
                ]
                if not dead:
                    continue
                # A rank flushes its answer before it exits: read what is
                # still in the pipe.
                try:
                    kind, rank, payload = results.get(timeout=1.0)
                except queue_module.Empty:
                    rank = dead[0]
                    raise WorkerError(
                        f"run_workers: rank {rank} of {world_size} died with "
                        "exit code "
                        f"{processes[rank].exitcode} while running "
                        f"{_function_name(fn)}",
                        rank,
                    ) from None
            if kind == "up":
                up.add(rank)
                if len(up) == world_size:  # the time limit starts now
                    store.set(ALL_UP, "1")
                    deadline = time.monotonic() + timeout
                continue
            if kind == "error":
                raise WorkerError(
                    f"run_workers: rank {rank} of {world_size} raised in "
                    f"{_function_name(fn)}:\n{payload}",
                    rank,
                    payload,
                )
            answers[rank] = payload
    except BaseException:
        failed = True
        raise
    finally:
        _end_processes(processes, grace=0.0 if failed else 10.0)
        results.close()
        results.join_thread()
    return [answers[rank] for rank in range(world_size)]


def _end_processes(processes, grace: float) -> None:
    """Join every process; after `grace` seconds terminate (then kill) the ones
    still running."""
    deadline = time.monotonic() + grace
    for p in processes:
        if p.pid is None:  # never started
            continue
        p.join(max(0.0, deadline - time.monotonic()))
    for p in processes:
        if p.pid is not None and p.is_alive():
            p.terminate()
            p.join(5.0)
            if p.is_alive():
                p.kill()
                p.join()


# ---------------------------------------------------------------------------
# What the ranks run
# ---------------------------------------------------------------------------


def shard(array: np.ndarray, rank: int, world_size: int) -> np.ndarray:
    """Rank `rank`'s contiguous slice of the rows of `array`; every rank gets the
    same count."""
    n = len(array)
    if n % world_size:
        raise ValueError(
            f"shard: a batch of {n} rows does not split evenly over {world_size} "
            "ranks; "
            "use a batch size divisible by the world size (equal shards make "
            "the mean "
            f"of the shards' mean losses equal the batch's mean loss)"
        )
    size = n // world_size
    return array[rank * size : (rank + 1) * size]


def make_mlp(sizes=(4, 16, 16, 1), seed: int = 0) -> torch.nn.Sequential:
    """A small float64 tanh MLP, the same weights for the same seed (in any
    process)."""
    if len(sizes) < 2:
        raise ValueError(
            "make_mlp: expected at least an input and an output size, got "
            f"{sizes}"
        )
    generator_state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    layers = []
    for i, (fan_in, fan_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        layers.append(torch.nn.Linear(fan_in, fan_out, dtype=torch.float64))
        if i < len(sizes) - 2:
            layers.append(torch.nn.Tanh())
    torch.random.set_rng_state(
        generator_state
    )  # leave the caller's random stream alone
    return torch.nn.Sequential(*layers)


def mse_loss(
    model: torch.nn.Module, x: np.ndarray, y: np.ndarray
) -> torch.Tensor:
    """Mean squared error of `model` on the NumPy batch (x (B, in), y (B,
    out))."""
    return torch.nn.functional.mse_loss(
        model(torch.as_tensor(x)), torch.as_tensor(y)
    )


def full_batch_gradients(
    x: np.ndarray, y: np.ndarray, seed: int = 0
) -> dict[str, np.ndarray]:
    """The single-process reference: gradients of the mean loss over the whole
    batch."""
    model = make_mlp(seed=seed)
    mse_loss(model, x, y).backward()
    return {name: p.grad.numpy().copy() for name, p in model.named_parameters()}


def allreduce_gradients(
    rank: int, world_size: int, x: np.ndarray, y: np.ndarray, seed: int = 0
) -> dict[str, torch.Tensor]:
    """Backward on this rank's shard, then an explicit all_reduce (sum) of
    every gradient / world_size.

    The batch's mean loss is the mean of the equal shards' mean losses, so
    its gradient is the mean of the shards' gradients.
    """
    model = make_mlp(seed=seed)
    mse_loss(
        model, shard(x, rank, world_size), shard(y, rank, world_size)
    ).backward()
    for p in model.parameters():
        # in place: every rank gets the sum
        dist.all_reduce(p.grad, op=dist.ReduceOp.SUM)
        p.grad /= world_size
    return {name: p.grad for name, p in model.named_parameters()}


def ddp_gradients(
    rank: int, world_size: int, x: np.ndarray, y: np.ndarray, seed: int = 0
) -> dict[str, torch.Tensor]:
    """The same gradients through DistributedDataParallel, which averages
    them during backward."""
    model = torch.nn.parallel.DistributedDataParallel(make_mlp(seed=seed))
    mse_loss(
        model, shard(x, rank, world_size), shard(y, rank, world_size)
    ).backward()
    # DDP wraps the model: its parameters are named "module.<name>"
    return {
        name.removeprefix("module."): p.grad
        for name, p in model.named_parameters()
    }


def gpt_data_parallel_gradients(
    rank: int,
    world_size: int,
    params: dict,
    config,
    idx: np.ndarray,
    targets: np.ndarray,
) -> dict:
    """The chapter 6 NumPy GPT, data-parallel: `gpt_backward` on this rank's
    shard, all-reduced.

    Returns {"loss": mean loss over the whole batch, "grads": {name: gradient}}.
    """
    from ..gpt import gpt_backward, gpt_forward

    loss, cache = gpt_forward(
        params,
        config,
        shard(idx, rank, world_size),
        shard(targets, rank, world_size),
    )
    grads = gpt_backward(params, config, cache)
    reduced = {}
    # the names of PARAMETER_TABLE, in its order on every rank
    for name, g in grads.items():
        t = torch.from_numpy(g)
        dist.all_reduce(t, op=dist.ReduceOp.SUM)
        reduced[name] = t / world_size
    loss_t = torch.tensor(float(loss), dtype=torch.float64)
    dist.all_reduce(loss_t, op=dist.ReduceOp.SUM)
    return {"loss": loss_t / world_size, "grads": reduced}


def _logged_buckets(rank, world_size, x, y, cap_bytes, seed):
    """Two backward passes of DDP on the MLP, a communication hook writing
    down every bucket it all-reduces: per backward, in launch order, the
    bucket's parameter names and its buffer's bytes."""
    model = make_mlp(seed=seed)
    names = {id(p): name for name, p in model.named_parameters()}
    ddp = torch.nn.parallel.DistributedDataParallel(
        model, bucket_cap_mb=cap_bytes / 2**20
    )
    # per backward: (names, bytes) of each bucket, in launch order
    iterations: list[list[tuple[list[str], int]]] = []

    def record_then_allreduce(state, bucket):
        t = bucket.buffer()
        iterations[-1].append(
            ([names[id(p)] for p in bucket.parameters()], t.nbytes)
        )
        t.div_(world_size)
        return (
            dist.all_reduce(t, async_op=True)
            .get_future()
            .then(lambda fut: fut.value()[0])
        )

    ddp.register_comm_hook(None, record_then_allreduce)
    # the 2nd backward uses the buckets DDP rebuilt from
    # the 1st one's ready order
    for _ in range(2):
        ddp.zero_grad()
        iterations.append([])
        mse_loss(
            ddp, shard(x, rank, world_size), shard(y, rank, world_size)
        ).backward()
    return iterations


def ddp_bucket_log(
    rank: int,
    world_size: int,
    x: np.ndarray,
    y: np.ndarray,
    cap_bytes: int,
    seed: int = 0,
) -> list[list[list[str]]]:
    """The buckets DDP all-reduces in each of two backward passes, in the
    order it launches them, as lists of parameter names.

    A communication hook replaces DDP's all-reduce of each bucket; ours
    writes down the bucket's parameter names, then does the usual
    all-reduce and average.  `cap_bytes` is DDP's bucket size cap.
    """
    logged = _logged_buckets(rank, world_size, x, y, cap_bytes, seed)
    return [[names for names, _ in buckets] for buckets in logged]


def ddp_bucket_bytes(
    rank: int,
    world_size: int,
    x: np.ndarray,
    y: np.ndarray,
    cap_bytes: int,
    seed: int = 0,
) -> list[int]:
    """The bytes this rank puts into DDP's all-reduces in each of two
    backward passes (the bucket buffers the same hook sees)."""
    logged = _logged_buckets(rank, world_size, x, y, cap_bytes, seed)
    return [sum(n for _, n in buckets) for buckets in logged]


def worker_info(rank: int, world_size: int) -> dict:
    """Who this rank is: its rank, the world size, the backend, its process id and
    the port used."""
    return {
        "rank": dist.get_rank(),
        "world_size": dist.get_world_size(),
        "backend": dist.get_backend(),
        "pid": os.getpid(),
        "port": int(os.environ["MASTER_PORT"]),
        "torch_threads": torch.get_num_threads(),
    }


def run_tasks(rank: int, world_size: int, tasks: dict) -> dict:
    """Run several functions in one launch: tasks maps a name to (fn, args);
    returns name -> result.

    Every rank runs the same tasks in the same order (collectives must match).
    """
    return {
        name: fn(rank, world_size, *args) for name, (fn, args) in tasks.items()
    }
