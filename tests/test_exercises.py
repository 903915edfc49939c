"""Tests of `backprop_lessons.exercises`: every check, on the chapter's
solution ("correct"), on a stub ("not attempted yet") and on a wrong answer
("not yet" with a hint), printing exactly one line each time."""

from __future__ import annotations

import numpy as np
import pytest

from backprop_lessons.exercises import (
    backprop_at_scale,
    debugging_backward,
    forward_vs_reverse,
    higher_order,
    matmul_vjp,
    topological_sort,
    value_nodes,
)
from backprop_lessons.exercises.checking import (
    Verdict,
    attempt,
    require_filled,
    run_check,
)
from backprop_lessons.exercises.matmul_vjp import (
    check_matmul_vjp as matmul_vjp_check,
)
from backprop_lessons.forward_mode import jvp
from backprop_lessons.scalar import float_sigmoid
from test_topological_sort import (
    depth,
    iterative_order,
    preorder_reversed,
    readiness_backward,
)
from verdicts import assert_verdict, run


def stub_raising(*args):
    raise NotImplementedError


def stub_ellipsis(*args): ...


# ---- the shared machinery ------------------------------------------------------


def test_verdict_text_and_flags():
    assert str(Verdict(2, "correct")) == "Exercise 2: correct"
    not_yet = Verdict(1, "not yet", "dX is wrong")
    assert str(not_yet) == "Exercise 1: not yet - dX is wrong"
    assert not not_yet.correct and not_yet.attempted
    assert not Verdict(3, "not attempted yet", "write it").attempted
    assert not_yet._ipython_display_() is None  # shows nothing a second time


def test_stubs_are_recognised_in_functions_and_values():
    from backprop_lessons.exercises.checking import NotAttempted

    for stub in (stub_raising, stub_ellipsis, lambda: ...):
        with pytest.raises(NotAttempted, match="write f"):
            attempt(stub, todo="write f")
    assert attempt(lambda: None, todo="", may_return_none=True) is None
    for value in (None, ..., {"a": ..., "b": 2}, [1, [...]]):
        with pytest.raises(NotAttempted):
            require_filled(value, "fill it")
    assert require_filled({"a": 1, "b": None}, "") == {"a": 1, "b": None}


def test_an_exception_in_the_readers_code_is_a_not_yet(capsys):
    verdict = run(value_nodes.check_softplus, lambda v: v.nope, capsys=capsys)
    assert_verdict(verdict, "not yet", "your code raised AttributeError")


def test_the_readers_failing_line_is_quoted_and_only_theirs(capsys):
    """The verdict quotes the reader's line that raised, with its number:
    frames of the package (the check) and of NumPy are left out."""

    def softplus(v):
        x = np.array([v.data])
        return x[3]  # out of bounds, raised inside NumPy's indexing

    line = softplus.__code__.co_firstlineno + 2
    verdict = run(value_nodes.check_softplus, softplus, capsys=capsys)
    assert_verdict(verdict, "not yet", "your code raised IndexError")
    assert verdict.where == (
        f"in softplus, line {line}: return x[3] # out of bounds, "
        "raised inside NumPy's indexing",
    )
    assert str(verdict).splitlines()[-1].startswith("    in softplus, line ")


def test_a_long_failing_line_is_cut():
    from backprop_lessons.exercises.checking import where_it_raised

    def f():
        return {}["a long key, which makes this line longer than a quote may be."]

    try:
        f()
    except KeyError as error:
        caller, where = where_it_raised(error)
    assert caller.startswith("in test_a_long_failing_line_is_cut, line ")
    assert where.endswith("...") and len(where.split(": ", 1)[1]) == 72


def test_a_passing_check_may_report_after_its_verdict(capsys):
    verdict = run_check(4, lambda answer: f"table for {answer}", "x")
    assert verdict.correct
    assert capsys.readouterr().out == "Exercise 4: correct\ntable for x\n"


