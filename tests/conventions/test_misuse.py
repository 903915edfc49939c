"""Misuse of the public API: every case of issue 16, and the classes they
stand for.  Each bad input gets a TypeError or ValueError whose message names
the function, the argument and what was expected; nothing is silently
coerced, and nothing fails with a bare IndexError, AttributeError or
ZeroDivisionError from deep inside.
"""

from __future__ import annotations

import copy
import pickle
import random

import numpy as np
import pytest

from backprop_lessons.data.corpus import CharVocab
from backprop_lessons.gpt.model import GPTConfig, init_params
from backprop_lessons.gpt.train import get_batch, sample
from backprop_lessons.microgpt import NameVocab
from backprop_lessons.mlp3 import ThreeLayerMLP, accuracy, train
from backprop_lessons.scalar import Value, topological_order
from backprop_lessons.scalar_nn import MLP, Layer, Neuron
from backprop_lessons.tensor import Tensor, cross_entropy, softmax
from backprop_lessons.validate import class_labels, real_number, token_ids
from value_pickling import shallow_copy  # also registers Value's pickling

# ---- Tensor ------------------------------------------------------------------


@pytest.mark.parametrize(
    "data", [None, "1", ["1", "2"], [1 + 2j], [None, 1.0], {"a": 1}, object()]
)
def test_tensor_refuses_junk(data):
    with pytest.raises(TypeError, match=r"^Tensor: data must be real numbers"):
        Tensor(data)


def test_tensor_refuses_ragged_lists():
    with pytest.raises(ValueError, match=r"^Tensor: data must be a rectangular"):
        Tensor([[1.0, 2.0], [3.0]])


def test_tensor_refuses_a_non_bool_requires_grad():
    with pytest.raises(TypeError, match=r"requires_grad must be True or False"):
        Tensor([1.0], requires_grad="yes")


@pytest.mark.parametrize("other", [None, "2", [1.0, 2.0], 1 + 2j, True])
def test_tensor_arithmetic_refuses_junk(other):
    with pytest.raises(TypeError, match=r"^(add|mul): expected a Tensor"):
        Tensor([1.0, 2.0]) + other
    with pytest.raises(TypeError, match=r"^(add|mul): expected a Tensor"):
        other * Tensor([1.0, 2.0])


def test_tensor_index_by_tensor_is_refused():
    x = Tensor([1.0, 2.0, 3.0])
    with pytest.raises(TypeError, match=r"^index: a Tensor cannot index"):
        x[Tensor([0, 2])]
    assert x[np.array([0, 2])].data.tolist() == [1.0, 3.0]


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda t: t.softmax(axis=(0, 1)), TypeError, r"^softmax: axis must be"),
        (lambda t: t.log_softmax(axis=1.0), TypeError, r"^log_softmax: axis"),
        (lambda t: t.sum(axis=0.0), TypeError, r"^sum: axis must be None"),
        (lambda t: t.mean(axis="0"), TypeError, r"^mean: axis must be None"),
        (lambda t: t.max(axis=[0.5]), TypeError, r"^max: axis must be None"),
        (lambda t: t.sum(axis=True), TypeError, r"^sum: axis must be None"),
        (lambda t: t.sum(axis=5), ValueError, r"^sum: axis 5 is out of range"),
    ],
)
def test_tensor_axis_errors(call, error, message):
    with pytest.raises(error, match=message):
        call(Tensor(np.ones((2, 3))))


def test_softmax_over_an_empty_axis():
    with pytest.raises(ValueError, match=r"^softmax: axis -1 of shape \(2, 0\)"):
        softmax(Tensor(np.ones((2, 0))))


def test_cross_entropy_asks_for_a_tensor():
    with pytest.raises(
        TypeError, match=r"^cross_entropy: logits must be a Tensor"
    ):
        cross_entropy(np.zeros((3, 4)), [0, 1, 2])


def test_tensor_data_assignment_is_checked():
    x = Tensor([1.0, 2.0])
    with pytest.raises(
        ValueError, match=r"^Tensor.data: the new array has shape"
    ):
        x.data = np.ones(3)
    with pytest.raises(TypeError, match=r"^Tensor.data: value must be real"):
        x.data = ["a", "b"]


# ---- Tensor: in-place changes between forward and backward --------------------

