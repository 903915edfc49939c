"""Write src/backprop_lessons/data/verses.txt: the character-level corpus of
chapter 6.

Run from the repository root:  python scripts/make_corpus.py

The text is generated, not collected: short four-line verses assembled from
the word lists below by a seeded random grammar, so the corpus is original,
reproducible byte for byte, and dedicated to the public domain (CC0; see
src/backprop_lessons/data/verses-LICENSE.txt).  Lower case letters, space,
comma, period and newline only: a vocabulary of about 30 characters.
A character model has real structure to learn here (spelling, word order,
line and verse breaks) while the text stays small.
"""

from __future__ import annotations

import random
from pathlib import Path

ADJECTIVES = (
    "old",
    "small",
    "quiet",
    "grey",
    "bright",
    "slow",
    "young",
    "tired",
    "gentle",
    "lonely",
    "silver",
    "golden",
    "cold",
    "warm",
    "little",
    "patient",
    "busy",
    "sleepy",
    "brave",
    "wild",
    "soft",
    "dark",
    "green",
    "pale",
)
NOUNS = (
    "fox",
    "bird",
    "river",
    "lantern",
    "baker",
    "moon",
    "boat",
    "child",
    "wind",
    "garden",
    "owl",
    "fisher",
    "stone",
    "kettle",
    "candle",
    "sailor",
    "cat",
    "hill",
    "bell",
    "road",
    "willow",
    "miller",
    "heron",
    "rain",
    "clock",
    "shepherd",
    "cloud",
    "lamp",
    "meadow",
    "orchard",
    "sparrow",
    "weaver",
    "harbor",
    "mill",
    "star",
)
VERBS = (
    "walks",
    "sings",
    "waits",
    "sleeps",
    "listens",
    "turns",
    "wanders",
    "rests",
    "hums",
    "dreams",
    "looks",
    "calls",
    "drifts",
    "runs",
    "shines",
    "whispers",
)
PLACES = (
    "the river",
    "the bridge",
    "the hill",
    "the old mill",
    "the harbor",
    "the garden",
    "the market",
    "the orchard",
    "the meadow",
    "the quiet road",
    "the window",
    "the gate",
    "the well",
    "the tall trees",
    "the little house",
    "the sea",
)
PREPOSITIONS = (
    "by",
    "under",
    "over",
    "near",
    "past",
    "beyond",
    "toward",
    "along",
    "behind",
)
TIMES = (
    "at dawn",
    "at noon",
    "at night",
    "in the rain",
    "in the snow",
    "all day",
    "before supper",
    "after the storm",
    "in the morning",
    "when the bells ring",
    "while the kettle sings",
    "until the stars come out",
)
OBJECTS = (
    "a letter",
    "the bread",
    "a song",
    "the lantern",
    "an apple",
    "a blue cup",
    "the key",
    "a ribbon",
    "the boat",
    "a feather",
    "the map",
    "a warm coat",
)
GIVE_VERBS = (
    "carries",
    "finds",
    "loses",
    "mends",
    "keeps",
    "brings",
    "paints",
    "counts",
)
ENDINGS = (
    "and the day goes on",
    "and nobody minds",
    "and the water is still",
    "and the night is long",
    "and the wind goes home",
    "and all is well",
    "and the fire is low",
    "and the road goes on",
)


def noun_phrase(rng: random.Random) -> str:
    article = rng.choice(("the", "the", "a"))
    if rng.random() < 0.6:
        adjective = rng.choice(ADJECTIVES)
        if article == "a" and adjective[0] in "aeiou":
            article = "an"
        return f"{article} {adjective} {rng.choice(NOUNS)}"
    noun = rng.choice(NOUNS)
    if article == "a" and noun[0] in "aeiou":
        article = "an"
    return f"{article} {noun}"


def line(rng: random.Random) -> str:
    kind = rng.randrange(5)
    if kind == 0:
        verb, where = rng.choice(VERBS), rng.choice(PREPOSITIONS)
        return f"{noun_phrase(rng)} {verb} {where} {rng.choice(PLACES)}"
    if kind == 1:
        verb, what = rng.choice(GIVE_VERBS), rng.choice(OBJECTS)
        return f"{noun_phrase(rng)} {verb} {what} {rng.choice(TIMES)}"
    if kind == 2:
        return f"{rng.choice(TIMES)}, {noun_phrase(rng)} {rng.choice(VERBS)}"
    if kind == 3:
        return f"{noun_phrase(rng)} {rng.choice(VERBS)}, {rng.choice(ENDINGS)}"
    where, place = rng.choice(PREPOSITIONS), rng.choice(PLACES)
    return f"{where} {place} {noun_phrase(rng)} {rng.choice(VERBS)}"


def verse(rng: random.Random) -> str:
    lines = [line(rng) for _ in range(4)]
    lines[1] += ","
    lines[3] += "."
    return "\n".join(lines)


def make_corpus(n_verses: int = 1500, seed: int = 2026) -> str:
    rng = random.Random(seed)
    return "\n\n".join(verse(rng) for _ in range(n_verses)) + "\n"


if __name__ == "__main__":
    text = make_corpus()
    path = Path("src/backprop_lessons/data/verses.txt")
    path.write_text(text, encoding="ascii")
    print(f"wrote {path}: {len(text):,} characters, {len(set(text))} distinct")
