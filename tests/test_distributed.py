"""The distributed helpers on 2 local processes (gloo): gradients, failures,
ports.

Each launch spawns 2 interpreters that import torch (a few seconds), so the
gradient checks run in the tests' one launch of two ranks (two_ranks.py).
"""

from __future__ import annotations

import multiprocessing
import os

import numpy as np
import pytest
import torch

import two_ranks
from backprop_lessons.gpt import GPTConfig, gpt_backward, gpt_forward, init_params
from backprop_lessons.scale import distributed as D
from distributed_workers import fail_on_rank

# they start processes: `make multiprocess`, one at a time (tests/conftest.py)
pytestmark = pytest.mark.multiprocess

CONFIG = GPTConfig(vocab_size=11, block_size=6, n_layer=2, n_head=2, n_embd=8)


def _batch():
    rng = np.random.default_rng(0)
    return rng.normal(size=(8, 4)), rng.normal(size=(8, 1))


def _gpt_batch():
    rng = np.random.default_rng(1)
    idx = rng.integers(0, CONFIG.vocab_size, size=(4, 6))
    return idx, rng.integers(0, CONFIG.vocab_size, size=(4, 6))


@two_ranks.tasks_for("distributed_ranks")
def _tasks() -> dict:
    x, y = _batch()
    idx, targets = _gpt_batch()
    params = init_params(CONFIG, seed=0, dtype=np.float64)
    return {
        "info": (D.worker_info, ()),
        "allreduce": (D.allreduce_gradients, (x, y)),
        "ddp": (D.ddp_gradients, (x, y)),
        "gpt": (D.gpt_data_parallel_gradients, (params, CONFIG, idx, targets)),
        "buckets": (D.ddp_bucket_log, (x, y, 256)),
        "bucket_bytes": (D.ddp_bucket_bytes, (x, y, 256)),
    }


@pytest.fixture(scope="module")
def distributed_ranks(rank_launch):
    """_tasks' results, per rank: from the tests' one launch of two ranks."""
    return rank_launch["distributed_ranks"]


def _assert_close(got: dict, expected: dict):
    assert list(got) == list(expected)
    for name in expected:
        assert isinstance(got[name], np.ndarray), name
        assert got[name].dtype == np.float64, name
        np.testing.assert_allclose(
            got[name], expected[name], rtol=1e-12, atol=1e-15, err_msg=name
        )


def test_results_come_back_as_numpy_in_rank_order(distributed_ranks):
    assert [r["info"]["rank"] for r in distributed_ranks] == [0, 1]
    assert {r["info"]["world_size"] for r in distributed_ranks} == {2}
    assert {r["info"]["backend"] for r in distributed_ranks} == {"gloo"}
    assert {r["info"]["torch_threads"] for r in distributed_ranks} == {1}
    assert (
        distributed_ranks[0]["info"]["pid"]
        != distributed_ranks[1]["info"]["pid"]
        != os.getpid()
    )


@pytest.mark.parametrize("task", ["allreduce", "ddp"])
def test_data_parallel_equals_single_process(distributed_ranks, task):
    expected = D.full_batch_gradients(*_batch())
    for rank in (0, 1):
        _assert_close(distributed_ranks[rank][task], expected)


def test_gpt_data_parallel_equals_single_process(distributed_ranks):
    params = init_params(CONFIG, seed=0, dtype=np.float64)
    idx, targets = _gpt_batch()
    loss, cache = gpt_forward(params, CONFIG, idx, targets)
    expected = gpt_backward(params, CONFIG, cache)
    for rank in (0, 1):
        assert distributed_ranks[rank]["gpt"]["loss"] == pytest.approx(
            loss, rel=1e-14
        )
        _assert_close(distributed_ranks[rank]["gpt"]["grads"], expected)


def test_ddp_rebuilds_buckets_in_gradient_ready_order(distributed_ranks):
    from backprop_lessons.scale.backward_cost import (
        assign_buckets,
        gradient_ready_order,
    )

    model = D.make_mlp()
    x, y = _batch()
    order = gradient_ready_order(
        model.named_parameters(), lambda: D.mse_loss(model, x, y)
    )
    sizes = dict(model.named_parameters())
    sizes = {name: sizes[name].numel() * 8 for name in order}
    first, second = distributed_ranks[0]["buckets"]
    assert first == [
        [name for name, _ in model.named_parameters()]
    ]  # one bucket at first
    assert second == assign_buckets(sizes, 256)
    # every gradient goes into the all-reduces once per backward, float64
    assert distributed_ranks[0]["bucket_bytes"] == [sum(sizes.values())] * 2


def test_a_failing_rank_is_named_and_no_process_is_left():
    with pytest.raises(D.WorkerError, match=r"rank 1 of 2 raised") as info:
        D.run_workers(fail_on_rank, 1, world_size=2, timeout=30)
    assert info.value.rank == 1
    assert "ValueError: fail_on_rank: rank 1 fails on purpose" in str(info.value)
    assert "Traceback" in info.value.worker_traceback
    assert multiprocessing.active_children() == []


def test_the_launcher_binds_the_groups_port_itself(monkeypatch):
    """The group's store is bound by the launcher on a port the OS picks at
    that moment (port 0), and stays bound while the workers start: no other
    program can take it in between.  (A test that launched workers beside a
    socket of its own, listening and never accepting, failed now and then on
    a loaded machine: a gloo connection closed by its peer.  Launching adds
    nothing to what this shows; every other test here launches.)"""
    made = []

    class Stop(Exception):
        pass

    def store(host, port, **kwargs):
        made.append((host, port, kwargs))
        raise Stop

    monkeypatch.setattr(D.dist, "TCPStore", store)
    with pytest.raises(Stop):
        D.run_workers(D.worker_info, world_size=2)
    ((host, port, kwargs),) = made
    assert (host, port) == ("127.0.0.1", 0)
    assert kwargs["is_master"] and not kwargs["wait_for_workers"]
    assert multiprocessing.active_children() == []


def test_bad_arguments_are_refused_before_launching():
    with pytest.raises(ValueError, match="module-level function"):
        D.run_workers(lambda rank, world_size: rank)
    with pytest.raises(ValueError, match="world_size must be a positive int"):
        D.run_workers(D.worker_info, world_size=0)
    with pytest.raises(ValueError, match="timeout must be positive"):
        D.run_workers(D.worker_info, timeout=0)


def test_shard_needs_an_even_split():
    a = np.arange(6)
    assert D.shard(a, 1, 3).tolist() == [2, 3]
    with pytest.raises(
        ValueError, match="6 rows does not split evenly over 4 ranks"
    ):
        D.shard(a, 0, 4)


def test_to_numpy_converts_nested_tensors():
    out = D.to_numpy({"a": [torch.ones(2), (torch.zeros(1), 3)]})
    assert isinstance(out["a"][0], np.ndarray) and isinstance(out["a"][1], tuple)
    assert out["a"][1][1] == 3
