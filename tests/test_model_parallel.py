"""Chapter 12's exercise checks (backprop_lessons.exercises.model_parallel):
each accepts the book's answer, says "not attempted yet" to a stub, and
names the wrong gradient and the slip for the typical wrong answers.  (The
chapter's machinery on real processes is tested in test_collectives,
test_tensor_parallel, test_vocab_parallel, test_pipeline and
test_model_parallel_train.)"""

from __future__ import annotations

import numpy as np
import pytest

from backprop_lessons.exercises import model_parallel as E
from verdicts import refused


def stub(*args):
    raise NotImplementedError


def _status(verdict, status, *words):
    assert verdict.status == status, verdict
    for word in words:
        assert word in verdict.hint, verdict.hint


# ---- reduce-scatter ---------------------------------------------------------


def test_reduce_scatter_backward():
    check = E.check_reduce_scatter_backward
    _status(check(stub, exercise=1), "not attempted yet")
    assert check(lambda ws: E.all_gather(ws), exercise=1).correct
    _status(check(lambda ws: ws, exercise=1), "not yet", "shape")
    own_block_everywhere = check(
        lambda ws: [np.tile(w, len(ws)) for w in ws], exercise=1
    )
    _status(own_block_everywhere, "not yet", "dot-product test")


# ---- column- and row-parallel linear layers ---------------------------------


def column_right(x, weights, dys):
    parts = [dy @ w for dy, w in zip(dys, weights)]
    return (
        E.all_reduce(parts),
        [dy.T @ x for dy in dys],
        [dy.sum(axis=0) for dy in dys],
    )


def test_column_parallel_backward():
    check = E.check_column_parallel_backward
    _status(check(stub, exercise=2), "not attempted yet")
    assert check(column_right, exercise=2).correct

    def no_f(x, weights, dys):
        dxs, dws, dbs = column_right(x, weights, dys)
        return [dy @ w for dy, w in zip(dys, weights)], dws, dbs

    _status(check(no_f, exercise=2), "not yet", "rank 0's dx", "f's backward")

    def summed_weights(x, weights, dys):
        dxs, dws, dbs = column_right(x, weights, dys)
        return dxs, E.all_reduce(dws), dbs

    _status(check(summed_weights, exercise=2), "not yet", "dW", "sum over")

    def transposed(x, weights, dys):
        dxs, dws, dbs = column_right(x, weights, dys)
        return dxs, [x.T @ dy for dy in dys], dbs

    _status(check(transposed, exercise=2), "not yet", "dW must have the shape")

    def bias_per_position(x, weights, dys):
        dxs, dws, _ = column_right(x, weights, dys)
        return dxs, dws, [dy.sum(axis=1) for dy in dys]

    _status(check(bias_per_position, exercise=2), "not yet", "db")
    _status(check(lambda x, w, d: (1, 2), exercise=2), "not yet", "tuple")
    _status(
        check(lambda x, w, d: (..., ..., ...), exercise=2), "not attempted yet"
    )


def row_right(xs, weights, dys):
    return (
        [dy @ w for dy, w in zip(dys, weights)],
        [dy.T @ x for dy, x in zip(dys, xs)],
        [dy.sum(axis=0) for dy in dys],
    )


def test_row_parallel_backward():
    check = E.check_row_parallel_backward
    _status(check(stub, exercise=3), "not attempted yet")
    assert check(row_right, exercise=3).correct

    def g_as_all_reduce(xs, weights, dys):
        return row_right(xs, weights, E.all_reduce(dys))

    _status(
        check(g_as_all_reduce, exercise=3),
        "not yet",
        "rank 0's dx",
        "g's backward is the identity",
    )

    def bias_summed_over_ranks(xs, weights, dys):
        dxs, dws, dbs = row_right(xs, weights, dys)
        return dxs, dws, E.all_reduce(dbs)

    _status(check(bias_summed_over_ranks, exercise=3), "not yet", "added once")

    def bias_shared_out(xs, weights, dys):
        dxs, dws, dbs = row_right(xs, weights, dys)
        return dxs, dws, [db / len(dbs) for db in dbs]

    _status(check(bias_shared_out, exercise=3), "not yet", "a share")

    def crashes(xs, weights, dys):
        return [dy @ weights.T for dy in dys], [], []  # a list has no .T

    verdict = check(crashes, exercise=3)
    assert verdict.status == "not yet" and verdict.where, verdict


# ---- the pipeline schedule --------------------------------------------------


def one_f_one_b(p, m):
    orders = []
    for s in range(p):
        warm = min(m, p - s)
        order = [f"F{k}" for k in range(warm)]
        for k in range(m - warm):
            order += [f"B{k}", f"F{warm + k}"]
        order += [f"B{k}" for k in range(m - warm, m)]
        orders.append(order)
    return orders


