"""`python -m backprop_lessons.scale.ddp_train`, run every way it can be run,
all at once.

Each way starts fresh interpreters that import torch (seconds each, on 2
shared cores), so one module fixture starts every run concurrently in the
background - alone (through `ddp_train.launch`), two torchrun "nodes" with
a c10d rendezvous and --accumulate 2, and a `torchrun --standalone` run
whose rank 1 dies after step 3 - and starts the resume of that run (--fsdp,
one process) as soon as it has ended.  The tests then only read the
outputs.  FSDP on two ranks is chapter 8's own launch (`--fsdp --accumulate
2` against the run alone, which nbval checks): not started again here.  A
launch costs ~9 CPU-seconds (torchrun and two workers), so each launch
tests several things at once: plain DDP on two ranks and `--standalone` are
the crashing run's first steps (the resume from them reaches the loss of
the run alone), DDP's `no_sync()` and a c10d rendezvous the two nodes'.

Every process the fixture starts carries a marker in its environment, which
torchrun passes on to its workers (they run in sessions of their own, so
killing the launcher's process group would not reach them): teardown kills
every marked process that is still running, and a test checks that none is
left.  Only 127.0.0.1 is used: free ports picked by the OS, gloo on `lo`.

The program's own pieces are also tested in this process (the command
line, torchrun's environment, `launch`'s report); the trainer's other
modules have their own tests (test_gpt_module, test_batches,
test_train_options, test_optimizer, test_resume, test_data_parallel).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest
import torch

import dying_rank
import launches
from backprop_lessons.scale import ddp_train as T

# they start processes: `make multiprocess`, one at a time (tests/conftest.py)
pytestmark = pytest.mark.multiprocess

STEPS = 6
CRASH_AFTER = 3
COMMON = [
    "--steps",
    str(STEPS),
    "--seed",
    "3",
    "--dtype",
    "float64",
    "--timeout",
    "30",
]
TORCHRUN = [sys.executable, "-m", "torch.distributed.run"]
PROGRAM = ["-m", T.PROGRAM]
# the program with --crash-rank and --crash-after-step (test support)
DYING_RANK = list(dying_rank.SCRIPT)
RUN_LIMIT = 240.0  # seconds: a run still going after this counts as hung
MARKER = "BACKPROP_LESSONS_TEST_RUN"
FINAL = re.compile(r"final loss: (\S+)")


# ---------------------------------------------------------------------------
# The launcher
# ---------------------------------------------------------------------------


@dataclass
class Finished:
    """How one command ended: exit code, its outputs, wall seconds."""

    name: str
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    # what the run left behind, e.g. the checkpoints it wrote
    left: list = field(default_factory=list)
    # seconds it took to stop after a crash
    stopping: float = float("nan")

    def final_loss(self) -> str | None:
        """The repr after `final loss: ` on the last line of stdout."""
        lines = self.stdout.strip().splitlines()
        match = FINAL.fullmatch(lines[-1]) if lines else None
        return match.group(1) if match else None

    def describe(self) -> str:
        return (
            f"{self.name}: exit code {self.returncode} after "
            f"{self.seconds:.1f} s\n--- stdout\n{self.stdout[-3000:]}"
            f"\n--- stderr\n{self.stderr[-3000:]}"
        )


class Launcher:
    """Starts commands in the background, each in a session of its own,
    with output to files; finds and kills everything they started."""

    def __init__(self, directory: Path):
        self.directory = directory
        self.marker = uuid.uuid4().hex
        self.running: dict[str, tuple[subprocess.Popen, float]] = {}
        self.chained: dict[str, threading.Thread] = {}
        self.launched: dict[str, Finished] = {}
        self.lock = threading.Lock()
        self.closed = False
        # the two-node run's rendezvous store, hosted here (see _start_every_run)
        self.rendezvous_store = None

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            {
                MARKER: self.marker,
                "OMP_NUM_THREADS": "1",
                "MKL_NUM_THREADS": "1",
                "OPENBLAS_NUM_THREADS": "1",
                "GLOO_SOCKET_IFNAME": "lo",
                "PYTHONUNBUFFERED": "1",
            }
        )
        return env

    def start(self, name: str, argv: list[str]) -> None:
        with self.lock:
            if self.closed:
                return
            with (
                open(self.directory / f"{name}.out", "w") as out,
                open(self.directory / f"{name}.err", "w") as err,
            ):
                proc = subprocess.Popen(
                    argv,
                    stdout=out,
                    stderr=err,
                    env=self.env(),
                    cwd=self.directory,
                    start_new_session=True,
                )
            self.running[name] = (proc, time.monotonic())
            launches.started(proc)

    def start_launch(self, name: str, args: list[str]) -> None:
        """Run `ddp_train.launch(args)` (the notebooks' way) in a thread."""

        def call():
            started = time.monotonic()
            run = T.launch(args, timeout=RUN_LIMIT, env=self.env())
            self.launched[name] = Finished(
                name,
                run.returncode,
                run.stdout,
                run.stderr,
                time.monotonic() - started,
            )

        self.chained[name] = threading.Thread(target=call, daemon=True)
        self.chained[name].start()
        launches.started(self.chained[name])

    def start_after(
        self, first: str, name: str, argv: list[str], before=None
    ) -> None:
        """Start `name` as soon as `first` has ended (from a thread), after
        calling `before()`."""

        def chain():
            try:
                self.running[first][0].wait(timeout=RUN_LIMIT)
            except subprocess.TimeoutExpired:
                return
            if before is not None:
                before()
            self.start(name, argv)

        self.chained[name] = threading.Thread(target=chain, daemon=True)
        self.chained[name].start()
        launches.started(self.chained[name])

    def wait(self, name: str) -> Finished:
        if name in self.chained:
            self.chained[name].join(RUN_LIMIT)
        if name in self.launched:
            return self.launched[name]
        if name not in self.running:
            pytest.fail(f"{name} was never started")
        proc, started = self.running[name]
        left = RUN_LIMIT - (time.monotonic() - started)
        try:
            proc.wait(timeout=max(left, 0.1))
        except subprocess.TimeoutExpired:
            self.kill_all()
            pytest.fail(f"{name} still ran after {RUN_LIMIT} s: hung")
        return Finished(
            name,
            proc.returncode,
            (self.directory / f"{name}.out").read_text(),
            (self.directory / f"{name}.err").read_text(),
            time.monotonic() - started,
        )

    def marked_processes(self) -> list[psutil.Process]:
        """Every live process carrying this launcher's marker (workers
        included: they inherit the environment)."""
        return dying_rank.marked_processes(MARKER, self.marker)

    def kill_all(self) -> None:
        """SIGKILL every process group started and every marked process."""
        with self.lock:
            self.closed = True  # chained runs start no more
        for proc, _ in self.running.values():
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
        for p in self.marked_processes():
            with contextlib.suppress(psutil.NoSuchProcess):
                p.kill()
        for proc, _ in self.running.values():
            proc.wait()


def _torchrun_standalone(*args: str, program=PROGRAM) -> list[str]:
    return (
        TORCHRUN
        + ["--standalone", "--nproc-per-node", "2"]
        + program
        + COMMON
        + list(args)
    )


@pytest.fixture(scope="module", autouse=True)
def launcher(request, tmp_path_factory):
    """Starts every run when the module starts (the tests in this process
    then run while they do), if a selected test needs them; kills whatever
    is left at the end."""
    runs = Launcher(tmp_path_factory.mktemp("ddp_train_runs"))
    if any(
        "runs" in item.fixturenames
        for item in request.session.items
        if getattr(item, "module", None) is request.module
    ):
        _start_every_run(runs)
    yield runs
    runs.kill_all()
    assert psutil.wait_procs(runs.marked_processes(), timeout=10)[1] == []


def _start_every_run(runs: Launcher) -> None:
    launches.take_turn(RUN_LIMIT)  # no other set running (launches.py)
    checkpoints = runs.directory / "checkpoints"
    runs.start(
        "crash",
        _torchrun_standalone(
            "--checkpoint-dir",
            str(checkpoints),
            "--crash-rank",
            "1",
            "--crash-after-step",
            str(CRASH_AFTER),
            program=DYING_RANK,
        ),
    )
    # what the crash left, listed (and when it ended, noted) before the
    # resume adds to it
    runs.crash_left, runs.crash_ended = [], []

    def note_crash():
        runs.crash_ended.append(time.time())
        runs.crash_left.extend(sorted(p.name for p in checkpoints.iterdir()))

    # The resume: one process with FSDP, from the checkpoints 2 DDP ranks
    # wrote (DCP reshards on load).
    runs.start_after(
        "crash",
        "resume",
        [sys.executable]
        + PROGRAM
        + COMMON
        + ["--fsdp", "--checkpoint-dir", str(checkpoints), "--resume"],
        before=note_crash,
    )
    # alone, through ddp_train.launch as the chapter runs it
    runs.start_launch("alone", COMMON)
    # The test hosts the two nodes' rendezvous store, on a port the OS picks
    # and that stays bound while they start (a port chosen first and bound
    # by a node later could be taken in between by another run's process);
    # both nodes join it as clients (is_host=false).
    runs.rendezvous_store = torch.distributed.TCPStore(
        "127.0.0.1", 0, is_master=True, wait_for_workers=False
    )
    port = runs.rendezvous_store.port
    for node in (0, 1):
        runs.start(
            f"node{node}",
            TORCHRUN
            + [
                "--nnodes",
                "2",
                "--nproc-per-node",
                "1",
                "--rdzv-backend",
                "c10d",
                "--rdzv-endpoint",
                f"127.0.0.1:{port}",
                "--rdzv-id",
                runs.marker,
                "--rdzv-conf",
                "is_host=false",
            ]
            + PROGRAM
            + COMMON
            # on two ranks, DDP's no_sync() skips a real all-reduce on the
            # first micro-batch of every step
            + ["--accumulate", "2"],
        )


@pytest.fixture(scope="module")
def runs(launcher) -> dict[str, Finished]:
    """Every run, finished."""
    finished = {
        name: launcher.wait(name)
        for name in (
            "crash",
            "alone",
            "node0",
            "node1",
            "resume",
        )
    }
    finished["crash"].left = list(launcher.crash_left)
    last = launcher.directory / "checkpoints" / f"step-{CRASH_AFTER:06d}"
    # seconds from the last checkpoint (the crash came right after it) to
    # the end of the whole run
    finished["crash"].stopping = (
        launcher.crash_ended[0] - (last / ".metadata").stat().st_mtime
    )
    return finished


def _succeeded(run: Finished) -> str:
    assert run.returncode == 0, run.describe()
    loss = run.final_loss()
    assert loss is not None, run.describe()
    return loss


# ---------------------------------------------------------------------------
# The pieces, in this process (first: the runs go on meanwhile)
# ---------------------------------------------------------------------------


def test_command_line_checks():
    with pytest.raises(SystemExit):
        T.parse_args(["--resume"])
    with pytest.raises(SystemExit):
        dying_rank.main(["--crash-rank", "1"])
    args = T.parse_args(["--fsdp", "--accumulate", "2"])
    assert args.fsdp and args.accumulate == 2 and args.threads == 1


def test_environment_from_torchrun_variables():
    env = T.Environment.from_env(
        {"RANK": "1", "LOCAL_RANK": "0", "WORLD_SIZE": "2"}
    )
    assert (env.rank, env.local_rank, env.world_size, env.launched) == (
        1,
        0,
        2,
        True,
    )
    assert T.Environment.from_env({}).world_size == 1


def test_finished_reads_the_last_line_and_the_root_cause():
    run = T.Finished(("python",), 0, "step 1/1\nfinal loss: 3.25\n", "")
    assert run.final_loss == 3.25 and dying_rank.root_cause(run.stderr) is None
    failed = T.Finished(
        ("python", "-m", "backprop_lessons.scale.ddp_train"),
        1,
        "",
        "ValueError: TrainOptions: steps must be ...",
    )
    with pytest.raises(
        RuntimeError,
        match=r"ddp_train: python -m "
        r"backprop_lessons.scale.ddp_train ended with exit code 1 "
        r"and no final loss(.|\n)*steps must be",
    ):
        _ = failed.final_loss
    # a long stderr: its beginning (a worker's own error) is quoted too
    aborted = T.Finished(
        ("torchrun",),
        1,
        "",
        "terminate called without an active exception\n"
        + "W1129 14:42:15.879000 7840 api.py:1] closing signal SIGTERM\n" * 50
        + "Root Cause (first observed failure): rank 1 (SIGABRT)",
    )
    with pytest.raises(RuntimeError) as raised:
        _ = aborted.final_loss
    assert "its stderr begins" in str(raised.value)
    assert "terminate called without an active exception" in str(raised.value)
    assert str(raised.value).endswith("rank 1 (SIGABRT)")
    assert "closing signal" not in str(raised.value).split("[...]")[0]
    report = """Failures:
[1]:
  rank      : 0 (local_rank: 0)
  exitcode  : 1 (pid: 17280)
Root Cause (first observed failure):
[0]:
  time      : 2026-11-23_20:27:01
  rank      : 1 (local_rank: 1)
  exitcode  : -9 (pid: 17281)  (SIGKILL)
  traceback : Signal 9 (SIGKILL) received by PID 17281
"""
    assert dying_rank.root_cause(report) == {
        "rank": 1,
        "exitcode": -9,
        "signal": "SIGKILL",
    }
    exited = report.replace("-9 (pid: 17281)  (SIGKILL)", "1 (pid: 17281)")
    assert dying_rank.root_cause(exited) == {
        "rank": 1,
        "exitcode": 1,
        "signal": None,
    }


def test_the_program_ends_flushed_and_unfinalized():
    """exit_program: what was printed arrives even through a pipe (buffered),
    the exit code is the program's, and the interpreter is not finalized
    (no atexit handler runs: PyTorch's gloo threads abort a finalizing
    interpreter now and then)."""
    code = (
        "import atexit, sys\n"
        "from backprop_lessons.scale.ddp_train import exit_program\n"
        "atexit.register(print, 'finalized')\n"
        "print('final loss: 1.5')\n"
        "print('to stderr', file=sys.stderr, end='')\n"
        "exit_program(3)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env
    )
    assert (done.returncode, done.stdout, done.stderr) == (
        3,
        "final loss: 1.5\n",
        "to stderr",
    )


# ---------------------------------------------------------------------------
# The runs (started by the `launcher` fixture)
# ---------------------------------------------------------------------------


def test_every_way_of_running_gives_the_same_final_loss(runs):
    losses = {"alone": _succeeded(runs["alone"])}
    nodes = [runs["node0"], runs["node1"]]
    printed = [n.final_loss() for n in nodes if n.final_loss() is not None]
    for n in nodes:
        assert n.returncode == 0, n.describe()
    assert len(printed) == 1, "exactly one node holds rank 0 and prints"
    losses["two nodes, --accumulate 2"] = printed[0]
    reference = float(losses["alone"])
    table = "\n".join(f"{name:>26}: {loss}" for name, loss in losses.items())
    for _name, loss in losses.items():
        assert float(loss) == pytest.approx(reference, rel=1e-12, abs=0), table


def test_each_way_runs_as_asked(runs):
    assert "DDP, world size 1 " in runs["alone"].stdout.splitlines()[0]
    (rank_0,) = [  # what the node that holds rank 0 printed
        n.stdout for n in (runs["node0"], runs["node1"]) if n.final_loss()
    ]
    header = rank_0.splitlines()[0]
    assert "DDP, world size 2 (gloo on cpu)" in header
    assert "= 2 ranks x 2 micro-batches x 2 sequences" in header
    steps = [line for line in rank_0.splitlines() if line.startswith("step")]
    assert len(steps) == STEPS


def test_a_dying_worker_stops_the_run_and_is_named(runs):
    crash = runs["crash"]
    assert crash.returncode != 0, crash.describe()
    assert f"rank 1: crashing on purpose after step {CRASH_AFTER}" in crash.stdout
    assert crash.final_loss() is None
    assert dying_rank.root_cause(crash.stderr) == {
        "rank": 1,
        "exitcode": -9,
        "signal": "SIGKILL",
    }, crash.describe()
    # the others stopped within the collective timeout (--timeout 30): the
    # lost connection told them, they did not wait it out
    assert crash.stopping < 30, crash.describe()


def test_a_killed_run_resumed_reaches_the_uninterrupted_final_loss(runs):
    assert runs["crash"].left == [
        f"step-{k:06d}" for k in range(1, CRASH_AFTER + 1)
    ]
    resumed = runs["resume"]
    loss = _succeeded(resumed)
    assert (
        f"resumed from step-{CRASH_AFTER:06d} (step {CRASH_AFTER})"
        in resumed.stdout
    )
    assert "FSDP2 (fully_shard), world size 1" in resumed.stdout
    steps = [
        line.split()[1]
        for line in resumed.stdout.splitlines()
        if line.startswith("step")
    ]
    assert steps == [f"{k}/{STEPS}" for k in range(CRASH_AFTER + 1, STEPS + 1)]
    # 2 DDP ranks for 3 steps, then 1 FSDP process: the same sums, split
    # differently, so the same loss to float64 rounding
    assert float(loss) == pytest.approx(
        float(_succeeded(runs["alone"])), rel=1e-12, abs=0
    )


def test_no_process_is_left(runs, launcher):
    assert psutil.wait_procs(launcher.marked_processes(), timeout=10)[1] == []