INPLACE = r"one of the variables needed for gradient computation has been "
INPLACE += r"modified by an inplace operation: \[Tensor \(2,\) float64\], which "
INPLACE += r"is {who}, is at version 1; expected version 0 instead \(saved for "
INPLACE += r"the backward of {op}\)"


def test_inplace_change_of_an_input_is_caught():
    """Issue 16, case 2: `x.data -= 1` after the forward pass."""
    x = Tensor([1.0, 2.0], requires_grad=True)
    y = (x * x).sum()
    x.data -= 1.0
    with pytest.raises(
        RuntimeError, match=INPLACE.format(who="a leaf", op=r"\*")
    ):
        y.backward()


def test_inplace_change_of_a_saved_output_is_caught():
    x = Tensor([1.0, 2.0], requires_grad=True)
    e = x.exp()  # exp saves its output
    y = e.sum()
    e.data *= 2.0
    with pytest.raises(
        RuntimeError, match=INPLACE.format(who="output of exp", op="exp")
    ):
        y.backward()


def test_inplace_change_of_an_unsaved_array_is_harmless():
    """add saves only shapes, so (as in PyTorch) changing x afterwards is no
    error and the gradient is still right."""
    x = Tensor([1.0, 2.0], requires_grad=True)
    y = (x + 1.0).sum()
    x.data -= 1.0
    y.backward()
    assert x.grad.tolist() == [1.0, 1.0]


def test_out_of_place_replacement_keeps_the_old_graph_right():
    """`x.data = new` gives x a new array; the graph kept the old one."""
    x = Tensor([1.0, 2.0], requires_grad=True)
    y = (x * x).sum()
    x.data = x.data - 1.0
    y.backward()
    assert x.grad.tolist() == [2.0, 4.0]


def test_a_training_step_then_a_new_forward_is_fine():
    w = Tensor([1.0, 2.0], requires_grad=True)
    for _ in range(2):
        loss = (w * w).sum()
        loss.backward()
        w.data -= 0.1 * w.grad
        w.grad = None
    assert w._version == 2


@pytest.mark.parametrize("view", ["reshape", "T"])
def test_a_view_shares_its_base_version_counter(view):
    """A write to the base changes what a view saved: backward must refuse
    (it used to give a silently wrong w.grad), as PyTorch does."""
    make = {
        "reshape": lambda x: x.reshape((1, 2)),
        "T": lambda x: x.T.T,
    }[view]  # (indexing copies: x[:, :] is no view)
    x = Tensor([[1.0, 2.0]], requires_grad=True)
    w = Tensor([[3.0], [4.0]], requires_grad=True)
    y = (make(x) @ w).sum()
    x.data -= 1.0
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()
    # and a write through the view is a write to the base
    x = Tensor([[1.0, 2.0]], requires_grad=True)
    y = (x * x).sum()
    v = make(x)
    v.data -= 1.0
    assert x._version == 1
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()


# ---- Value ---------------------------------------------------------------------


@pytest.mark.parametrize("data", [None, "1", 1 + 2j, True, [1.0]])
def test_value_refuses_junk(data):
    with pytest.raises(TypeError, match=r"^Value construction: expected"):
        Value(data)


def test_value_label_must_be_a_str():
    with pytest.raises(TypeError, match=r"^Value: label must be a str, got int"):
        Value(1.0, label=123)


def test_value_division_names_itself():
    with pytest.raises(OverflowError, match=r"^Value /: 3.0 / 1e-310 overflows"):
        Value(3.0) / Value(1e-310)


def test_value_local_gradients_are_taken_at_forward_time():
    """The scalar engine stores each local derivative when the forward pass
    runs; changing `.data` afterwards changes no gradient of that graph (a
    new forward pass sees the new value)."""
    a = Value(3.0)
    y = a * a  # local gradients (3.0, 3.0) stored now
    a.data = 10.0
    y.backward()
    assert a.grad == 6.0  # d(a^2)/da at a = 3, not at 10
    assert y.data == 9.0  # and the output is not recomputed either


def chain(depth: int) -> tuple[Value, Value]:
    x = Value(0.5, label="x")
    y = x
    for _ in range(depth):
        y = y * 1.0001 + 0.1
    return x, y


