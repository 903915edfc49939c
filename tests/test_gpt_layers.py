"""The checks of the exercises in which the reader writes each GPT layer's
backward and then the whole model's (backprop_lessons.exercises.gpt_layers).

For every check: the book's own backward is correct, a stub is not
attempted, an exception of the reader's code is a "not yet" that names it,
and the classic bugs, written here as a reader would write them, are
rejected with a hint that names the wrong gradient and, where the check can
tell, the bug.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from backprop_lessons.exercises import (
    check_attention_backward,
    check_crossentropy_softmax_backward,
    check_encoder_backward,
    check_gelu_backward,
    check_gpt_backward,
    check_layernorm_backward,
    check_matmul_backward,
    check_rmsnorm_backward,
)
from backprop_lessons.exercises.checking import Verdict
from backprop_lessons.gpt import layers
from backprop_lessons.gpt.model import gpt_backward

torch = pytest.importorskip("torch")


def run(check, answer, capsys):
    """The verdict of check(answer), which printed exactly its verdict (and,
    when the capstone passes, its table after it)."""
    verdict = check(answer, exercise=1)
    printed = capsys.readouterr().out
    if verdict.correct and check is check_gpt_backward:
        assert printed.startswith(f"{verdict}\nthe gradients vs PyTorch")
    else:
        assert printed == f"{verdict}\n"
    assert isinstance(verdict, Verdict)
    return verdict


def assert_not_yet(verdict, *parts):
    assert verdict.status == "not yet", str(verdict)
    for part in parts:
        assert part in verdict.hint, str(verdict)


def stub_ellipsis(*args): ...


def stub_raising(*args):
    raise NotImplementedError


def stub_pass(*args):
    pass


CHECKS = {
    check_layernorm_backward: layers.layernorm_backward,
    check_gelu_backward: layers.gelu_backward,
    check_crossentropy_softmax_backward: layers.crossentropy_softmax_backward,
    check_attention_backward: layers.attention_backward,
    check_encoder_backward: layers.encoder_backward,
    check_matmul_backward: layers.matmul_backward,
    check_rmsnorm_backward: layers.rmsnorm_backward,
    check_gpt_backward: gpt_backward,
}
LAYER_CHECKS = [c for c in CHECKS if c is not check_gpt_backward]


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
def test_the_books_backward_is_correct(check, capsys):
    verdict = run(check, CHECKS[check], capsys)
    assert verdict.correct, str(verdict)


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("stub", [stub_ellipsis, stub_raising, stub_pass])
def test_a_stub_is_not_attempted(check, stub, capsys):
    verdict = run(check, stub, capsys)
    assert verdict.status == "not attempted yet", str(verdict)
    assert str(verdict).startswith(f"Exercise {verdict.exercise}: not attempted")


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
def test_an_exception_of_the_readers_code_is_named(check, capsys):
    def broken(*args):
        return {}["nope"]

    assert_not_yet(run(check, broken, capsys), "your code raised KeyError")


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
def test_an_exception_comes_back_with_its_line(check, capsys):
    """The reader's line that raised is quoted under the verdict, with its
    number, so the reader need not hunt for it."""

    def broken(*args):
        table = {}
        return table["nope"]

    line = broken.__code__.co_firstlineno + 2
    verdict = run(check, broken, capsys)
    assert_not_yet(verdict, "your code raised KeyError")
    assert verdict.where == (f'in broken, line {line}: return table["nope"]',)
    assert str(verdict).endswith(
        f'\n    in broken, line {line}: return table["nope"]'
    )


def test_the_capstone_names_the_layer_call_that_failed(capsys):
    """In the capstone the reader's layers run inside the reader's model
    backward: the hint names the call in gpt_backward, then the line in the
    layer."""

    def my_attention_backward(dinp, dout, cache):
        inp, att, n_head = cache
        dinp += att @ inp  # shapes that do not fit

    def my_gpt_backward(params, config, cache):
        grads = {n: np.zeros_like(p) for n, p in params.items()}
        c = cache["blocks"][-1]
        datt = np.zeros_like(c["att"][0])
        my_attention_backward(np.zeros_like(c["att"][0]), datt, c["att"])
        return grads

    first = my_gpt_backward.__code__.co_firstlineno
    inner = my_attention_backward.__code__.co_firstlineno
    verdict = run(check_gpt_backward, my_gpt_backward, capsys)
    assert_not_yet(verdict, "your code raised ValueError")
    assert verdict.where == (
        f"in my_gpt_backward, line {first + 4}: "
        'my_attention_backward(np.zeros_like(c["att"][0]), datt, c["att"])',
        f"in my_attention_backward, line {inner + 2}: "
        "dinp += att @ inp # shapes that do not fit",
    )


def _shapes_seen(check, backward) -> list[tuple]:
    """(B, T) and the shapes of dout and the cache's arrays, for every call
    the check makes of the reader's function fn(*buffers, dout, cache)."""
    seen = []

    def spy(*args):
        dout, cache = args[-2], args[-1]
        cache = cache if isinstance(cache, tuple) else (cache,)
        arrays = [a for a in (dout, *cache) if isinstance(a, np.ndarray)]
        # dout is (B, T, ...), but the cross-entropy's is a float: there the
        # probabilities, the cache's first array, are (B, T, V)
        bt = arrays[0].shape[:2]
        seen.append((bt, tuple(a.shape for a in arrays)))
        backward(*args)

    verdict = check(spy, exercise=1)
    assert verdict.correct, str(verdict)
    return seen


