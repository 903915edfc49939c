"""Checks for the exercises of "GPT-2 at its real size" (chapter 9).

    check_parameter_count(count, exercise=N)        parameters of a config
    check_attention_crossover(crossover, exercise=N) T where attention
                                                     costs as much as the
                                                     matmul layers
    check_to_hf_state_dict(to_hf_state_dict, exercise=N)
                                                     the loader, backwards

Each check names what an answer may not call (`run_check`'s `refuse=`:
the book's own count of the same thing, see each check) and prints no
number the reader is asked to find: a wrong count is told by what it
misses, and checked again on configurations drawn here.  Each prints
"Exercise N: ..." and returns a `Verdict` (see `checking`).  Exercise 3's
check runs transformers' model, so it imports torch and
transformers when it gets that far.

`SELF_CHECKS` holds the chapter's self-check questions (`questions`).
"""

from __future__ import annotations

import math

import numpy as np

from ..gpt import (
    GPTConfig,
    gpt_forward,
    init_params,
    load_hf_gpt2,
    parameter_shapes,
)
from ..gpt.hf_checkpoint import hf_shapes
from ..gradcheck import close, largest_difference
from .checking import NotYet, Verdict, attempt, run_check
from .questions import Choice, Number

__all__ = [
    "GPT2_SIZES",
    "check_parameter_count",
    "check_attention_crossover",
    "check_to_hf_state_dict",
    "SELF_CHECKS",
]

# The four GPT-2 models of Radford et al. (2019): n_layer, n_head, n_embd.
GPT2_SIZES = {
    "gpt2 (small)": (12, 12, 768),
    "gpt2-medium": (24, 16, 1024),
    "gpt2-large": (36, 20, 1280),
    "gpt2-xl": (48, 25, 1600),
}


def _gpt2_config(L: int, NH: int, C: int) -> GPTConfig:
    return GPTConfig(
        vocab_size=50257, block_size=1024, n_layer=L, n_head=NH, n_embd=C
    )


def _held_out(seed: int, count: int) -> list[GPTConfig]:
    """`count` GPT-2 shaped configurations drawn here, printed nowhere: a
    table of the answers the chapter shows does not pass."""
    rng = np.random.default_rng(seed)
    configs = []
    for _ in range(count):
        NH = int(rng.integers(1, 9))
        configs.append(
            GPTConfig(
                vocab_size=int(rng.integers(10, 60000)),
                block_size=int(rng.integers(4, 4096)),
                n_layer=int(rng.integers(1, 60)),
                n_head=NH,
                n_embd=NH * int(rng.integers(1, 200)),
            )
        )
    return configs


def _off(got, expected) -> str:
    return "too high" if got > expected else "too low"


# ---- Exercise 1 ----------------------------------------------------------------


def _count_refused() -> tuple:
    """What parameter_count may not call: the book's own count of the same
    thing (the parameter table's shapes, the parameters themselves, the
    sizing of chapter 8's plan)."""
    from ..gpt.model import Parameter, num_parameters
    from ..scale.scale_out import GPT2Plan

    return (
        parameter_shapes,
        Parameter.dims,
        init_params,
        num_parameters,
        hf_shapes,
        GPT2Plan.parameters.fget,
    )


def check_parameter_count(count, *, exercise: int) -> Verdict:
    """count(config) -> the number of parameters of a GPT-2 shaped config.

    Compared with the shapes of model.parameter_shapes for the four GPT-2
    sizes, two small configurations and four drawn here.  No expected count
    is printed: a wrong one is told by the part it misses, or which way it
    is off.  Refused: the book's own count (`parameter_shapes` and the
    table's `Parameter.dims`, `init_params`, `num_parameters`, `hf_shapes`,
    chapter 8's `GPT2Plan.parameters`)."""

    def check(count):
        todo = (
            f"write {getattr(count, '__name__', 'the function')} and run its cell"
        )
        configs = [_gpt2_config(*sizes) for sizes in GPT2_SIZES.values()]
        configs += [GPTConfig(28, 32, 2, 4, 32), GPTConfig(5, 3, 1, 1, 2)]
        configs += _held_out(1, 4)
        for config in configs:
            got = attempt(count, config, todo=todo)
            expected = sum(
                math.prod(shape) for shape in parameter_shapes(config).values()
            )
            if isinstance(got, bool) or not isinstance(got, (int, np.integer)):
                raise NotYet(f"return a whole number of parameters, got {got!r}")
            if got != expected:
                raise NotYet(f"for {config}: {_missed(got, expected, config)}")

    return run_check(exercise, check, count, refuse=_count_refused())


