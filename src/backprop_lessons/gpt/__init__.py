"""A GPT-2 style decoder with a hand-written backward, in NumPy (chapter 6).

    layers      forward/backward pairs: encoder, layernorm, matmul, attention,
                gelu, residual, crossentropy_softmax
    model       GPTConfig, PARAMETER_TABLE, init_params, gpt_forward, gpt_backward
    checks      each layer's backward vs centered differences (a CheckTable)
    reference   the PyTorch twin (the only module here that imports torch)
    train       AdamW, seeded batches, the training loop, sampling
    hf_checkpoint  Hugging Face GPT-2 checkpoints in the book's layout

microgpt's NumPy twin, built from these layers, is `microgpt.numpy_twin`.

The text it trains on is in `backprop_lessons.data.corpus`.

Import `reference` explicitly when you want PyTorch:
`from backprop_lessons.gpt import reference`.
"""

from .model import (
    PARAMETER_TABLE,
    GPTConfig,
    check_params,
    gpt_backward,
    gpt_forward,
    init_params,
    num_parameters,
    parameter_shapes,
)

__all__ = [
    "GPTConfig",
    "PARAMETER_TABLE",
    "parameter_shapes",
    "init_params",
    "num_parameters",
    "check_params",
    "gpt_forward",
    "gpt_backward",
    "load_hf_gpt2",
]


def __getattr__(name: str):
    """`load_hf_gpt2` (chapter 9) loads its module on first use, so that the
    model and its layers load nothing of the checkpoint machinery."""
    if name == "load_hf_gpt2":
        from .hf_checkpoint import load_hf_gpt2

        return load_hf_gpt2
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
