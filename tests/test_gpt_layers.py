"""The checks of the exercises in which the reader writes each GPT layer's
backward and then the whole model's (backprop_lessons.exercises.gpt_layers).

For every check: a right backward, written here as a reader writes it, is
correct; the book's own backward (called directly, through a name bound at
import, or in its place another of the package's or PyTorch's ways to the
same gradient) is refused and named; a stub is not attempted, an exception
of the reader's code is a "not yet" that names it, and the classic bugs are
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
from backprop_lessons.gpt.layers import gelu_backward
from backprop_lessons.gpt.model import BLOCK_PARAMETERS, gpt_backward
from verdicts import assert_not_yet

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


def stub_ellipsis(*args): ...


def stub_raising(*args):
    raise NotImplementedError


def stub_pass(*args):
    pass


# The reader's layers, right (each written out below, as a reader writes
# it, with a bug or none), and their capstone: a reader's that calls them.


def my_matmul_backward(dinp, dweight, dbias, dout, cache):
    matmul(dinp, dweight, dbias, dout, cache)


def my_gelu_backward(dinp, dout, cache):
    gelu(dinp, dout, cache)


def my_crossentropy_softmax_backward(dlogits, dloss, cache):
    crossentropy(dlogits, dloss, cache)


def my_layernorm_backward(dinp, dweight, dbias, dout, cache):
    layernorm(dinp, dweight, dbias, dout, cache)


def my_encoder_backward(dwte, dwpe, dout, cache):
    encoder(dwte, dwpe, dout, cache)


def my_attention_backward(dinp, dout, cache):
    attention(dinp, dout, cache)


def my_rmsnorm_backward(dinp, dweight, dout, cache):
    rmsnorm(dinp, dweight, dout, cache)


def my_gpt_backward(params, config, cache):
    return assembled()(params, config, cache)


CHECKS = {
    check_layernorm_backward: my_layernorm_backward,
    check_gelu_backward: my_gelu_backward,
    check_crossentropy_softmax_backward: my_crossentropy_softmax_backward,
    check_attention_backward: my_attention_backward,
    check_encoder_backward: my_encoder_backward,
    check_matmul_backward: my_matmul_backward,
    check_rmsnorm_backward: my_rmsnorm_backward,
    check_gpt_backward: my_gpt_backward,
}
#: The book's version of each, which the check refuses.
BOOKS = {
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
def test_a_right_backward_is_correct(check, capsys):
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
    check_attention_backward(my_attention_backward, exercise=6)
    capsys.readouterr()
    verdict = run(check_gpt_backward, my_gpt_backward, capsys)
    assert_not_yet(
        verdict,
        "your my_attention_backward, which my_gpt_backward calls first with "
        'cache["blocks"][1]["att"], does not pass exercise 6 yet: at B = 2',
        "your code raised ValueError",
    )
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
    verdict = check_layernorm_backward(my_layernorm_backward, exercise=4)
    assert str(verdict) == "Exercise 4: correct"
    capsys.readouterr()
    with pytest.raises(TypeError, match="exercise"):
        check_layernorm_backward(my_layernorm_backward)


def test_a_backward_that_returns_its_gradient_is_told_to_add(capsys):
    def returns(dinp, dout, cache):
        x, tanh_u = cache
        return dout * 0.5 * (1 + tanh_u)

    assert_not_yet(
        run(check_gelu_backward, returns, capsys), "adds into the buffers"
    )


def test_changing_dout_in_place_is_caught(capsys):
    def in_place(dinp, dweight, dbias, dout, cache):
        layernorm(dinp, dweight, dbias, dout, cache)
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
    if bug == "+ variance term":
        mean_gx = -mean_gx
    if bug == "mean over T":
        mean_g = g.mean(axis=1, keepdims=True)
    grad = (g - mean_g - xhat * mean_gx) * (1 if bug == "no rstd" else rstd)
    dbias_part = dout.sum(axis=(0, 1))
    if bug == "dbias with xhat":
        dbias_part = (dout * xhat).sum(axis=(0, 1))
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
        ("dweight and dbias swapped", "it is dbias's formula"),
        ("dweight and dbias swapped", "dbias wrong too"),
        ("dbias with xhat", "dbias is wrong"),
        ("dbias with xhat", "it is dweight's formula"),
        ("+ variance term", "the xhat * mean(g * xhat) term has the wrong sign"),
        ("mean over T", "dinp is wrong"),
        ("mean over T", ": see Hint 3 for the formula"),
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
        layernorm(dinp, dweight, dbias, dout, cache, bug="no dbias")
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
    if bug == "+ term":
        term = -term
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
        ("mean over T", "see Hint 3 for the formula"),
        ("= for dinp", "assigns (=) where it must add (+=)"),
        ("x for xhat", "multiplies dout by the input x"),
        ("bias's sum", "a bias's gradient (RMSNorm has none)"),
        ("+ term", "the xhat * mean(g * xhat) term has the wrong sign"),
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
    if bug == "one-hot not scaled":
        grad = probs * d / scale - onehot
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
        ("one-hot not scaled", "the one-hot part is not scaled"),
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
    elif bug == "dbias averaged":
        dbias += dout2.mean(axis=0)
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
        ("dbias averaged", ("dbias is wrong", "it averages over the positions")),
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
    """A capstone of the book's layers (the capstone may call them) that
    skips the layer function `step = (name, n)`'s n-th call (counting from
    0) only."""
    name, nth = step
    original = getattr(layers, name)

    def backward(params, config, cache):
        calls = []

        def maybe(*args):
            calls.append(None)
            if len(calls) - 1 != nth:
                original(*args)

        slots = {
            k: maybe if fn is original else fn for k, fn in BOOKS_LAYERS.items()
        }
        return assembled(**slots)(params, config, cache)

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
        grads = my_gpt_backward(params, config, cache)
        del grads["wpe"]
        return grads

    assert_not_yet(run(check_gpt_backward, missing, capsys), "wpe missing")

    def changes(params, config, cache):
        grads = my_gpt_backward(params, config, cache)
        params["lnfb"] -= 0.1 * grads["lnfb"]
        return grads

    assert_not_yet(
        run(check_gpt_backward, changes, capsys), "changed params['lnfb']"
    )

    def wrong_shape(params, config, cache):
        grads = my_gpt_backward(params, config, cache)
        grads["qkvw"] = grads["qkvw"][0]
        return grads

    assert_not_yet(
        run(check_gpt_backward, wrong_shape, capsys),
        "grads['qkvw'] must be an array of the shape",
    )

    def a_list(params, config, cache):
        return list(my_gpt_backward(params, config, cache).values())

    assert_not_yet(
        run(check_gpt_backward, a_list, capsys),
        "return a dict of gradients, one per parameter (like params), not a list",
    )

    def nan(params, config, cache):
        grads = my_gpt_backward(params, config, cache)
        grads["fcb"][1, 0] = np.nan
        return grads

    assert_not_yet(
        run(check_gpt_backward, nan, capsys), "grads['fcb'] holds nan or inf"
    )

    def zero_wte(params, config, cache):
        grads = my_gpt_backward(params, config, cache)
        grads["wte"][:] = 0
        return grads

    assert_not_yet(run(check_gpt_backward, zero_wte, capsys), "grads['wte']")


# ---- the capstone names the reader's layer at fault ---------------------------
#
# A reader's capstone calls the reader's own layers, functions of a notebook
# (here: of this file, which the checks treat alike): each below is right,
# as a reader's that passed its exercise, unless a test replaces it.


#: The book's layer for each of a capstone's calls (`assembled`'s names).
BOOKS_LAYERS = {
    "loss": layers.crossentropy_softmax_backward,
    "lm_head": layers.matmul_backward,
    "lnf": layers.layernorm_backward,
    "encoder": layers.encoder_backward,
    "ln1": layers.layernorm_backward,
    "qkv": layers.matmul_backward,
    "att": layers.attention_backward,
    "attproj": layers.matmul_backward,
    "ln2": layers.layernorm_backward,
    "fc": layers.matmul_backward,
    "gelu": layers.gelu_backward,
    "fcproj": layers.matmul_backward,
}

#: The reader's layers and the numbers chapter 6 gives their exercises.
READERS_LAYERS = {
    check_matmul_backward: (my_matmul_backward, 1),
    check_gelu_backward: (my_gelu_backward, 2),
    check_crossentropy_softmax_backward: (my_crossentropy_softmax_backward, 3),
    check_layernorm_backward: (my_layernorm_backward, 4),
    check_encoder_backward: (my_encoder_backward, 5),
    check_attention_backward: (my_attention_backward, 6),
}


def the_chapter_ran_its_layer_checks(capsys, **yours):
    """Run each layer's check with the chapter's number, as the stub cells
    above the capstone do, on the reader's layers (`yours` replaces some:
    gelu=fn, ...), so that the capstone knows their exercises' numbers."""
    for check, (fn, number) in READERS_LAYERS.items():
        fn = yours.get(fn.__name__.removeprefix("my_").split("_")[0], fn)
        check(fn, exercise=number)
    capsys.readouterr()