def _missed(got: int, expected: int, config: GPTConfig) -> str:
    """What a wrong parameter count misses, in words."""
    V, maxT = config.vocab_size, config.block_size
    L, C = config.n_layer, config.n_embd
    slips = [
        (V * C, "is wte counted twice? The LM head shares it"),
        (-2 * C, "the final layer norm's gain and shift are missing"),
        (-maxT * C, "the position embeddings (maxT x C) are missing"),
        (-V * C, "the token embeddings (V x C) are missing"),
        (-L * 9 * C, "the biases of the four matmuls are missing"),
        (-(L * 4 * C + 2 * C), "the layer norms' gains and shifts are missing"),
    ]
    for difference, hint in slips:
        if got == expected + difference:
            return hint
    return (
        f"your count is {_off(got, expected)} (a block holds 12 C^2 + 13 C "
        "parameters: four matmuls with their biases, two layer norms)"
    )


# ---- Exercise 2 ----------------------------------------------------------------


def _crossover_refused() -> tuple:
    """What attention_crossover may not call: the book's own matmul
    parameter count and FLOP formulas (chapter 8's)."""
    from ..scale.backward_cost import gpt_flops_formula, gpt_matmul_parameters
    from ..scale.scale_out import GPT2Plan

    return (
        gpt_matmul_parameters,
        gpt_flops_formula,
        GPT2Plan.flops_per_token.fget,
    )


def check_attention_crossover(crossover, *, exercise: int) -> Verdict:
    """crossover(config) -> the context length T at which attention's FLOPs
    per token equal those of the matmul layers.

    Per token, training: 6 N_mm for the matmul layers (N_mm = L 12 C^2 + V C)
    and 12 L T C for q k^T and att v; equal at T = N_mm / (2 L C).  Checked
    on the four GPT-2 sizes and four configurations drawn here; no expected
    T is printed.  Refused: chapter 8's `gpt_matmul_parameters` and FLOP
    formulas, the book's own N_mm."""

    def check(crossover):
        todo = (
            f"write {getattr(crossover, '__name__', 'the function')} and run "
            "its cell"
        )
        configs = [_gpt2_config(*sizes) for sizes in GPT2_SIZES.values()]
        for config in configs + _held_out(2, 4):
            got = attempt(crossover, config, todo=todo)
            L, C, V = config.n_layer, config.n_embd, config.vocab_size
            expected = (12 * L * C * C + V * C) / (2 * L * C)
            number = isinstance(got, (int, float, np.number)) and not isinstance(
                got, bool
            )
            if not number:
                raise NotYet(f"return a number, the context length; got {got!r}")
            if largest_difference(got, expected) <= 1.0:
                continue
            solve = "solve 6 N_mm = 12 L T C for T"
            slips = [
                (6 * C, "did you leave out the LM head, V x C?"),
                (2 * expected, f"it is twice the crossover: {solve}"),
                (expected / 2, f"it is half the crossover: {solve}"),
                (None, f"yours is {_off(got, expected)}: {solve}"),
            ]
            hint = next(
                h
                for value, h in slips
                if value is None or largest_difference(got, value) <= 1.0
            )
            raise NotYet(f"for n_layer={L}, n_embd={C}, vocab_size={V}: {hint}")

    return run_check(exercise, check, crossover, refuse=_crossover_refused())


# ---- Exercise 3 ----------------------------------------------------------------


def _hf_config(config: GPTConfig) -> dict:
    return {
        "vocab_size": config.vocab_size,
        "n_positions": config.block_size,
        "n_layer": config.n_layer,
        "n_head": config.n_head,
        "n_embd": config.n_embd,
    }


def check_to_hf_state_dict(to_hf_state_dict, *, exercise: int) -> Verdict:
    """to_hf_state_dict(params, config) -> GPT-2's state dict of NumPy arrays.

    Checked in four steps, each with its own message: the keys (as
    save_pretrained writes them: 'wte.weight', 'h.0.attn.c_attn.weight',
    ...), their shapes in GPT-2's layout, a round trip through
    load_hf_gpt2, and transformers' GPT2LMHeadModel loaded with the state
    dict, whose logits must equal gpt_forward's (float64); on two
    configurations, the second of three blocks and three heads.

    Nothing is refused: the package has no inverse of load_hf_gpt2 (the
    check's own round trip calls the loader, which cannot give a state dict
    back), and no gradient is involved.
    """

    def check(to_hf_state_dict):
        configs = [
            GPTConfig(vocab_size=11, block_size=8, n_layer=2, n_head=2, n_embd=8),
            GPTConfig(vocab_size=7, block_size=5, n_layer=3, n_head=3, n_embd=12),
        ]
        for config in configs:
            _check_state_dict(to_hf_state_dict, config)

    return run_check(exercise, check, to_hf_state_dict)


