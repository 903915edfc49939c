"""Neurons, layers and multi-layer perceptrons built from scalar `Value`s.

Every weight is its own `Value`, so a forward pass builds a graph with one
node per multiply and add; `loss.backward()` then fills in every weight's
gradient.  Slow by design: chapter 2 counts the nodes one step creates, and
chapter 6 explains why real frameworks use tensors instead.
"""

from __future__ import annotations

import math
import numbers
import random
from collections.abc import Sequence

from .scalar import Value, zero_grad
from .validate import (
    entries_of,
    length_is,
    nonempty_sequence,
    one_of,
    positive_int,
    python_random,
)

__all__ = ["Neuron", "Layer", "MLP"]

_NONLINEARITIES = ("tanh", "relu", "sigmoid", "linear")
_INPUT = (Value, numbers.Real)  # what a neuron reads: Values or numbers


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
        self, nin: int, nonlin: str = "tanh", rng: random.Random | None = None
    ):
        nin = positive_int("Neuron", "nin", nin)
        one_of("Neuron", "nonlin", nonlin, _NONLINEARITIES)
        rng = python_random("Neuron", "rng", rng)
        bound = 1.0 / math.sqrt(nin)
        self.w = [Value(rng.uniform(-bound, bound)) for _ in range(nin)]
        self.b = Value(0.0)
        self.nonlin = nonlin

    def __call__(self, x: Sequence) -> Value:
        x = entries_of("Neuron", "input", x, _INPUT, "a Value or a real number")
        length_is("Neuron", "inputs", x, len(self.w))
        act = self.b
        for wi, xi in zip(self.w, x):
            act = act + wi * xi
        if self.nonlin == "linear":
            return act
        return getattr(act, self.nonlin)()

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
    ):
        nout = positive_int("Layer", "nout", nout)
        rng = python_random("Layer", "rng", rng)
        self.neurons = [Neuron(nin, nonlin, rng) for _ in range(nout)]

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
    single Value when the last layer has one neuron.
    """

    def __init__(
        self, nin: int, nouts: Sequence[int], nonlin: str = "tanh", seed: int = 0
    ):
        nonempty_sequence("MLP", "nouts", nouts, "layer size")
        one_of("MLP", "nonlin", nonlin, _NONLINEARITIES)
        if not isinstance(seed, int) or isinstance(seed, bool):
            seed = positive_int("MLP", "seed", seed, minimum=0)
        sizes = [positive_int("MLP", "nin", nin)] + [
            positive_int("MLP", "every layer size", n) for n in nouts
        ]
        rng = random.Random(seed)
        self.layers = []
        for i in range(len(nouts)):
            last = i == len(nouts) - 1
            layer = Layer(
                sizes[i], sizes[i + 1], "linear" if last else nonlin, rng
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
