"""Train the book's GPT data-parallel with PyTorch's own tools: DDP or FSDP, under
torchrun.

The model is the PyTorch twin of chapter 6's GPT as modules (`gpt_module`).
One program, several ways of running it:

    python -m backprop_lessons.scale.ddp_train        # alone: world size 1
    torchrun --standalone --nproc-per-node 2 -m backprop_lessons.scale.ddp_train
    torchrun --nnodes 2 --nproc-per-node 1 --rdzv-backend c10d \\
        --rdzv-endpoint 127.0.0.1:29400 --rdzv-id book \\
        -m backprop_lessons.scale.ddp_train  # twice: two "machines"

In the last form each torchrun is one node (on real machines, one per
machine, all naming the first machine's address as the endpoint); they meet
at the c10d rendezvous, which hands out the ranks in the order the nodes
join (`--node-rank` only matters to the static rendezvous).

Options: `--steps N --seed S --dtype {float32,float64}`, `--batch-size B`
(the global batch, in sequences), `--accumulate K` (K micro-batches per
step; DDP's `no_sync()` on all but the last), `--fsdp` (FSDP2's
`fully_shard` on every block and the root, instead of DDP),
`--checkpoint-dir DIR` (the run saved after every step, `--resume`
continues from the newest complete save: `resume`), `--timeout SECONDS`
(how long a collective may wait for the others), `--threads T` (torch
threads per process, default 1: N processes on N cores), `--clip
MAX_NORM` (the gradient clipped to that global norm before every step, in
every mode: `scale.clipping`).  Chapter 12's model parallelism, instead of
data parallelism: `--tensor-parallel N` (Megatron's split of every block
over N processes; `--sequence-parallel` splits the residual stream along
the sequence too) or `--pipeline N` (N ranks, `--schedule
{gpipe,1f1b,interleaved-1f1b,zbv}`, the last two with 2 stages per rank,
`--micro-batches M`); see `scale.model_parallel_train`.  Rank 0 prints one
line per step and, last, `final loss: <repr of the float>`: the mean loss of the
trained model on a fixed evaluation batch.

Why every way gives the same final loss: every rank draws the same global
batch of step k (`batches`), takes its own contiguous slice of it, and
splits that into K equal micro-batches whose losses are divided by K.  DDP
and FSDP then average the gradients over the ranks, so every way computes
the gradient of the mean loss over the same global batch; only the order
of the additions differs, which is float64 rounding.

Backends: gloo on CPU (here, 127.0.0.1); NCCL with one GPU per process when
CUDA is present (`--device auto`, the default, picks it; written for it, not
run on this project's CPU machines).  A rank that dies ends the run: its
peers' next collective fails (or times out after `--timeout` seconds), and
torchrun stops the other workers and reports the failed rank.  `launch`
runs the program from Python as a reader types it (chapter 8 does).

This module is the program: its command line, the process group, and the
training loop, which dispatches to data parallelism (`data_parallel`) or
to chapter 12's model parallelism (`model_parallel_train`).  The rest of
the trainer has a module each: the options (`train_options`), the model
(`gpt_module`), the batches (`batches`), PyTorch's AdamW (`optimizer`) and
the files a run is saved to and resumed from (`resume`).

What it is not: fast, or a general trainer (no learning-rate schedule, no
mixed precision).  References: PyTorch's DDP and
FSDP2 tutorials; Li et al. 2020 (DDP); Zhao et al. 2023 (FSDP);
Rajbhandari et al. 2020 (ZeRO); the torchrun and DCP documentation.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist

from .batches import corpus_tokens, eval_batch, micro_batches, step_batch
from .data_parallel import evaluate, train_step, wrap_ddp, wrap_fsdp
from .gpt_module import make_model
from .optimizer import adamw
from .pipeline import SCHEDULES
from .resume import latest_checkpoint, load_checkpoint, save_checkpoint
from .train_options import TrainOptions

__all__ = [
    "PROGRAM",
    "Environment",
    "pick_device",
    "start_process_group",
    "train",
    "train_model_parallel",
    "train_in_group",
    "train_alone",
    "parse_args",
    "main",
    "Finished",
    "quote_stderr",
    "launch",
    "exit_program",
]

#: the module `python -m` runs: this one
PROGRAM = "backprop_lessons.scale.ddp_train"


# ---------------------------------------------------------------------------
# The process group, and the run
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Environment:
    """Who this process is: what torchrun put in the environment, or world
    size 1 when the program runs alone."""

    rank: int
    local_rank: int
    world_size: int
    launched: bool  # started by torchrun (RANK etc. set)

    @classmethod
    def from_env(cls, environ=os.environ) -> Environment:
        if "RANK" not in environ:
            return cls(rank=0, local_rank=0, world_size=1, launched=False)
        return cls(
            rank=int(environ["RANK"]),
            local_rank=int(environ.get("LOCAL_RANK", 0)),
            world_size=int(environ["WORLD_SIZE"]),
            launched=True,
        )


def pick_device(requested: str, env: Environment) -> torch.device:
    """'cpu', 'cuda' (one GPU per process: cuda:LOCAL_RANK) or 'auto'."""
    if requested == "auto":
        requested = "cuda" if torch.cuda.is_available() else "cpu"
    if requested == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(
                "ddp_train: --device cuda, but CUDA is not "
                "available here; use --device cpu"
            )
        torch.cuda.set_device(env.local_rank)
        return torch.device("cuda", env.local_rank)
    return torch.device("cpu")


def start_process_group(
    env: Environment, device: torch.device, timeout: float
) -> str:
    """Join the process group; returns the backend (gloo or nccl).

    Under torchrun the rendezvous it did tells every rank where rank 0's
    store is (MASTER_ADDR, MASTER_PORT): `env://`.  Alone, an in-process
    store makes a group of one, so the same DDP / FSDP code runs unchanged.
    `timeout` bounds every collective: a peer that hangs makes the others
    fail after this many seconds instead of waiting forever.
    """
    backend = "nccl" if device.type == "cuda" else "gloo"
    limit = datetime.timedelta(seconds=timeout)
    if env.launched:
        dist.init_process_group(
            backend,
            init_method="env://",
            rank=env.rank,
            world_size=env.world_size,
            timeout=limit,
            device_id=device if device.type == "cuda" else None,
        )
    else:
        dist.init_process_group(
            backend, store=dist.HashStore(), rank=0, world_size=1, timeout=limit
        )
    return backend


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "es" if noun.endswith("h") else "s")


def _say(env: Environment, message: str) -> None:
    if env.rank == 0:
        print(message, flush=True)


def train(
    options: TrainOptions,
    env: Environment,
    device: torch.device,
    checkpoint_dir: Path | None = None,
    resume: bool = False,
    after_step: Callable[[int, int], None] | None = None,
) -> float:
    """Train in an initialized process group; return the final loss.

    Every rank runs this.  `after_step(rank, step)` runs after every step
    and its checkpoint (the tests kill a rank there, on purpose).
    """
    world, rank = env.world_size, env.rank
    if options.model_parallel > 1:
        if checkpoint_dir is not None or resume:
            raise ValueError(
                "ddp_train: --checkpoint-dir and --resume are for data "
                "parallelism; --tensor-parallel and --pipeline do not save "
                "checkpoints"
            )
        return train_model_parallel(options, env, device, after_step)
    per_micro = options.check_world(world)
    data = corpus_tokens()
    model = make_model(options.config, options.seed, options.dtype, device)
    model = wrap_fsdp(model, device) if options.fsdp else wrap_ddp(model, device)
    optimizer = adamw(model.named_parameters(), options)
    start = 0
    if resume:
        found = latest_checkpoint(checkpoint_dir)
        if found is None:
            _say(
                env,
                f"no complete checkpoint in {checkpoint_dir}: starting at step 0",
            )
        else:
            start = load_checkpoint(found[1], model, optimizer, options)
            _say(env, f"resumed from {found[1].name} (step {start})")
    how = "FSDP2 (fully_shard)" if options.fsdp else "DDP"
    _say(
        env,
        f"ddp_train: {how}, world size {world} "
        f"({dist.get_backend()} on {device.type}), {options.dtype}, "
        f"global batch {options.batch_size} = "
        f"{_count(world, 'rank')} x "
        f"{_count(options.accumulate, 'micro-batch')} x "
        f"{_count(per_micro, 'sequence')} of "
        f"{options.config.block_size} tokens",
    )
    for step in range(start, options.steps):
        x, y = step_batch(data, options, step)
        micro = micro_batches(x, y, rank, world, options.accumulate)
        t0 = time.perf_counter()
        try:
            loss = train_step(model, optimizer, micro, device, options.clip)
            dist.all_reduce(loss)  # sum of the ranks' means
        except RuntimeError as e:
            if world == 1:
                raise
            raise _step_failed(e, rank, world, step) from e
        seconds = time.perf_counter() - t0
        _say_step(env, step, options.steps, loss.item() / world, seconds)
        if checkpoint_dir is not None:
            save_checkpoint(checkpoint_dir, step + 1, model, optimizer, options)
        if after_step is not None:
            after_step(rank, step + 1)
    return evaluate(model, *eval_batch(data, options), device)


def train_in_group(rank: int, world_size: int, options: TrainOptions) -> dict:
    """`train` on ranks whose process group is already up (a task of
    `distributed.run_workers`): {"final": the final loss, "log": what rank 0
    printed}.  Several runs can share one launch."""
    import io

    env = Environment(
        rank=rank, local_rank=0, world_size=world_size, launched=True
    )
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        final = train(options, env, torch.device("cpu"))
    return {"final": final, "log": printed.getvalue()}


def train_alone(options: TrainOptions) -> dict:
    """`train` in this process as a world of one, what `python -m
    backprop_lessons.scale.ddp_train` does alone, without printing: as
    `train_in_group`.  Starts and ends its own one-process group."""
    env = Environment.from_env({})
    start_process_group(env, torch.device("cpu"), timeout=60.0)
    try:
        return train_in_group(0, 1, options)
    finally:
        dist.destroy_process_group()


def _step_failed(error, rank, world, step) -> RuntimeError:
    """The error a rank raises when a step fails under torchrun: it names
    the rank and the step, and where the first failure is reported."""
    return RuntimeError(
        f"ddp_train: rank {rank} of {world} failed in step "
        f"{step + 1}: {str(error).splitlines()[0]}\nIf a connection "
        f"was lost or a collective timed out, another rank stopped "
        f"first; torchrun's report names it (Root Cause)."
    )


def _say_step(env, step, steps, loss, seconds) -> None:
    _say(
        env,
        f"step {step + 1:>4}/{steps}  train loss {loss:.6f}  "
        f"({seconds * 1e3:.0f} ms)",
    )


def train_model_parallel(
    options: TrainOptions,
    env: Environment,
    device: torch.device,
    after_step: Callable[[int, int], None] | None = None,
) -> float:
    """`train` with the model split over the ranks (chapter 12): every rank
    a tensor-parallel slice (`--tensor-parallel N`) or a pipeline stage
    (`--pipeline N`), all on the same global batches; returns the final
    loss."""
    from . import model_parallel_train as mp

    world, rank = env.world_size, env.rank
    if device.type != "cpu":
        raise ValueError(
            "ddp_train: --tensor-parallel and --pipeline run on CPU (gloo) "
            "here; use --device cpu"
        )
    per_micro = options.check_world(world)
    data = corpus_tokens()
    kind = (
        mp.TensorParallelRunner
        if options.tensor_parallel > 1
        else mp.PipelineRunner
    )
    runner = kind(options, rank, world)
    _say(
        env,
        f"ddp_train: {runner.description}, world size {world} "
        f"({dist.get_backend()} on {device.type}), {options.dtype}, "
        f"global batch {options.batch_size} = "
        f"{_count(options.batch_size // per_micro, 'micro-batch')} x "
        f"{_count(per_micro, 'sequence')} of "
        f"{options.config.block_size} tokens",
    )
    for step in range(options.steps):
        x, y = step_batch(data, options, step)
        t0 = time.perf_counter()
        try:
            loss = runner.step(x, y)
        except RuntimeError as e:
            if world == 1:
                raise
            raise _step_failed(e, rank, world, step) from e
        seconds = time.perf_counter() - t0
        _say_step(env, step, options.steps, loss, seconds)
        if after_step is not None:
            after_step(rank, step + 1)
    return runner.evaluate(*eval_batch(data, options))


# ---------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m backprop_lessons.scale.ddp_train",
        description="Train the book's GPT data-parallel (DDP or FSDP2) "
        "alone or under torchrun.",
    )
    d = TrainOptions()
    p.add_argument("--steps", type=int, default=d.steps)
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--dtype", choices=("float32", "float64"), default=d.dtype)
    p.add_argument(
        "--batch-size",
        type=int,
        default=d.batch_size,
        help="global batch in sequences (default %(default)s)",
    )
    p.add_argument(
        "--accumulate",
        type=int,
        default=d.accumulate,
        help="micro-batches per step; no_sync on all but the last",
    )
    p.add_argument(
        "--fsdp", action="store_true", help="FSDP2 fully_shard instead of DDP"
    )
    p.add_argument("--lr", type=float, default=d.lr)
    p.add_argument(
        "--tensor-parallel",
        type=int,
        default=d.tensor_parallel,
        metavar="N",
        help="split every block over N ranks (Megatron; run N processes)",
    )
    p.add_argument(
        "--pipeline",
        type=int,
        default=d.pipeline,
        metavar="N",
        help="cut the blocks into N stages, one per rank (run N processes)",
    )
    p.add_argument(
        "--schedule",
        choices=SCHEDULES,
        default=d.schedule,
        help="pipeline schedule (default %(default)s); interleaved-1f1b "
        "and zbv hold 2 stages per rank",
    )
    p.add_argument(
        "--sequence-parallel",
        action="store_true",
        help="with --tensor-parallel: split the residual stream along the "
        "sequence too (all-gather / reduce-scatter instead of all-reduce)",
    )
    p.add_argument(
        "--clip",
        type=float,
        default=None,
        metavar="MAX_NORM",
        help="clip the gradient to this global norm before every step",
    )
    p.add_argument(
        "--micro-batches",
        type=int,
        default=d.micro_batches,
        help="pipeline micro-batches per step (default %(default)s)",
    )
    p.add_argument(
        "--checkpoint-dir",
        type=Path,
        default=None,
        help="save a DCP checkpoint here after every step",
    )
    p.add_argument(
        "--resume",
        action="store_true",
        help="continue from the newest complete checkpoint",
    )
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    p.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads per process (default 1)",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=60.0,
        help="seconds a collective waits for the others",
    )
    args = p.parse_args(argv)
    if args.resume and args.checkpoint_dir is None:
        p.error("--resume needs --checkpoint-dir")
    return args


def main(argv=None, after_step=None) -> int:
    """The program: parse argv, join the group, train, print the final loss.
    `after_step` as in `train`."""
    args = parse_args(argv)
    options = TrainOptions(
        steps=args.steps,
        seed=args.seed,
        dtype=args.dtype,
        batch_size=args.batch_size,
        accumulate=args.accumulate,
        fsdp=args.fsdp,
        lr=args.lr,
        tensor_parallel=args.tensor_parallel,
        pipeline=args.pipeline,
        schedule=args.schedule,
        micro_batches=args.micro_batches,
        sequence_parallel=args.sequence_parallel,
        clip=args.clip,
    )
    env = Environment.from_env()
    torch.set_num_threads(args.threads)
    device = pick_device(args.device, env)
    start_process_group(env, device, args.timeout)
    try:
        final = train(
            options, env, device, args.checkpoint_dir, args.resume, after_step
        )
        _say(env, f"final loss: {final!r}")
    finally:
        dist.destroy_process_group()
    return 0


# ---------------------------------------------------------------------------
# Running the program from Python
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Finished:
    """A finished run of the program: its command, exit code and output."""

    command: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    @property
    def final_loss(self) -> float:
        """The float rank 0 printed last; a clear error if the run failed."""
        lines = self.stdout.strip().splitlines()
        if (
            self.returncode
            or not lines
            or not lines[-1].startswith("final loss: ")
        ):
            raise RuntimeError(
                f"ddp_train: {' '.join(self.command)} ended with exit code "
                f"{self.returncode} and no final loss; "
                + quote_stderr(self.stderr)
            )
        return float(lines[-1].removeprefix("final loss: "))


#: a line of torchrun's own log ("W1129 14:42:15.879000 7840 api.py:...")
_AGENT_LOG = re.compile(r"[DIWEF]\d{4} \d\d:\d\d:\d\d")


def quote_stderr(stderr: str, limit: int = 2000) -> str:
    """A failed run's stderr for an error message: whole if short; else how
    it begins, torchrun's own log lines left out (a worker's first error,
    e.g. an abort's message, comes first), and how it ends (torchrun's
    report: which rank failed, with which signal)."""
    if len(stderr) <= limit:
        return f"its stderr:\n{stderr}"
    own = "\n".join(
        line for line in stderr.splitlines() if not _AGENT_LOG.match(line)
    )
    return (
        "its stderr begins (torchrun's log lines left out):\n"
        f"{own[: limit // 2]}\n[...]\nand ends:\n{stderr[-limit:]}"
    )


def launch(
    args=(),
    nproc_per_node: int = 1,
    timeout: float = 300.0,
    env: dict[str, str] | None = None,
    program: tuple[str, ...] = ("-m", PROGRAM),
) -> Finished:
    """Run `python -m backprop_lessons.scale.ddp_train ARGS` as a reader
    would type it: alone when `nproc_per_node` is 1, else under `torchrun
    --standalone --nproc-per-node N`; wait for it and return its output.

    One thread per process (OMP_NUM_THREADS=1); `env` adds environment
    variables; `program` replaces `-m backprop_lessons.scale.ddp_train`
    (the tests run a script that wraps it).  After `timeout` seconds the
    run is stopped (torchrun passes SIGTERM on to its workers, then
    SIGKILL) and a TimeoutError is raised.
    """
    command = [*program, *map(str, args)]
    if nproc_per_node == 1:
        command = [sys.executable, *command]
    else:
        command = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc-per-node",
            str(nproc_per_node),
            *command,
        ]
    proc = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "OMP_NUM_THREADS": "1", **(env or {})},
        start_new_session=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.terminate()
        try:
            proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
        raise TimeoutError(
            f"ddp_train: {' '.join(command)} did not finish within {timeout} s"
        ) from None
    return Finished(tuple(command), proc.returncode, stdout, stderr)


def exit_program(code: int) -> None:
    """End the program with exit code `code`, its output flushed, without
    finalizing the interpreter (the end of a run: everything it does is
    done, checkpoints included, which are written synchronously).

    Gloo's worker threads (pt_gloo_runloop) outlive destroy_process_group()
    in PyTorch 2.13.  One that drops its last reference to a finished
    collective's tensors after the interpreter has begun finalizing needs
    the GIL it can no longer take, and the process aborts ("terminate called
    without an active exception", SIGABRT): torchrun then reports a run that
    had finished as failed.  On a loaded 2-core machine one in about ten of
    chapter 8's FSDP launches did so; a core dump showed the thread
    destroying an AsyncAllgatherWork in ProcessGroupGloo::runLoop, under
    PyThread_exit_thread.  Without finalization, no thread can."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    from torch.distributed.elastic.multiprocessing.errors import record

    # An error leaves through the exception, which `record` reports.
    exit_program(record(main)())
