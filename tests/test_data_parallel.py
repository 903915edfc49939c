"""One data-parallel step (backprop_lessons.scale.data_parallel), in this
process: micro-batches add up to the step on the whole batch, a plain
module has nothing to sync, and clipping in a group of one is PyTorch's
own.  DDP and FSDP on several ranks: test_ddp_train and test_scale_out."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from backprop_lessons.scale import data_parallel as DP
from backprop_lessons.scale.batches import corpus_tokens, step_batch
from backprop_lessons.scale.ddp_train import Environment, start_process_group
from backprop_lessons.scale.gpt_module import full_parameters, make_model
from backprop_lessons.scale.optimizer import adamw
from backprop_lessons.scale.train_options import TrainOptions

CPU = torch.device("cpu")
OPTIONS = TrainOptions(seed=2)


def _model_and_optimizer():
    model = make_model(OPTIONS.config, OPTIONS.seed, "float64")
    return model, adamw(model.named_parameters(), OPTIONS)


def test_micro_batches_add_up_to_the_whole_batch():
    x, y = step_batch(corpus_tokens(), OPTIONS, 0)
    whole, whole_opt = _model_and_optimizer()
    split, split_opt = _model_and_optimizer()
    loss = DP.train_step(whole, whole_opt, [(x, y)], CPU)
    halves = [(x[:4], y[:4]), (x[4:], y[4:])]
    loss_split = DP.train_step(split, split_opt, halves, CPU)
    assert loss_split.item() == pytest.approx(loss.item(), rel=1e-13)
    after, after_split = full_parameters(whole), full_parameters(split)
    # atol: the key bias's gradient is 0 in exact arithmetic (softmax does
    # not see a shift of a row's scores), so its step is round-off alone
    for name, p in after.items():
        np.testing.assert_allclose(
            after_split[name], p, rtol=1e-12, atol=1e-14, err_msg=name
        )
    assert DP.evaluate(whole, x, y, CPU) < loss.item()  # the step helped


def test_a_plain_module_has_nothing_to_sync():
    model, _ = _model_and_optimizer()
    for enabled in (True, False):
        with DP.gradient_sync(model, enabled):
            pass


@pytest.fixture
def group_of_one():
    env = Environment(rank=0, local_rank=0, world_size=1, launched=False)
    start_process_group(env, CPU, timeout=30)
    yield env
    torch.distributed.destroy_process_group()


def test_clipping_in_a_group_of_one_is_pytorchs(group_of_one):
    x, y = step_batch(corpus_tokens(), OPTIONS, 0)
    ours, _ = _model_and_optimizer()
    theirs, _ = _model_and_optimizer()
    for model in (ours, theirs):
        model(torch.as_tensor(x), torch.as_tensor(y)).backward()
    norm = DP.clip_gradients(ours, 0.01)
    expected = torch.nn.utils.clip_grad_norm_(theirs.parameters(), 0.01)
    assert norm == pytest.approx(expected.item(), rel=1e-12)
    for a, b in zip(ours.parameters(), theirs.parameters()):
        torch.testing.assert_close(a.grad, b.grad, rtol=1e-12, atol=0)