@pytest.mark.parametrize(
    "clone",
    [copy.deepcopy, lambda obj: pickle.loads(pickle.dumps(obj))],
    ids=["deepcopy", "pickle"],
)
def test_deep_graphs_copy_and_pickle(clone):
    """A 5,000-deep chain (10,000 nodes) copies without RecursionError; the
    copy has the same values and gradients, and a leaf pickled next to the
    root stays one object."""
    x, y = chain(5000)
    y2, x2 = clone([y, x])
    assert len(topological_order(y2)) == len(topological_order(y))
    assert y2.data == y.data and x2.label == "x"
    y.backward()
    y2.backward()
    assert x2.grad == x.grad and x2 is not x


def test_shallow_copy_shares_the_inputs():
    x, y = chain(3)
    y2 = shallow_copy(y)
    assert y2 is not y and y2._children is y._children and y2.data == y.data


# ---- scalar_nn -----------------------------------------------------------------


@pytest.mark.parametrize(
    "make, error, message",
    [
        (lambda: MLP(2, 3), TypeError, r"^MLP: nouts must be a list"),
        (lambda: MLP(2, [3], nonlin="gelu"), ValueError, r"^MLP: nonlin must"),
        (lambda: MLP(2, [0]), ValueError, r"^MLP: every layer size must be"),
        (lambda: MLP(2.0, [3]), ValueError, r"^MLP: nin must be a positive int"),
        (lambda: Neuron(2, rng=42), TypeError, r"^Neuron: rng must be a random"),
        (
            lambda: Layer(2, 3, rng="x"),
            TypeError,
            r"^Layer: rng must be a random",
        ),
        (lambda: MLP(2, [3], seed=1.5), ValueError, r"^MLP: seed must be"),
        (
            lambda: MLP(2, [3], engine={"add": None}),
            TypeError,
            r"^MLP: engine must be an Engine \(scalar_nn.Engine\(add=",
        ),
        (lambda: Neuron(2, engine=None), TypeError, r"^Neuron: engine must be"),
    ],
)
def test_scalar_nn_constructors(make, error, message):
    with pytest.raises(error, match=message):
        make()


def test_scalar_nn_accepts_numpy_integers_and_rows():
    model = MLP(np.int64(2), [np.int64(3), 1])
    assert isinstance(model([1.0, 2.0]), Value)
    assert isinstance(model(np.array([1.0, 2.0])), Value)
    assert Neuron(2, rng=random.Random(1))([1.0, 2.0]).data != 0.0


@pytest.mark.parametrize("x", [["a", 1.0], [None, 1.0], "ab"])
def test_scalar_nn_inputs(x):
    with pytest.raises(TypeError, match=r"^Neuron: (every input|inputs) must"):
        Neuron(2)(x)


# ---- mlp3 ----------------------------------------------------------------------


def moons_like(n: int = 40):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, 2))
    return X, (X[:, 0] > 0).astype(np.int64)


def test_accuracy_refuses_column_labels():
    """Issue 16, case 3: (B, 1) labels broadcast against (B,) predictions."""
    X, y = moons_like()
    m = ThreeLayerMLP(2, 4, 4, 2)
    with pytest.raises(ValueError, match=r"^accuracy: labels y must be a 1-D"):
        accuracy(m, X, y[:, None])
    with pytest.raises(ValueError, match=r"^accuracy: 39 labels y for 40 rows"):
        accuracy(m, X, y[:-1])
    with pytest.raises(TypeError, match=r"^accuracy: model must be"):
        accuracy("model", X, y)


def test_train_checks_labels_against_the_model():
    X, _ = moons_like()
    m = ThreeLayerMLP(2, 4, 4, 2)
    y4 = np.arange(40) % 4
    with pytest.raises(
        ValueError, match=r"^train: labels y must lie in \[0, 2\)"
    ):
        train(m, X, y4, epochs=1)
    with pytest.raises(ValueError, match=r"^train: X must have shape \(B, 2\)"):
        train(m, X[:, :1], y4 % 2, epochs=1)
    with pytest.raises(TypeError, match=r"^train: lr must be a real number"):
        train(m, X, y4 % 2, epochs=1, lr="1")
    with pytest.raises(ValueError, match=r"^train: lr must be finite"):
        train(m, X, y4 % 2, epochs=1, lr=float("nan"))


# ---- the GPTs, tokens and vocabularies -----------------------------------------

CONFIG = GPTConfig(vocab_size=8, block_size=4, n_layer=1, n_head=1, n_embd=4)


def test_gpt_config_accepts_numpy_integers():
    config = GPTConfig(np.int64(8), np.int64(4), 1, 1, 4)
    assert config == CONFIG and type(config.vocab_size) is int