def assembled(dloss=1.0, **calls):
    """A reader's my_gpt_backward calling the reader's layers; `calls` maps
    a cache's name (lnf, fc, gelu, ...) to the function called with it, and
    `dloss` is the gradient it starts from (1.0 is right)."""
    L = {
        "loss": my_crossentropy_softmax_backward,
        "lm_head": my_matmul_backward,
        "lnf": my_layernorm_backward,
        "encoder": my_encoder_backward,
        "ln1": my_layernorm_backward,
        "qkv": my_matmul_backward,
        "att": my_attention_backward,
        "attproj": my_matmul_backward,
        "ln2": my_layernorm_backward,
        "fc": my_matmul_backward,
        "gelu": my_gelu_backward,
        "fcproj": my_matmul_backward,
    } | calls

    def my_gpt_backward(params, config, cache):
        grads = {name: np.zeros_like(p) for name, p in params.items()}
        (B, T), C = cache["shape"], config.n_embd

        def zeros(width):
            return np.zeros((B, T, width))

        dlogits, dlnf, dx = zeros(config.vocab_size), zeros(C), zeros(C)
        L["loss"](dlogits, dloss, cache["loss"])
        L["lm_head"](dlnf, grads["wte"], None, dlogits, cache["lm_head"])
        L["lnf"](dx, grads["lnfw"], grads["lnfb"], dlnf, cache["lnf"])
        for l in reversed(range(config.n_layer)):
            c = cache["blocks"][l]
            g = {n: grads[n][l] for n in BLOCK_PARAMETERS}
            dh, dfc, dln2 = zeros(4 * C), zeros(4 * C), zeros(C)
            L["fcproj"](dh, g["fcprojw"], g["fcprojb"], dx, c["fcproj"])
            L["gelu"](dfc, dh, c["gelu"])
            L["fc"](dln2, g["fcw"], g["fcb"], dfc, c["fc"])
            L["ln2"](dx, g["ln2w"], g["ln2b"], dln2, c["ln2"])
            datt, dqkv, dln1 = zeros(C), zeros(3 * C), zeros(C)
            L["attproj"](datt, g["attprojw"], g["attprojb"], dx, c["attproj"])
            L["att"](dqkv, datt, c["att"])
            L["qkv"](dln1, g["qkvw"], g["qkvb"], dqkv, c["qkv"])
            L["ln1"](dx, g["ln1w"], g["ln1b"], dln1, c["ln1"])
        L["encoder"](grads["wte"], grads["wpe"], dx, cache["encoder"])
        return grads

    return my_gpt_backward