@pytest.mark.parametrize("check", LAYER_CHECKS, ids=lambda c: c.__name__)
def test_each_layer_check_runs_three_shape_sets_one_with_a_single_b_or_t(
    check, capsys
):
    """An answer fitted to one shape cannot pass: at least three shape sets,
    one of them with B = 1 or T = 1, and for the matmul a weight that is not
    square."""
    seen = _shapes_seen(check, CHECKS[check])
    capsys.readouterr()
    assert len(set(seen)) >= 3, seen
    assert any(1 in bt for bt, _ in seen), seen
    if check is check_matmul_backward:
        weights = [s for _, shapes in seen for s in shapes if len(s) == 2]
        assert any(a != b for a, b in weights), weights


def test_the_notebook_owns_the_exercise_number(capsys):
    """A check takes the number its chapter gives the exercise, and has none
    of its own (two copies of it disagreed once)."""
    verdict = check_layernorm_backward(layers.layernorm_backward, exercise=4)
    assert str(verdict) == "Exercise 4: correct"
    capsys.readouterr()
    with pytest.raises(TypeError, match="exercise"):
        check_layernorm_backward(layers.layernorm_backward)


def test_a_backward_that_returns_its_gradient_is_told_to_add(capsys):
    def returns(dinp, dout, cache):
        x, tanh_u = cache
        return dout * 0.5 * (1 + tanh_u)

    assert_not_yet(
        run(check_gelu_backward, returns, capsys), "adds into the buffers"
    )


def test_changing_dout_in_place_is_caught(capsys):
    def in_place(dinp, dweight, dbias, dout, cache):
        layers.layernorm_backward(dinp, dweight, dbias, dout, cache)
        dout *= 2

    assert_not_yet(
        run(check_layernorm_backward, in_place, capsys),
        "changed dout or the cache in place",
    )


# ---- layernorm ---------------------------------------------------------------


def layernorm(
    dinp,
    dweight,
    dbias,
    dout,
    cache,
    bug=None,
):
    """The layernorm backward as a reader writes it, with one bug or none."""
    inp, weight, mean, rstd = cache
    xhat = (inp - mean) * rstd
    g = dout if bug == "dout for g" else dout * weight
    mean_g = g.mean(axis=-1, keepdims=True)
    mean_gx = (g * xhat).mean(axis=-1, keepdims=True)
    if bug == "no mean term":
        mean_g = 0
    if bug == "no variance term":
        mean_gx = 0
    if bug == "neither":
        mean_g = mean_gx = 0
    grad = (g - mean_g - xhat * mean_gx) * (1 if bug == "no rstd" else rstd)
    dbias_part = dout.sum(axis=(0, 1))
    dweight_part = (dout * (inp if bug == "x for xhat" else xhat)).sum(
        axis=(0, 1)
    )
    if bug == "dweight and dbias swapped":
        dweight_part, dbias_part = dbias_part, dweight_part
    if bug == "= for dinp":
        dinp[...] = grad
    else:
        dinp += grad
    if bug == "= for dweight":
        dweight[:] = dweight_part
    else:
        dweight += dweight_part
    if bug == "no dbias":
        return
    if bug == "= for dbias":
        dbias[:] = dbias_part
    else:
        dbias += dbias_part


