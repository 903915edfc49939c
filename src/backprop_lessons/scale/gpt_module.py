"""The GPT `ddp_train` trains, as `torch.nn.Module`s: the PyTorch twin of
chapter 6's GPT (`gpt.reference`), its blocks made modules so that DDP's
gradient buckets and FSDP's shards follow the blocks.

    GPTModule(params, config)   wte, wpe, lnfw, lnfb and one Block per layer;
                                forward(idx, targets) -> the mean loss
    make_model(config, seed, dtype)  a fresh one, from gpt.init_params
    full_parameters(model), full_gradients(model)
                                back to the NumPy dict of gpt.init_params
                                (gathered from FSDP's shards)
    BLOCK_NAMES, TOP_NAMES      the parameter table's names, per block and not
"""

from __future__ import annotations

import numpy as np
import torch

from ..gpt.model import BLOCK_PARAMETERS, PARAMETER_TABLE, GPTConfig, init_params
from ..gpt.reference import torch_gpt_block, torch_gpt_loss

__all__ = [
    "BLOCK_NAMES",
    "TOP_NAMES",
    "Block",
    "GPTModule",
    "make_model",
    "full_parameters",
    "full_gradients",
]

# Per-block parameters (stacked along L): gpt.model's BLOCK_PARAMETERS.
BLOCK_NAMES = BLOCK_PARAMETERS
TOP_NAMES = tuple(name for name, _ in PARAMETER_TABLE if name not in BLOCK_NAMES)


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