def test_a_capstone_of_the_readers_right_layers_passes(capsys):
    the_chapter_ran_its_layer_checks(capsys)
    assert run(check_gpt_backward, assembled(), capsys).correct


def test_the_capstone_names_a_layer_that_is_still_a_stub(capsys):
    """A stub layer is the layer's to write, not the capstone's: the
    capstone was attempted ("not yet"), and the hint names the layer, where
    the capstone calls it and its exercise."""

    def my_gelu_backward(dinp, dout, cache):
        raise NotImplementedError  # your code: add into dinp

    the_chapter_ran_its_layer_checks(capsys, gelu=my_gelu_backward)
    verdict = run(check_gpt_backward, assembled(gelu=my_gelu_backward), capsys)
    assert verdict.status == "not yet", str(verdict)
    assert verdict.hint == (
        "your my_gelu_backward, which my_gpt_backward calls first with "
        'cache["blocks"][1]["gelu"], is still a stub: write it in exercise 2 '
        "first"
    )


def test_the_capstone_names_a_layer_that_fails_its_own_exercise(capsys):
    """A layernorm without the path through the mean gets its own
    gradients right, but not the stream's: the first wrong gradient is
    block 1's fcprojw, and the hint names the layernorm and exercise 4."""

    def my_layernorm_backward(dinp, dweight, dbias, dout, cache):
        layernorm(dinp, dweight, dbias, dout, cache, bug="no mean term")

    the_chapter_ran_its_layer_checks(capsys, layernorm=my_layernorm_backward)
    verdict = run(
        check_gpt_backward,
        assembled(lnf=my_layernorm_backward, ln1=my_layernorm_backward),
        capsys,
    )
    assert_not_yet(
        verdict,
        "your my_layernorm_backward, which my_gpt_backward calls first with "
        'cache["lnf"], does not pass exercise 4 yet: dinp is wrong at B = 2, '
        "T = 3, C = 5",
        "it lacks the - mean(g) term (the path through the mean). Fix it "
        "there first: the gradients after its first call inherit its error "
        "(the first wrong one going back from the loss: grads['fcprojw'][1] "
        "(block 1), largest relative error",
    )


