"""Chapter 12's model parallelism on real processes: the collectives'
backwards, Megatron tensor parallelism (by hand, with sequence parallelism,
and with PyTorch's tensor-parallel API), the vocabulary-parallel embedding
and cross-entropy, the four pipeline schedules, and the trainer's
`--tensor-parallel 2` / `--pipeline 2` / `--clip` under torchrun.

The tests marked `multiprocess` start processes that import torch (several
seconds each on 2 shared cores); `make test` runs them in a lane of their
own.  One module fixture starts every command-line run at once in the
background (alone, tensor-parallel with accumulation, sequence-parallel,
GPipe and zbv pipelines, clipped runs, and a tensor-parallel and a
pipeline run whose rank 1 dies after step 3; plain tensor parallelism and
1F1B run in the launch below and in chapter 12's); every process carries
a marker in its environment, teardown kills any marked process still
alive, and a test checks that none is left.
The worker functions, and the trainer in every other mode
(`ddp_train.train_in_group`), run in one `run_workers` launch.

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
import torch

import dying_rank
from backprop_lessons.gpt.model import GPTConfig, init_params
from backprop_lessons.gpt.reference import torch_forward_backward
from backprop_lessons.scale import collectives, pipeline, tensor_parallel
from backprop_lessons.scale import ddp_train as T

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
    "alone": [sys.executable, "-m", T.PROGRAM, *COMMON],
    "alone-clip": [sys.executable, "-m", T.PROGRAM, *COMMON, *CLIP],
    "sequence": [
        "tp",
        "-m",
        T.PROGRAM,
        *COMMON,
        "--tensor-parallel",
        "2",
        "--sequence-parallel",
    ],
    "zbv-clip": [
        "tp",
        "-m",
        T.PROGRAM,
        *COMMON,
        "--pipeline",
        "2",
        "--schedule",
        "zbv",
        *CLIP,
    ],
    "tensor-accumulate": [
        "tp",
        "-m",
        T.PROGRAM,
        *COMMON,
        "--tensor-parallel",
        "2",
        "--accumulate",
        "2",
    ],
    "gpipe": [
        "tp",
        "-m",
        T.PROGRAM,
        *COMMON,
        "--pipeline",
        "2",
        "--schedule",
        "gpipe",
        "--micro-batches",
        "8",
    ],
    "tensor-crash": [
        "tp",
        *dying_rank.SCRIPT,
        *COMMON,
        "--tensor-parallel",
        "2",
        "--crash-rank",
        "1",
        "--crash-after-step",
        str(CRASH_AFTER),
    ],
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


def _argv(spec):
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
        for name, spec in RUNS.items():
            with (
                open(self.directory / f"{name}.out", "w") as out,
                open(self.directory / f"{name}.err", "w") as err,
            ):
                self.procs[name] = subprocess.Popen(
                    _argv(spec),
                    stdout=out,
                    stderr=err,
                    env=self.env(),
                    start_new_session=True,
                )
        self.started = time.monotonic()

    def wait(self, name):
        proc = self.procs[name]
        left = RUN_LIMIT - (time.monotonic() - self.started)
        try:
            proc.wait(timeout=max(left, 0.1))
        except subprocess.TimeoutExpired:
            self.kill_all()
            pytest.fail(f"{name} still ran after {RUN_LIMIT} s: hung")
        return T.Finished(
            tuple(_argv(RUNS[name])),
            proc.returncode,
            (self.directory / f"{name}.out").read_text(),
            (self.directory / f"{name}.err").read_text(),
        )

    def marked(self):
        found = []
        for p in psutil.process_iter():
            try:
                if (
                    p.environ().get(MARKER) == self.marker
                    and p.status() != psutil.STATUS_ZOMBIE
                ):
                    found.append(p)
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
        return found

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


@pytest.fixture(scope="module", autouse=True)
def launcher(request, tmp_path_factory):
    """Starts the trainer runs when the module starts, if a selected test
    needs them; kills whatever is left at the end."""
    runs = Runs(tmp_path_factory.mktemp("model_parallel_runs"))
    if any(
        "runs" in item.fixturenames
        for item in request.session.items
        if getattr(item, "module", None) is request.module
    ):
        runs.start_all()
    yield runs
    runs.kill_all()
    assert psutil.wait_procs(runs.marked(), timeout=10)[1] == []


@pytest.fixture(scope="module")
def runs(launcher):
    return {name: launcher.wait(name) for name in RUNS}


@pytest.fixture(scope="module")
def problem():
    params = init_params(CONFIG, seed=0, dtype=np.float64)
    rng = np.random.default_rng(0)
    x = rng.integers(0, 28, (8, 16))
    y = rng.integers(0, 28, (8, 16))
    return params, x, y, torch_forward_backward(params, CONFIG, x, y)


# The trainer in every mode, in the launch of `ranks` (train_in_group): the
# same options as the command-line runs, without the torchrun start-ups.
_TRAIN = {"steps": STEPS, "seed": 0, "dtype": "float64"}
IN_GROUP = {
    "ddp": {},
    "tensor": {"tensor_parallel": 2},
    "sequence": {"tensor_parallel": 2, "sequence_parallel": True},
    "interleaved-1f1b": {"pipeline": 2, "schedule": "interleaved-1f1b"},
    "zbv": {"pipeline": 2, "schedule": "zbv"},
    "ddp-clip": {"clip": 0.05},
    "fsdp-clip": {"fsdp": True, "clip": 0.05},
    "tensor-clip": {"tensor_parallel": 2, "clip": 0.05},
    "sequence-clip": {
        "tensor_parallel": 2,
        "sequence_parallel": True,
        "clip": 0.05,
    },
    "1f1b-clip": {"pipeline": 2, "clip": 0.05},
    "interleaved-1f1b-clip": {
        "pipeline": 2,
        "schedule": "interleaved-1f1b",
        "clip": 0.05,
    },
}


@pytest.fixture(scope="module")
def ranks(problem):
    """Every worker function of the chapter, in one launch of two ranks."""
    from backprop_lessons.scale import distributed, vocab_parallel

    params, x, y, _ = problem
    tasks = {
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
        **{
            f"train {name}": (T.train_in_group, (T.TrainOptions(**_TRAIN, **o),))
            for name, o in IN_GROUP.items()
        },
    }
    return distributed.run_workers(
        distributed.run_tasks, tasks, world_size=2, timeout=180
    )


# ---------------------------------------------------------------------------
# In this process
# ---------------------------------------------------------------------------


def test_qkv_rows_give_each_rank_its_heads_q_k_v():
    rows = tensor_parallel.qkv_rows(16, 4, 2)
    assert sorted(rows) == list(range(48))
    assert rows[:24].tolist() == [*range(0, 8), *range(16, 24), *range(32, 40)]


def test_single_mode_is_the_reference_model(problem):
    params, x, y, (ref_loss, ref) = problem
    out = tensor_parallel.tp_gradients(0, 1, params, CONFIG, x, y, "single")
    assert out["loss"] == pytest.approx(ref_loss, rel=1e-14)
    for name, g in ref.items():
        np.testing.assert_allclose(
            out["grads"][name], g, rtol=1e-12, atol=1e-15, err_msg=name
        )


def test_bad_splits_are_clear_errors():
    params = init_params(CONFIG, seed=0, dtype=np.float64)
    with pytest.raises(ValueError, match="2 heads do not split over 3 ranks"):
        tensor_parallel.TPBlock(params, 0, CONFIG, "manual", 0, 3)
    with pytest.raises(ValueError, match="mode must be one of"):
        tensor_parallel.TPBlock(params, 0, CONFIG, "sharded")
    with pytest.raises(ValueError, match="2 blocks do not split into 3"):
        pipeline.stage_layers(CONFIG, 0, 3)
    with pytest.raises(ValueError, match="schedule must be one of"):
        pipeline.in_flight("zbv", 2, 4, 0)
    with pytest.raises(ValueError, match="schedule must be one of"):
        pipeline.rank_stages("interleaved", 0, 2)
    with pytest.raises(ValueError, match="no timetable"):
        pipeline.schedule_grid("1f1b", 2, 4)
    with pytest.raises(ValueError, match="needs mode 'manual'"):
        tensor_parallel.TPGPT(params, CONFIG, "dtensor", sequence_parallel=True)
    with pytest.raises(ValueError, match="reduce_scatter: dim 1 \\(15\\)"):
        collectives._blocks(torch.zeros(2, 15, 4), 2, 1, "reduce_scatter")


def test_stages_split_blocks_or_pieces_and_sit_in_a_loop_or_a_v():
    # 2 blocks on 2 stages: one block each; on 4 stages the embedding and
    # the head are stages of their own
    assert [pipeline.stage_layers(CONFIG, s, 2) for s in range(2)] == [
        range(0, 1),
        range(1, 2),
    ]
    assert [pipeline.stage_layers(CONFIG, s, 4) for s in range(4)] == [
        range(0, 0),
        range(0, 1),
        range(1, 2),
        range(2, 2),
    ]
    deep = GPTConfig(vocab_size=28, block_size=16, n_layer=4, n_head=2, n_embd=16)
    assert [len(pipeline.stage_layers(deep, s, 4)) for s in range(4)] == [1] * 4
    assert [pipeline.rank_stages("interleaved-1f1b", r, 2) for r in (0, 1)] == [
        (0, 2),
        (1, 3),
    ]
    assert [pipeline.rank_stages("zbv", r, 4) for r in range(4)] == [
        (0, 7),
        (1, 6),
        (2, 5),
        (3, 4),
    ]
    assert [pipeline.stage_rank("zbv", s, 2) for s in range(4)] == [0, 1, 1, 0]
    assert pipeline.stage_rank("1f1b", 1, 2) == 1


def test_bubble_and_in_flight_formulas():
    assert pipeline.bubble_fraction(2, 4) == pytest.approx(0.2)
    assert pipeline.bubble_fraction(4, 1) == pytest.approx(0.75)
    assert pipeline.bubble_fraction(2, 4, "gpipe") == pytest.approx(0.2)
    # interleaved: (p - 1) / (v m + p - 1)
    assert pipeline.bubble_fraction(2, 4, "interleaved-1f1b") == pytest.approx(
        1 / 9
    )
    assert pipeline.bubble_fraction(4, 8, "interleaved-1f1b") == pytest.approx(
        3 / 19
    )
    # zbv: PyTorch's timetable has 25 slots for 24 actions (p = 2, m = 4)
    grid = pipeline.schedule_grid("zbv", 2, 4)
    assert [len(row) for row in grid] == [24, 25]
    assert [sum(a is not None for a in row) for row in grid] == [24, 24]
    assert pipeline.bubble_fraction(2, 4, "zbv") == pytest.approx(1 / 25)
    assert [pipeline.in_flight("1f1b", 4, 8, s) for s in range(4)] == [4, 3, 2, 1]
    assert pipeline.in_flight("gpipe", 4, 8, 3) == 8
    assert pipeline.in_flight("1f1b", 4, 2, 0) == 2


def test_wire_elements_of_a_ring():
    counts = {"all-reduce": 100, "reduce-scatter": 100, "all-gather": 50}
    assert collectives.wire_elements(counts, 2) == 100 + 50 + 50
    assert collectives.wire_elements(counts, 4) == 150 + 75 + 150
    with pytest.raises(ValueError, match="no ring cost for broadcast"):
        collectives.wire_elements({"broadcast": 1}, 2)


def test_comm_per_step_counts():
    c = tensor_parallel.comm_per_step(CONFIG, 128, 7296)
    assert c == {"tensor parallel": 4 * 2 * 128 * 16, "data parallel (DDP)": 7296}


# ---------------------------------------------------------------------------
# On two ranks (run_workers)
# ---------------------------------------------------------------------------


@pytest.mark.multiprocess
def test_collective_backwards_match_finite_differences_and_torch(ranks):
    for r in ranks:
        for name in ("all-reduce", "all-gather", "reduce-scatter", "broadcast"):
            row = r["collectives"][name]
            np.testing.assert_allclose(
                row["derived"], row["numeric"], rtol=0, atol=1e-9, err_msg=name
            )
            np.testing.assert_array_equal(
                row["derived"], row["torch"], err_msg=name
            )
        fg = r["collectives"]["f and g"]
        np.testing.assert_allclose(fg["derived"], fg["numeric"], atol=1e-9)
        np.testing.assert_allclose(
            fg["all-reduce as g"], 2 * fg["derived"], rtol=1e-14
        )
    assert not ranks[1]["collectives"]["broadcast"]["derived"].any()


@pytest.mark.multiprocess
@pytest.mark.parametrize("mode", ["manual", "sequence", "dtensor"])
def test_tensor_parallel_gradients_equal_one_process(ranks, problem, mode):
    _, x, _, (ref_loss, ref) = problem
    for r in ranks:
        out = r[mode]
        assert out["loss"] == pytest.approx(ref_loss, rel=1e-13)
        for name, g in ref.items():
            np.testing.assert_allclose(
                out["grads"][name], g, rtol=1e-11, atol=1e-15, err_msg=name
            )
    tokens, C, L = x.size, CONFIG.n_embd, CONFIG.n_layer
    if mode == "manual":
        assert ranks[0][mode]["comm"] == {"all-reduce": 4 * L * tokens * C}
    elif mode == "sequence":
        # the all-gathers take this rank's half of the positions: 2 forward
        # per block, 2 again in the backward (the saved halves), 2 as the
        # reduce-scatters' backward; plus the embeddings' scatter (backward)
        # and the gather in front of the head
        half = tokens // 2 * C
        assert ranks[0][mode]["comm"] == {
            "all-gather": (6 * L + 2) * half,
            "reduce-scatter": 4 * L * tokens * C,
        }
    else:
        assert ranks[0][mode]["comm"] == {"all_reduce": 8}


@pytest.mark.multiprocess
def test_sequence_parallelism_halves_a_blocks_activations(ranks, problem):
    params, x, y, _ = problem
    single = tensor_parallel.tp_gradients(0, 1, params, CONFIG, x, y, "single")
    whole = single["block_activation_bytes"]
    B, T = x.shape
    C = CONFIG.n_embd
    mask = T * T  # the causal mask (bool), whole on every rank
    # plain tensor parallelism keeps whole: both layer norms' inputs and
    # outputs (B, T, C) and their mean and 1/std (B, T), in float64
    replicated = 4 * B * T * C * 8 + 4 * B * T * 8 + mask
    for r in ranks:
        assert 2 * r["manual"]["block_activation_bytes"] == whole + replicated
        assert 2 * r["sequence"]["block_activation_bytes"] == whole + mask
        assert r["sequence"]["activation_bytes"] < r["manual"]["activation_bytes"]


@pytest.mark.multiprocess
def test_vocabulary_parallel_loss_and_gradients_equal_unsharded(ranks):
    for r in ranks:
        out = r["vocab"]
        assert out["loss"] == pytest.approx(out["ref_loss"], rel=1e-14)
        np.testing.assert_allclose(
            out["wte_grad"], out["ref_wte_grad"], rtol=1e-12, atol=1e-15
        )
        np.testing.assert_allclose(
            out["h_grad"], out["ref_h_grad"], rtol=1e-12, atol=1e-17
        )
        # embedding (B T C) and f's backward, then (m, s, target) per position
        assert out["comm"] == {"all-reduce": 2 * 8 * 16 * 16 + 3 * 8 * 16}
    halves = [r["vocab"]["wte_grad"] for r in ranks]
    assert halves[0].shape == halves[1].shape == (14, 16)


ORDERS = {  # each rank's order of work, as one string
    "gpipe": ("F0 F1 F2 F3 B0 B1 B2 B3", "F0 F1 F2 F3 B0 B1 B2 B3"),
    "1f1b": ("F0 F1 B0 F2 B1 F3 B2 B3", "F0 B0 F1 B1 F2 B2 F3 B3"),
    # stage, kind, micro-batch: rank 0 holds stages 0 and 2, rank 1 1 and 3
    "interleaved-1f1b": (
        "0F0 0F1 2F0 2F1 0F2 2B0 0F3 2B1 2F2 0B0 2F3 0B1 2B2 2B3 0B2 0B3",
        "1F0 1F1 3F0 3B0 3F1 3B1 1F2 1B0 1F3 1B1 3F2 3B2 3F3 3B3 1B2 1B3",
    ),
    # rank 0 holds stages 0 and 3, rank 1 1 and 2; I the input gradient, W
    # the weight gradient (stage 0 has no input gradient: PyTorch runs its
    # whole backward at its W)
    "zbv": (
        "0F0 0F1 0F2 3F0 3I0 3W0 3F1 3I1 3W1 0F3 0W0 0I0 3F2 3I2 3W2 0W1 "
        "0I1 3F3 3I3 3W3 0W2 0I2 0W3 0I3",
        "1F0 2F0 1F1 2F1 2I0 2W0 1F2 1I0 1W0 2F2 2I1 2W1 1F3 1I1 1W1 2F3 "
        "2I2 2W2 1I2 2I3 1I3 1W2 2W3 1W3",
    ),
}


@pytest.mark.multiprocess
@pytest.mark.parametrize("schedule", pipeline.SCHEDULES)
def test_pipeline_gradients_order_and_memory(ranks, problem, schedule):
    _, _, _, (ref_loss, ref) = problem
    last = pipeline.stage_rank(
        schedule, 2 * pipeline.STAGES_PER_RANK[schedule] - 1, 2
    )
    assert ranks[last][schedule]["loss"] == pytest.approx(ref_loss, rel=1e-13)
    grads = {}
    for r in ranks:
        for name, g in r[schedule]["grads"].items():
            if isinstance(g, dict):
                grads.setdefault(name, {}).update(g)
            else:
                grads[name] = g
    for name, g in ref.items():
        got = grads[name]
        if isinstance(got, dict):
            got = np.stack([got[l] for l in range(CONFIG.n_layer)])
        np.testing.assert_allclose(got, g, rtol=1e-11, atol=1e-15, err_msg=name)
    held = [
        r[schedule]["grads"]["wte"]
        for r in ranks
        if "wte" in r[schedule]["grads"]
    ]
    for wte in held[1:]:  # the two copies of the tied wte
        np.testing.assert_array_equal(wte, held[0])
    orders = tuple(" ".join(r[schedule]["order"]) for r in ranks)
    assert orders == ORDERS[schedule]
    if schedule not in ("gpipe", "1f1b"):
        return
    for stage, r in enumerate(ranks):
        held, rest = divmod(
            r[schedule]["peak_bytes"], r[schedule]["per_micro_bytes"]
        )
        assert rest == 0
        assert held == pipeline.in_flight(schedule, 2, 4, stage)


@pytest.mark.multiprocess
@pytest.mark.parametrize("name", IN_GROUP)
def test_trainer_in_every_mode_reaches_the_single_process_loss(runs, ranks, name):
    alone = _final(runs["alone-clip" if name.endswith("-clip") else "alone"])
    for r in ranks:
        assert r[f"train {name}"]["final"] == pytest.approx(alone, rel=1e-10)


# ---------------------------------------------------------------------------
# The trainer under torchrun
# ---------------------------------------------------------------------------


def _final(run):
    assert run.returncode == 0, run.stderr[-3000:]
    match = FINAL.fullmatch(run.stdout.strip().splitlines()[-1])
    assert match, run.stdout[-2000:]
    return float(match.group(1))


@pytest.mark.multiprocess
@pytest.mark.parametrize(
    "name",
    ["tensor-accumulate", "sequence", "gpipe", "zbv-clip"],
)
def test_model_parallel_runs_reach_the_single_process_loss(runs, name):
    alone = _final(runs["alone-clip" if name.endswith("-clip") else "alone"])
    assert _final(runs[name]) == pytest.approx(alone, rel=1e-10)


@pytest.mark.multiprocess
def test_the_clip_is_active(runs):
    alone, clipped = _final(runs["alone"]), _final(runs["alone-clip"])
    assert abs(clipped - alone) > 1e-6 * abs(alone)


@pytest.mark.multiprocess
def test_each_way_says_what_it_is(runs):
    assert (
        "tensor parallel over 2 ranks (1 of 2 heads each)"
        in runs["tensor-accumulate"].stdout
    )
    assert (
        "tensor parallel over 2 ranks (1 of 2 heads each, sequence parallel)"
        in runs["sequence"].stdout
    )
    assert (
        "pipeline of 2 stages on 2 ranks (gpipe, 8 micro-batches; this rank: "
        "stage 0 (embeddings, block 0))" in runs["gpipe"].stdout
    )
    assert (
        "pipeline of 4 stages on 2 ranks (zbv, 4 micro-batches; this rank: "
        "stage 0 (embeddings), stage 3 (head))" in runs["zbv-clip"].stdout
    )


@pytest.mark.multiprocess
@pytest.mark.parametrize("name", ["tensor-crash", "pipeline-crash"])
def test_a_dying_worker_ends_the_run_with_a_clear_error(runs, name):
    crash = runs[name]
    assert crash.returncode != 0, crash.stdout
    assert f"rank 1: crashing on purpose after step {CRASH_AFTER}" in crash.stdout
    assert "final loss" not in crash.stdout
    assert dying_rank.root_cause(crash.stderr) == {
        "rank": 1,
        "exitcode": -9,
        "signal": "SIGKILL",
    }, crash.stderr[-3000:]


@pytest.mark.multiprocess
def test_no_process_is_left(runs, launcher):
    assert psutil.wait_procs(launcher.marked(), timeout=30)[1] == []


def test_exercise_checks_tell_stub_wrong_and_right_apart():
    from backprop_lessons.exercises import model_parallel as E

    def stub(ws, *args):
        raise NotImplementedError

    assert (
        E.check_all_gather_backward(stub, exercise=1).status
        == "not attempted yet"
    )
    own_block = E.check_all_gather_backward(
        lambda ws: [w[: len(w) // len(ws)] for w in ws], exercise=1
    )
    assert own_block.status == "not yet" and "dot-product" in own_block.hint
    assert E.check_all_gather_backward(
        lambda ws: list(np.split(np.sum(ws, axis=0), len(ws))), exercise=1
    ).correct
    assert (
        E.check_broadcast_backward(stub, exercise=1).status == "not attempted yet"
    )
    everyone = E.check_broadcast_backward(
        lambda ws, src: [np.sum(ws, axis=0) for _ in ws], exercise=1
    )
    assert everyone.status == "not yet"
    assert E.check_broadcast_backward(
        lambda ws, src: [
            np.sum(ws, axis=0) if r == src else np.zeros_like(w)
            for r, w in enumerate(ws)
        ],
        exercise=1,
    ).correct
    short = E.check_broadcast_backward(lambda ws, src: ws[:1], exercise=1)
    assert short.status == "not yet" and "one array per rank" in short.hint
