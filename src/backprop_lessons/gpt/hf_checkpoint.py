"""Hugging Face GPT-2 checkpoints in the book's GPT: `load_hf_gpt2` (chapter 9).

    config, params = load_hf_gpt2(source, dtype=np.float32)

`source` is one of
  - a directory written by transformers' `save_pretrained`: `config.json`
    and `model.safetensors` (or the shards listed in
    `model.safetensors.index.json`), read with safetensors' NumPy API;
  - a transformers model (anything with `.config` and `.state_dict()`, such
    as `GPT2LMHeadModel`): its configuration and weights, no files;
  - a state dict (name -> NumPy array or torch tensor), with the
    configuration passed as `config=` (a `GPT2Config`, or the dict of
    `config.json`): the shapes alone do not say how many heads there are.

The result is `(GPTConfig, params)`, `params` keyed as in
`model.PARAMETER_TABLE` and ready for `gpt_forward`/`gpt_backward`.  What the
mapping has to know about GPT-2's layout:
  - GPT-2 writes its linear layers as `Conv1D` modules, whose weight is
    stored (in, out): the transpose of the (out, in) that `matmul_forward`
    takes (and that PyTorch's `nn.Linear` and llm.c use).  The four block
    weights `c_attn`, `c_proj` (attention), `c_fc`, `c_proj` (MLP) are
    transposed here.  Every block's tensors are stacked into one (L, ...)
    array per parameter.
  - the LM head is tied to the token embedding `wte`.  A checkpoint stores
    it once (`save_pretrained`) or twice (`state_dict()`, with
    `lm_head.weight` the same tensor); a separate, different head is refused.
  - GPT-2's activation `gelu_new` is the tanh approximation of GELU, which
    is `layers.gelu_forward`; its layer-norm epsilon is 1e-5, which is
    `layers.LAYERNORM_EPS`.  A configuration with another activation,
    epsilon, attention scaling or MLP width is refused: the weights would
    load, but the book's model would compute something else with them.
  - `h.{l}.attn.bias` / `h.{l}.attn.masked_bias` in older checkpoints are
    not weights but the causal mask, kept as buffers: skipped.
Dropout rates are training settings, not weights: ignored (the book's model
has no dropout).

Imports: NumPy always; safetensors only when reading a directory (with a
clear error if it is missing).  Neither torch nor transformers is imported
by `load_hf_gpt2`: a torch tensor in a state dict is converted through its
own `.numpy()`.  The comparison with transformers' own model, which needs
torch, is `reference.compare_with_transformers`.
"""

from __future__ import annotations

import json
import os
import re
import socket
import threading
from pathlib import Path

import numpy as np

from .checks import CheckTable
from .layers import LAYERNORM_EPS
from .model import (
    PARAMETER_TABLE,
    PARAMETERS,
    GPTConfig,
    check_params,
    parameter_shapes,
)

__all__ = [
    "load_hf_gpt2",
    "config_from_hf",
    "CONV1D_PARAMETERS",
    "hf_shapes",
    "format_against_tolerance",
    "hub_is_reachable",
]

# Parameters that GPT-2 keeps in Conv1D modules, stored (in, out).
#: The weights GPT-2 stores transposed, (in, out) (its `Conv1D` layers).
CONV1D_PARAMETERS = tuple(p.name for p in PARAMETERS if p.conv1d)


def hf_shapes(config: GPTConfig) -> dict[str, tuple[int, ...]]:
    """GPT-2's keys (as `save_pretrained` writes them, without the
    `transformer.` prefix) and their shapes in its layout, for `config`."""
    shapes = {}
    for p in PARAMETERS:
        dims = p.dims(config)[1:] if p.per_block else p.dims(config)
        dims = dims[::-1] if p.conv1d else dims
        blocks = range(config.n_layer) if p.per_block else [None]
        shapes.update({p.hf_key.format(l=l): dims for l in blocks})
    return shapes


# Activations that are the tanh approximation of GELU, under transformers' names.
TANH_GELU = ("gelu_new", "gelu_pytorch_tanh")

# The causal-mask buffers of older GPT-2 checkpoints: not parameters.
_MASK_BUFFER = re.compile(r"h\.\d+\.attn\.(bias|masked_bias)")