def test_the_capstone_names_the_first_failing_layer_it_calls(capsys):
    """Two layers wrong: the one the capstone calls first (the LM head's
    matmul, before the final layernorm) is named."""

    def my_matmul_backward(dinp, dweight, dbias, dout, cache):
        matmul(dinp, dweight, dbias, dout, cache, bug="= for dweight")

    def my_layernorm_backward(dinp, dweight, dbias, dout, cache):
        layernorm(dinp, dweight, dbias, dout, cache, bug="no rstd")

    the_chapter_ran_its_layer_checks(
        capsys, matmul=my_matmul_backward, layernorm=my_layernorm_backward
    )
    readers = dict.fromkeys(("lm_head", "qkv", "fc"), my_matmul_backward)
    readers |= dict.fromkeys(("lnf", "ln1", "ln2"), my_layernorm_backward)
    verdict = run(check_gpt_backward, assembled(**readers), capsys)
    assert_not_yet(
        verdict,
        "your my_matmul_backward, which my_gpt_backward calls first with "
        'cache["lm_head"], does not pass exercise 1 yet',
        "assigns (=) where it must add (+=)",
    )


def test_the_capstone_without_the_layers_numbers_says_its_own_exercise(
    capsys, monkeypatch
):
    from backprop_lessons.exercises import gpt_layers

    def my_gelu_backward(dinp, dout, cache):
        raise NotImplementedError

    monkeypatch.setattr(gpt_layers, "_EXERCISE_OF", {})
    verdict = run(check_gpt_backward, assembled(gelu=my_gelu_backward), capsys)
    assert verdict.hint.endswith(
        "is still a stub: write it in its own exercise first"
    )


def test_the_capstone_names_a_layer_given_another_layers_cache(capsys):
    """The reader's layernorm called with a matmul's cache is not a wrong
    layernorm: the call is told, not the layer."""
    the_chapter_ran_its_layer_checks(capsys)
    verdict = run(check_gpt_backward, assembled(fc=my_layernorm_backward), capsys)
    assert_not_yet(
        verdict,
        'my_gpt_backward passes cache["blocks"][1]["fc"], a matmul\'s cache, to '
        "your my_layernorm_backward, your layernorm backward: look at that call",
    )
    assert verdict.where[0].startswith("in my_gpt_backward, line")


def test_the_capstone_with_every_layer_right_names_the_first_wrong_gradient(
    capsys,
):
    """When all the reader's layers pass, the wiring is at fault: the hint
    is the first wrong gradient, as before, and blames no layer."""

    the_chapter_ran_its_layer_checks(capsys)
    verdict = run(check_gpt_backward, assembled(dloss=2.0), capsys)
    assert_not_yet(verdict, "grads['lnfw'] is wrong", "the first wrong gradient")
    assert "your" not in verdict.hint, str(verdict)


def test_the_capstone_names_a_layer_that_adds_nothing_as_a_stub(capsys):
    def my_encoder_backward(dwte, dwpe, dout, cache):
        pass  # the embeddings' backward left out

    the_chapter_ran_its_layer_checks(capsys, encoder=my_encoder_backward)
    verdict = run(
        check_gpt_backward, assembled(encoder=my_encoder_backward), capsys
    )
    assert verdict.hint == (
        "your my_encoder_backward, which my_gpt_backward calls first with "
        'cache["encoder"], is still a stub: write it in exercise 5 first'
    )


def test_the_capstone_watches_every_layer_cache_of_gpt_forward():
    """Every layer cache gpt_forward makes (the residual additions aside,
    which no function of the reader's takes) is one the capstone knows."""
    from backprop_lessons.exercises.gpt_layers import (
        _capstone_model,
        _layer_caches,
    )
    from backprop_lessons.gpt import gpt_forward

    config, params, idx, targets = _capstone_model()
    _, cache = gpt_forward(params, config, idx, targets)
    known = _layer_caches(cache, config)
    tops = ["loss", "lm_head", "lnf", "encoder"]
    assert all(id(cache[k]) in known for k in tops)
    for block in cache["blocks"]:
        layers_of_block = [k for k in block if not k.startswith("res")]
        assert len(layers_of_block) == 8
        assert all(id(block[k]) in known for k in layers_of_block)


@pytest.mark.parametrize("part", ["head", "embedding"])
def test_gpt_backward_with_one_part_of_wte(part, capsys):
    def one_part(params, config, cache):
        grads = my_gpt_backward(params, config, cache)
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


# ---- `=` on every buffer, and nan in a buffer -------------------------------