def test_yours_or_the_solution_says_which_it_uses(capsys):
    from backprop_lessons.exercises import yours_or_the_solution

    def matmul_vjp(G, X, W):
        raise NotImplementedError

    def matmul_vjp_solution(G, X, W):
        return G @ W.T, X.T @ G

    chosen = yours_or_the_solution(
        matmul_vjp, matmul_vjp_solution, matmul_vjp_check, exercise=1
    )
    assert chosen is matmul_vjp_solution
    assert capsys.readouterr().out == (
        "Using matmul_vjp_solution, the book's version, until your matmul_vjp "
        "passes\n    exercise 1 (now: not attempted yet).\n"
    )
    chosen = yours_or_the_solution(
        matmul_vjp_solution, matmul_vjp, matmul_vjp_check, exercise=1
    )
    assert chosen is matmul_vjp_solution
    assert capsys.readouterr().out == (
        "Using your matmul_vjp_solution: it passes exercise 1.\n"
    )


def test_a_bug_in_a_check_itself_is_not_blamed_on_the_reader():
    def check(answer):
        return {}["missing"]  # the check's own code fails

    with pytest.raises(KeyError):
        run_check(1, check, 0)


# ---- topological sort ----------------------------------------------------------


def backward_without_waiting(root):
    root.grad = 1.0
    for node in reversed(preorder_reversed(root)):
        for child, local in zip(node._children, node._local_grads):
            child.grad += local * node.grad


@pytest.mark.parametrize(
    "check,right,wrong,hint",
    [
        (
            topological_sort.check_depth,
            depth,
            lambda root: 1,
            "relu example f = relu(a*b + d) is 1: it is not the number",
        ),
        (
            topological_sort.check_order_function,
            iterative_order,
            preorder_reversed,
            "(x used three times), the * node comes before x, one of its inputs",
        ),
        (
            topological_sort.check_readiness_backward,
            readiness_backward,
            backward_without_waiting,
            "on the diamond w = (y + x) * y, y = x*2, the gradient of x",
        ),
    ],
)
def test_topological_sort_checks(check, right, wrong, hint, capsys):
    assert run(check, right, capsys=capsys).correct
    assert_verdict(run(check, wrong, capsys=capsys), "not yet", hint)
    for stub in (stub_raising, stub_ellipsis):
        assert_verdict(run(check, stub, capsys=capsys), "not attempted yet")


# ---- forward vs reverse --------------------------------------------------------


def sigmoid_jvp_fixed(primals, tangents):
    (x,), (x_dot,) = primals, tangents
    s = float_sigmoid(x)
    return s, s * (1.0 - s) * x_dot


def sigmoid_jvp_buggy(primals, tangents):
    (x,), _ = primals, tangents
    s = float_sigmoid(x)
    return s, s * (1.0 - s)


def directional_derivative(f, xs, v):
    return jvp(f, xs, v)[1]


def passes_per_step(P, method):
    return {"one-sided": P + 1, "centered": 2 * P, "forward": P, "reverse": 2}[
        method
    ]


@pytest.mark.parametrize(
    "check,right,wrong,hint",
    [
        (
            forward_vs_reverse.check_jvp_rule,
            sigmoid_jvp_fixed,
            sigmoid_jvp_buggy,
            "differs from reverse mode",
        ),
        (
            forward_vs_reverse.check_directional_derivative,
            directional_derivative,
            lambda f, xs, v: sum(
                directional_derivative(f, xs, v) for _ in range(2)
            ),
            "2 passes of f, expected 1",
        ),
        (
            forward_vs_reverse.check_passes_per_step,
            passes_per_step,
            lambda P, method: 2 * P if method != "reverse" else 2,
            "one-sided with P = 3 your formula gives 6: that is centered",
        ),
    ],
)
def test_forward_vs_reverse_checks(check, right, wrong, hint, capsys):
    assert run(check, right, capsys=capsys).correct
    assert_verdict(run(check, wrong, capsys=capsys), "not yet", hint)
    assert_verdict(run(check, stub_raising, capsys=capsys), "not attempted yet")


