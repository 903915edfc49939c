"""The exercise checks of chapter 9 (backprop_lessons.exercises.gpt2_full_size):
each says "not attempted yet" for a stub, "not yet" for a wrong answer and
"correct" for a right one."""

from __future__ import annotations

import numpy as np
import pytest

from backprop_lessons.exercises import gpt2_full_size as ex
from backprop_lessons.exercises.checking import Verdict
from backprop_lessons.gpt.hf_checkpoint import CONV1D_PARAMETERS
from backprop_lessons.gpt.model import PARAMETER_TABLE


def verdict(capsys, check, fn) -> str:
    """What the check printed, which is its Verdict (the book's protocol)."""
    result = check(fn, exercise=EXERCISES[check.__name__])
    printed = capsys.readouterr().out.strip()
    assert isinstance(result, Verdict) and printed == str(result)
    return printed


EXERCISES = {
    "check_parameter_count": 1,
    "check_attention_crossover": 2,
    "check_to_hf_state_dict": 3,
}


def stub_raises(*args):
    raise NotImplementedError


def stub_ellipsis(*args): ...


# ---- Exercise 1 ---------------------------------------------------------------


def count(config):
    V, maxT, L, C = (
        config.vocab_size,
        config.block_size,
        config.n_layer,
        config.n_embd,
    )
    return V * C + maxT * C + L * (12 * C * C + 13 * C) + 2 * C


@pytest.mark.parametrize("stub", [stub_raises, stub_ellipsis])
def test_parameter_count_stub(capsys, stub):
    assert verdict(capsys, ex.check_parameter_count, stub).startswith(
        "Exercise 1: not attempted yet"
    )


def test_parameter_count_wrong_and_right(capsys):
    def head_counted_twice(config):
        return count(config) + config.vocab_size * config.n_embd

    out = verdict(capsys, ex.check_parameter_count, head_counted_twice)
    assert out.startswith("Exercise 1: not yet") and "wte counted twice" in out
    assert (
        verdict(capsys, ex.check_parameter_count, count) == "Exercise 1: correct"
    )
    assert count(ex._gpt2_config(*ex.GPT2_SIZES["gpt2 (small)"])) == 124_439_808


# ---- Exercise 2 ---------------------------------------------------------------


def crossover(config):
    L, C, V = config.n_layer, config.n_embd, config.vocab_size
    return (12 * L * C * C + V * C) / (2 * L * C)


def test_attention_crossover(capsys):
    assert verdict(capsys, ex.check_attention_crossover, stub_raises).startswith(
        "Exercise 2: not attempted yet"
    )
    out = verdict(
        capsys, ex.check_attention_crossover, lambda config: 6 * config.n_embd
    )
    assert out.startswith("Exercise 2: not yet") and "LM head" in out
    assert (
        verdict(capsys, ex.check_attention_crossover, crossover)
        == "Exercise 2: correct"
    )
    assert round(crossover(ex._gpt2_config(12, 12, 768))) == 6702


# ---- Exercise 3 ---------------------------------------------------------------


def to_hf_state_dict(params, config, transpose=CONV1D_PARAMETERS):
    state = {}
    for name, key in PARAMETER_TABLE:
        p = params[name]
        if "{l}" in key:
            for l in range(config.n_layer):
                state[key.format(l=l)] = p[l].T if name in transpose else p[l]
        else:
            state[key] = p
    return state


def test_to_hf_state_dict(capsys):
    pytest.importorskip("transformers")
    assert verdict(capsys, ex.check_to_hf_state_dict, stub_ellipsis).startswith(
        "Exercise 3: not attempted yet"
    )
    out = verdict(
        capsys,
        ex.check_to_hf_state_dict,
        lambda p, c: to_hf_state_dict(p, c, transpose=()),
    )
    assert (
        out.startswith("Exercise 3: not yet")
        and "c_attn.weight has shape (24, 8)" in out
    )
    # square attention projection not transposed: right shapes, wrong values
    out = verdict(
        capsys,
        ex.check_to_hf_state_dict,
        lambda p, c: to_hf_state_dict(p, c, transpose=("qkvw", "fcw", "fcprojw")),
    )
    assert out.startswith("Exercise 3: not yet") and "attprojw" in out
    out = verdict(
        capsys,
        ex.check_to_hf_state_dict,
        lambda p, c: {
            k: v for k, v in to_hf_state_dict(p, c).items() if k != "wpe.weight"
        },
    )
    assert "missing keys ['wpe.weight']" in out
    assert (
        verdict(capsys, ex.check_to_hf_state_dict, to_hf_state_dict)
        == "Exercise 3: correct"
    )


