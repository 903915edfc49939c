"""A small microgpt shared by the tests of `microgpt` and its NumPy twin."""

from __future__ import annotations

from backprop_lessons.microgpt import MicroGPT, MicroGPTConfig, NameVocab

TINY_NAMES = ["ava", "bob", "cara", "dave", "eve"]


def tiny_model(seed=0, **sizes):
    """A small model over the letters of TINY_NAMES (a-e, o, r, v + BOS)."""
    vocab = NameVocab(TINY_NAMES)
    config = MicroGPTConfig(
        **{
            "vocab_size": len(vocab),
            "block_size": 8,
            "n_layer": 1,
            "n_head": 2,
            "n_embd": 8,
            **sizes,
        }
    )
    return MicroGPT(seed, config=config, vocab=vocab)
