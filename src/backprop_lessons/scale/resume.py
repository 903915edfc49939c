"""A run saved after every step and resumed where it stopped: `ddp_train
--checkpoint-dir DIR [--resume]`, through torch.distributed.checkpoint
(DCP).  These are files of a run's model and optimizer state; activation
checkpointing, which recomputes activations in the backward instead of
storing them, is `checkpointing.py`'s.

    save_checkpoint(directory, step, model, optimizer, options)
                                  DIR/step-000NNN, one file per rank
    latest_checkpoint(directory)  (step, path) of the newest complete one
    load_checkpoint(path, model, optimizer, options)
                                  into any world size (DCP reshards), with
                                  the options the run was saved with
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from .train_options import TrainOptions

__all__ = [
    "CHECKPOINT_PREFIX",
    "save_checkpoint",
    "latest_checkpoint",
    "load_checkpoint",
]

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
