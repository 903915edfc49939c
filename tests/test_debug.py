"""Tests for backprop_lessons.debug: gradient-flow table, hooks, memory, NaN
hunting."""

import math

import pytest
import torch

from backprop_lessons.debug import (
    EXPLODING_RATIO,
    VANISHING_RATIO,
    GradientRecorder,
    find_nan_origin,
    gradient_flow_table,
    measure_memory,
)

F64 = torch.float64


def chain(depth, width, gain, activation):
    """A stack of Linear layers with weights scaled by `gain`, `activation`
    between them."""
    torch.manual_seed(0)
    layers = []
    for _ in range(depth):
        linear = torch.nn.Linear(width, width)
        with torch.no_grad():
            linear.weight.mul_(gain)
        layers += [linear, activation()]
    return torch.nn.Sequential(*layers[:-1]).double()


def backward_once(model, width=4):
    torch.manual_seed(1)
    model(torch.randn(8, width, dtype=F64)).pow(2).mean().backward()


def test_healthy_mlp_has_no_flags():
    model = chain(3, 4, 1.0, torch.nn.Tanh)
    backward_once(model)
    table = gradient_flow_table(model)
    assert [r.name for r in table.rows] == [
        n for n, _ in model.named_parameters()
    ]
    assert table.flagged == []
    for row, (_, p) in zip(table.rows, model.named_parameters()):
        assert row.grad_norm == pytest.approx(float(p.grad.norm()))
        assert row.ratio == pytest.approx(
            float(p.grad.norm() / p.detach().norm())
        )


def test_vanishing_flag_on_deep_sigmoid_chain():
    model = chain(12, 4, 0.1, torch.nn.Sigmoid)
    backward_once(model)
    flags = gradient_flow_table(model).flags
    assert flags["0.weight"] == "VANISHING"
    assert flags["22.weight"] == ""  # the last layer still learns


def test_exploding_flag_on_deep_linear_chain():
    model = chain(12, 4, 4.0, torch.nn.Identity)
    backward_once(model)
    flags = gradient_flow_table(model).flags
    assert flags["0.weight"] == "EXPLODING"
    assert flags["22.weight"] != "VANISHING"


def test_no_grad_nan_and_zero_norm_parameters():
    used = torch.nn.Parameter(torch.tensor([1.0, 2.0], dtype=F64))
    unused = torch.nn.Parameter(torch.tensor([3.0], dtype=F64))
    zero_bias = torch.nn.Parameter(torch.zeros(2, dtype=F64))
    broken = torch.nn.Parameter(torch.tensor([0.0], dtype=F64))
    (used * 2 + zero_bias).sum().add(torch.sqrt(broken).mul(0).sum()).backward()
    table = gradient_flow_table(
        [
            ("used", used),
            ("unused", unused),
            ("zero_bias", zero_bias),
            ("broken", broken),
        ]
    )
    assert table.flags == {
        "used": "",
        "unused": "NO GRAD",
        "zero_bias": "",
        "broken": "NAN/INF",
    }
    assert table.rows[2].ratio is None


def test_thresholds_are_documented_defaults_and_can_be_changed():
    assert (VANISHING_RATIO, EXPLODING_RATIO) == (1e-5, 1e2)
    model = chain(2, 4, 1.0, torch.nn.Tanh)
    backward_once(model)
    assert all(
        f == "EXPLODING"
        for f in gradient_flow_table(model, 1e-12, 1e-11).flags.values()
    )
    assert all(
        f == "VANISHING"
        for f in gradient_flow_table(model, 1e11, 1e12).flags.values()
    )


def test_table_text_is_fixed_format():
    p = torch.nn.Parameter(torch.tensor([3.0, 4.0], dtype=F64))
    (p * 0.5).sum().backward()
    assert str(gradient_flow_table([("w", p)])).splitlines() == [
        "parameter  shape         grad norm param norm grad/param  flag",
        "--------------------------------------------------------------",
        "w          (2)            7.07e-01   5.00e+00   1.41e-01",
        "flags: VANISHING if grad/param < 1e-05, EXPLODING if grad/param > 1e+02",
    ]


def test_table_rejects_bad_input():
    with pytest.raises(ValueError, match="vanishing_below < exploding_above"):
        gradient_flow_table(torch.nn.Linear(2, 2), 1.0, 0.5)
    with pytest.raises(ValueError, match="no parameters"):
        gradient_flow_table([])
    with pytest.raises(TypeError, match="expected \\(name, tensor\\) pairs"):
        gradient_flow_table([("w", 3.0)])


