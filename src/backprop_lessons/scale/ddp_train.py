"""Train the book's GPT data-parallel with PyTorch's own tools: DDP or FSDP, under
torchrun.

The model is the PyTorch twin of chapter 6's GPT (`gpt.reference`), its
blocks made `torch.nn.Module`s so that DDP's gradient buckets and FSDP's
shards follow the blocks.  One program, several ways of running it:

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
`--checkpoint-dir DIR` (a `torch.distributed.checkpoint` after every step,
`--resume` continues from the newest complete one), `--timeout SECONDS`
(how long a collective may wait for the others), `--threads T` (torch
threads per process, default 1: N processes on N cores), `--clip
MAX_NORM` (the gradient clipped to that global norm before every step, in
every mode: `scale.clipping`).  Chapter 12's model parallelism, instead of
data parallelism: `--tensor-parallel N` (Megatron's split of every block
over N processes; `--sequence-parallel` splits the residual stream along
the sequence too) or `--pipeline N` (N ranks, `--schedule
{gpipe,1f1b,interleaved-1f1b,zbv}`, the last two with 2 stages per rank,
`--micro-batches M`); see `scale.model_parallel_train`.  Rank 0 prints one
line
per step and, last, `final loss: <repr of the float>`: the mean loss of the
trained model on a fixed evaluation batch.

Why every way gives the same final loss: every rank draws the same global
batch of step k from a generator seeded with (seed, 0, k), takes its own
contiguous slice of it (`distributed.shard`), and splits that into K equal
micro-batches whose losses are divided by K.  DDP and FSDP then average the
gradients over the ranks, so every way computes the gradient of the mean
loss over the same global batch; only the order of the additions differs,
which is float64 rounding.  Data never comes from the network: the batches
are windows of the corpus shipped with the package (`data.corpus`).

Backends: gloo on CPU (here, 127.0.0.1); NCCL with one GPU per process when
CUDA is present (`--device auto`, the default, picks it; written for it, not
run on this project's CPU machines).  A rank that dies ends the run: its
peers' next collective fails (or times out after `--timeout` seconds), and
torchrun stops the other workers and reports the failed rank.  Running it
from a notebook or a test, and making a rank die on purpose, is test
support: `scale.harness` (`launch`, `--crash-rank R --crash-after-step K`).

What it is not: fast, or a general trainer (no learning-rate schedule, no
mixed precision).  References: PyTorch's DDP and
FSDP2 tutorials; Li et al. 2020 (DDP); Zhao et al. 2023 (FSDP);
Rajbhandari et al. 2020 (ZeRO); the torchrun and DCP documentation.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

from ..data.corpus import CharVocab, load_corpus
from ..gpt.model import BLOCK_PARAMETERS, PARAMETER_TABLE, GPTConfig, init_params
from ..gpt.reference import torch_gpt_block, torch_gpt_loss
from ..gpt.train import DECAYED, get_batch
from .clipping import clip_by_global_norm
from .distributed import shard
from .pipeline import SCHEDULES

__all__ = [
    "TINY_CONFIG",
    "TrainOptions",
    "Block",
    "GPTModule",
    "corpus_tokens",
    "step_batch",
    "eval_batch",
    "micro_batches",
    "make_model",
    "full_parameters",
    "full_gradients",
    "wrap_ddp",
    "wrap_fsdp",
    "make_optimizer",
    "gradient_sync",
    "train_step",
    "clip_gradients",
    "evaluate",
    "save_checkpoint",
    "latest_checkpoint",
    "load_checkpoint",
    "Environment",
    "pick_device",
    "start_process_group",
    "train",
    "train_in_group",
    "train_alone",
    "parse_args",
    "main",
]

# The chapter's small GPT: 28 characters, 16 positions, 2 blocks of width 16.
TINY_CONFIG = GPTConfig(
    vocab_size=28, block_size=16, n_layer=2, n_head=2, n_embd=16
)
# Per-block parameters (stacked along L): gpt.model's BLOCK_PARAMETERS.
BLOCK_NAMES = BLOCK_PARAMETERS
TOP_NAMES = tuple(name for name, _ in PARAMETER_TABLE if name not in BLOCK_NAMES)
# Batches of step k come from the seeds (seed, STEP_STREAM, k); the
# evaluation batch from (seed, EVAL_STREAM).
STEP_STREAM, EVAL_STREAM = 0, 1


@dataclass(frozen=True)
class TrainOptions:
    """Everything that decides the numbers a run computes.

    Two runs with equal options compute the same final loss up to float64
    rounding, whatever their world size, `accumulate` or `fsdp`: those three
    only change how the same sums are split up.
    """

    steps: int = 20
    seed: int = 0
    dtype: str = "float64"
    batch_size: int = 8  # global batch, in sequences of block_size
    accumulate: int = 1  # micro-batches per step on every rank
    fsdp: bool = False
    lr: float = 3e-3
    weight_decay: float = 0.1  # decoupled, on the names in DECAYED
    config: GPTConfig = TINY_CONFIG
    # model parallelism (chapter 12): every rank a tensor-parallel slice, or
    # a pipeline stage with its schedule and micro-batches
    tensor_parallel: int = 1
    pipeline: int = 1
    schedule: str = "1f1b"
    micro_batches: int = 4
    sequence_parallel: bool = False  # with tensor_parallel > 1
    # global gradient-norm clipping (every mode); None: no clipping
    clip: float | None = None

    def __post_init__(self):
        for name in (
            "steps",
            "batch_size",
            "accumulate",
            "tensor_parallel",
            "pipeline",
            "micro_batches",
        ):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(
                    f"TrainOptions: {name} must be a positive int, got {value!r}"
                )
        if self.dtype not in ("float32", "float64"):
            raise ValueError(
                f"TrainOptions: dtype must be 'float32' or "
                f"'float64', got {self.dtype!r}"
            )
        if self.schedule not in SCHEDULES:
            raise ValueError(
                f"TrainOptions: schedule must be one of {', '.join(SCHEDULES)}, "
                f"got {self.schedule!r}"
            )
        if self.sequence_parallel and self.tensor_parallel == 1:
            raise ValueError(
                "TrainOptions: --sequence-parallel splits tensor parallelism's "
                "residual stream; it needs --tensor-parallel N with N > 1"
            )
        if self.clip is not None and (
            isinstance(self.clip, bool)
            or not isinstance(self.clip, int | float)
            or not self.clip > 0
        ):
            raise ValueError(
                f"TrainOptions: clip (--clip MAX_NORM) must be a positive "
                f"number, got {self.clip!r}"
            )
        if self.tensor_parallel > 1 and self.pipeline > 1:
            raise ValueError(
                "TrainOptions: --tensor-parallel and --pipeline do not combine "
                "in this trainer; use one of them"
            )
        if self.model_parallel > 1 and self.fsdp:
            raise ValueError(
                "TrainOptions: --fsdp is data parallelism; it does not combine "
                "with --tensor-parallel or --pipeline here"
            )
        if self.pipeline > 1 and self.accumulate > 1:
            raise ValueError(
                "TrainOptions: under --pipeline the micro-batches are the "
                "pipeline's (--micro-batches); leave --accumulate at 1"
            )

    @property
    def model_parallel(self) -> int:
        """Ranks one model is split over (1: data parallelism)."""
        return max(self.tensor_parallel, self.pipeline)

    def check_world(self, world_size: int) -> int:
        """Sequences per micro-batch; refuse a batch that does not split
        evenly over world_size ranks x accumulate micro-batches.  Under
        model parallelism the world must be exactly the ranks one model is
        split over (every rank sees the whole batch)."""
        if self.model_parallel > 1:
            return self._check_model_parallel(world_size)
        parts = world_size * self.accumulate
        if self.batch_size % parts:
            raise ValueError(
                f"ddp_train: a global batch of {self.batch_size} sequences "
                f"does not split into {world_size} ranks x {self.accumulate} "
                f"micro-batches; use a batch size divisible by {parts} "
                f"(equal micro-batches make the mean of their mean losses "
                f"the mean loss of the batch)"
            )
        return self.batch_size // parts

    def _check_model_parallel(self, world_size: int) -> int:
        how = (
            f"--tensor-parallel {self.tensor_parallel}"
            if self.tensor_parallel > 1
            else f"--pipeline {self.pipeline}"
        )
        if world_size != self.model_parallel:
            raise ValueError(
                f"ddp_train: {how} needs exactly {self.model_parallel} "
                f"processes (torchrun --nproc-per-node {self.model_parallel}), "
                f"got a world of {world_size}; this trainer does not combine "
                f"model and data parallelism"
            )
        parts = self.micro_batches if self.pipeline > 1 else self.accumulate
        if self.batch_size % parts:
            raise ValueError(
                f"ddp_train: a global batch of {self.batch_size} sequences "
                f"does not split into {parts} equal micro-batches; use a "
                f"batch size divisible by {parts}"
            )
        return self.batch_size // parts


# ---------------------------------------------------------------------------
# The model: the twin's functions, its parameters held by modules
# ---------------------------------------------------------------------------


class Block(torch.nn.Module):
    """Transformer block l of the twin; holds block l's slice of every
    stacked parameter (`qkvw[l]` (3C, C), ...), under the table's names."""

    def __init__(self, params: dict[str, np.ndarray], l: int, config: GPTConfig):
        super().__init__()
        self.config = config
        for name in BLOCK_NAMES:
            self.register_parameter(
                name, torch.nn.Parameter(torch.tensor(params[name][l]))
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # x (B, T, C) -> (B, T, C).  torch_gpt_block indexes tp[name][l];
        # a one-element tuple per name makes this block its layer 0.
        tp = {name: (getattr(self, name),) for name in BLOCK_NAMES}
        return torch_gpt_block(x, tp, self.config, 0)


class GPTModule(torch.nn.Module):
    """The chapter 6 GPT as modules: wte, wpe, lnfw, lnfb, and one `Block`
    per layer.  `forward(idx, targets)` returns the mean cross-entropy,
    computed by `gpt.reference.torch_gpt_loss` (the LM head is tied to wte).

    Built from the NumPy parameter dict of `gpt.init_params`, so it starts
    from exactly the numbers the hand-written model starts from.
    """

    def __init__(self, params: dict[str, np.ndarray], config: GPTConfig):
        super().__init__()
        self.config = config
        for name in TOP_NAMES:
            self.register_parameter(
                name, torch.nn.Parameter(torch.tensor(params[name]))
            )
        self.blocks = torch.nn.ModuleList(
            Block(params, l, config) for l in range(config.n_layer)
        )

    def forward(self, idx: torch.Tensor, targets: torch.Tensor):
        # idx, targets (B, T) int64 -> scalar loss
        tp = {name: getattr(self, name) for name in TOP_NAMES}
        return torch_gpt_loss(
            tp, self.config, idx, targets, run_block=self._run_block
        )

    def _run_block(self, x, tp, config, l):
        # through the module's __call__, so DDP's and FSDP's hooks run
        return self.blocks[l](x)


def make_model(
    config: GPTConfig, seed: int, dtype: str, device: torch.device | str = "cpu"
) -> GPTModule:
    """A fresh GPTModule: `gpt.init_params(config, seed)` in `dtype`."""
    params = init_params(config, seed=seed, dtype=np.dtype(dtype))
    return GPTModule(params, config).to(device)


def full_parameters(model: torch.nn.Module) -> dict[str, np.ndarray]:
    """The model's parameters as the NumPy dict of `gpt.init_params`
    (stacked over layers), gathered from the shards if FSDP holds them.

    Under FSDP this is a collective: every rank must call it.
    """
    return _stacked(model, lambda p: p)


def full_gradients(model: torch.nn.Module) -> dict[str, np.ndarray]:
    """The parameters' gradients, named and stacked as `full_parameters`
    (the names and shapes of `gpt.gpt_backward`'s result)."""
    return _stacked(model, lambda p: p.grad)


def _stacked(model: torch.nn.Module, get) -> dict[str, np.ndarray]:
    module = getattr(model, "module", model)  # DDP wraps, FSDP does not

    def full(p: torch.nn.Parameter) -> np.ndarray:
        t = get(p)
        t = t.full_tensor() if hasattr(t, "full_tensor") else t  # DTensor
        return t.detach().cpu().numpy().copy()

    out = {name: full(getattr(module, name)) for name in TOP_NAMES}
    for name in BLOCK_NAMES:
        out[name] = np.stack([full(getattr(b, name)) for b in module.blocks])
    return {name: out[name] for name, _ in PARAMETER_TABLE}


# ---------------------------------------------------------------------------
# Data: the shipped corpus, the same global batch on every rank
# ---------------------------------------------------------------------------


def corpus_tokens() -> np.ndarray:
    """The shipped corpus as token ids (N,) int64; its 28 characters are the
    vocabulary of TINY_CONFIG."""
    text = load_corpus()
    return CharVocab(text).encode(text)


def step_batch(data: np.ndarray, options: TrainOptions, step: int):
    """The global batch of step `step` (0-based): (x, y), each (B, T).

    Drawn from a generator seeded with (seed, STEP_STREAM, step), so any
    rank, in any run, resumed or not, gets the same batch for the same step.
    """
    rng = np.random.default_rng([options.seed, STEP_STREAM, step])
    return get_batch(data, options.config.block_size, options.batch_size, rng)


def eval_batch(data: np.ndarray, options: TrainOptions):
    """The fixed evaluation batch (x, y), each (B, T): the final loss is
    measured on it."""
    rng = np.random.default_rng([options.seed, EVAL_STREAM])
    return get_batch(data, options.config.block_size, options.batch_size, rng)


def micro_batches(
    x: np.ndarray, y: np.ndarray, rank: int, world_size: int, accumulate: int
):
    """This rank's shard of the global batch, split into `accumulate` equal
    micro-batches: a list of (x, y) pairs, each (B / (world * K), T)."""
    xr, yr = shard(x, rank, world_size), shard(y, rank, world_size)
    return [
        (shard(xr, k, accumulate), shard(yr, k, accumulate))
        for k in range(accumulate)
    ]


# ---------------------------------------------------------------------------
# Data parallelism: DDP or FSDP, the optimizer, one step
# ---------------------------------------------------------------------------


def wrap_ddp(model: GPTModule, device: torch.device, bucket_cap_mb: float = 25.0):
    """DistributedDataParallel: broadcasts rank 0's parameters now, then
    averages gradients bucket by bucket during every backward."""
    from torch.nn.parallel import DistributedDataParallel

    ids = [device.index] if device.type == "cuda" else None
    return DistributedDataParallel(
        model, device_ids=ids, bucket_cap_mb=bucket_cap_mb
    )


def wrap_fsdp(model: GPTModule, device: torch.device):
    """FSDP2: every block, then the root, sharded over the ranks (dim 0 of
    every parameter).  A block's full parameters exist only while it runs
    forward or backward; its gradient is reduce-scattered right after its
    backward.  The root's own parameters (wte, wpe, lnfw, lnfb) are one
    more sharded group.  No broadcast: every rank must build the same model
    (same seed), and ddp_train does.
    """
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh(device.type, (dist.get_world_size(),))
    for block in model.blocks:
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model


def make_optimizer(model: torch.nn.Module, options: TrainOptions):
    """torch.optim.AdamW as the book's `gpt.train.AdamW`: betas (0.9, 0.95),
    eps 1e-8, weight decay only on the matrices (the names in DECAYED).
    Under FSDP the parameters are shards, so each rank keeps the moments of
    its own shard only (ZeRO's optimizer-state sharding)."""
    decayed, other = [], []
    for name, p in model.named_parameters():
        (decayed if name.rsplit(".", 1)[-1] in DECAYED else other).append(p)
    groups = [
        {"params": decayed, "weight_decay": options.weight_decay},
        {"params": other, "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=options.lr, betas=(0.9, 0.95), eps=1e-8)


def gradient_sync(model: torch.nn.Module, enabled: bool):
    """A context in which backward does (enabled) or does not average the
    gradients over the ranks: DDP's `no_sync()`, FSDP2's
    `set_requires_gradient_sync`.  Without sync, gradients only accumulate
    in this rank's `.grad`; the next synced backward sends their sum."""
    if hasattr(model, "no_sync"):  # DDP
        return contextlib.nullcontext() if enabled else model.no_sync()
    if hasattr(model, "set_requires_gradient_sync"):  # FSDP2
        model.set_requires_gradient_sync(enabled)
        return contextlib.nullcontext()
    return contextlib.nullcontext()  # a plain module


def train_step(
    model: torch.nn.Module,
    optimizer,
    micro: list,
    device: torch.device,
    clip: float | None = None,
) -> torch.Tensor:
    """One optimizer step over this rank's micro-batches; returns this
    rank's mean loss (a detached scalar tensor).

    Each micro-batch's loss is divided by n_acc = len(micro), so the n_acc
    backwards add up the gradient of the mean over the rank's shard; the
    gradients are averaged over the ranks only in the last backward.  With
    `clip`, the averaged gradient is clipped to that global norm before
    the step (`clip_gradients`).
    """
    optimizer.zero_grad(set_to_none=True)
    total = torch.zeros((), dtype=torch.float64, device=device)
    n_acc = len(micro)
    for k, (x, y) in enumerate(micro):
        idx = torch.as_tensor(x, device=device)  # (b, T)
        targets = torch.as_tensor(y, device=device)  # (b, T)
        with gradient_sync(model, enabled=k == n_acc - 1):
            loss = model(idx, targets) / n_acc
            loss.backward()
        total += loss.detach().double()
    if clip is not None:
        clip_gradients(model, clip)
    optimizer.step()
    return total


def clip_gradients(model: torch.nn.Module, max_norm: float) -> float:
    """Clip the gradients of a DDP or FSDP model (or a plain one) to the
    global norm `max_norm`; returns the norm before clipping.  Under DDP
    every rank holds the same averaged gradient, so rank 0 alone counts
    it; under FSDP every rank counts its own shards."""
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    fsdp = any(hasattr(g, "to_local") for g in grads)
    counted = grads if fsdp or dist.get_rank() == 0 else []
    return clip_by_global_norm(counted, grads, max_norm)


@torch.no_grad()
def evaluate(
    model: torch.nn.Module, x: np.ndarray, y: np.ndarray, device: torch.device
) -> float:
    """Mean loss of the model on (x, y), the whole batch on every rank (a
    collective under FSDP, whose forward gathers the shards)."""
    loss = model(
        torch.as_tensor(x, device=device), torch.as_tensor(y, device=device)
    )
    return float(loss.double().item())


# ---------------------------------------------------------------------------
# Checkpoints: torch.distributed.checkpoint (DCP)
# ---------------------------------------------------------------------------

CHECKPOINT_PREFIX = "step-"


def save_checkpoint(
    directory: Path, step: int, model, optimizer, options: TrainOptions
) -> Path:
    """Save model and optimizer after `step` steps into DIR/step-000NNN.

    DCP writes one file per rank (under FSDP each rank writes its own
    shards) and, after every rank has written, a `.metadata` file: a
    directory with `.metadata` is complete.  The options are saved too, so
    that a resume with other numbers is refused.
    """
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict

    model_sd, optim_sd = get_state_dict(model, optimizer)
    path = Path(directory) / f"{CHECKPOINT_PREFIX}{step:06d}"
    run = {"step": step, "options": _options_record(options)}
    state = {"model": model_sd, "optim": optim_sd, "run": json.dumps(run)}
    dcp.save(state, checkpoint_id=path)
    return path


def latest_checkpoint(directory: Path) -> tuple[int, Path] | None:
    """(step, path) of the newest complete checkpoint in `directory`, or
    None.  A directory a killed run left half-written (no `.metadata`) is
    skipped."""
    found = []
    for path in Path(directory).glob(f"{CHECKPOINT_PREFIX}*"):
        digits = path.name[len(CHECKPOINT_PREFIX) :]
        if digits.isdigit() and (path / ".metadata").is_file():
            found.append((int(digits), path))
    return max(found) if found else None


def load_checkpoint(path: Path, model, optimizer, options: TrainOptions) -> int:
    """Load model and optimizer from a DCP checkpoint; return its step.

    DCP reshards on load: a checkpoint written by 2 FSDP ranks loads into 1
    DDP process and the other way round.  Options that change the numbers
    (seed, batch, dtype, model, optimizer) must match.
    """
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import (
        get_state_dict,
        set_state_dict,
    )

    model_sd, optim_sd = get_state_dict(model, optimizer)
    state = {"model": model_sd, "optim": optim_sd, "run": ""}
    dcp.load(state, checkpoint_id=path)
    run = json.loads(state["run"])
    saved, ours = run["options"], _options_record(options)
    if saved != ours:
        changed = sorted(
            k for k in saved.keys() | ours if saved.get(k) != ours.get(k)
        )
        raise ValueError(
            f"ddp_train: checkpoint {path} was written with "
            f"other options ({', '.join(changed)} differ: "
            f"{ {k: saved.get(k) for k in changed} }); resume "
            f"with the options it was written with"
        )
    set_state_dict(
        model,
        optimizer,
        model_state_dict=state["model"],
        optim_state_dict=state["optim"],
    )
    return int(run["step"])


def _options_record(options: TrainOptions) -> dict:
    """The options that must match for a resume (not `steps`, not `fsdp`,
    not `accumulate`: those do not change the sums)."""
    record = asdict(options)
    for free in (
        "steps",
        "fsdp",
        "accumulate",
        "schedule",
        "micro_batches",
        "sequence_parallel",
    ):
        record.pop(free)
    if record["clip"] is None:  # as checkpoints from before --clip
        record.pop("clip")
    record["config"] = dict(record["config"])
    return record


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
    and its checkpoint (`scale.harness` kills a rank there, on purpose).
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
    optimizer = make_optimizer(model, options)
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


if __name__ == "__main__":
    from torch.distributed.elastic.multiprocessing.errors import record

    sys.exit(record(main)())