def test_the_jvp_check_restores_the_package_rule(capsys):
    from backprop_lessons import forward_mode as fm

    rule = fm.jvp_rules["sigmoid"]
    run(forward_vs_reverse.check_jvp_rule, sigmoid_jvp_buggy, capsys=capsys)
    assert fm.jvp_rules["sigmoid"] is rule


# ---- matmul VJP ----------------------------------------------------------------


def matmul_vjp_right(G, X, W):
    return G @ W.T, X.T @ G


@pytest.mark.parametrize(
    "wrong,hint",
    [
        # a missing transpose: NumPy refuses the product on the non-square W
        (lambda G, X, W: (G @ W, X.T @ G), "your code raised ValueError"),
        (
            lambda G, X, W: (
                G @ W.T @ np.ones((X.shape[1],) * 2)[:, :1],
                X.T @ G,
            ),
            "dX should have the shape of X",
        ),
        (lambda G, X, W: (G @ W.T, G.T @ X), "dW should have the shape of W"),
        # right shapes on the square case only: the values must tell
        (
            lambda G, X, W: (
                (G @ W if W.shape[0] == W.shape[1] else G @ W.T),
                X.T @ G,
            ),
            "(3, 3), dX has the right shape but wrong values",
        ),
        (
            lambda G, X, W: (
                G @ W.T,
                (X.T @ G).T if X.shape == G.shape else X.T @ G,
            ),
            "(3, 3), dW has the right shape but wrong values",
        ),
        (lambda G, X, W: G @ W.T, "return the tuple (dX, dW)"),
        (lambda G, X, W: 1 / 0, "ZeroDivisionError"),
    ],
)
def test_matmul_vjp_check(wrong, hint, capsys):
    assert run(
        matmul_vjp.check_matmul_vjp, matmul_vjp_right, capsys=capsys
    ).correct
    assert_verdict(
        run(matmul_vjp.check_matmul_vjp, wrong, capsys=capsys), "not yet", hint
    )
    stub = run(matmul_vjp.check_matmul_vjp, stub_ellipsis, capsys=capsys)
    assert_verdict(stub, "not attempted yet")
    assert stub.exercise == 1


def shared_weight_vjp(G, X, W):
    n, k = W.shape
    return G @ W.T, X.reshape(-1, n).T @ G.reshape(-1, k)


def linear_backward(G, X, W):
    return G @ W.T, X.T @ G, G.sum(axis=0)


def linear_backward_buggy(G, X, W):
    return G @ W, X.T @ G, G.mean(axis=0)


def logsumexp_vjp(g, z):
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return g[:, None] * e / e.sum(axis=-1, keepdims=True)


def my_unbroadcast(grad, shape):
    while grad.ndim > len(shape):
        grad = grad.sum(axis=0)
    for axis, size in enumerate(shape):
        if size == 1 and grad.shape[axis] != 1:
            grad = grad.sum(axis=axis, keepdims=True)
    return grad


@pytest.mark.parametrize(
    "check,right,wrong,hint",
    [
        (
            matmul_vjp.check_shared_weight_vjp,
            shared_weight_vjp,
            lambda G, X, W: (G @ W.T, X[0].T @ G[0]),
            "dW has the right shape but wrong values",
        ),
        (
            matmul_vjp.check_linear_backward,
            linear_backward,
            linear_backward_buggy,
            "dX and db disagree with finite differences",
        ),
        (
            matmul_vjp.check_logsumexp_vjp,
            logsumexp_vjp,
            lambda g, z: (
                g[:, None] * np.exp(z) / np.exp(z).sum(axis=-1, keepdims=True)
            ),
            "not finite",
        ),
        (
            matmul_vjp.check_unbroadcast,
            my_unbroadcast,
            lambda grad, shape: grad.sum(
                axis=tuple(range(grad.ndim - len(shape)))
            ),
            "(2, 3, 4) -> (3, 1) gives shape (3, 4)",
        ),
    ],
)
def test_matmul_vjp_checks(check, right, wrong, hint, capsys):
    assert run(check, right, capsys=capsys).correct
    assert_verdict(run(check, wrong, capsys=capsys), "not yet", hint)
    assert_verdict(run(check, stub_ellipsis, capsys=capsys), "not attempted yet")


