"""Tests of `backprop_lessons.scalar_nn`: Neuron, Layer and MLP on scalar Values.

The gradient test copies an MLP's weights into float64 PyTorch tensors,
computes the same loss there, and compares every parameter's gradient.
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter

import pytest
import torch

from backprop_lessons.gradcheck import relative_error
from backprop_lessons.scalar import Value, topological_order
from backprop_lessons.scalar_nn import MLP, Engine, Layer, Neuron

BATCH = [
    ([0.5, -1.2], 1.0),
    ([-0.3, 0.8], -1.0),
    ([1.5, 0.1], 0.5),
    ([0.0, -0.7], 0.0),
]


def squared_error(model, batch) -> Value:
    """sum over the batch of (model(x) - y)^2."""
    loss = Value(0.0)
    for x, y in batch:
        loss = loss + (model(x) - y) ** 2
    return loss


def torch_mlp_loss(model: MLP, batch):
    """The same loss in float64 PyTorch; returns (loss, [(W, b) per layer])."""
    act = {
        "tanh": torch.tanh,
        "relu": torch.relu,
        "sigmoid": torch.sigmoid,
        "linear": lambda z: z,
    }
    params = []
    for layer in model.layers:
        W = torch.tensor(
            [[w.data for w in n.w] for n in layer.neurons],
            dtype=torch.float64,
            requires_grad=True,
        )  # (nout, nin)
        b = torch.tensor(
            [n.b.data for n in layer.neurons],
            dtype=torch.float64,
            requires_grad=True,
        )  # (nout,)
        params.append((W, b, act[layer.neurons[0].nonlin]))
    X = torch.tensor([x for x, _ in batch], dtype=torch.float64)  # (B, nin)
    Y = torch.tensor([y for _, y in batch], dtype=torch.float64)  # (B,)
    h = X
    for W, b, f in params:
        h = f(h @ W.T + b)  # (B, nout)
    loss = ((h[:, 0] - Y) ** 2).sum()
    loss.backward()
    return loss, [(W, b) for W, b, _ in params]


rel_err = functools.partial(relative_error, floor=1e-6)


@pytest.mark.parametrize("nonlin", ["tanh", "relu", "sigmoid"])
def test_mlp_gradients_match_torch(nonlin):
    model = MLP(2, [8, 6, 1], nonlin=nonlin, seed=1)
    loss = squared_error(model, BATCH)
    loss.backward()
    ref_loss, ref_params = torch_mlp_loss(model, BATCH)
    assert rel_err(loss.data, ref_loss.item()) < 1e-13
    failures = []
    for l, (layer, (W, b)) in enumerate(zip(model.layers, ref_params)):
        for i, neuron in enumerate(layer.neurons):
            for j, w in enumerate(neuron.w):
                if rel_err(w.grad, W.grad[i, j].item()) >= 1e-12:
                    failures.append(
                        f"layer {l} w[{i},{j}]: {w.grad!r} "
                        f"vs {W.grad[i, j].item()!r}"
                    )
            if rel_err(neuron.b.grad, b.grad[i].item()) >= 1e-12:
                failures.append(
                    f"layer {l} b[{i}]: {neuron.b.grad!r} vs {b.grad[i].item()!r}"
                )
    assert not failures, "\n".join(failures)


def test_seeded_mlp_is_deterministic():
    a, b = MLP(2, [16, 16, 1], seed=7), MLP(2, [16, 16, 1], seed=7)
    assert [p.data for p in a.parameters()] == [p.data for p in b.parameters()]
    x = [0.3, -0.4]
    assert a(x).data == b(x).data
    c = MLP(2, [16, 16, 1], seed=8)
    assert [p.data for p in a.parameters()] != [p.data for p in c.parameters()]


def test_default_seed_is_fixed():
    assert [p.data for p in MLP(3, [4, 1]).parameters()] == [
        p.data for p in MLP(3, [4, 1]).parameters()
    ]
    assert [p.data for p in Neuron(3).parameters()] == [
        p.data for p in Neuron(3).parameters()
    ]


def test_parameter_counts():
    assert len(Neuron(3).parameters()) == 4
    assert len(Layer(3, 5).parameters()) == 20
    # (2*16 + 16) + (16*16 + 16) + (16*1 + 1)
    assert len(MLP(2, [16, 16, 1]).parameters()) == 337
    params = MLP(2, [16, 16, 1]).parameters()
    assert len({id(p) for p in params}) == len(
        params
    )  # no parameter listed twice


def test_weights_are_bounded_by_one_over_sqrt_nin_and_biases_start_at_zero():
    model = MLP(9, [4, 1], seed=0)
    for layer in model.layers:
        for n in layer.neurons:
            bound = 1.0 / math.sqrt(len(n.w))
            assert all(abs(w.data) <= bound for w in n.w)
            assert n.b.data == 0.0


def test_last_layer_is_linear_and_output_shape():
    model = MLP(2, [3, 1], nonlin="tanh")
    assert [l.neurons[0].nonlin for l in model.layers] == ["tanh", "linear"]
    assert isinstance(model([1.0, 2.0]), Value)
    out = MLP(2, [3, 2])([1.0, 2.0])
    assert isinstance(out, list) and len(out) == 2


def test_mlp_accepts_values_as_inputs():
    model = MLP(2, [3, 1], seed=2)
    x = [Value(0.5), Value(-1.0)]
    model(x).backward()
    assert all(v.grad != 0.0 for v in x)


def test_module_zero_grad_resets_every_parameter():
    model = MLP(2, [4, 1], seed=0)
    squared_error(model, BATCH).backward()
    assert any(p.grad != 0.0 for p in model.parameters())
    model.zero_grad()
    assert all(p.grad == 0.0 for p in model.parameters())


def test_wrong_input_length_raises():
    with pytest.raises(ValueError, match=r"Neuron: expected 3 inputs, got 2"):
        Neuron(3)([1.0, 2.0])
    with pytest.raises(ValueError, match=r"expected 2 inputs, got 3"):
        MLP(2, [4, 1])([1.0, 2.0, 3.0])


@pytest.mark.parametrize(
    "make",
    [
        lambda: Neuron(2, "softplus"),
        lambda: Layer(2, 3, "softplus"),
        lambda: MLP(2, [3, 1], nonlin="softplus"),
    ],
)
def test_unknown_nonlinearity_raises(make):
    with pytest.raises(
        ValueError, match=r"(Neuron|MLP): nonlin must be one of .*'softplus'"
    ):
        make()


@pytest.mark.parametrize("nin", [0, -1, 2.5])
def test_bad_nin_raises(nin):
    with pytest.raises(ValueError, match=r"Neuron: nin must be a positive int"):
        Neuron(nin)


def test_reprs_are_stable():
    assert repr(Neuron(3)) == "Neuron(3, tanh)"
    assert repr(Neuron(3, "relu")) == "Neuron(3, relu)"
    assert repr(Layer(3, 5)) == "Layer(3 -> 5, tanh)"
    assert repr(MLP(2, [16, 16, 1])) == "MLP(2 -> 16 -> 16 -> 1, 337 parameters)"
    assert "0x" not in repr(MLP(2, [3, 1]).layers)


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: MLP(2, []), "MLP: nouts must list at least one layer size"),
        (lambda: MLP(2, [3, 0]), "MLP: every layer size must be a positive int"),
        (lambda: Neuron(True), "Neuron: nin must be a positive int, got True"),
        (lambda: Layer(2, 0), "Layer: nout must be a positive int, got 0"),
    ],
)
def test_bad_sizes_are_rejected(make, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        make()


# ---- the engine a network computes with ----------------------------------------


def readers_engine(calls: Counter) -> Engine:
    """An engine written as a reader writes it (chapter 1's operations, each
    a new Value from its data, children and local derivatives; chapter 2's
    backward), every call counted."""

    def add(a, b):
        calls["add"] += 1
        return Value(a.data + b.data, "", (a, b), (1.0, 1.0), "+")

    def mul(a, b):
        calls["mul"] += 1
        return Value(a.data * b.data, "", (a, b), (b.data, a.data), "*")

    def tanh(a):
        calls["tanh"] += 1
        t = math.tanh(a.data)
        return Value(t, "", (a,), (1 - t * t,), "tanh")

    def relu(a):
        calls["relu"] += 1
        on = a.data > 0
        return Value(a.data if on else 0.0, "", (a,), (float(on),), "relu")

    def backward(root):
        calls["backward"] += 1
        order = topological_order(root)
        for node in order:
            if node._children:
                node.grad = 0.0
        root.grad += 1.0
        for node in reversed(order):
            for child, local in zip(node._children, node._local_grads):
                child.grad += local * node.grad

    return Engine(add=add, mul=mul, tanh=tanh, relu=relu, backward=backward)


@pytest.mark.parametrize("nonlin", ["tanh", "relu"])
def test_an_mlp_computes_with_the_engine_it_is_given(nonlin):
    """The forward pass calls the engine's operations (and nothing of the
    package's on Values), and `model.engine.backward` is the engine's: the
    reader's engine gives the package's loss and gradients exactly."""
    calls = Counter()
    ours = MLP(2, [3, 1], nonlin=nonlin, seed=1, engine=readers_engine(calls))
    book = MLP(2, [3, 1], nonlin=nonlin, seed=1)
    assert book.engine == Engine() and ours.engine != book.engine
    losses = []
    for model in (ours, book):
        ops = model.engine
        loss = Value(0.0)
        for x, y in BATCH:  # sum of relu(1 - y * score), with ops alone
            margin = ops.add(Value(1.0), ops.mul(Value(-y), model(x)))
            loss = ops.add(loss, ops.relu(margin))
        model.zero_grad()
        ops.backward(loss)
        losses.append((loss.data, [p.grad for p in model.parameters()]))
    assert losses[0] == losses[1]
    assert any(losses[0][1])
    # per sample: one mul and one add per weight of the 3 + 1 neurons, one
    # activation per hidden neuron; the loss: 2 adds, 1 mul and 1 relu
    weights, hidden, n = 3 * 2 + 1 * 3, 3, len(BATCH)
    expected = Counter(mul=n * (weights + 1), add=n * (weights + 2), backward=1)
    expected[nonlin] += n * hidden
    expected["relu"] += n
    assert calls == expected


def test_the_default_engine_is_the_packages_value():
    engine = Engine()
    a, b = Value(2.0), Value(-3.0)
    assert engine.add(a, b).data == -1.0 and engine.mul(a, b).data == -6.0
    assert engine.backward is Value.backward and engine.tanh is Value.tanh
    assert all(
        n.engine is MLP(2, [2]).engine for n in MLP(2, [2]).layers[0].neurons
    )
