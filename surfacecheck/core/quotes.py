"""A runtime's own words, found in its installed code: quotes matched as prose, whatever the comment syntax.

Matching is on comment text: per line, leading whitespace and comment markers are dropped (``/**``, ``*``, ``//``
for JavaScript and TypeScript; ``#`` for Python, whose docstrings need none), lines are joined with one space and
runs of whitespace collapse, so a sentence wrapped over three lines is quoted as one sentence.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

JS_MARKER = re.compile(r"^\s*(?:/\*\*+|\*/|\*|//+)?\s?")
PY_MARKER = re.compile(r"^\s*(?:#+)?\s?")


@dataclass(frozen=True)
class QuoteCheck:
    """Where a quote was looked for and what was found: ``found`` True/False, or None when not checkable here."""

    found: bool | None
    where: str
    line: int | None = None
    why: str = ""

    def to_json(self) -> dict:
        return {"found": self.found, "where": self.where, "line": self.line, "why": self.why}


def normalise(text: str, marker: re.Pattern = JS_MARKER) -> str:
    """Comment text as prose: markers dropped per line, whitespace collapsed (the matching rule above)."""
    return " ".join(" ".join(marker.sub("", line, count=1) for line in text.splitlines()).split())


def find_line(text: str, quote: str, marker: re.Pattern = JS_MARKER) -> int | None:
    """The 1-based line where ``quote`` starts in ``text`` (by the matching rule), or None."""
    wanted = normalise(quote, marker)
    if not wanted:
        return None
    lines = text.splitlines()
    cleaned = [" ".join(marker.sub("", line, count=1).split()) for line in lines]
    starts, position = [], 0
    for piece in cleaned:
        starts.append(position)
        position += len(piece) + 1
    index = _collapsed_find(" ".join(cleaned), wanted)  # empty lines leave doubled spaces: collapsed
    if index is None:
        return None
    line = 0
    while line + 1 < len(starts) and starts[line + 1] <= index:
        line += 1
    return line + 1


def _collapsed_find(prose: str, wanted: str) -> int | None:
    """Offset in ``prose`` of ``wanted`` when runs of spaces in ``prose`` count as one."""
    kept, offsets, previous_space = [], [], False
    for offset, char in enumerate(prose):
        space = char.isspace()
        if space and previous_space:
            continue
        kept.append(" " if space else char)
        offsets.append(offset)
        previous_space = space
    found = "".join(kept).find(wanted)
    return None if found < 0 else offsets[found]
