"""Neurons, layers and multi-layer perceptrons built from scalar `Value`s.

Every weight is its own `Value`, so a forward pass builds a graph with one
node per multiply and add; `loss.backward()` then fills in every weight's
gradient.  Slow by design: chapter 2 counts the nodes one step creates, and
chapter 6 explains why real frameworks use tensors instead.

A network computes with an `Engine`: the operations its forward pass calls
and the backward its training loop calls.  The default is the package's own
`Value`; chapter 2 trains the same network with the reader's engine, the
operations written in chapter 1 and the backward written in chapter 2.
"""

from __future__ import annotations

import math
import numbers
import random
from collections.abc import Callable, Sequence
from typing import NamedTuple

from .scalar import Value, zero_grad
from .validate import (
    entries_of,
    instance_of,
    length_is,
    nonempty_sequence,
    one_of,
    positive_int,
    python_random,
)

__all__ = ["Engine", "Neuron", "Layer", "MLP"]

_NONLINEARITIES = ("tanh", "relu", "sigmoid", "linear")
_INPUT = (Value, numbers.Real)  # what a neuron reads: Values or numbers


class Engine(NamedTuple):
    """The operations a network's forward pass calls, and the backward its
    training loop calls as `engine.backward(loss)`.

    Each operation takes Values and returns a new Value (its children and
    local derivatives filled in); `backward(root)` fills in the gradients,
    as `Value.backward` does.  The defaults are the package's own; a
    reader's engine replaces some or all of them:
    `Engine(add=my_add, mul=my_mul, tanh=my_tanh, relu=my_relu,
    backward=my_backward)`.
    """

    add: Callable[[Value, Value], Value] = Value.__add__
    mul: Callable[[Value, Value], Value] = Value.__mul__
    tanh: Callable[[Value], Value] = Value.tanh
    relu: Callable[[Value], Value] = Value.relu
    sigmoid: Callable[[Value], Value] = Value.sigmoid
    backward: Callable[[Value], None] = Value.backward


#: The package's own engine, every network's default.
PACKAGE_ENGINE = Engine()
_HOW = " (scalar_nn.Engine(add=..., backward=...))"


class Module:
    """Anything with parameters: `parameters()` and `zero_grad()`."""

    def parameters(self) -> list[Value]:
        return []

    def zero_grad(self) -> None:
        zero_grad(self.parameters())


class Neuron(Module):
    """`act(w . x + b)` for one output; weights drawn from `rng`.

    Weights are uniform in +-1/sqrt(nin) (the scale PyTorch's `nn.Linear`
    uses), so activations neither explode nor vanish as width grows.
    """

    def __init__(
        self,
        nin: int,
        nonlin: str = "tanh",
        rng: random.Random | None = None,
        engine: Engine = PACKAGE_ENGINE,
    ):
        nin = positive_int("Neuron", "nin", nin)
        one_of("Neuron", "nonlin", nonlin, _NONLINEARITIES)
        rng = python_random("Neuron", "rng", rng)
        bound = 1.0 / math.sqrt(nin)
        self.w = [Value(rng.uniform(-bound, bound)) for _ in range(nin)]
        self.b = Value(0.0)
        self.nonlin = nonlin
        self.engine = instance_of("Neuron", "engine", engine, Engine, _HOW)

    def __call__(self, x: Sequence) -> Value:
        x = entries_of("Neuron", "input", x, _INPUT, "a Value or a real number")
        length_is("Neuron", "inputs", x, len(self.w))
        ops = self.engine
        act = self.b
        for wi, xi in zip(self.w, x):
            xi = xi if isinstance(xi, Value) else Value(xi)
            act = ops.add(act, ops.mul(wi, xi))
        if self.nonlin == "linear":
            return act
        return getattr(ops, self.nonlin)(act)

    def parameters(self) -> list[Value]:
        return self.w + [self.b]

    def __repr__(self) -> str:
        return f"Neuron({len(self.w)}, {self.nonlin})"


class Layer(Module):
    """`nout` neurons that all read the same `nin` inputs."""

    def __init__(
        self,
        nin: int,
        nout: int,
        nonlin: str = "tanh",
        rng: random.Random | None = None,
        engine: Engine = PACKAGE_ENGINE,
    ):
        nout = positive_int("Layer", "nout", nout)
        rng = python_random("Layer", "rng", rng)
        self.neurons = [Neuron(nin, nonlin, rng, engine) for _ in range(nout)]

    def __call__(self, x: Sequence) -> list[Value]:
        return [n(x) for n in self.neurons]

    def parameters(self) -> list[Value]:
        return [p for n in self.neurons for p in n.parameters()]

    def __repr__(self) -> str:
        n = self.neurons[0]
        return f"Layer({len(n.w)} -> {len(self.neurons)}, {n.nonlin})"


class MLP(Module):
    """A stack of layers: `nonlin` on the hidden layers, a linear last layer.

    `MLP(2, [16, 16, 1], seed=0)` maps 2 inputs to 1 output.  The same seed
    always gives the same weights.  A call returns a list of Values, or a
    single Value when the last layer has one neuron.  `engine` names the
    operations the forward pass calls (`Engine`; the package's by default)
    and the backward a training loop calls, `model.engine.backward(loss)`.
    """

    def __init__(
        self,
        nin: int,
        nouts: Sequence[int],
        nonlin: str = "tanh",
        seed: int = 0,
        engine: Engine = PACKAGE_ENGINE,
    ):
        nonempty_sequence("MLP", "nouts", nouts, "layer size")
        one_of("MLP", "nonlin", nonlin, _NONLINEARITIES)
        if not isinstance(seed, int) or isinstance(seed, bool):
            seed = positive_int("MLP", "seed", seed, minimum=0)
        sizes = [positive_int("MLP", "nin", nin)] + [
            positive_int("MLP", "every layer size", n) for n in nouts
        ]
        rng = random.Random(seed)
        self.engine = instance_of("MLP", "engine", engine, Engine, _HOW)
        self.layers = []
        for i in range(len(nouts)):
            last = i == len(nouts) - 1
            layer = Layer(
                sizes[i], sizes[i + 1], "linear" if last else nonlin, rng, engine
            )
            self.layers.append(layer)

    def __call__(self, x: Sequence):
        for layer in self.layers:
            x = layer(x)
        return x[0] if len(x) == 1 else x

    def parameters(self) -> list[Value]:
        return [p for layer in self.layers for p in layer.parameters()]

    def __repr__(self) -> str:
        sizes = [len(self.layers[0].neurons[0].w)]
        sizes += [len(layer.neurons) for layer in self.layers]
        arrows = " -> ".join(map(str, sizes))
        return f"MLP({arrows}, {len(self.parameters())} parameters)"