def test_assigning_every_buffer_is_told_as_rebinding(capsys):
    """`dinp = ...` on every buffer leaves all of them as they were: not a
    stub, but rebinding the names, and told so."""

    def my_layernorm_backward(dinp, dweight, dbias, dout, cache):
        inp, weight, mean, rstd = cache
        xhat = (inp - mean) * rstd
        dbias = dout.sum(axis=(0, 1))  # noqa: F841 (the slip)
        dweight = (dout * xhat).sum(axis=(0, 1))  # noqa: F841
        dinp = rstd * dout * weight  # noqa: F841

    verdict = run(check_layernorm_backward, my_layernorm_backward, capsys)
    assert_not_yet(
        verdict,
        "your backward assigns to dbias, dweight and dinp (`dbias = ...`), "
        "which only rebinds the names inside your function and leaves the "
        "buffers you were given unchanged: add in place with +=: "
        "`dbias += ...`",
    )

    def my_gelu_backward(dinp, dout, cache):
        dinp = dout * cache[0]  # noqa: F841

    assert_not_yet(
        run(check_gelu_backward, my_gelu_backward, capsys),
        "assigns to dinp (`dinp = ...`), which only rebinds the name",
    )


def test_nan_in_a_buffer_is_named(capsys):
    def my_gelu_backward(dinp, dout, cache):
        dinp += dout
        dinp[0, 0, 0] = np.nan  # a 0/0 of the reader's

    assert_not_yet(
        run(check_gelu_backward, my_gelu_backward, capsys),
        "dinp holds nan or inf after your backward",
    )


def test_no_named_slip_writes_out_the_formula_hint_3_gives():
    """A named slip names the bug, not the answer: no hint of the layers
    whose formula is the exercise's Hint 3 prints it (`dinp = rstd * ...`)."""
    from backprop_lessons.exercises import gpt_layers

    rng = np.random.default_rng(0)
    cases = [
        gpt_layers._layernorm_case(rng, 2, 3, 5),
        gpt_layers._rmsnorm_case(rng, 2, 3, 5),
        gpt_layers._gelu_case(rng, 2, 3, 5),
        gpt_layers._crossentropy_case(rng, 2, 3, 5),
        gpt_layers._encoder_case(rng, np.array([[1, 1]]), 3, 2, 2),
        gpt_layers._matmul_case(rng, 2, 3, 4, 4, True, ""),
    ]
    texts = [what for c in cases for bugs in c.bugs.values() for _, what in bugs]
    assert len(texts) > 25
    for text in texts:
        for formula in ("dinp = ", "dweight = ", "dlogits = ", "du/dx = "):
            assert formula not in text, text


# ---- mutants of the solutions -------------------------------------------------
#
# What a mutation test makes of chapter 6's solutions (`+=` made `=`, an
# operator swapped, a term dropped, a constant changed, a name replaced),
# written out; each computes something else, and each must fail its check.
# (A sweep over every single-point change of the eight solution cells, when
# this was written, made 3,671 such mutants, and every one failed; the 81
# that passed compute the same, e.g. `swapaxes(-2, -1)` for
# `swapaxes(-1, -2)`.)


def _matmul_mutant(dinp, dweight, dbias, dout, cache, *, k):
    inp, weight = cache
    OC, C = weight.shape
    dout2, inp2 = dout.reshape(-1, OC), inp.reshape(-1, C)
    if k == 0:  # `+=` made `=`
        dinp[...] = (dout2 @ weight).reshape(inp.shape)
    else:
        dinp += (dout2 @ weight).reshape(inp.shape)
    if k == 1:  # a term dropped: the last position left out
        dweight += dout2[:-1].T @ inp2[:-1]
    else:
        dweight += dout2.T @ inp2
    if dbias is not None:
        dbias += dout2.sum(axis=0) * (2 if k == 2 else 1)  # a constant


def _gelu_mutant(dinp, dout, cache, *, k):
    inp, tanh_u = cache
    c = 0.044715 * (1.1 if k == 0 else 1)  # a constant changed
    du_dx = math.sqrt(2 / math.pi) * (1 + (2 if k == 1 else 3) * c * inp**2)
    first = 0.5 * (1 - tanh_u) if k == 2 else 0.5 * (1 + tanh_u)  # + to -
    second = 0.5 * inp * (1 - tanh_u**2) * du_dx
    dinp += dout * (first if k == 3 else first + second)  # a term dropped


def _crossentropy_mutant(dlogits, dloss, cache, *, k):
    probs, targets = cache
    B, T, V = probs.shape
    onehot = np.zeros_like(probs)
    np.put_along_axis(onehot, targets[..., None], 2.0 if k == 0 else 1.0, -1)
    scale = (B + T) if k == 1 else (B * T)  # an operator swapped
    dlogits += (dloss if k != 2 else 1.0) * (probs - onehot) / scale


