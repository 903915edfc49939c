"""A three-layer MLP with a backward pass derived by hand (no autograd).

    X -> Z1 = X W1 + b1 -> H1 = sigmoid(Z1)
      -> Z2 = H1 W2 + b2 -> H2 = sigmoid(Z2)
      -> Z3 = H2 W3 + b3 -> Y_hat = softmax(Z3)
    loss = mean cross-entropy(Y_hat, Y)

`ThreeLayerMLP.forward(X)` returns the class probabilities and keeps a cache;
`loss(Y)` reads the loss from that cache; `backward(Y)` returns the gradient
of the mean loss for every parameter, from the formulas of chapter 5:

    delta3 = (Y_hat - Y) / B      dW3 = H2^T delta3     db3 = sum_b delta3
    dH2 = delta3 W3^T             delta2 = dH2 * H2 (1 - H2)   ... down to dW1

Labels `Y` are either integer classes (B,) or one-hot rows (B, d3) (any rows
of probabilities work: the formulas hold for soft targets too).

Shape legend: B batch, d0 inputs, d1 and d2 hidden widths, d3 classes.

What this is not: a general layer library.  It is one fixed network written
out in full so that every line of its backward can be read against the
derivation.  It imports NumPy and the shared array formulas of `numerics`
(sigmoid, log-softmax, one-hot rows).
"""

from __future__ import annotations

import numpy as np

from .numerics import log_softmax, one_hot, sigmoid
from .validate import (
    class_labels,
    float_dtype,
    gradient_for,
    in_range,
    instance_of,
    positive_int,
    probability_rows,
    ready,
    real_array,
    real_number,
    rows_of,
)

__all__ = ["ThreeLayerMLP", "sgd_step", "train", "accuracy"]


# ---- the model -----------------------------------------------------------------


