"""A deep, square MLP with a hand-written backward: the vanishing-gradient
experiment.

    H0 = X;  for l = 1..depth:  Z_l = H_{l-1} W_l + b_l,  H_l = act(Z_l)
                                (+ H_{l-1} if residual)
    logits = H_depth W_out + b_out;  loss = mean cross-entropy

Every hidden layer has the same width n (the input too), so depth is the only
thing that changes between experiments.  `layer_gradient_norms` returns the
norm of dL/dW_l for each hidden layer, which chapter 5 plots on a log scale:
with sigmoid, each layer down multiplies the backward signal by
sigmoid'(Z) <= 1/4 (times the weights' gain), so the norms fall
geometrically toward the input; with ReLU and He initialisation they do not.

Shape legend: B batch, n width, n_classes classes; `depth` hidden layers.
NumPy and the shared array formulas of `numerics`.
"""

from __future__ import annotations

import numpy as np

from .numerics import log_softmax, one_hot, sigmoid
from .validate import one_of, positive_int, ready

__all__ = [
    "DeepMLP",
    "ACTIVATIONS",
    "INITS",
    "layer_gradient_norms",
    "layer_profile",
    "per_layer_ratio",
]


# Each activation with its derivative written in terms of its *output* H, so
# the cache keeps only H (Z is never needed again).
ACTIVATIONS = {
    # sigma' = sigma (1 - sigma) <= 1/4
    "sigmoid": (sigmoid, lambda H: H * (1 - H)),
    # tanh' = 1 - tanh^2 <= 1
    "tanh": (np.tanh, lambda H: 1 - H * H),
    # relu' is 1 where the unit is on, 0 where it is off (and 0 at the kink,
    # as in PyTorch)
    "relu": (lambda Z: np.maximum(Z, 0), lambda H: (H > 0).astype(H.dtype)),
}

# Standard deviation of a weight as a function of (fan_in, fan_out).
INITS = {
    # Glorot & Bengio 2010
    "xavier": lambda fan_in, fan_out: np.sqrt(2.0 / (fan_in + fan_out)),
    # He et al. 2015, for ReLU
    "he": lambda fan_in, fan_out: np.sqrt(2.0 / fan_in),
}


class DeepMLP:
    """`depth` hidden layers of width n with one activation, then a linear
    layer to n_classes logits.

    `residual=True` adds each hidden layer's input to its output
    (H_l = H_{l-1} + act(Z_l)), giving the gradient an identity path around
    every activation.  Parameters: W_l (n, n) and b_l (n,) for
    l = 1..depth, W_out (n, n_classes), b_out (n_classes,); biases start at
    0, weights as N(0, std^2) with the std of `init`.
    """

    def __init__(
        self,
        width: int,
        depth: int,
        n_classes: int = 10,
        activation: str = "sigmoid",
        init: str = "xavier",
        residual: bool = False,
        seed: int = 0,
    ):
        self.width = positive_int("DeepMLP", "width", width)
        self.depth = positive_int("DeepMLP", "depth", depth)
        self.n_classes = positive_int("DeepMLP", "n_classes", n_classes)
        one_of("DeepMLP", "activation", activation, tuple(sorted(ACTIVATIONS)))
        one_of("DeepMLP", "init", init, tuple(sorted(INITS)))
        self.activation, self.init = activation, init
        self.residual = bool(residual)
        rng = np.random.default_rng(positive_int("DeepMLP", "seed", seed, 0))
        self.params: dict[str, np.ndarray] = {}
        for name, shape in self.param_shapes().items():
            if name.startswith("W"):
                std = INITS[init](*shape)
                self.params[name] = rng.standard_normal(shape) * std
            else:
                self.params[name] = np.zeros(shape)
        self.cache: dict | None = None

    def param_shapes(self) -> dict[str, tuple]:
        """Names and shapes, input side first."""
        n, shapes = self.width, {}
        for l in range(1, self.depth + 1):
            shapes[f"W{l}"], shapes[f"b{l}"] = (n, n), (n,)
        shapes["W_out"], shapes["b_out"] = (n, self.n_classes), (self.n_classes,)
        return shapes

    def __repr__(self) -> str:
        return (
            f"DeepMLP(width={self.width}, depth={self.depth}, "
            f"n_classes={self.n_classes}, "
            f"activation={self.activation!r}, init={self.init!r}, "
            f"residual={self.residual})"
        )

    def forward(self, X) -> np.ndarray:
        """Class probabilities (B, n_classes) for X (B, n); caches every hidden
        output."""
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != self.width or X.shape[0] == 0:
            raise ValueError(
                f"DeepMLP.forward: X must have shape (B, {self.width}) "
                f"with B >= 1, got {X.shape}"
            )
        act, _ = ACTIVATIONS[self.activation]
        p, H = self.params, X  # (B, n)
        Hs, As = [X], []  # H_0..H_L and act(Z_1)..act(Z_L)
        for l in range(1, self.depth + 1):
            A = act(H @ p[f"W{l}"] + p[f"b{l}"])  # (B, n)
            H = H + A if self.residual else A  # (B, n)
            Hs.append(H)
            As.append(A)
        log_Y_hat = log_softmax(H @ p["W_out"] + p["b_out"])  # (B, n_classes)
        self.cache = {"Hs": Hs, "As": As, "log_Y_hat": log_Y_hat}
        return np.exp(log_Y_hat)  # (B, n_classes)

    def loss(self, y) -> float:
        """Mean cross-entropy of the cached batch for integer labels y (B,)."""
        log_Y_hat = ready("DeepMLP.loss", self.cache, "call forward(X) first")[
            "log_Y_hat"
        ]  # (B, n_classes)
        Y = one_hot(y, self.n_classes)  # (B, n_classes)
        return float(-(Y * log_Y_hat).sum() / log_Y_hat.shape[0])

    def backward(self, y) -> dict[str, np.ndarray]:
        """Gradients of the mean cross-entropy for integer labels y (B,),
        every parameter."""
        ready("DeepMLP.backward", self.cache, "call forward(X) first")
        _, act_grad = ACTIVATIONS[self.activation]
        p, Hs, As = self.params, self.cache["Hs"], self.cache["As"]
        B = Hs[0].shape[0]
        y = np.asarray(y)
        if y.shape != (B,):
            raise ValueError(
                f"DeepMLP.backward: need {B} integer labels, got shape {y.shape}"
            )
        Y_hat, Y = (
            np.exp(self.cache["log_Y_hat"]),
            one_hot(y, self.n_classes),
        )  # (B, n_classes) each
        delta = (Y_hat - Y) / B  # (B, n_classes) dL/dlogits
        grads = {}
        grads["W_out"] = Hs[-1].T @ delta  # (n, n_classes)
        grads["b_out"] = delta.sum(axis=0)  # (n_classes,)
        dH = delta @ p["W_out"].T  # (B, n) dL/dH_L
        signals = []  # dL/dH_l as it arrives at each layer, top first
        for l in range(self.depth, 0, -1):
            signals.append(dH)
            dZ = dH * act_grad(As[l - 1])  # (B, n) dL/dZ_l
            grads[f"W{l}"] = Hs[l - 1].T @ dZ  # (n, n)
            grads[f"b{l}"] = dZ.sum(axis=0)  # (n,)
            dH_below = dZ @ p[f"W{l}"].T  # (B, n) through the layer
            # plus the identity path around the layer, if residual
            dH = dH + dH_below if self.residual else dH_below
        self.cache["dHs"] = signals[::-1]  # dL/dH_1..dL/dH_depth
        return {name: grads[name] for name in self.params}  # input-side order