def _layernorm_mutant(dinp, dweight, dbias, dout, cache, *, k):
    inp, weight, mean, rstd = cache
    xhat = (inp + mean) * rstd if k == 0 else (inp - mean) * rstd  # - to +
    dbias += dout.sum(axis=(0, 1))
    dweight += (dout * xhat).sum(axis=(0, 1))
    g = dout * weight
    mean_g = g.mean(axis=0 if k == 1 else -1, keepdims=True)  # another axis
    mean_gx = (g * xhat).mean(axis=-1, keepdims=True) * (2 if k == 2 else 1)
    dinp += rstd * (g - mean_g - xhat * mean_gx)


def _encoder_mutant(dwte, dwpe, dout, cache, *, k):
    idx = cache
    T = idx.shape[1]
    np.add.at(dwte, idx, dout)
    if k == 0:  # the last sequence only
        dwpe[:T] += dout[-1]
    else:  # a constant changed
        dwpe[:T] += dout.sum(axis=0) * 0.5


def _rmsnorm_mutant(dinp, dweight, dout, cache, *, k):
    inp, weight, rstd = cache
    xhat = inp * rstd
    dweight += (dout * (inp if k == 0 else xhat)).sum(axis=(0, 1))
    g = dout * weight
    mean_gx = (g * xhat).mean(axis=0 if k == 1 else -1, keepdims=True)
    dinp += (rstd**2 if k == 2 else rstd) * (g - xhat * mean_gx)


LAYER_MUTANTS = [
    (check_matmul_backward, _matmul_mutant, 3),
    (check_gelu_backward, _gelu_mutant, 4),
    (check_crossentropy_softmax_backward, _crossentropy_mutant, 3),
    (check_layernorm_backward, _layernorm_mutant, 3),
    (check_encoder_backward, _encoder_mutant, 2),
    (check_rmsnorm_backward, _rmsnorm_mutant, 3),
]


@pytest.mark.parametrize(
    "check,mutant,k",
    [(c, m, k) for c, m, n in LAYER_MUTANTS for k in range(n)],
    ids=lambda v: getattr(v, "__name__", str(v)),
)
def test_every_mutant_of_a_layer_solution_fails(check, mutant, k, capsys):
    def answer(*args):
        mutant(*args, k=k)

    verdict = run(check, answer, capsys)
    assert not verdict.correct, str(verdict)


@pytest.mark.parametrize(
    "flags",
    [
        {"mask": False},
        {"softmax_term": False},
        {"scale": False},
        {"heads": "split"},
        {"dv_transpose": False},
        {"dk_transpose": False},
    ],
)
def test_every_mutant_of_the_attention_solution_fails(flags, capsys):
    from backprop_lessons.exercises.gpt_layers import _attention_dinp

    def mutant(dinp, dout, cache):
        inp, att, n_head = cache
        dinp += _attention_dinp(inp, dout, n_head, **flags)

    assert not run(check_attention_backward, mutant, capsys).correct


@pytest.mark.parametrize(
    "change",
    [
        "dloss 2.0",
        "blocks in forward order",
        "ln2 into the branch's buffer",
        "ln1's weight and bias swapped",
        "the encoder given dln1",
    ],
)
def test_every_mutant_of_the_capstone_solution_fails(change, capsys):
    def mutant(params, config, cache):
        grads = {name: np.zeros_like(p) for name, p in params.items()}
        (B, T), C = cache["shape"], config.n_embd
        L = layers

        def zeros(width):
            return np.zeros((B, T, width), params["wte"].dtype)

        dlogits, dlnf, dx = zeros(config.vocab_size), zeros(C), zeros(C)
        dloss = 2.0 if change == "dloss 2.0" else 1.0
        L.crossentropy_softmax_backward(dlogits, dloss, cache["loss"])
        L.matmul_backward(dlnf, grads["wte"], None, dlogits, cache["lm_head"])
        L.layernorm_backward(dx, grads["lnfw"], grads["lnfb"], dlnf, cache["lnf"])
        blocks = range(config.n_layer)
        if change != "blocks in forward order":
            blocks = reversed(blocks)
        for l in blocks:
            c, g = cache["blocks"][l], {n: grads[n][l] for n in BLOCK_PARAMETERS}
            dh, dfc, dln2 = zeros(4 * C), zeros(4 * C), zeros(C)
            L.matmul_backward(dh, g["fcprojw"], g["fcprojb"], dx, c["fcproj"])
            L.gelu_backward(dfc, dh, c["gelu"])
            L.matmul_backward(dln2, g["fcw"], g["fcb"], dfc, c["fc"])
            into = dln2 if change == "ln2 into the branch's buffer" else dx
            L.layernorm_backward(into, g["ln2w"], g["ln2b"], dln2, c["ln2"])
            datt, dqkv, dln1 = zeros(C), zeros(3 * C), zeros(C)
            L.matmul_backward(
                datt, g["attprojw"], g["attprojb"], dx, c["attproj"]
            )
            L.attention_backward(dqkv, datt, c["att"])
            L.matmul_backward(dln1, g["qkvw"], g["qkvb"], dqkv, c["qkv"])
            w, b = g["ln1w"], g["ln1b"]
            if change == "ln1's weight and bias swapped":
                w, b = b, w
            L.layernorm_backward(dx, w, b, dln1, c["ln1"])
        last = dln1 if change == "the encoder given dln1" else dx
        L.encoder_backward(grads["wte"], grads["wpe"], last, cache["encoder"])
        return grads

    assert not run(check_gpt_backward, mutant, capsys).correct