def test_simulate_schedule_plays_1f1b_and_gpipe():
    run = E.simulate_schedule(one_f_one_b(2, 4), 4)
    assert run.span == 15.0 and run.in_flight == (2, 1)
    assert run.bubble[0] == pytest.approx(0.2)
    gpipe = [[f"F{k}" for k in range(4)] + [f"B{k}" for k in range(4)]] * 2
    run = E.simulate_schedule(gpipe, 4)
    assert run.span == 15.0 and run.in_flight == (4, 4)
    with pytest.raises(ValueError, match="deadlocks"):
        E.simulate_schedule(
            [["F0", "B0", "F1", "B1"], ["F0", "F1", "B0", "B1"]], 2
        )
    with pytest.raises(ValueError, match="F1 more than once; no B1"):
        E.simulate_schedule(
            [["F0", "F1", "B0", "F1"], ["F0", "B0", "F1", "B1"]], 2
        )


def test_pipeline_schedule_check():
    check = E.check_pipeline_schedule
    _status(check(stub, exercise=4), "not attempted yet")
    verdict = check(one_f_one_b, exercise=4)
    assert verdict.correct, verdict

    def gpipe(p, m):
        return [[f"F{k}" for k in range(m)] + [f"B{k}" for k in range(m)]] * p

    _status(check(gpipe, exercise=4), "not yet", "stage 0 holds 4", "at most")

    def one_at_a_time(p, m):
        return [[a for k in range(m) for a in (f"F{k}", f"B{k}")]] * p

    _status(check(one_at_a_time, exercise=4), "not yet", "the step takes")

    def backward_too_soon(p, m):
        return [[a for k in range(m) for a in (f"F{k}", f"B{k}")]] + one_f_one_b(
            p, m
        )[1:]

    _status(check(backward_too_soon, exercise=4), "not yet")

    def deadlock(p, m):
        # stage 0 waits for B0 before F1; the last stage wants F1 before B0
        orders = one_f_one_b(p, m)
        orders[0] = [a for k in range(m) for a in (f"F{k}", f"B{k}")]
        orders[-1] = ["F0", "F1", "B0", "B1"] + orders[-1][4:]
        return orders

    _status(check(deadlock, exercise=4), "not yet", "deadlocks")
    _status(
        check(lambda p, m: [["X0"]] * p, exercise=4),
        "not yet",
        '"F<k>" or "B<k>"',
    )
    _status(check(lambda p, m: [[]], exercise=4), "not yet", "one per stage")


# ---- predictions ------------------------------------------------------------


def test_malformed_answers_get_a_verdict_not_a_crash():
    ragged = E.check_reduce_scatter_backward(
        lambda ws: [[1.0, [2.0]] for _ in ws], exercise=1
    )
    _status(ragged, "not yet", "not an array of numbers")
    short = E.check_reduce_scatter_backward(
        lambda ws: E.all_gather(ws)[:2], exercise=1
    )
    _status(short, "not yet", "got a list of 2")
    nones = E.check_broadcast_backward(
        lambda ws, src: [None for _ in ws], exercise=9
    )
    _status(nones, "not yet", "is None")
    letters = E.check_column_parallel_backward(
        lambda x, w, d: (["a"] * len(d), w, d), exercise=2
    )
    _status(letters, "not yet", "not an array of numbers")
    _status(
        E.check_pipeline_schedule(lambda p, m: [None] * p, exercise=6),
        "not yet",
        "must be a list of steps",
    )


def test_collective_slips_are_named():
    everyone = E.check_broadcast_backward(
        lambda ws, src: E.all_reduce(ws), exercise=9
    )
    _status(everyone, "not yet", "src = 0", "only rank src's input")
    own = E.check_reduce_scatter_backward(
        lambda ws: [
            np.concatenate([w if q == r else 0 * w for q in range(len(ws))])
            for r, w in enumerate(ws)
        ],
        exercise=1,
    )
    _status(own, "not yet", "only its own block")
    float32 = E.check_reduce_scatter_backward(
        lambda ws: [a.astype(np.float32) for a in E.all_gather(ws)], exercise=1
    )
    _status(float32, "not yet", "largest error")


def test_row_parallel_slips_are_named():
    check = E.check_row_parallel_backward

    def dx_all_reduced(xs, weights, dys):
        dxs, dws, dbs = row_right(xs, weights, dys)
        return E.all_reduce(dxs), dws, dbs

    _status(check(dx_all_reduced, exercise=3), "not yet", "rank 0's dx", "own")

    def bias_on_rank_0(xs, weights, dys):
        dxs, dws, dbs = row_right(xs, weights, dys)
        return dxs, dws, [dbs[0]] + [0 * b for b in dbs[1:]]

    _status(check(bias_on_rank_0, exercise=3), "not yet", "rank 1's db", "zero")


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


