"""Datasets generated in code or shipped with the package (no downloads),
seeded so that every run is identical.  Each loader sits next to its data:

    two_moons.py  two_moons(n, noise, seed): two interleaving half circles,
                  plain Python lists for the scalar engine (chapters 2, 4)
    spirals.py    spirals(n_per_class, K, noise, seed): K spiral arms as NumPy
                  arrays (chapter 5)
    corpus.py     load_corpus() -> the text of verses.txt, and CharVocab, its
                  characters <-> token ids (chapters 6, 8)
    names.py      load_names() -> the first names of names.txt, which microgpt
                  learns to continue (chapter 6)
"""

from .corpus import CharVocab, load_corpus
from .names import load_names
from .spirals import spirals
from .two_moons import two_moons

__all__ = ["two_moons", "spirals", "load_corpus", "CharVocab", "load_names"]
