"""Chapter 12's machinery on real processes, launched once for the test files
that share it (test_collectives, test_tensor_parallel, test_vocab_parallel,
test_pipeline, test_model_parallel_train): tests/conftest.py makes its
fixtures visible to them all, session-scoped, so one run of `make
multiprocess` (or `make chapter CH=12`) starts the processes once.

    chapter12_problem   the small GPT, a batch, PyTorch's loss and gradients
    chapter12_ranks     every worker function of the chapter on two ranks, in
                        the tests' one launch of two ranks (two_ranks.py; the
                        trainer in every mode, train_in_group, is the
                        chapter's own launch, which nbval checks)
    trainer_runs        the trainer's command-line runs (RUNS), started at
                        once in the background (trainer_launcher starts them
                        before the launch of two ranks, so both overlap)

Every process the runs start carries a marker in its environment; teardown
kills any marked process still alive.

Time limits: RUN_LIMIT is generous on purpose.  Two torchrun workers took
30-60 s just to start on a loaded 2-core machine (see
scale.distributed.STARTUP_LIMIT_S); the runs themselves take seconds.
`run_workers`' own timeout starts once every worker is up.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
import uuid

import numpy as np
import psutil
import pytest

import dying_rank
import launches
import two_ranks
from backprop_lessons.gpt.model import GPTConfig, init_params

#: the trainer's module (ddp_train.PROGRAM, which this file does not import:
#: tests/conftest.py loads it in every test session)
PROGRAM = "backprop_lessons.scale.ddp_train"

STEPS, CRASH_AFTER = 6, 3
COMMON = [
    "--steps",
    str(STEPS),
    "--seed",
    "0",
    "--dtype",
    "float64",
    "--timeout",
    "30",
]
RUN_LIMIT = 300.0  # seconds; see the module docstring
MARKER = "BACKPROP_LESSONS_MODEL_PARALLEL_RUN"
FINAL = re.compile(r"final loss: (\S+)")
CONFIG = GPTConfig(vocab_size=28, block_size=16, n_layer=2, n_head=2, n_embd=16)
CLIP = ["--clip", "0.05"]
RUNS = {
    # tensor parallel, the residual stream split along the sequence too, and
    # two micro-batches a step: one launch for the three options
    "sequence-accumulate": [
        "tp",
        "-m",
        PROGRAM,
        *COMMON,
        "--tensor-parallel",
        "2",
        "--sequence-parallel",
        "--accumulate",
        "2",
    ],
    # the pipeline: a schedule, a micro-batch count and a clip that are not
    # the defaults, in one launch (every schedule is chapter 12's own
    # launch, train_in_group, and chapter12_ranks' pipeline_run)
    "zbv-clip": [
        "tp",
        "-m",
        PROGRAM,
        *COMMON,
        "--pipeline",
        "2",
        "--schedule",
        "zbv",
        "--micro-batches",
        "8",
        *CLIP,
    ],
    # A rank that dies: torchrun's agent stops the others and names it,
    # whatever the mode (test_ddp_train's crash run is DDP's, blocked in a
    # collective); here the survivor waits in a point-to-point receive.
    "pipeline-crash": [
        "tp",
        *dying_rank.SCRIPT,
        *COMMON,
        "--pipeline",
        "2",
        "--crash-rank",
        "1",
        "--crash-after-step",
        str(CRASH_AFTER),
    ],
}


def argv_of(spec):
    if spec[0] != "tp":
        return spec
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node",
        "2",
        *spec[1:],
    ]


class Runs:
    """Every run of RUNS started at once, each in a session of its own."""

    def __init__(self, directory):
        self.directory, self.marker = directory, uuid.uuid4().hex
        self.procs = {}

    def env(self):
        return {
            **os.environ,
            MARKER: self.marker,
            "OMP_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1",
            "OPENBLAS_NUM_THREADS": "1",
            "GLOO_SOCKET_IFNAME": "lo",
            "PYTHONUNBUFFERED": "1",
        }

    def start_all(self):
        launches.take_turn(RUN_LIMIT)  # no other set running (launches.py)
        for name, spec in RUNS.items():
            with (
                open(self.directory / f"{name}.out", "w") as out,
                open(self.directory / f"{name}.err", "w") as err,
            ):
                self.procs[name] = subprocess.Popen(
                    argv_of(spec),
                    stdout=out,
                    stderr=err,
                    env=self.env(),
                    start_new_session=True,
                )
                launches.started(self.procs[name])
        self.started = time.monotonic()

    def wait(self, name):
        proc = self.procs[name]
        left = RUN_LIMIT - (time.monotonic() - self.started)
        try:
            proc.wait(timeout=max(left, 0.1))
        except subprocess.TimeoutExpired:
            self.kill_all()
            pytest.fail(f"{name} still ran after {RUN_LIMIT} s: hung")
        from backprop_lessons.scale.ddp_train import Finished

        return Finished(
            tuple(argv_of(RUNS[name])),
            proc.returncode,
            (self.directory / f"{name}.out").read_text(),
            (self.directory / f"{name}.err").read_text(),
        )

    def marked(self):
        return dying_rank.marked_processes(MARKER, self.marker)

    def kill_all(self):
        for proc in self.procs.values():
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
        for p in self.marked():
            with contextlib.suppress(psutil.NoSuchProcess):
                p.kill()
        for proc in self.procs.values():
            proc.wait()


@pytest.fixture(scope="session")
def trainer_launcher(request, tmp_path_factory):
    """Starts the trainer's runs, if a selected test needs them; kills
    whatever is left at the end of the session."""
    runs = Runs(tmp_path_factory.mktemp("model_parallel_runs"))
    items = request.session.items  # notebook cells (nbval) have no fixtures
    if any("trainer_runs" in getattr(i, "fixturenames", ()) for i in items):
        runs.start_all()
    yield runs
    runs.kill_all()
    assert psutil.wait_procs(runs.marked(), timeout=10)[1] == []


@pytest.fixture(scope="session")
def trainer_runs(trainer_launcher):
    return {name: trainer_launcher.wait(name) for name in RUNS}


@pytest.fixture(scope="session")
def alone_losses(trainer_launcher) -> dict:
    """The trainer's final loss alone, with COMMON's options: {None: no
    clip, 0.05: --clip 0.05}.  Trained in this process (train_alone, as
    chapter 12 does) while the runs go on: the command line alone is
    test_ddp_train's run, and another interpreter importing torch would
    cost seconds of CPU for the same numbers."""
    from backprop_lessons.scale.ddp_train import train_alone
    from backprop_lessons.scale.train_options import TrainOptions

    return {
        clip: train_alone(
            TrainOptions(steps=STEPS, seed=0, dtype="float64", clip=clip)
        )["final"]
        for clip in (None, float(CLIP[1]))
    }


def _batch():
    rng = np.random.default_rng(0)
    x = rng.integers(0, 28, (8, 16))
    y = rng.integers(0, 28, (8, 16))
    return init_params(CONFIG, seed=0, dtype=np.float64), x, y


@pytest.fixture(scope="session")
def chapter12_problem():
    from backprop_lessons.gpt.reference import torch_forward_backward

    params, x, y = _batch()
    return params, x, y, torch_forward_backward(params, CONFIG, x, y)


@two_ranks.tasks_for("chapter12_ranks")
def _chapter12_tasks() -> dict:
    """Every worker function of the chapter, on _batch()."""
    from backprop_lessons.scale import (
        collectives,
        pipeline,
        tensor_parallel,
        vocab_parallel,
    )

    params, x, y = _batch()
    return {
        "collectives": (collectives.check_collective_vjps, ()),
        "manual": (
            tensor_parallel.tp_gradients,
            (params, CONFIG, x, y, "manual"),
        ),
        "sequence": (
            tensor_parallel.tp_gradients,
            (params, CONFIG, x, y, "manual", True),
        ),
        "dtensor": (
            tensor_parallel.tp_gradients,
            (params, CONFIG, x, y, "dtensor"),
        ),
        "vocab": (vocab_parallel.vocab_parallel_check, ()),
        **{
            schedule: (
                pipeline.pipeline_run,
                (params, CONFIG, x, y, schedule, 4),
            )
            for schedule in pipeline.SCHEDULES
        },
    }


@pytest.fixture(scope="session")
def chapter12_ranks(rank_launch):
    """Every worker function of the chapter on two ranks (_chapter12_tasks)."""
    return rank_launch["chapter12_ranks"]


def final_loss_of(run):
    assert run.returncode == 0, run.stderr[-3000:]
    match = FINAL.fullmatch(run.stdout.strip().splitlines()[-1])
    assert match, run.stdout[-2000:]
    return float(match.group(1))