@pytest.mark.parametrize(
    "bug,hint",
    [
        (None, None),
        (
            "no mean term",
            "dinp is wrong at B = 2, T = 3, C = 5 (largest difference",
        ),
        ("no mean term", "lacks the - mean(g) term (the path through the mean)"),
        ("no variance term", "lacks the - xhat * mean(g * xhat) term"),
        ("neither", "lacks both"),
        ("no rstd", "lacks the factor rstd"),
        ("dout for g", "uses dout where g = dout * weight belongs"),
        ("x for xhat", "dweight is wrong"),
        ("x for xhat", "multiplies dout by the input x"),
        ("dweight and dbias swapped", "dweight is wrong"),
        ("dweight and dbias swapped", "dbias wrong too"),
        ("= for dinp", "dinp is wrong"),
        ("= for dinp", "assigns (=) where it must add (+=)"),
        ("= for dweight", "dweight is wrong"),
        ("= for dweight", "assigns (=)"),
        ("= for dbias", "dbias is wrong"),
        ("= for dbias", "assigns (=)"),
        ("no dbias", "dbias is wrong"),
        ("no dbias", "added nothing into the dbias buffer"),
    ],
)
def test_layernorm_bugs(bug, hint, capsys):
    def answer(*args):
        return layernorm(*args, bug=bug)

    verdict = run(check_layernorm_backward, answer, capsys)
    if bug is None:
        assert verdict.correct, str(verdict)
    else:
        assert_not_yet(verdict, hint)


def test_layernorm_rebinding_the_buffer_is_explained(capsys):
    def rebinds(dinp, dweight, dbias, dout, cache):
        layers.layernorm_backward(dinp, dweight, None, dout, cache)
        dbias = dbias + dout.sum(axis=(0, 1))  # a new array

    assert_not_yet(
        run(check_layernorm_backward, rebinds, capsys),
        "dbias is wrong",
        "`dbias = ...` only rebinds the name",
    )


# ---- rmsnorm (chapter 6's exercise after the summary) --------------------------


def rmsnorm(dinp, dweight, dout, cache, bug=None):
    """The RMSNorm backward as a reader writes it, with one bug or none."""
    inp, weight, rstd = cache
    xhat = inp * rstd
    g = dout if bug == "dout for g" else dout * weight
    term = xhat * (g * xhat).mean(axis=-1, keepdims=True)
    if bug == "layernorm's mean term":
        term = term + g.mean(axis=-1, keepdims=True)
    if bug == "no mean(g xhat) term":
        term = 0
    if bug == "mean over T":
        term = xhat * (g * xhat).mean(axis=1, keepdims=True)
    grad = (g - term) * (1 if bug == "no rstd" else rstd)
    dweight_part = (dout * (inp if bug == "x for xhat" else xhat)).sum(
        axis=(0, 1)
    )
    if bug == "= for dinp":
        dinp[...] = grad
    else:
        dinp += grad
    dweight += dout.sum(axis=(0, 1)) if bug == "bias's sum" else dweight_part