def config_from_hf(hf: dict) -> GPTConfig:
    """The book's GPTConfig from a GPT-2 configuration (the dict of config.json).

    Raises a ValueError naming the setting when the book's model cannot
    compute what that configuration describes.
    """

    def refuse(key, expected):
        raise ValueError(
            f"load_hf_gpt2: config {key}={hf.get(key)!r} does not fit the "
            f"book's GPT, which needs {expected}"
        )

    if hf.get("model_type", "gpt2") != "gpt2":
        refuse("model_type", "'gpt2'")
    if hf.get("activation_function", "gelu_new") not in TANH_GELU:
        refuse(
            "activation_function", f"the tanh approximation of GELU {TANH_GELU}"
        )
    if hf.get("layer_norm_epsilon", 1e-5) != LAYERNORM_EPS:
        refuse("layer_norm_epsilon", f"{LAYERNORM_EPS} (layers.LAYERNORM_EPS)")
    if hf.get("n_inner") not in (None, 4 * hf.get("n_embd", 768)):
        refuse("n_inner", "None or 4 * n_embd")
    for key, value in (
        ("tie_word_embeddings", True),
        ("scale_attn_weights", True),
        ("scale_attn_by_inverse_layer_idx", False),
        ("add_cross_attention", False),
    ):
        if hf.get(key, value) != value:
            refuse(key, value)
    try:
        return GPTConfig(
            vocab_size=hf["vocab_size"],
            block_size=hf["n_positions"],
            n_layer=hf["n_layer"],
            n_head=hf["n_head"],
            n_embd=hf["n_embd"],
        )
    except KeyError as e:
        raise ValueError(
            f"load_hf_gpt2: config has no {e.args[0]!r}; a GPT-2 config "
            "names vocab_size, n_positions, n_layer, n_head and n_embd"
        ) from None


def _as_dict(config) -> dict:
    """A GPT2Config (anything with to_dict()) or a dict, as a plain dict."""
    if hasattr(config, "to_dict"):
        return config.to_dict()
    if isinstance(config, dict):
        return config
    raise TypeError(
        f"load_hf_gpt2: config must be a GPT2Config or the dict of "
        f"config.json, got {type(config).__name__}"
    )


def _to_numpy(value, key: str) -> np.ndarray:
    """A NumPy array from an array or a torch tensor (bfloat16 via float32)."""
    if hasattr(value, "detach"):  # a torch tensor, without importing torch
        value = value.detach().cpu()
        if str(value.dtype) == "torch.bfloat16":
            value = value.float()
        value = value.numpy()
    if not isinstance(value, np.ndarray) or not np.issubdtype(
        value.dtype, np.floating
    ):
        raise ValueError(
            f"load_hf_gpt2: {key} must be a float array or tensor, got "
            f"{getattr(value, 'dtype', type(value).__name__)}"
        )
    return value


def _read_directory(path: Path) -> tuple[dict, dict]:
    """(config dict, tensors) of a save_pretrained directory, read with
    safetensors' NumPy API."""
    if not (path / "config.json").is_file():
        raise ValueError(
            f"load_hf_gpt2: {path} has no config.json; expected a directory "
            "written by save_pretrained"
        )
    hf = json.loads((path / "config.json").read_text())
    index = path / "model.safetensors.index.json"
    if index.is_file():
        files = sorted(set(json.loads(index.read_text())["weight_map"].values()))
    elif (path / "model.safetensors").is_file():
        files = ["model.safetensors"]
    else:
        raise ValueError(
            f"load_hf_gpt2: {path} has no model.safetensors (a .bin "
            "checkpoint needs torch's unpickler: re-save it with "
            "save_pretrained, which writes safetensors)"
        )
    try:
        from safetensors import safe_open
    except ImportError:
        raise ImportError(
            "load_hf_gpt2 reads model.safetensors with the safetensors "
            "package: pip install safetensors"
        ) from None
    tensors = {}
    for name in files:
        with safe_open(path / name, framework="np") as f:
            keys = f.keys()  # a safe_open handle is not iterable
            tensors.update({key: f.get_tensor(key) for key in keys})
    return hf, tensors


def _gather(tensors: dict, config: GPTConfig, dtype) -> dict[str, np.ndarray]:
    """The book's parameters from GPT-2's tensors (keys without a prefix)."""
    shapes = parameter_shapes(config)
    expected = set()
    params = {}
    for name, hf_key in PARAMETER_TABLE:
        keys = (
            [hf_key.format(l=l) for l in range(config.n_layer)]
            if "{l}" in hf_key
            else [hf_key]
        )
        expected.update(keys)
        missing = [k for k in keys if k not in tensors]
        if missing:
            raise ValueError(
                f"load_hf_gpt2: the checkpoint has no {', '.join(missing[:3])}"
                f"{' ...' if len(missing) > 3 else ''} (parameter {name})"
            )
        # one layer's shape, in GPT-2's layout: Conv1D weights are (in, out)
        want = shapes[name][1:] if "{l}" in hf_key else shapes[name]
        if name in CONV1D_PARAMETERS:
            want = want[::-1]
        # a new C-contiguous array in `dtype`, never a view of the source;
        # block l of a stacked parameter goes to out[l]
        params[name] = out = np.empty(shapes[name], dtype=dtype)
        for k, dest in zip(keys, out if "{l}" in hf_key else [out]):
            a = _to_numpy(tensors[k], k)
            if a.shape != want:
                raise ValueError(
                    f"load_hf_gpt2: {k} has shape {a.shape}, expected {want} "
                    f"for {config}"
                )
            dest[...] = a.T if name in CONV1D_PARAMETERS else a
    if "lm_head.weight" in tensors:
        head = _to_numpy(tensors["lm_head.weight"], "lm_head.weight")
        wte = _to_numpy(tensors["wte.weight"], "wte.weight")
        if head.shape != wte.shape or not np.array_equal(head, wte):
            raise ValueError(
                "load_hf_gpt2: lm_head.weight differs from wte.weight; the "
                "book's GPT ties its LM head to the token embedding"
            )
        expected.add("lm_head.weight")
    unexpected = sorted(
        k for k in tensors if k not in expected and not _MASK_BUFFER.fullmatch(k)
    )
    if unexpected:
        raise ValueError(
            f"load_hf_gpt2: unexpected tensors {unexpected[:5]}"
            f"{' ...' if len(unexpected) > 5 else ''} for {config}"
        )
    return params