# ---- what the checks refuse ---------------------------------------------------
#
# An answer that hands back the book's gradient instead of computing it:
# the book's own layer (the function itself, a name bound at import), the
# package's other code for the same gradient (chapter 10's FlashAttention
# and fused classifier, the tensor engine), and PyTorch's autograd.  Each
# is "not yet", naming what was called and quoting the reader's line.


def refused(verdict, called: str, line: str = "") -> None:
    assert_not_yet(verdict, f"your code called {called}")
    assert "shapes" not in verdict.hint, str(verdict)  # nothing else to say
    if line:
        assert verdict.where[-1].endswith(line), verdict.where


@pytest.mark.parametrize("check", BOOKS, ids=lambda c: c.__name__)
def test_the_books_own_backward_is_refused(check, capsys):
    fn = BOOKS[check]
    verdict = run(check, fn, capsys)
    refused(
        verdict,
        f"{fn.__module__}.{fn.__name__}, the book's own version of what this "
        "exercise asks you to write",
    )


def test_a_name_bound_at_import_is_refused(capsys):
    def my_gelu_backward(dinp, dout, cache):
        gelu_backward(dinp, dout, cache)  # the book's, imported by name

    refused(
        run(check_gelu_backward, my_gelu_backward, capsys),
        "backprop_lessons.gpt.layers.gelu_backward",
        ": gelu_backward(dinp, dout, cache) # the book's, imported by name",
    )


def _layernorm_in_torch(inp, weight, bias):
    return torch.nn.functional.layer_norm(
        inp, inp.shape[-1:], weight, bias, layers.LAYERNORM_EPS
    )


def layernorm_by_backward(dinp, dweight, dbias, dout, cache):
    inp, weight, mean, rstd = cache
    x, w = torch.tensor(inp, requires_grad=True), torch.tensor(weight)
    w.requires_grad_(True)
    b = torch.zeros_like(w, requires_grad=True)
    _layernorm_in_torch(x, w, b).backward(torch.tensor(dout))
    dinp += x.grad.numpy()
    dweight += w.grad.numpy()
    dbias += b.grad.numpy()


def layernorm_by_autograd_grad(dinp, dweight, dbias, dout, cache):
    inp, weight, mean, rstd = cache
    x = torch.tensor(inp, requires_grad=True)
    out = _layernorm_in_torch(x, torch.tensor(weight), None)
    (dx,) = torch.autograd.grad(out, x, torch.tensor(dout))
    dinp += dx.numpy()


def layernorm_by_torch_func(dinp, dweight, dbias, dout, cache):
    inp, weight, mean, rstd = cache
    w = torch.tensor(weight)
    _, vjp = torch.func.vjp(
        lambda x: _layernorm_in_torch(x, w, None), torch.tensor(inp)
    )
    dinp += vjp(torch.tensor(dout))[0].numpy()


def gelu_by_the_tensor_engine(dinp, dout, cache):
    from backprop_lessons.tensor import Tensor

    inp, tanh_u = cache
    x = Tensor(inp, requires_grad=True)
    u = (x + x**3 * 0.044715) * math.sqrt(2 / math.pi)
    y = x * 0.5 * (u.tanh() + 1.0)
    (y * Tensor(dout)).sum().backward()  # the book's autodiff, by a method
    dinp += x.grad


def matmul_by_the_tensor_rule(dinp, dweight, dbias, dout, cache):
    from backprop_lessons.tensor import Tensor

    inp, weight = cache
    Tensor.matmul_backward(dout, (inp, weight.T), (True, True))


def attention_by_flash(dinp, dout, cache):
    inp, att, n_head = cache
    _, flash = layers.flash_attention_forward(inp, n_head)  # the forward: fine
    layers.flash_attention_backward(dinp, dout, flash)


