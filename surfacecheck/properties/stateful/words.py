"""Texts of dsh events as the machines draw them: a number of words and a seed, two integer choices.

The estimator counts UTF-16 units (spec 4.1), so the words mix ASCII, Latin-1, CJK and an astral emoji. A text
is drawn straight from the choice sequence (:class:`WordTexts`) rather than through ``st.builds`` of two
``st.integers``: the same two choices, without the three nested draws around them (argument draws are the largest
Hypothesis cost per step when a rule choice is one draw).
"""
from __future__ import annotations

import functools
import hashlib

from hypothesis.strategies import SearchStrategy

WORDS = ("read", "the", "file", "tool", "result", "summary", "node", "cut", "price", "claim", "héllo", "日本", "🙂")
SEEDS = 2**32 - 1
_WORD_OF_BYTE = tuple(WORDS[byte % len(WORDS)] for byte in range(256))
"""A byte picks a word: 256 = 19·13 + 9, so the first nine words are each 20/256 of a text, the other four 19/256."""


@functools.lru_cache(maxsize=8192)
def words(count: int, seed: int) -> str:
    """``count`` words of :data:`WORDS`, picked by ``seed``: the first ``count`` bytes of SHAKE-128 of the seed, a
    word each. Texts of different seeds are independent (no shared stream: nearby seeds must not give overlapping
    texts, whose prices would correlate), and one digest costs a third of seeding a ``random.Random``.
    Kept for the last 8,192 (count, seed) pairs: Hypothesis draws the same small seeds again and again (at the CI
    seed, level log asks 2,173 texts of 638 pairs)."""
    return " ".join(map(_WORD_OF_BYTE.__getitem__, hashlib.shake_128(seed.to_bytes(4, "little")).digest(count)))


class WordTexts(SearchStrategy):
    """A text of ``min_size``..``max_size`` words; with several ranges, first which range (as ``st.one_of``
    would). Shrinks to the first range, its fewest words, seed 0."""

    def __init__(self, *ranges: tuple[int, int]):
        super().__init__()
        self.ranges = ranges

    def __repr__(self) -> str:
        return f"WordTexts{self.ranges!r}"

    def do_draw(self, data) -> str:
        low, high = self.ranges[data.draw_integer(0, len(self.ranges) - 1) if len(self.ranges) > 1 else 0]
        return words(data.draw_integer(low, high), data.draw_integer(0, SEEDS))