def test_transformers_logits_are_compared():
    """The last step runs transformers' model: a state dict with the two blocks'
    MLP biases exchanged (same keys and shapes, another model) fails it."""
    pytest.importorskip("transformers")
    from backprop_lessons.gpt import GPTConfig, init_params

    config = GPTConfig(vocab_size=11, block_size=8, n_layer=2, n_head=2, n_embd=8)
    rng = np.random.default_rng(0)
    params = {
        k: v + 0.1 * rng.standard_normal(v.shape)
        for k, v in init_params(config, dtype=np.float64).items()
    }
    state = to_hf_state_dict(params, config)
    assert ex._transformers_logits_match(
        state, config, params, np.random.default_rng(1)
    )
    swapped = dict(state)
    swapped["h.0.mlp.c_fc.bias"], swapped["h.1.mlp.c_fc.bias"] = (
        state["h.1.mlp.c_fc.bias"],
        state["h.0.mlp.c_fc.bias"],
    )
    assert not ex._transformers_logits_match(
        swapped, config, params, np.random.default_rng(1)
    )


# ---- what the counts may not call, and print -----------------------------------


def _refused(out: str, called: str):
    assert out.startswith("Exercise 1: not yet - your code called") or (
        out.startswith("Exercise 2: not yet - your code called")
    ), out
    assert called in " ".join(out.split()), out


def test_the_books_count_is_refused(capsys):
    from backprop_lessons.gpt import init_params, parameter_shapes
    from backprop_lessons.gpt.model import num_parameters
    from backprop_lessons.scale.backward_cost import gpt_matmul_parameters
    from backprop_lessons.scale.scale_out import GPT2Plan

    def by_shapes(config):  # bound at import
        return sum(int(np.prod(s)) for s in parameter_shapes(config).values())

    def by_the_parameters(config):
        return num_parameters(init_params(config))

    def by_the_plan(config):  # a property of chapter 8's plan
        return GPT2Plan(config=config).parameters

    for answer, called in (
        (by_shapes, "backprop_lessons.gpt.model.parameter_shapes"),
        (by_the_parameters, "backprop_lessons.gpt.model.init_params"),
        (by_the_plan, "backprop_lessons.scale.scale_out.GPT2Plan.parameters"),
    ):
        _refused(verdict(capsys, ex.check_parameter_count, answer), called)
    _refused(
        verdict(
            capsys,
            ex.check_attention_crossover,
            lambda c: gpt_matmul_parameters(c) / (2 * c.n_layer * c.n_embd),
        ),
        "backprop_lessons.scale.backward_cost.gpt_matmul_parameters",
    )


def test_no_expected_count_is_printed(capsys):
    """A wrong answer is told what it misses; the expected number, which a
    table of answers could collect, is never in the hint."""
    small = ex._gpt2_config(*ex.GPT2_SIZES["gpt2 (small)"])
    for wrong, words in (
        (lambda c: count(c) - 2 * c.n_embd, "final layer norm"),
        (lambda c: count(c) - c.block_size * c.n_embd, "position embeddings"),
        (lambda c: count(c) - 9 * c.n_layer * c.n_embd, "biases"),
        (lambda c: count(c) + 1, "too high"),
    ):
        out = " ".join(verdict(capsys, ex.check_parameter_count, wrong).split())
        assert words in out and "124,439,808" not in out, out
        assert f"{12 * 768**2 + 13 * 768:,}" not in out, out
    for wrong, words in (
        (lambda c: 2 * crossover(c), "twice the crossover"),
        (lambda c: crossover(c) - 3, "too low"),
    ):
        out = " ".join(
            verdict(capsys, ex.check_attention_crossover, wrong).split()
        )
        assert words in out and f"{crossover(small):,.0f}" not in out, out


def test_a_table_of_the_gpt2_sizes_does_not_pass(capsys):
    table = {
        ex._gpt2_config(*sizes): count(ex._gpt2_config(*sizes))
        for sizes in ex.GPT2_SIZES.values()
    }
    table[ex.GPTConfig(28, 32, 2, 4, 32)] = count(ex.GPTConfig(28, 32, 2, 4, 32))
    table[ex.GPTConfig(5, 3, 1, 1, 2)] = count(ex.GPTConfig(5, 3, 1, 1, 2))
    out = verdict(capsys, ex.check_parameter_count, lambda c: table.get(c, 0))
    assert out.startswith("Exercise 1: not yet"), out
    crossovers = {c: crossover(c) for c in table}
    out = verdict(
        capsys, ex.check_attention_crossover, lambda c: crossovers.get(c, 0.0)
    )
    assert out.startswith("Exercise 2: not yet"), out
