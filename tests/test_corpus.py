"""Tests of `backprop_lessons.data.corpus`: the shipped text and its
character vocabulary."""

from __future__ import annotations

import numpy as np
import pytest

from backprop_lessons.data import CharVocab, load_corpus


def test_corpus_is_shipped_and_small():
    text = load_corpus()
    assert 100_000 < len(text) <= 1_000_000
    assert set(text) <= set("abcdefghijklmnopqrstuvwxyz ,.\n")


def test_char_vocab_round_trips_and_names_unknown_characters():
    text = load_corpus()
    vocab = CharVocab(text)
    assert len(vocab) == 28
    ids = vocab.encode(text[:100])
    assert ids.dtype == np.int64 and ids.max() < len(vocab)
    assert vocab.decode(ids) == text[:100]
    with pytest.raises(ValueError, match=r"not in the vocabulary: \['!', 'H'\]"):
        vocab.encode("Hello!")


def test_char_vocab_ids_follow_sorted_characters():
    vocab = CharVocab("cab")
    assert vocab.chars == ["a", "b", "c"]
    assert vocab.encode("abc").tolist() == [0, 1, 2]
    assert repr(vocab) == "CharVocab(3 characters: 'abc')"