@pytest.mark.parametrize(
    "bug,hint",
    [
        (None, None),
        ("layernorm's mean term", "it subtracts mean(g), layernorm's path"),
        ("no mean(g xhat) term", "lacks the - xhat * mean(g * xhat) term"),
        ("no rstd", "lacks the factor rstd"),
        ("dout for g", "uses dout where g = dout * weight belongs"),
        ("mean over T", "dinp is wrong"),
        ("mean over T", "the mean over the C channels"),
        ("= for dinp", "assigns (=) where it must add (+=)"),
        ("x for xhat", "multiplies dout by the input x"),
        ("bias's sum", "a bias's gradient (RMSNorm has none)"),
    ],
)
def test_rmsnorm_bugs(bug, hint, capsys):
    def answer(*args):
        return rmsnorm(*args, bug=bug)

    verdict = run(check_rmsnorm_backward, answer, capsys)
    if bug is None:
        assert verdict.correct, str(verdict)
    else:
        assert_not_yet(verdict, hint)


# ---- GELU --------------------------------------------------------------------


def gelu(dinp, dout, cache, bug=None):
    x, _ = cache
    s, c = math.sqrt(2 / math.pi), 0.044715
    th = np.tanh(s * (x + c * x**3))
    du = s * (1 + (1 if bug == "x^3 derivative" else 3) * c * x**2)
    local = 0.5 * (1 + th) + 0.5 * x * (1 - th**2) * du
    if bug == "erf":
        phi = np.exp(-0.5 * x**2) / math.sqrt(2 * math.pi)
        local = 0.5 * (1 + np.vectorize(math.erf)(x / math.sqrt(2))) + x * phi
    if bug == "first term only":
        local = 0.5 * (1 + th)
    if bug == "no du/dx":
        local = 0.5 * (1 + th) + 0.5 * x * (1 - th**2)
    if bug == "tanh' not squared":
        local = 0.5 * (1 + th) + 0.5 * x * (1 - th) * du
    if bug == "no dout":
        dinp += local
    elif bug == "=":
        dinp[:] = local * dout
    else:
        dinp += local * dout


@pytest.mark.parametrize(
    "bug,hint",
    [
        (None, None),
        ("erf", "derivative of the exact (erf) GELU"),
        ("first term only", "lacks the second term of the product rule"),
        ("no du/dx", "lacks the chain rule's du/dx"),
        ("x^3 derivative", "the derivative of x^3 is 3 x^2"),
        ("tanh' not squared", "1 - tanh(u)^2 (squared)"),
        ("no dout", "multiply it by dout"),
        ("=", "assigns (=) where it must add (+=)"),
    ],
)
def test_gelu_bugs(bug, hint, capsys):
    verdict = run(check_gelu_backward, lambda *a: gelu(*a, bug=bug), capsys)
    if bug is None:
        assert verdict.correct, str(verdict)
    else:
        assert_not_yet(verdict, "dinp is wrong", hint)


def test_the_gelu_tolerance_lies_between_the_two_gelus():
    """The erf GELU's derivative differs from the tanh GELU's by far more
    than the tolerance; float64 rounding by far less."""
    from backprop_lessons.exercises.gpt_layers import TOL

    x = np.linspace(-4, 4, 801)
    _, cache = layers.gelu_forward(x)
    tanh_slope = np.zeros_like(x)
    layers.gelu_backward(tanh_slope, np.ones_like(x), cache)
    xt = torch.tensor(x, requires_grad=True)
    torch.nn.functional.gelu(xt).sum().backward()  # the erf GELU
    gap = np.abs(tanh_slope - xt.grad.numpy()).max()
    assert 1e-4 < gap < 1e-3
    assert gap > 1e5 * TOL


# ---- softmax + cross-entropy -------------------------------------------------


def crossentropy(dlogits, dloss, cache, bug=None):
    probs, targets = cache
    B, T, V = probs.shape
    onehot = np.eye(V)[targets]
    scale = {"no /(B*T)": 1, "/B": B, "/T": T}.get(bug, B * T)
    if bug == "no one-hot":
        onehot = 0
    d = dloss if bug != "no dloss" else 1.0
    grad = (probs - onehot) * d / scale
    if bug == "=":
        dlogits[...] = grad
    else:
        dlogits += grad