def layer_profile(
    depth: int = 20,
    width: int = 64,
    activation: str = "sigmoid",
    init: str = "xavier",
    residual: bool = False,
    batch: int = 128,
    n_classes: int = 10,
    seed: int = 0,
) -> dict[str, np.ndarray]:
    """What one forward and backward pass shows at each hidden layer.

    A freshly initialised `DeepMLP` on a batch of standard-normal inputs
    with random labels (all from `seed`).  Arrays over l = 1..depth, input
    side first:
        "dW"      ||dL/dW_l|| (Frobenius)
        "dH"      ||dL/dH_l||, the backward signal arriving at layer l
        "H_in"    the root mean square of layer l's input H_{l-1}
        "slope"   the mean of act'(Z_l) over the batch and the units
    dW_l = H_{l-1}^T (dH_l * act'(Z_l)) is built from the other three.
    """
    model = DeepMLP(width, depth, n_classes, activation, init, residual, seed)
    rng = np.random.default_rng(seed + 1)
    X = rng.standard_normal((batch, width))  # (B, n)
    y = rng.integers(0, n_classes, size=batch)  # (B,)
    model.forward(X)
    grads = model.backward(y)
    _, act_grad = ACTIVATIONS[activation]
    Hs, As, dHs = (model.cache[k] for k in ("Hs", "As", "dHs"))
    layers = range(1, depth + 1)
    return {
        "dW": np.array([np.linalg.norm(grads[f"W{l}"]) for l in layers]),
        "dH": np.array([np.linalg.norm(dH) for dH in dHs]),
        "H_in": np.array([np.sqrt(np.mean(H * H)) for H in Hs[:-1]]),
        "slope": np.array([float(np.mean(act_grad(A))) for A in As]),
    }


def layer_gradient_norms(*args, **kwargs) -> np.ndarray:
    """||dL/dW_l|| (Frobenius) for the hidden layers l = 1..depth, input side
    first: `layer_profile(*args, **kwargs)["dW"]`, with its arguments."""
    return layer_profile(*args, **kwargs)["dW"]


def per_layer_ratio(norms) -> float:
    """The factor by which the gradient norm changes per layer toward the
    input.

    Fitted as exp(-slope) of a least-squares line through log(norm) against
    the layer index (input side first): 0.25 means each layer down keeps a
    quarter of the gradient; 1.0 means no decay.
    """
    norms = np.asarray(norms, dtype=np.float64)
    if norms.ndim != 1 or norms.size < 2 or np.any(norms <= 0):
        raise ValueError(
            "per_layer_ratio: need at least 2 positive norms in a 1-D array, "
            f"got {norms!r}"
        )
    slope = np.polyfit(np.arange(norms.size), np.log(norms), 1)[0]
    return float(np.exp(-slope))