def test_char_vocab_decode():
    """Issue 16, case 7."""
    vocab = CharVocab("abc")
    assert vocab.decode([0, 2]) == "ac" and vocab.decode(np.array([1])) == "b"
    with pytest.raises(ValueError, match=r"^CharVocab.decode: ids must lie in"):
        vocab.decode([-1])
    with pytest.raises(
        TypeError, match=r"^CharVocab.decode: ids must be integer"
    ):
        vocab.decode([1.7])
    with pytest.raises(ValueError, match=r"^CharVocab.decode: ids must lie in"):
        vocab.decode([3])
    with pytest.raises(TypeError, match=r"^CharVocab: text must be a non-empty"):
        CharVocab(None)


def test_name_vocab_decode():
    vocab = NameVocab(["ab"])
    assert vocab.decode([vocab.bos, 0, 1, vocab.bos]) == "ab"
    with pytest.raises(ValueError, match=r"^NameVocab.decode: ids must lie in"):
        vocab.decode([-1])


def test_sample_checks_temperature():
    """Issue 16, case 7: a NaN temperature gave garbage text."""
    params, vocab = init_params(CONFIG, seed=0), CharVocab("abcdefgh")
    for bad in (float("nan"), float("inf")):
        with pytest.raises(ValueError, match=r"^sample: temperature must be fin"):
            sample(params, CONFIG, vocab, "a", 2, temperature=bad)
    with pytest.raises(TypeError, match=r"^sample: temperature must be a real"):
        sample(params, CONFIG, vocab, "a", 2, temperature="1")


def test_get_batch_checks_its_arguments():
    rng = np.random.default_rng(0)
    x, y = get_batch(list(range(20)), 4, 2, rng)  # a list of ids is fine
    assert x.shape == y.shape == (2, 4)
    with pytest.raises(TypeError, match=r"^get_batch: data must be integer"):
        get_batch(np.linspace(0, 1, 20), 4, 2, rng)
    with pytest.raises(TypeError, match=r"^get_batch: rng must be a numpy"):
        get_batch(np.arange(20), 4, 2, 0)
    with pytest.raises(ValueError, match=r"^get_batch: block_size must be"):
        get_batch(np.arange(20), 0, 2, rng)


# ---- the shared checks ---------------------------------------------------------


def test_shared_checks():
    assert real_number("f", "x", np.float32(1.5)) == 1.5
    with pytest.raises(TypeError, match=r"^f: x must be a real number, got bool"):
        real_number("f", "x", True)
    assert class_labels("f", "y", np.array([0, 1]), 2).tolist() == [0, 1]
    with pytest.raises(ValueError, match=r"^f: y must be a 1-D array of integer"):
        class_labels("f", "y", [0.0, 1.0], 2)
    assert token_ids("f", "ids", [[1, 2]], 3).shape == (1, 2)


# ---- the engines' functions and the configs ------------------------------------


def test_engine_functions_name_themselves():
    from backprop_lessons.scalar import zero_grad as value_zero_grad
    from backprop_lessons.tensor import log_softmax
    from backprop_lessons.tensor import zero_grad as tensor_zero_grad

    with pytest.raises(TypeError, match=r"^topological_order: root must be"):
        topological_order(None)
    with pytest.raises(TypeError, match=r"^zero_grad: every item of values"):
        value_zero_grad([Value(1.0), "w"])
    with pytest.raises(TypeError, match=r"^zero_grad: every item of tensors"):
        tensor_zero_grad([np.ones(2)])
    with pytest.raises(TypeError, match=r"^softmax: x must be a Tensor"):
        softmax(np.ones((2, 3)))
    with pytest.raises(TypeError, match=r"^log_softmax: x must be a Tensor"):
        log_softmax([1.0, 2.0])


@pytest.mark.parametrize("index", ["x", 2.5, np.zeros(2), [0.5]])
def test_tensor_index_of_the_wrong_kind(index):
    with pytest.raises(TypeError, match=r"^index: "):
        Tensor([1.0, 2.0])[index]
    with pytest.raises(IndexError, match=r"^index: index 5 is out of bounds"):
        Tensor([1.0, 2.0])[5]