# ---- what a backward by hand, and a schedule, may not call ---------------------


def test_a_collectives_backward_may_not_borrow_one(capsys):
    torch = pytest.importorskip("torch")
    from backprop_lessons.scale import collectives
    from backprop_lessons.scale.collectives import ReduceScatter

    def by_the_function(ws):  # the book's Function, its backward called
        return [ReduceScatter.backward(None, torch.tensor(w))[0] for w in ws]

    def by_differences(ws):  # the book's numerical VJP, through the module
        collectives.finite_difference_vjp(None, None, None, 1e-4)

    def by_torch(ws):  # PyTorch's gradient of a reduce-scatter written here
        n = len(ws) * len(ws[0])
        xs = [torch.zeros(n, dtype=torch.float64, requires_grad=True) for _ in ws]
        outs = torch.chunk(sum(xs), len(ws))
        loss = sum((o * torch.tensor(w)).sum() for o, w in zip(outs, ws))
        return [g.numpy() for g in torch.autograd.grad(loss, xs)]

    check = E.check_reduce_scatter_backward
    for answer, called in (
        (by_the_function, "backprop_lessons.scale.collectives.ReduceScatter."),
        (by_differences, "backprop_lessons.scale.collectives.finite_differenc"),
        (by_torch, "torch.autograd.grad, PyTorch's autograd"),
    ):
        refused(check(answer, exercise=1), called)
    refused(
        E.check_all_gather_backward(by_torch, exercise=8),
        "torch.autograd.grad",
    )


def test_a_parallel_layers_backward_may_not_borrow_a_matmul_rule(capsys):
    from backprop_lessons.gpt.layers import matmul_backward
    from backprop_lessons.tensor import Tensor

    def column_by_the_layer(x, weights, dys):  # bound at import
        dx, dws, dbs = np.zeros_like(x), [], []
        for w, dy in zip(weights, dys):
            part, dw, db = np.zeros_like(x), np.zeros_like(w), np.zeros(len(w))
            matmul_backward(part, dw, db, dy, (x, w))
            dx += part
            dws.append(dw)
            dbs.append(db)
        return [dx.copy() for _ in weights], dws, dbs

    def row_by_the_engine(xs, weights, dys):  # a method: .backward()
        dxs, dws = [], []
        for x, w in zip(xs, weights):
            xt, wt = Tensor(x, requires_grad=True), Tensor(w, requires_grad=True)
            (xt @ wt.T).backward(dys[0])
            dxs.append(xt.grad)
            dws.append(wt.grad)
        return dxs, dws, [d.sum(axis=0) for d in dys]

    refused(
        E.check_column_parallel_backward(column_by_the_layer, exercise=2),
        "backprop_lessons.gpt.layers.matmul_backward",
    )
    refused(
        E.check_row_parallel_backward(row_by_the_engine, exercise=3),
        "backprop_lessons.tensor.Tensor.backward",
    )


def test_the_schedule_may_not_be_built_by_the_package(capsys):
    pytest.importorskip("torch")
    from backprop_lessons.scale import pipeline
    from backprop_lessons.torch_private import schedule_timetable

    def by_the_grid(p, m):  # the package's timetable, then the real answer
        pipeline.schedule_grid("interleaved-1f1b", p, m)
        return one_f_one_b(p, m)

    def by_torch(p, m):  # PyTorch's timetable, bound at import
        from torch.distributed.pipelining import schedules

        schedule_timetable(schedules.ScheduleInterleaved1F1B, p, m)
        return one_f_one_b(p, m)

    assert E.check_pipeline_schedule(one_f_one_b, exercise=6).correct
    refused(
        E.check_pipeline_schedule(by_the_grid, exercise=6),
        "backprop_lessons.scale.pipeline.schedule_grid",
    )
    refused(
        E.check_pipeline_schedule(by_torch, exercise=6),
        "backprop_lessons.torch_private.schedule_timetable",
    )


def test_a_right_schedule_prints_no_bubble(capsys):
    """Exercise 7 asks for 1F1B's bubble at p = 2, m = 4: exercise 6's
    report, printed under a right schedule, leaves it out."""
    E.check_pipeline_schedule(one_f_one_b, exercise=6)
    printed = capsys.readouterr().out
    assert "in flight" in printed and "bubble" not in printed
    assert "0.2" not in printed