@pytest.mark.parametrize(
    "bug,hint",
    [
        (None, None),
        ("no /(B*T)", "not divided by B*T"),
        ("/B", "divided by B only"),
        ("/T", "divided by T only"),
        ("no one-hot", "lacks the - onehot(targets) part"),
        ("no dloss", "ignores dloss"),
        ("=", "assigns (=) where it must add (+=)"),
    ],
)
def test_crossentropy_bugs(bug, hint, capsys):
    verdict = run(
        check_crossentropy_softmax_backward,
        lambda *a: crossentropy(*a, bug=bug),
        capsys,
    )
    if bug is None:
        assert verdict.correct, str(verdict)
    else:
        assert_not_yet(verdict, "dlogits is wrong", hint)


# ---- attention ---------------------------------------------------------------


def attention(dinp, dout, cache, bug=None):
    """Attention's backward as a reader writes it: recomputing the scores
    from q and k (the cache's att is used only when asked)."""
    inp, att_cached, NH = cache
    B, T, C3 = inp.shape
    C = C3 // 3
    hs = C // NH

    def split(x):
        if bug == "heads split wrong":
            return x.reshape(B, NH, T, hs)
        return x.reshape(B, T, NH, hs).transpose(0, 2, 1, 3)

    def merge(x):
        if bug == "heads merged wrong":
            return x.reshape(B, T, C)
        return x.transpose(0, 2, 1, 3).reshape(B, T, C)

    q, k, v = (
        x.reshape(B, T, NH, hs).transpose(0, 2, 1, 3)
        for x in np.split(inp, 3, axis=-1)
    )
    scores = q @ k.swapaxes(-1, -2) / math.sqrt(hs)
    if bug != "no mask":
        scores = scores + np.triu(np.full((T, T), -np.inf), k=1)
    att = np.exp(scores - scores.max(axis=-1, keepdims=True))
    att /= att.sum(axis=-1, keepdims=True)
    dy = split(dout)
    dv = (att if bug == "att for att^T" else att.swapaxes(-1, -2)) @ dy
    datt = dy @ v.swapaxes(-1, -2)
    ds = att * datt
    if bug != "no -(g.s)":
        ds -= att * (datt * att).sum(axis=-1, keepdims=True)
    if bug != "no scale":
        ds /= math.sqrt(hs)
    dq = ds @ k
    dk = (ds if bug == "ds for ds^T" else ds.swapaxes(-1, -2)) @ q
    parts = [merge(d) for d in (dq, dk, dv)]
    if bug == "q and k swapped":
        parts = [parts[1], parts[0], parts[2]]
    grad = np.concatenate(parts, axis=-1)
    if bug == "=":
        dinp[...] = grad
    else:
        dinp += grad


@pytest.mark.parametrize(
    "bug,hints",
    [
        (None, ()),
        ("no mask", ("without the causal mask", "dq, dk and dv parts")),
        ("no -(g.s)", ("lacks the - sum_j(datt * att) term", "dq and dk")),
        ("no scale", ("lacks the 1/sqrt(hs)", "its dq and dk parts")),
        ("heads split wrong", ("splits or merges the heads in the wrong order",)),
        ("heads merged wrong", ("in the wrong order", "dq, dk and dv")),
        ("q and k swapped", ("its dq and dk parts are wrong",)),
        ("att for att^T", ("dv = att^T dy", "its dv part is wrong")),
        ("ds for ds^T", ("dk = ds^T q / sqrt(hs)", "its dk part is wrong")),
        ("=", ("assigns (=) where it must add (+=)",)),
    ],
)
def test_attention_bugs(bug, hints, capsys):
    verdict = run(
        check_attention_backward, lambda *a: attention(*a, bug=bug), capsys
    )
    if bug is None:
        assert verdict.correct, str(verdict)
    else:
        assert_not_yet(verdict, "dinp is wrong", *hints)


# ---- encoder -----------------------------------------------------------------