# ---- debugging a backward ------------------------------------------------------


def autograd_functions():
    import torch

    class SoftmaxFixed(torch.autograd.Function):
        @staticmethod
        def forward(ctx, z):
            p = torch.softmax(z, dim=-1)
            ctx.save_for_backward(p)
            return p

        @staticmethod
        def backward(ctx, grad_p):
            (p,) = ctx.saved_tensors
            return p * (grad_p - (grad_p * p).sum(dim=-1, keepdim=True))

    class SoftmaxBuggy(SoftmaxFixed):
        @staticmethod
        def backward(ctx, grad_p):
            (p,) = ctx.saved_tensors
            return p * grad_p

    class SoftmaxStub(SoftmaxFixed):
        @staticmethod
        def backward(ctx, grad_p):
            raise NotImplementedError

    class LinearFixed(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, w, b):
            ctx.save_for_backward(x, w)
            return x @ w.T + b

        @staticmethod
        def backward(ctx, dy):
            x, w = ctx.saved_tensors
            return dy @ w, dy.T @ x, dy.sum(dim=0)

    class LinearBuggy(LinearFixed):
        @staticmethod
        def backward(ctx, dy):
            x, w = ctx.saved_tensors
            return dy @ w, (x.T @ dy)[: w.shape[0], : w.shape[1]], dy.sum(dim=0)

    class LinearStub(LinearFixed):
        @staticmethod
        def backward(ctx, dy): ...

    return (
        SoftmaxFixed,
        SoftmaxBuggy,
        SoftmaxStub,
        LinearFixed,
        LinearBuggy,
        LinearStub,
    )


def accumulate(model, x, y, micro_batches, zero_first=True):
    import torch.nn.functional as F

    if zero_first:
        model.zero_grad()
    for xb, yb in zip(x.chunk(micro_batches), y.chunk(micro_batches)):
        (F.mse_loss(model(xb), yb) / micro_batches).backward()


def test_debugging_backward_checks(capsys):
    s_fix, s_bug, s_stub, l_fix, l_bug, l_stub = autograd_functions()
    check = debugging_backward.check_softmax_function
    assert run(check, s_fix, capsys=capsys).correct
    assert_verdict(run(check, s_bug, capsys=capsys), "not yet", "not diagonal")
    assert_verdict(run(check, s_stub, capsys=capsys), "not attempted yet")
    check = debugging_backward.check_linear_function
    assert run(check, l_fix, capsys=capsys).correct
    assert_verdict(run(check, l_bug, capsys=capsys), "not yet", "(3, 3) weight")
    assert_verdict(run(check, l_stub, capsys=capsys), "not attempted yet")
    check = debugging_backward.check_accumulate
    assert run(check, accumulate, capsys=capsys).correct
    wrong = run(check, lambda *a: accumulate(*a, zero_first=False), capsys=capsys)
    assert_verdict(wrong, "not yet", "zero them first")
    assert_verdict(run(check, stub_ellipsis, capsys=capsys), "not attempted yet")
    # the mutation test's: zero_grad() without a backward left every .grad
    # None, and the check raised a TypeError instead of naming it
    no_backward = run(check, lambda model, *a: model.zero_grad(), capsys=capsys)
    assert_verdict(no_backward, "not yet", "a .grad is None")


# ---- backprop at scale ---------------------------------------------------------


