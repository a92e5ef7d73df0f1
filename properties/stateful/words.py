"""Texts of dsh events as the machines draw them: a number of words and a seed, two integer choices.

The estimator counts UTF-16 units (spec 4.1), so the words mix ASCII, Latin-1, CJK and an astral emoji. A text
is drawn straight from the choice sequence (:class:`WordTexts`) rather than through ``st.builds`` of two
``st.integers``: the same two choices, without the three nested draws around them (issue 19 part 2: argument
draws were the largest Hypothesis cost per step once a rule choice was one draw). The seed is an offset into one
fixed stream of words made once (:data:`STREAM`), so a text is a slice: no random generator is seeded per text
(seeding one was a fifth of the cost of a rule's arguments).
"""
from __future__ import annotations

import random

from hypothesis.strategies import SearchStrategy

WORDS = ("read", "the", "file", "tool", "result", "summary", "node", "cut", "price", "claim", "héllo", "日本", "🙂")
SEEDS = 2**14 - 1
LONGEST = 160
STREAM = tuple(random.Random(0).choices(WORDS, k=SEEDS + 1 + LONGEST))
"""The words every text is cut from: text ``(count, seed)`` is ``count`` words from position ``seed``."""


def words(count: int, seed: int) -> str:
    """``count`` words of :data:`WORDS` from position ``seed`` of :data:`STREAM` (``count`` at most
    :data:`LONGEST`)."""
    return " ".join(STREAM[seed:seed + count])


class WordTexts(SearchStrategy):
    """A text of ``min_size``..``max_size`` words; with several ranges, first which range (as ``st.one_of``
    would). Shrinks to the first range, its fewest words, seed 0."""

    def __init__(self, *ranges: tuple[int, int]):
        super().__init__()
        if any(low < 0 or high > LONGEST or low > high for low, high in ranges):
            raise ValueError(f"word counts must lie in 0..{LONGEST}: {ranges!r}")
        self.ranges = ranges

    def __repr__(self) -> str:
        return f"WordTexts{self.ranges!r}"

    def do_draw(self, data) -> str:
        low, high = self.ranges[data.draw_integer(0, len(self.ranges) - 1) if len(self.ranges) > 1 else 0]
        return words(data.draw_integer(low, high), data.draw_integer(0, SEEDS))