def load_hf_gpt2(
    source, dtype=np.float32, config=None
) -> tuple[GPTConfig, dict[str, np.ndarray]]:
    """A GPT-2 checkpoint of Hugging Face transformers as `(GPTConfig, params)`.

    `source`: a save_pretrained directory, a transformers model, or a state
    dict together with `config=` (see the module docstring).  `dtype`: the
    float type of the returned parameters (copies; the source is not
    modified or shared).  Every key, shape and setting is checked; a
    mismatch raises a ValueError that names it.
    """
    if not np.issubdtype(np.dtype(dtype), np.floating):
        raise ValueError(
            f"load_hf_gpt2: dtype must be a float type, got {np.dtype(dtype)}"
        )
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if not path.is_dir():
            raise ValueError(
                f"load_hf_gpt2: {path} is not a directory; expected one "
                "written by save_pretrained"
            )
        hf, tensors = _read_directory(path)
    elif hasattr(source, "state_dict") and hasattr(source, "config"):
        hf, tensors = _as_dict(source.config), source.state_dict()
    elif isinstance(source, dict):
        if config is None:
            raise ValueError(
                "load_hf_gpt2: a state dict does not say how many heads the "
                "model has; pass config= (a GPT2Config, or the dict of "
                "config.json)"
            )
        hf, tensors = _as_dict(config), source
    else:
        raise TypeError(
            f"load_hf_gpt2: source must be a directory, a transformers model or "
            f"a state dict, got {type(source).__name__}"
        )
    gpt_config = config_from_hf(hf)
    tensors = {k.removeprefix("transformer."): v for k, v in tensors.items()}
    params = _gather(tensors, gpt_config, np.dtype(dtype))
    check_params(params, gpt_config)
    return gpt_config, params


def format_against_tolerance(table: CheckTable, margin: float = 100.0) -> str:
    """The table as text, each error shown against its tolerance, so that it
    reads the same on any CPU.

    An error below tolerance / margin prints as that bound ('< 1e-11' for a
    tolerance of 1e-9) and PASS: the exact round-off digits depend on the
    CPU's kernels and thread count, the bound does not.  Above the bound
    the value itself is printed, with PASS or FAIL.
    """
    w = max(len(r.name) for r in table.rows)
    s = max(len(str(r.shape)) for r in table.rows)
    lines = [
        table.title,
        f"{'':<{w}} | {'shape':<{s}} | rel. error | tolerance |",
        f"{'-' * w}-+-{'-' * s}-+------------+-----------+-----",
    ]
    for r in table.rows:
        bound = r.tol / margin
        error = f"< {bound:.0e}" if r.rel_error < bound else f"{r.rel_error:.1e}"
        lines.append(
            f"{r.name:<{w}} | {str(r.shape):<{s}} | {error:>10} | "
            f"{r.tol:>9.0e} | {'PASS' if r.passed else 'FAIL'}"
        )
    return "\n".join(lines)


def hub_is_reachable(host: str = "huggingface.co", timeout: float = 2.0) -> bool:
    """Whether a TCP connection to `host`:443 opens within `timeout` seconds.

    For notebook cells that download from the Hugging Face hub only when they
    can: False at once if HF_HUB_OFFLINE is set, and never waits longer than
    `timeout` (the name lookup runs in a daemon thread, because a resolver
    with no network can block far longer than a socket timeout).
    """
    if os.environ.get("HF_HUB_OFFLINE", "0") not in ("", "0", "false", "False"):
        return False
    result = []

    def connect():
        try:
            socket.create_connection((host, 443), timeout=timeout).close()
            result.append(True)
        except OSError:
            pass

    probe = threading.Thread(target=connect, daemon=True)
    probe.start()
    probe.join(timeout)
    return bool(result)