def predicted_flops(sizes, batch, first_input_grad=False):
    layer = [2 * batch * a * b for a, b in zip(sizes[:-1], sizes[1:])]
    forward = sum(layer)
    return forward, 2 * forward - (0 if first_input_grad else layer[0])


def combine(grads, sizes):
    return sum(n * g for n, g in zip(sizes, grads)) / sum(sizes)


def rank_times_accumulation(model, x, y, ranks, micro, divide_micro=True):
    import torch

    from backprop_lessons.scale import distributed

    total = {name: torch.zeros_like(p) for name, p in model.named_parameters()}
    for r in range(ranks):
        model.zero_grad()
        xr, yr = distributed.shard(x, r, ranks), distributed.shard(y, r, ranks)
        for k in range(micro):
            xb, yb = (
                distributed.shard(xr, k, micro),
                distributed.shard(yr, k, micro),
            )
            loss = distributed.mse_loss(model, xb, yb)
            (loss / micro if divide_micro else loss).backward()
        for name, p in model.named_parameters():
            total[name] += p.grad
    return {name: (g / ranks).numpy() for name, g in total.items()}


def test_backprop_at_scale_checks(capsys):
    check = backprop_at_scale.check_predicted_flops
    assert run(check, predicted_flops, capsys=capsys).correct
    wrong = run(check, lambda s, b: predicted_flops(s, b, True), capsys=capsys)
    assert_verdict(wrong, "not yet", "first layer's input gradient too")
    assert_verdict(run(check, stub_raising, capsys=capsys), "not attempted yet")
    check = backprop_at_scale.check_combine
    assert run(check, combine, capsys=capsys).correct
    wrong = run(check, lambda g, s: sum(g) / len(g), capsys=capsys)
    assert_verdict(wrong, "not yet", "weight each shard")
    # the mutation test's: a number (here 1.0, the sizes' weights alone) or a
    # list made the check's own comparison raise instead of giving a verdict
    for odd in (lambda g, s: sum(s) / sum(s), lambda g, s: list(g)):
        assert_verdict(run(check, odd, capsys=capsys), "not yet", "one tensor")
    assert_verdict(run(check, stub_ellipsis, capsys=capsys), "not attempted yet")
    check = backprop_at_scale.check_rank_accumulation
    assert run(check, rank_times_accumulation, capsys=capsys).correct
    wrong = run(
        check,
        lambda *a: rank_times_accumulation(*a, divide_micro=False),
        capsys=capsys,
    )
    assert_verdict(wrong, "not yet", "differs from the full batch's gradient")
    assert_verdict(run(check, stub_ellipsis, capsys=capsys), "not attempted yet")


# ---- derivatives of derivatives (chapter 11) -----------------------------------


def tensor_hvp(loss_fn, arrays, vs):
    from backprop_lessons.tensor import Tensor, grad

    params = [Tensor(a, requires_grad=True) for a in arrays]
    gs = grad(loss_fn(params), params, create_graph=True)
    dot = sum((g * Tensor(v)).sum() for g, v in zip(gs, vs))
    return [h.data for h in grad(dot, params)]


def gradient_only(loss_fn, arrays, vs):
    from backprop_lessons.tensor import Tensor, grad

    params = [Tensor(a, requires_grad=True) for a in arrays]
    return [g.data for g in grad(loss_fn(params), params)]


def test_higher_order_hvp_check(capsys):
    check = higher_order.check_hvp
    assert run(check, tensor_hvp, capsys=capsys).correct
    assert_verdict(
        run(check, gradient_only, capsys=capsys), "not yet", "the gradient itself"
    )
    assert_verdict(
        run(
            check,
            lambda f, a, v: [2 * x for x in tensor_hvp(f, a, v)],
            capsys=capsys,
        ),
        "not yet",
        "differs from reverse over reverse",
    )
    assert_verdict(run(check, stub_raising, capsys=capsys), "not attempted yet")