class ThreeLayerMLP:
    """d0 -> d1 (sigmoid) -> d2 (sigmoid) -> d3 (softmax), trained with
    cross-entropy.

    Parameters live in `self.params`, an ordered dict name -> array (see
    `param_shapes`).  Weights start as N(0, 1/fan_in) (LeCun/Xavier-style
    scaling, which keeps pre-activations of order 1), biases at 0; the same
    seed always gives the same parameters.
    """

    def __init__(
        self, d0: int, d1: int, d2: int, d3: int, seed: int = 0, dtype=np.float64
    ):
        self.d0 = positive_int("ThreeLayerMLP", "d0", d0)
        self.d1 = positive_int("ThreeLayerMLP", "d1", d1)
        self.d2 = positive_int("ThreeLayerMLP", "d2", d2)
        self.d3 = positive_int("ThreeLayerMLP", "d3", d3, minimum=2)  # classes
        self.dtype = float_dtype("ThreeLayerMLP", "dtype", dtype)
        seed = positive_int("ThreeLayerMLP", "seed", seed, minimum=0)
        rng = np.random.default_rng(seed)
        self.params: dict[str, np.ndarray] = {}
        for name, shape in self.param_shapes().items():
            if name.startswith("W"):
                # std 1/sqrt(fan_in)
                w = rng.standard_normal(shape) / np.sqrt(shape[0])
                self.params[name] = w.astype(self.dtype)
            else:
                self.params[name] = np.zeros(shape, dtype=self.dtype)
        self.cache: dict[str, np.ndarray] | None = None

    def param_shapes(self) -> dict[str, tuple]:
        """The one table of parameter names and shapes, in forward order."""
        return {
            "W1": (self.d0, self.d1),
            "b1": (self.d1,),
            "W2": (self.d1, self.d2),
            "b2": (self.d2,),
            "W3": (self.d2, self.d3),
            "b3": (self.d3,),
        }

    def num_params(self) -> int:
        return sum(p.size for p in self.params.values())

    def __repr__(self) -> str:
        return (
            f"ThreeLayerMLP({self.d0} -> {self.d1} -> {self.d2} -> {self.d3}, "
            f"{self.num_params()} parameters, {self.dtype})"
        )

    # ---- forward ---------------------------------------------------------------

    def forward(self, X) -> np.ndarray:
        """Class probabilities Y_hat (B, d3) for inputs X (B, d0); keeps what
        backward needs."""
        op = "ThreeLayerMLP.forward"
        X = rows_of(op, "X", real_array(op, "X", X), self.d0)
        if X.shape[0] == 0:
            raise ValueError("ThreeLayerMLP.forward: X is an empty batch (B = 0)")
        X = X.astype(self.dtype, copy=False)  # (B, d0)
        p = self.params
        Z1 = X @ p["W1"] + p["b1"]  # (B, d1)
        H1 = sigmoid(Z1)  # (B, d1)
        Z2 = H1 @ p["W2"] + p["b2"]  # (B, d2)
        H2 = sigmoid(Z2)  # (B, d2)
        Z3 = H2 @ p["W3"] + p["b3"]  # (B, d3)  logits
        log_Y_hat = log_softmax(Z3)  # (B, d3)
        Y_hat = np.exp(log_Y_hat)  # (B, d3)  rows sum to 1
        # Z1 and Z2 are not kept: sigmoid'(Z) = H (1 - H) is recomputed from H.
        self.cache = {
            "X": X,
            "H1": H1,
            "H2": H2,
            "log_Y_hat": log_Y_hat,
            "Y_hat": Y_hat,
        }
        return Y_hat

    def _targets(self, Y, op: str) -> np.ndarray:
        """Labels as one-hot rows (B, d3) matching the cached batch."""
        op = f"ThreeLayerMLP.{op}"
        todo = "call forward(X) first; there is no cached batch yet"
        cache = ready(op, self.cache, todo)
        B = cache["X"].shape[0]
        Y = np.asarray(Y)
        if Y.ndim == 1:
            labels = class_labels(op, "labels", Y, self.d3, B)
            return one_hot(labels, self.d3, self.dtype)
        Y = probability_rows(op, "Y", Y, B, self.d3)
        return Y.astype(self.dtype, copy=False)

    def loss(self, Y) -> float:
        """Mean cross-entropy -1/B sum_b sum_k Y[b,k] log Y_hat[b,k] of the cached
        batch."""
        Y = self._targets(Y, "loss")  # (B, d3)
        log_Y_hat = self.cache["log_Y_hat"]  # (B, d3)
        return float(-(Y * log_Y_hat).sum() / log_Y_hat.shape[0])  # ()

    # ---- backward --------------------------------------------------------------

    def backward(self, Y) -> dict[str, np.ndarray]:
        """Gradients of the mean cross-entropy for every parameter (same keys
        and shapes).

        Pure: it reads the cache and the parameters and returns new arrays;
        calling it twice gives the same gradients twice.
        """
        Y = self._targets(Y, "backward")  # (B, d3)
        c, p = self.cache, self.params
        X, H1, H2, Y_hat = c["X"], c["H1"], c["H2"], c["Y_hat"]
        B = X.shape[0]
        # output layer: softmax + cross-entropy together give
        # dL/dZ3 = (Y_hat - Y) / B
        delta3 = (Y_hat - Y) / B  # (B, d3) dL/dZ3
        dW3 = H2.T @ delta3  # (d2, d3) = (d2, B) @ (B, d3)
        db3 = delta3.sum(axis=0)  # (d3,) b3 was added to every row
        dH2 = delta3 @ p["W3"].T  # (B, d2) = (B, d3) @ (d3, d2)
        # second hidden layer: sigmoid'(Z2) = H2 (1 - H2), elementwise
        delta2 = dH2 * H2 * (1 - H2)  # (B, d2) dL/dZ2
        dW2 = H1.T @ delta2  # (d1, d2) = (d1, B) @ (B, d2)
        db2 = delta2.sum(axis=0)  # (d2,)
        dH1 = delta2 @ p["W2"].T  # (B, d1) = (B, d2) @ (d2, d1)
        # first hidden layer: the same two steps once more
        delta1 = dH1 * H1 * (1 - H1)  # (B, d1) dL/dZ1
        dW1 = X.T @ delta1  # (d0, d1) = (d0, B) @ (B, d1)
        db1 = delta1.sum(axis=0)  # (d1,)
        # (dX = delta1 @ W1.T would be next; the inputs need no gradient)
        return {"W1": dW1, "b1": db1, "W2": dW2, "b2": db2, "W3": dW3, "b3": db3}

    def loss_and_grads(self, X, Y) -> tuple[float, dict[str, np.ndarray]]:
        """forward, loss and backward on one batch."""
        self.forward(X)
        return self.loss(Y), self.backward(Y)

    def predict(self, X) -> np.ndarray:
        """The most probable class (B,) for each row of X (B, d0)."""
        return self.forward(X).argmax(axis=1)


