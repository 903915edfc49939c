"""PyTorch's AdamW as the book's (backprop_lessons.scale.optimizer): decay
only on the matrices, the book's betas and eps, and the same update as
gpt.train.AdamW."""

from __future__ import annotations

import numpy as np
import torch

from backprop_lessons.gpt import init_params
from backprop_lessons.gpt.train import AdamW
from backprop_lessons.scale.gpt_module import GPTModule
from backprop_lessons.scale.optimizer import BETAS, EPS, adamw
from backprop_lessons.scale.train_options import TINY_CONFIG, TrainOptions

CONFIG = TINY_CONFIG


def test_optimizer_decays_only_the_matrices():
    model = GPTModule(init_params(CONFIG, seed=0), CONFIG)
    opt = adamw(model.named_parameters(), TrainOptions())
    decayed = {id(p) for p in opt.param_groups[0]["params"]}
    names = {n for n, p in model.named_parameters() if id(p) in decayed}
    assert {n.rsplit(".", 1)[-1] for n in names} == {
        "wte",
        "wpe",
        "qkvw",
        "attprojw",
        "fcw",
        "fcprojw",
    }
    assert opt.param_groups[1]["weight_decay"] == 0.0


def test_the_settings_are_the_books_adamw():
    assert (BETAS, EPS) == ((0.9, 0.95), 1e-8)
    opt = adamw([("w", torch.nn.Parameter(torch.zeros(2)))], TrainOptions())
    assert opt.param_groups[1]["betas"] == BETAS
    assert opt.param_groups[1]["eps"] == EPS


def test_one_step_is_the_books_adamw_step():
    """The same three steps by torch.optim.AdamW and gpt.train.AdamW, on
    a decayed matrix and an undecayed bias, in float64."""
    rng = np.random.default_rng(0)
    params = {"fcw": rng.standard_normal((3, 2)), "fcb": rng.standard_normal(3)}
    grads = [
        {n: rng.standard_normal(p.shape) for n, p in params.items()}
        for _ in range(3)
    ]
    options = TrainOptions(lr=1e-2, weight_decay=0.1)
    torch_params = {
        n: torch.nn.Parameter(torch.tensor(p)) for n, p in params.items()
    }
    theirs = adamw(torch_params.items(), options)
    ours = AdamW(params, lr=options.lr, weight_decay=options.weight_decay)
    for g in grads:
        for n, p in torch_params.items():
            p.grad = torch.tensor(g[n])
        theirs.step()
        ours.step(params, g)
    for n, p in params.items():
        np.testing.assert_allclose(
            torch_params[n].detach().numpy(), p, rtol=1e-13, err_msg=n
        )