def encoder(dwte, dwpe, dout, cache, bug=None):
    inp = cache
    T = inp.shape[1]
    if bug == "fancy +=":
        dwte[inp] += dout
    elif bug == "fancy =":
        dwte[inp] = dout
    elif bug == "= for dwte":
        dwte[:] = 0
        np.add.at(dwte, inp, dout)
    else:
        np.add.at(dwte, inp, dout)
    if bug == "first sequence":
        dwpe[:T] += dout[0]
    elif bug == "mean over b":
        dwpe[:T] += dout.mean(axis=0)
    elif bug == "all of wpe":
        dwpe += dout.sum(axis=0)
    elif bug == "= for dwpe":
        dwpe[:] = 0
        dwpe[:T] = dout.sum(axis=0)
    else:
        dwpe[:T] += dout.sum(axis=0)


@pytest.mark.parametrize(
    "bug,hints",
    [
        (None, ()),
        ("fancy +=", ("dwte is wrong", "np.add.at(dwte, idx, dout)")),
        ("fancy =", ("dwte is wrong", "it assigns the rows")),
        ("= for dwte", ("dwte is wrong", "assigns (=)")),
        ("first sequence", ("dwpe is wrong", "first sequence only")),
        ("mean over b", ("dwpe is wrong", "averages over the batch")),
        ("all of wpe", ("could not be broadcast", "dwpe (maxT, C) = (6, 3)")),
        ("= for dwpe", ("dwpe is wrong", "assigns (=)")),
    ],
)
def test_encoder_bugs(bug, hints, capsys):
    verdict = run(check_encoder_backward, lambda *a: encoder(*a, bug=bug), capsys)
    if bug is None:
        assert verdict.correct, str(verdict)
    else:
        assert_not_yet(verdict, *hints)


# ---- matmul ------------------------------------------------------------------


def matmul(dinp, dweight, dbias, dout, cache, bug=None):
    inp, weight = cache
    OC, C = weight.shape
    dout2, inp2 = dout.reshape(-1, OC), inp.reshape(-1, C)
    w = weight.T if bug == "dinp with weight^T" else weight
    grad_inp = (dout2 @ w).reshape(inp.shape)
    if bug == "= for dinp":
        dinp[...] = grad_inp
    else:
        dinp += grad_inp
    if bug == "dweight transposed":
        dweight += inp2.T @ dout2
    elif bug == "first sequence":
        dweight += dout[0].T @ inp[0]
    elif bug == "= for dweight":
        dweight[...] = dout2.T @ inp2
    else:
        dweight += dout2.T @ inp2
    if bug == "no dbias":
        return
    if bug == "dbias always":
        dbias += dout2.sum(axis=0)
    elif dbias is not None:
        if bug == "= for dbias":
            dbias[...] = dout2.sum(axis=0)
        else:
            dbias += dout2.sum(axis=0)


@pytest.mark.parametrize(
    "bug,hints",
    [
        (None, ()),
        (
            "dinp with weight^T",
            ("dinp is wrong with a square weight", "weight^T"),
        ),
        (
            "dweight transposed",
            (
                "dweight is wrong with a square weight, at B = 2, T = 3",
                "it is transposed",
            ),
        ),
        ("first sequence", ("dweight is wrong", "first sequence only")),
        ("no dbias", ("dbias is wrong", "added nothing into the dbias buffer")),
        (
            "dbias always",
            ("with dbias=None", "raised TypeError", "if dbias is not None"),
        ),
        ("= for dinp", ("dinp is wrong", "assigns (=)")),
        ("= for dweight", ("dweight is wrong", "assigns (=)")),
        ("= for dbias", ("dbias is wrong", "assigns (=)")),
    ],
)
def test_matmul_bugs(bug, hints, capsys):
    verdict = run(check_matmul_backward, lambda *a: matmul(*a, bug=bug), capsys)
    if bug is None:
        assert verdict.correct, str(verdict)
    else:
        assert_not_yet(verdict, *hints)


# ---- the whole model ---------------------------------------------------------


def without(step):
    """The book's gpt_backward with one layer's backward dropped: `step`
    names the layers function to replace by one that does nothing, on its
    n-th call (counting from 0) only."""
    import backprop_lessons.gpt.model as model

    name, nth = step

    def backward(params, config, cache):
        original = getattr(model, name)
        calls = []

        def maybe(*args):
            calls.append(None)
            if len(calls) - 1 != nth:
                original(*args)

        setattr(model, name, maybe)
        try:
            return model.gpt_backward(params, config, cache)
        finally:
            setattr(model, name, original)

    return backward