# ---- training ------------------------------------------------------------------


def sgd_step(params: dict, grads: dict, lr: float) -> None:
    """p <- p - lr * dp for every name, in place."""
    instance_of("sgd_step", "params", params, dict)
    instance_of("sgd_step", "grads", grads, dict)
    real_number("sgd_step", "lr", lr)
    for name, g in grads.items():
        params[name] -= lr * gradient_for("sgd_step", name, g, params[name].shape)


def accuracy(model: ThreeLayerMLP, X, y) -> float:
    """Fraction of rows whose most probable class is the label y (B,)."""
    _check_model("accuracy", model)
    predicted = model.predict(X)  # (B,)
    y = class_labels("accuracy", "labels y", y, model.d3, len(predicted))
    return float(np.mean(predicted == y))


def _check_training_data(model, X, y, epochs, lr, batch_size) -> tuple:
    """The arguments of `train` checked: X (B, d0) real, y (B,) integer
    labels in [0, d3), epochs >= 0, a finite lr, batch_size in [1, B] (None:
    B).  Returns X, y and the batch size."""
    _check_model("train", model)
    X = rows_of("train", "X", real_array("train", "X", X), model.d0)
    n = X.shape[0]
    y = class_labels("train", "labels y", y, model.d3, n)
    positive_int("train", "epochs", epochs, minimum=0)
    real_number("train", "lr", lr)
    batch_size = n if batch_size is None else batch_size
    batch_size = positive_int("train", "batch_size", batch_size, minimum=0)
    in_range("train", "batch_size", batch_size, 1, n)
    return X, y, batch_size


def _check_model(op: str, model) -> None:
    instance_of(op, "model", model, ThreeLayerMLP)


def train(
    model: ThreeLayerMLP,
    X,
    y,
    epochs: int = 100,
    lr: float = 1.0,
    batch_size: int | None = None,
    seed: int = 0,
) -> dict[str, list[float]]:
    """Minibatch SGD on integer labels y (B,); one shuffle per epoch from `seed`.

    Returns the history {"loss": [...], "accuracy": [...]}, both measured on
    the whole of (X, y) after every epoch.  `batch_size=None` means full batch.
    """
    X, y, batch_size = _check_training_data(model, X, y, epochs, lr, batch_size)
    n = X.shape[0]
    rng = np.random.default_rng(seed)
    history = {"loss": [], "accuracy": []}
    for _ in range(epochs):
        order = rng.permutation(n)
        for start in range(0, n, batch_size):
            batch = order[start : start + batch_size]
            _, grads = model.loss_and_grads(X[batch], y[batch])
            sgd_step(model.params, grads, lr)
        Y_hat = model.forward(X)
        history["loss"].append(model.loss(y))
        history["accuracy"].append(float(np.mean(Y_hat.argmax(axis=1) == y)))
    return history