def _check_state_dict(to_hf_state_dict, config: GPTConfig) -> None:
    """Exercise 3's four steps for one configuration."""
    rng = np.random.default_rng(0)
    params = {
        k: v + 0.1 * rng.standard_normal(v.shape)
        for k, v in init_params(config, dtype=np.float64).items()
    }
    todo = (
        f"write {getattr(to_hf_state_dict, '__name__', 'the function')} "
        "and run its cell"
    )
    state = attempt(
        to_hf_state_dict,
        {k: v.copy() for k, v in params.items()},
        config,
        todo=todo,
    )
    if not isinstance(state, dict):
        raise NotYet(f"expected a dict of arrays, got {type(state).__name__}")
    expected = hf_shapes(config)
    missing = sorted(set(expected) - set(state))
    extra = sorted(set(state) - set(expected))
    if missing or extra:
        raise NotYet(f"missing keys {missing[:3]}, unexpected keys {extra[:3]}")
    for key, shape in expected.items():
        if np.shape(state[key]) != shape:
            raise NotYet(
                f"{key} has shape {np.shape(state[key])}, GPT-2 stores "
                f"it as {shape}"
            )
    state = {k: np.asarray(v, dtype=np.float64) for k, v in state.items()}
    _, back = load_hf_gpt2(state, dtype=np.float64, config=_hf_config(config))
    wrong = [n for n in params if not np.array_equal(back[n], params[n])]
    if wrong:
        raise NotYet(
            f"loading your state dict back gives other values for "
            f"{', '.join(wrong)} (a square weight transposed the wrong "
            "way keeps its shape)"
        )
    if not _transformers_logits_match(state, config, params, rng):
        raise NotYet("transformers' model computes other logits from it")


def _transformers_logits_match(state, config, params, rng) -> bool:
    """Whether transformers' GPT2LMHeadModel with `state` gives gpt_forward's
    logits (float64)."""
    try:
        import torch
        import transformers
    except ImportError:  # nothing more to check without transformers
        return True
    hf = transformers.GPT2Config(
        **_hf_config(config),
        bos_token_id=0,
        eos_token_id=0,
        attn_implementation="eager",
    )
    model = transformers.GPT2LMHeadModel(hf).double().eval()
    model.transformer.load_state_dict(
        {k: torch.from_numpy(v) for k, v in state.items()}
    )
    idx = rng.integers(0, config.vocab_size, (2, config.block_size))
    with torch.no_grad():
        theirs = model(input_ids=torch.from_numpy(idx)).logits.numpy()
    _, cache = gpt_forward(params, config, idx)
    return close(cache["logits"], theirs, 1e-12, floor=0.0)


# ---- self-checks -------------------------------------------------------------

#: The chapter's self-check questions, shown by `widgets.self_check`.
SELF_CHECKS = {
    "gpt2-medium-block": Number(
        "GPT-2 medium has the same layout with n_layer = 24 blocks and C = 1024. "
        "How many parameters does one of its blocks hold?",
        answer=12 * 1024**2 + 13 * 1024,
        hint="A block holds 12 C² + 13 C parameters: four matmuls, their biases "
        "and two layer norms.",
        explanation="12 · 1024² + 13 · 1024 = 12,596,224. The number of heads "
        "does not enter: it splits C without changing any matrix.",
    ),
    "attention-share": Choice(
        "Going from T = 256 to T = 1024 tokens per sequence, with the same "
        "number of tokens per step, why does attention's share of a step's "
        "FLOPs grow?",
        [
            "Its FLOPs per token grow with T, while the matmul layers' stay "
            "fixed",
            "The matmul layers' FLOPs per token shrink as T grows",
            "Attention's FLOPs per token grow with T², the matmuls' with T",
            "The LM head's cost moves into attention",
        ],
        answer=0,
        hints={
            1: "The matmul layers cost 6 FLOPs per parameter per token, "
            "whatever T is.",
            2: "Per token, q kᵀ and att v each multiply by T keys, not T².",
            3: "The LM head is a matmul layer; its cost per token does not "
            "depend on T.",
        },
        explanation="Each token's query meets T keys, so attention costs "
        "12 n_layer T C FLOPs per token, linear in T, while the "
        "weights cost 6 N_mm per token at any T.",
    ),
}