def crossentropy_by_the_fused_classifier(dlogits, dloss, cache):
    """The fused classifier with the identity as its weight: its dinp is
    dlogits."""
    probs, targets = cache
    V = probs.shape[-1]
    _, fused = layers.fused_classifier_forward(np.log(probs), np.eye(V), targets)
    layers.fused_classifier_backward(dlogits, np.zeros((V, V)), dloss, fused)


def gpt_by_torch(params, config, cache):
    from backprop_lessons.gpt import reference

    idx, (_, targets) = cache["encoder"], cache["loss"]
    return reference.torch_forward_backward(params, config, idx, targets)[1]


def gpt_by_the_books(params, config, cache):
    grads = gpt_backward(params, config, cache)
    return {name: g.copy() for name, g in grads.items()}


@pytest.mark.parametrize(
    "check, gaming, called, line",
    [
        (
            check_layernorm_backward,
            layernorm_by_backward,
            "Tensor.backward, PyTorch's autograd: this exercise asks for the "
            "gradient by hand",
            ".backward(torch.tensor(dout))",
        ),
        (
            check_layernorm_backward,
            layernorm_by_autograd_grad,
            "torch.autograd.grad, PyTorch's autograd",
            "torch.autograd.grad(out, x, torch.tensor(dout))",
        ),
        (
            check_layernorm_backward,
            layernorm_by_torch_func,
            "torch.func.vjp, PyTorch's autograd",
            "",
        ),
        (
            check_gelu_backward,
            gelu_by_the_tensor_engine,
            "backprop_lessons.tensor.Tensor.backward, the book's own "
            "differentiation: this exercise asks for the gradient by hand",
            "# the book's autodiff, by a method",
        ),
        (
            check_matmul_backward,
            matmul_by_the_tensor_rule,
            "backprop_lessons.tensor.Tensor.matmul_backward, the book's own "
            "differentiation",
            "(True, True))",
        ),
        (
            check_attention_backward,
            attention_by_flash,
            "backprop_lessons.gpt.layers.flash_attention_backward, the book's "
            "FlashAttention backward",
            "layers.flash_attention_backward(dinp, dout, flash)",
        ),
        (
            check_crossentropy_softmax_backward,
            crossentropy_by_the_fused_classifier,
            "backprop_lessons.gpt.layers.fused_classifier_backward, the book's "
            "fused classifier backward",
            "",
        ),
        (
            check_gpt_backward,
            gpt_by_torch,
            "Tensor.backward, PyTorch's autograd",
            "",
        ),
        (
            check_gpt_backward,
            gpt_by_the_books,
            "backprop_lessons.gpt.model.gpt_backward, the book's own version",
            "grads = gpt_backward(params, config, cache)",
        ),
    ],
    ids=lambda v: getattr(v, "__name__", ""),
)
def test_another_way_to_the_books_gradient_is_refused(
    check, gaming, called, line, capsys
):
    verdict = run(check, gaming, capsys)
    refused(verdict, called, line)
    assert verdict.where[0].startswith(f"in {gaming.__name__}, line ")


def test_the_capstone_may_call_the_books_layers_and_the_readers(capsys):
    """The capstone is the wiring: the book's layers, or the reader's that
    call the book's, pass (the layers' own exercises refuse those)."""
    assert run(check_gpt_backward, assembled(**BOOKS_LAYERS), capsys).correct

    def my_gelu_backward(dinp, dout, cache):
        layers.gelu_backward(dinp, dout, cache)

    verdict = run(check_gelu_backward, my_gelu_backward, capsys)
    refused(verdict, "backprop_lessons.gpt.layers.gelu_backward")
    assert run(
        check_gpt_backward, assembled(gelu=my_gelu_backward), capsys
    ).correct


def test_a_layer_that_calls_the_books_is_not_blamed_for_the_wiring(capsys):
    """A wrong capstone whose layers call the book's: the first wrong
    gradient is told, not a layer (its gradients are right)."""

    def my_gelu_backward(dinp, dout, cache):
        layers.gelu_backward(dinp, dout, cache)

    the_chapter_ran_its_layer_checks(capsys, gelu=my_gelu_backward)
    verdict = run(
        check_gpt_backward,
        assembled(dloss=2.0, gelu=my_gelu_backward),
        capsys,
    )
    assert_not_yet(verdict, "grads['lnfw'] is wrong", "the first wrong gradient")
    assert "your" not in verdict.hint, str(verdict)


def test_autograd_in_a_layer_of_the_capstone_is_refused_there(capsys):
    verdict = run(
        check_gpt_backward, assembled(ln2=layernorm_by_autograd_grad), capsys
    )
    refused(verdict, "torch.autograd.grad, PyTorch's autograd")
    assert verdict.where[0].startswith("in my_gpt_backward, line ")
    assert verdict.where[-1].startswith("in layernorm_by_autograd_grad, line ")
