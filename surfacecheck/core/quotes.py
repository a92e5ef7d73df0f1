"""A runtime's own words, found in its installed code: quotes matched as prose, whatever the comment syntax.

Matching is on comment text: per line, leading whitespace and comment markers are dropped (``/**``, ``*``, ``//``
for JavaScript and TypeScript; ``#`` for Python, whose docstrings need none), lines are joined with one space and
runs of whitespace collapse, so a sentence wrapped over three lines is quoted as one sentence.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

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


def check_installed(evidence: dict, where: str, installed: str | None, missing: str, path: Path,
                    unreadable: str, marker: re.Pattern) -> QuoteCheck:
    """The checks every installed-package quote goes through: the distribution installed (``installed`` its version,
    None: ``missing`` says where it was looked for), at the version the quote is of, its file at ``path`` readable
    (else ``unreadable``), the quote in it at the ``line`` the entry says."""
    if installed is None:
        return QuoteCheck(False, where, why=missing)
    if installed != evidence["version"]:
        return QuoteCheck(None, where, why=f"installed {evidence['distribution']} is {installed}, "
                                           f"the quote is of {evidence['version']}")
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return QuoteCheck(False, where, why=unreadable)
    line = find_line(text, evidence["quote"], marker)
    if line is None:
        return QuoteCheck(False, where, why="the quote is not in the file")
    if evidence.get("line") not in (None, line):
        return QuoteCheck(False, where, line, f"the quote starts at line {line}, the entry says {evidence['line']}")
    return QuoteCheck(True, where, line)


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