def test_configs_and_models_are_checked_at_the_entry_points():
    from backprop_lessons import microgpt
    from backprop_lessons.gpt.model import parameter_shapes

    with pytest.raises(TypeError, match=r"^parameter_shapes: config must be a"):
        parameter_shapes(None)
    with pytest.raises(TypeError, match=r"^init_params|^parameter_shapes"):
        init_params({"vocab_size": 8})
    with pytest.raises(TypeError, match=r"^num_parameters: config must be a Mi"):
        microgpt.num_parameters(CONFIG)
    with pytest.raises(TypeError, match=r"^check_gradients: model must be a Mi"):
        microgpt.check_gradients(None, "anna")


def test_backward_seed_is_checked():
    x = Tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(TypeError, match=r"^backward: grad must be real numbers"):
        (x * 2).backward("x")
    (x * 2).backward(Tensor([1.0, 1.0]))
    assert x.grad.tolist() == [2.0, 2.0]


def test_more_entry_points_name_themselves():
    from backprop_lessons.forward_mode import backward_pass
    from backprop_lessons.gpt.model import num_parameters
    from backprop_lessons.mlp3 import sgd_step

    cases = [
        (lambda: backward_pass(None), r"^backward_pass: out must be a Value"),
        (lambda: num_parameters(None), r"^num_parameters: params must be a dict"),
        (lambda: sgd_step(None, {}, 0.1), r"^sgd_step: params must be a dict"),
        (
            lambda: sample({}, CONFIG, None, "a"),
            r"^sample: vocab must be a CharVocab",
        ),
    ]
    for call, message in cases:
        with pytest.raises(TypeError, match=message):
            call()


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda t: t.reshape(2.5), TypeError, r"^reshape: shape must be ints"),
        (lambda t: t.reshape("a"), TypeError, r"^reshape: shape must be ints"),
        (
            lambda t: t.transpose("ab"),
            TypeError,
            r"^transpose: axes must be ints",
        ),
        (lambda t: t.sum(keepdims="no"), TypeError, r"^sum: keepdims must be"),
        (lambda t: t.max(keepdims=1), TypeError, r"^max: keepdims must be"),
    ],
)
def test_tensor_shape_arguments(call, error, message):
    t = Tensor(np.ones((2, 2)))
    with pytest.raises(error, match=message):
        call(t)
    assert t.reshape(4).shape == (4,) and t.reshape((1, 4)).shape == (1, 4)
    assert t.transpose((1, 0)).shape == (2, 2)


def test_functions_and_arrays_are_checked():
    from backprop_lessons.forward_mode import jvp, vjp
    from backprop_lessons.gradcheck import relative_error

    with pytest.raises(TypeError, match=r"^jvp: f must be a function"):
        jvp(None, [1.0], [1.0])
    with pytest.raises(TypeError, match=r"^vjp: f must be a function"):
        vjp(None, [1.0], 1.0)
    with pytest.raises(TypeError, match=r"^relative_error: a must be real"):
        relative_error("a", 1.0)
    model = ThreeLayerMLP(2, 3, 3, 2)
    with pytest.raises(TypeError, match=r"^ThreeLayerMLP.forward: X must be"):
        model.forward([[None, 1.0]])  # NumPy would make it nan
    with pytest.raises(ValueError, match=r"^ThreeLayerMLP: seed must be"):
        ThreeLayerMLP(2, 3, 3, 2, seed="a")


# ---- debug and viz ----------------------------------------------------------


def test_gradient_flow_table_asks_for_named_parameters():
    import torch

    from backprop_lessons.debug import gradient_flow_table

    model = torch.nn.Linear(2, 2)
    with pytest.raises(
        TypeError, match=r"^gradient_flow_table: expected a torch"
    ):
        gradient_flow_table(model.parameters())
    assert len(gradient_flow_table(model.named_parameters()).rows) == 2


def test_find_nan_origin_reraises_an_error_that_is_not_a_nan():
    import torch

    from backprop_lessons.debug import find_nan_origin

    def shape_bug():
        x = torch.ones(2, 3, requires_grad=True)
        (x @ torch.ones(2, 3)).sum().backward()

    with pytest.raises(RuntimeError, match=r"mat1 and mat2 shapes"):
        find_nan_origin(shape_bug)
    with pytest.raises(TypeError, match=r"^find_nan_origin: fn must be callable"):
        find_nan_origin(None)


@pytest.mark.parametrize("root", [3.0, Tensor([1.0]), [Value(1.0)]])
def test_draw_graph_asks_for_a_value(root):
    from backprop_lessons.viz.graph import draw_graph

    with pytest.raises(TypeError, match=r"^draw_graph: root must be a Value"):
        draw_graph(root)
