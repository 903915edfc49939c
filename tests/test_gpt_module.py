"""The GPT ddp_train trains, as torch.nn.Modules (backprop_lessons.scale.
gpt_module): the same loss and gradients as the hand-written NumPy GPT,
and its parameters back as the NumPy dict of gpt.init_params."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from backprop_lessons.gpt import gpt_backward, gpt_forward, init_params
from backprop_lessons.scale import gpt_module as M
from backprop_lessons.scale.batches import corpus_tokens, step_batch
from backprop_lessons.scale.train_options import TINY_CONFIG, TrainOptions

CONFIG = TINY_CONFIG


def test_the_module_computes_the_numpy_gpt_loss_and_gradients():
    params = init_params(CONFIG, seed=1, dtype=np.float64)
    x, y = step_batch(corpus_tokens(), TrainOptions(seed=1), 0)
    model = M.GPTModule(params, CONFIG)
    loss = model(torch.as_tensor(x), torch.as_tensor(y))
    loss.backward()
    ref_loss, cache = gpt_forward(params, CONFIG, x, y)
    ref_grads = gpt_backward(params, CONFIG, cache)
    assert loss.item() == pytest.approx(ref_loss, rel=1e-13)
    grads = {name: getattr(model, name).grad.numpy() for name in M.TOP_NAMES}
    for name in M.BLOCK_NAMES:
        grads[name] = np.stack(
            [getattr(b, name).grad.numpy() for b in model.blocks]
        )
    assert list(M.full_parameters(model)) == list(params)
    for name, g in ref_grads.items():
        np.testing.assert_allclose(
            grads[name], g, rtol=1e-10, atol=1e-15, err_msg=name
        )


def test_full_parameters_stacks_the_blocks_back():
    params = init_params(CONFIG, seed=2, dtype=np.float32)
    back = M.full_parameters(M.GPTModule(params, CONFIG))
    assert all(np.array_equal(back[n], params[n]) for n in params)
    assert {back[n].dtype for n in back} == {np.dtype(np.float32)}