def test_higher_order_clipping_check(capsys):
    import torch
    from torch.func import grad, vmap

    def per_example(loss_one, params, X, y):
        return vmap(grad(loss_one), in_dims=(None, 0, 0))(params, X, y)

    def clipped(loss_one, params, X, y, C):
        g = per_example(loss_one, params, X, y)
        sq = sum((v.reshape(len(X), -1) ** 2).sum(1) for v in g.values())
        scale = torch.clamp(C / sq.sqrt(), max=1.0)
        return {
            k: (v * scale.reshape(-1, *[1] * (v.ndim - 1))).mean(0)
            for k, v in g.items()
        }

    def per_parameter_norm(loss_one, params, X, y, C):
        g = per_example(loss_one, params, X, y)
        out = {}
        for k, v in g.items():
            n = v.reshape(len(X), -1).norm(dim=1)
            s = torch.clamp(C / n, max=1.0).reshape(-1, *[1] * (v.ndim - 1))
            out[k] = (v * s).mean(0)
        return out

    check = higher_order.check_clipped_mean_gradient
    assert run(check, clipped, capsys=capsys).correct
    assert_verdict(
        run(
            check,
            lambda f, p, X, y, C: {
                k: v.mean(0) for k, v in per_example(f, p, X, y).items()
            },
            capsys=capsys,
        ),
        "not yet",
        "plain mean gradient",
    )
    assert_verdict(
        run(check, per_parameter_norm, capsys=capsys),
        "not yet",
        "over all parameters",
    )
    assert_verdict(run(check, stub_raising, capsys=capsys), "not attempted yet")


# ---- one protocol for every check ----------------------------------------------


def _every_check():
    import importlib
    import inspect
    import pkgutil

    import backprop_lessons.exercises as exercises

    for info in pkgutil.iter_modules(exercises.__path__):
        module = importlib.import_module(f"{exercises.__name__}.{info.name}")
        for name, fn in vars(module).items():
            if name.startswith("check_") and inspect.getmodule(fn) is module:
                yield f"{info.name}.{name}", fn


CHECKS = dict(_every_check())


def test_there_is_one_protocol_for_every_check():
    assert len(CHECKS) >= 39


@pytest.mark.parametrize("name", sorted(CHECKS))
def test_every_check_takes_its_number_and_returns_a_verdict(name, capsys):
    """The notebook owns the exercise number (a required keyword), and any
    answer, a stub here, gets a `Verdict` back, printed as such."""
    import inspect

    check = CHECKS[name]
    params = inspect.signature(check).parameters
    assert params["exercise"].kind is inspect.Parameter.KEYWORD_ONLY
    assert params["exercise"].default is inspect.Parameter.empty
    answers = [p for p in params.values() if p.default is inspect.Parameter.empty]
    if len(answers) != 2:  # the answer and exercise; the others take data too
        pytest.skip(f"{name} takes {len(answers) - 1} arguments besides exercise")
    verdict = check(stub_raising, exercise=9)
    assert isinstance(verdict, Verdict)
    assert verdict.exercise == 9
    assert verdict.status in ("not attempted yet", "not yet")
    assert capsys.readouterr().out == f"{verdict}\n"


def test_a_printed_verdict_breaks_between_words():
    """JupyterLab breaks a long output line in the middle of a word: the
    verdict breaks its lines between words, continuations indented."""
    from backprop_lessons.exercises.checking import WIDTH, Verdict

    long_hint = "add into the buffers in place " * 8
    text = str(Verdict(3, "not yet", long_hint.strip(), ("in f, line 2: x",)))
    lines = text.splitlines()
    assert len(lines) > 2 and all(len(line) <= WIDTH for line in lines)
    assert all(line.startswith("    ") for line in lines[1:])
    assert " ".join(w for line in lines[:-1] for w in line.split()) == (
        "Exercise 3: not yet - " + long_hint.strip()
    )
    assert lines[-1] == "    in f, line 2: x"