def test_recorder_records_parameter_gradients_and_removes_hooks():
    model = chain(2, 4, 1.0, torch.nn.Tanh)
    with GradientRecorder() as rec:
        rec.watch_parameters(model)
        assert rec.active_hooks == 4
        backward_once(model)
    assert rec.active_hooks == 0
    assert sorted(r.name for r in rec.records) == sorted(
        n for n, _ in model.named_parameters()
    )
    grads = dict(model.named_parameters())
    for r in rec.records:
        assert r.norm == pytest.approx(float(grads[r.name].grad.norm()))
        assert r.finite
    backward_once(model)  # hooks are gone: nothing new is recorded
    assert len(rec.records) == 4
    assert all(not p._backward_hooks for p in model.parameters())


def test_recorder_sees_activations_in_backward_order():
    model = chain(3, 4, 1.0, torch.nn.Tanh)
    with GradientRecorder() as rec:
        rec.watch_activations(model)
        backward_once(model)
    assert [r.name for r in rec.records] == [
        "4 (out)",
        "3 (out)",
        "2 (out)",
        "1 (out)",
        "0 (out)",
    ]
    assert rec.active_hooks == 0
    backward_once(model)  # forward hooks are gone too
    assert len(rec.records) == 5


def test_recorder_finds_first_nan():
    x = torch.tensor([0.0, 1.0], dtype=F64, requires_grad=True)
    with GradientRecorder() as rec:
        rec.watch("x", x)
        r = rec.watch("sqrt", torch.sqrt(x))
        (r * 0).sum().backward()
    assert rec.first_nonfinite.name == "x"
    assert [(g.name, g.n_nan, g.n_inf) for g in rec.records] == [
        ("sqrt", 0, 0),
        ("x", 1, 0),
    ]
    assert math.isnan(rec.records[1].norm)
    assert "nan" in str(rec)


def test_recorder_rejects_tensor_without_grad():
    with GradientRecorder() as rec:
        with pytest.raises(
            ValueError, match="watch\\('x'\\): the tensor does not require grad"
        ):
            rec.watch("x", torch.ones(2, dtype=F64))
        with pytest.raises(TypeError, match="expected a tensor"):
            rec.watch("y", [1.0])


def test_measure_memory_counts_exact_bytes():
    def make():
        a = torch.ones(1000, dtype=F64)  # 8000 bytes, freed on return
        return a * 2  # 8000 bytes, returned

    report = measure_memory(make)
    assert report.peak_bytes >= 16000
    assert report.retained_bytes == 8000
    assert torch.equal(report.result, torch.full((1000,), 2.0, dtype=F64))
    again = measure_memory(make)
    assert (again.peak_bytes, again.retained_bytes) == (
        report.peak_bytes,
        report.retained_bytes,
    )


def test_measure_memory_ignores_frees_of_older_tensors():
    holder = [torch.ones(5000, dtype=F64)]

    def free_old_then_allocate():
        holder.clear()
        return torch.ones(1000, dtype=F64)

    report = measure_memory(free_old_then_allocate)
    assert (report.peak_bytes, report.retained_bytes) == (8000, 8000)


def test_find_nan_origin_names_node_and_forward_line():
    def log_of_zero():
        x = torch.tensor([1.0, 0.0], dtype=F64, requires_grad=True)
        y = torch.log(x)
        (y * 0).sum().backward()

    report = find_nan_origin(log_of_zero)
    assert report.backward_node == "LogBackward0"
    assert (
        report.error
        == "Function 'LogBackward0' returned nan values in its 0th output."
    )
    assert report.forward_function == "log_of_zero"
    assert report.forward_line == "y = torch.log(x)"


def test_find_nan_origin_returns_none_when_all_is_finite():
    x = torch.ones(2, requires_grad=True)
    assert find_nan_origin(lambda: x.exp().sum().backward()) is None


def test_assert_finite_names_the_tensor_the_count_and_the_first_index():
    from backprop_lessons.debug import assert_finite

    good = torch.ones(2, 2)
    assert_finite(good=good, also=torch.zeros(3))  # silent
    bad = torch.tensor([[1.0, float("inf")], [float("nan"), 2.0]])
    with pytest.raises(
        ValueError,
        match=r"assert_finite: bad has 2 non-finite entries of 4, "
        r"the first at index \(0, 1\)",
    ):
        assert_finite(good=good, bad=bad)
    with pytest.raises(
        TypeError, match="assert_finite: x must be a torch.Tensor"
    ):
        assert_finite(x=[1.0])