@pytest.mark.parametrize(
    "step,hint",
    [
        (("encoder_backward", 0), "grads['wpe'] is wrong"),
        (("layernorm_backward", 0), "grads['lnfw'] is wrong"),
        # the second matmul backward is block 1's fcproj; the first the head
        (("matmul_backward", 1), "grads['fcprojw'][1] (block 1) is wrong"),
        (("gelu_backward", 1), "grads['fcw'][0] (block 0) is wrong"),
        (("attention_backward", 0), "grads['qkvw'][1] (block 1) is wrong"),
    ],
)
def test_gpt_backward_with_one_layer_dropped(step, hint, capsys):
    verdict = run(check_gpt_backward, without(step), capsys)
    assert_not_yet(verdict, hint, "largest relative error")


def test_gpt_backward_returning_too_little_or_changing_params(capsys):
    def missing(params, config, cache):
        grads = gpt_backward(params, config, cache)
        del grads["wpe"]
        return grads

    assert_not_yet(run(check_gpt_backward, missing, capsys), "wpe missing")

    def changes(params, config, cache):
        grads = gpt_backward(params, config, cache)
        params["lnfb"] -= 0.1 * grads["lnfb"]
        return grads

    assert_not_yet(
        run(check_gpt_backward, changes, capsys), "changed params['lnfb']"
    )

    def wrong_shape(params, config, cache):
        grads = gpt_backward(params, config, cache)
        grads["qkvw"] = grads["qkvw"][0]
        return grads

    assert_not_yet(
        run(check_gpt_backward, wrong_shape, capsys),
        "grads['qkvw'] must be an array of the shape",
    )

    def zero_wte(params, config, cache):
        grads = gpt_backward(params, config, cache)
        grads["wte"][:] = 0
        return grads

    assert_not_yet(run(check_gpt_backward, zero_wte, capsys), "grads['wte']")


@pytest.mark.parametrize("part", ["head", "embedding"])
def test_gpt_backward_with_one_part_of_wte(part, capsys):
    def one_part(params, config, cache):
        grads = gpt_backward(params, config, cache)
        head = np.zeros_like(grads["wte"])
        dlogits = np.zeros_like(cache["logits"])
        layers.crossentropy_softmax_backward(dlogits, 1.0, cache["loss"])
        layers.matmul_backward(None, head, None, dlogits, cache["lm_head"])
        if part == "head":
            grads["wte"] = head  # the LM head's part only
        else:
            grads["wte"] -= head
        return grads

    verdict = run(check_gpt_backward, one_part, capsys)
    name = {"head": "LM head", "embedding": "embedding"}[part]
    assert_not_yet(
        verdict, "grads['wte'] is wrong", f"it holds the {name}'s part only"
    )


def test_a_stub_is_named_as_the_reader_named_it():
    def my_gelu_backward(dinp, dout, cache):
        raise NotImplementedError

    verdict = check_gelu_backward(my_gelu_backward, exercise=1)
    assert str(verdict).endswith("write my_gelu_backward(dinp, dout, cache)")
    unnamed = check_gelu_backward(lambda dinp, dout, cache: ..., exercise=1)
    assert str(unnamed).endswith("write your function(dinp, dout, cache)")


def test_indexing_every_target_at_every_position_is_named():
    def my_crossentropy_softmax_backward(dlogits, dloss, cache):
        probs, targets = cache[0], cache[1]
        B, T, _ = probs.shape
        d = probs.copy()
        d[:, :, targets] -= 1.0  # the classic slip
        dlogits += d * dloss / (B * T)

    verdict = check_crossentropy_softmax_backward(
        my_crossentropy_softmax_backward, exercise=1
    )
    assert verdict.status != "correct"
    assert "np.arange(B)[:, None], np.arange(T), targets" in str(verdict), str(
        verdict
    )
