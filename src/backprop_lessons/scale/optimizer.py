"""PyTorch's AdamW as the book's (`gpt.train.AdamW`), for every way
`ddp_train` runs: data parallel, tensor parallel, pipeline.

    adamw(named_parameters, options)   torch.optim.AdamW over (name, p)

One place builds it, from the one parameter table: weight decay only on the
matrices the table marks `decayed` (`gpt.train.DECAYED`), and the betas and
eps the book's AdamW takes by default; lr and the decay from the options.
"""

from __future__ import annotations

import inspect

import torch

from ..gpt.train import DECAYED, AdamW
from .train_options import TrainOptions

__all__ = ["BETAS", "EPS", "adamw"]

_BOOKS = inspect.signature(AdamW).parameters
#: the book's AdamW's moments' decay rates and its epsilon
BETAS, EPS = _BOOKS["betas"].default, _BOOKS["eps"].default


def adamw(named_parameters, options: TrainOptions) -> torch.optim.AdamW:
    """torch.optim.AdamW over `named_parameters`, (name, parameter) pairs
    whose name ends in the table's name ("blocks.0.qkvw", or "qkvw"), with
    the decay of `options` on the names in DECAYED and none on the others.
    Under FSDP the parameters are shards, so each rank keeps the moments of
    its own shard only (ZeRO's optimizer-state sharding); under tensor
    parallelism and the pipeline, of its slices and stages: AdamW acts on
    each entry alone, so that is the update of the whole model."""
    decayed, other = [], []
    for name, p in named_parameters:
        (decayed if name.rsplit(".", 1)[-1] in DECAYED else other).append(p)
    groups = [
        {"params": decayed, "weight_decay": options.weight_decay},
        {"params": other, "weight_decay": 0.0},
    ]
    return torch.optim.AdamW(groups, lr=options.lr, betas=BETAS, eps=EPS)
