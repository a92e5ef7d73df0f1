"""Branch coverage of dsh's code from V8's block coverage: which arms of dsh's decisions never ran, and why.

V8's precise coverage gives, per function, its range and its blocks (an ``if`` arm, an ``else``, a ``catch``, the
code after an early ``return``), each with an execution count; a block whose count equals its container's is left
out of a dump (V8 merges it into the container). Summed over every process of a run, a block is **unreached** when
it counts zero while the range holding it ran: the decision was taken, that arm never. A function that never ran
inside code that did is listed once, as a function, not block by block.

Each unreached block carries a reason when one is known: dsh's own ``/* v8 ignore ... -- why */`` comment on it
(dsh's authors mark backstops no caller can reach), or an entry of ``runtimes/dsh/unreached.json`` (file and the
block's first line of code -> why the gate does not reach it). The rest are listed with no reason: the gate's
blind spots.
"""
from __future__ import annotations

import bisect
import json
import re
from dataclasses import dataclass
from pathlib import Path

REASONS = Path(__file__).resolve().parents[2] / "runtimes" / "dsh" / "unreached.json"
IGNORE = re.compile(r"/\*\s*v8 ignore (next|else|if|start)\b[^*]*?(?:--\s*(.*?))?\s*\*/")
IGNORE_STOP = re.compile(r"/\*\s*v8 ignore stop\b")


@dataclass(frozen=True)
class Block:
    """One V8 range of a bundle (UTF-16 offsets), summed over processes: its count and its container's."""

    start: int
    end: int
    function: bool
    count: int
    parent: int

    @property
    def unreached(self) -> bool:
        return self.count == 0 and self.parent > 0


def sum_blocks(dumps: list[list[dict]]) -> list[Block]:
    """Every range of one script over several processes' ``functions`` lists, with summed counts. In a process
    that left a range out, its count is that of the innermost range holding it (V8 merged it there)."""
    keys: dict[tuple[int, int], bool] = {}
    for functions in dumps:
        for function in functions:
            for index, r in enumerate(function.get("ranges", [])):
                key = (r["startOffset"], r["endOffset"])
                keys[key] = keys.get(key, False) or index == 0
    order = sorted(keys)
    starts = [s for s, _ in order]
    own = [0] * len(order)
    parent = [0] * len(order)
    for functions in dumps:
        mine, holder = [0] * len(order), [0] * len(order)
        ranges = [r for f in functions for r in f.get("ranges", [])]
        ranges.sort(key=lambda r: r["endOffset"] - r["startOffset"], reverse=True)  # containers first
        for r in ranges:
            low = bisect.bisect_left(starts, r["startOffset"])
            high = bisect.bisect_left(starts, r["endOffset"])
            for index in range(low, high):
                start, end = order[index]
                if end > r["endOffset"]:
                    continue  # a shorter range at the same start: nested in this key, not holding it
                mine[index] = r["count"]
                if (start, end) != (r["startOffset"], r["endOffset"]):
                    holder[index] = r["count"]
        for index in range(len(order)):
            own[index] += mine[index]
            parent[index] += holder[index]
    return [Block(s, e, keys[(s, e)], own[i], parent[i]) for i, (s, e) in enumerate(order)]


def reasons() -> dict[str, str]:
    """``runtimes/dsh/unreached.json``: ``"<package>/<file>: <first line of code>"`` -> why the gate misses it."""
    if not REASONS.is_file():
        return {}
    return {entry["block"]: entry["why"] for entry in json.loads(REASONS.read_text(encoding="utf-8"))["blocks"]}


def ignored(lines: list[str], line: int) -> str | None:
    """dsh's own ``v8 ignore`` reason for a block starting on ``line`` (1-based): a comment on that line or the
    one before, or a ``start``/``stop`` pair around it."""
    for number in (line, line - 1):
        if 1 <= number <= len(lines):
            match = IGNORE.search(lines[number - 1])
            if match and match.group(1) != "start":
                return f"dsh marks it `v8 ignore {match.group(1)}`" + (f": {match.group(2)}" if match.group(2) else "")
    for number in range(line - 1, 0, -1):
        text = lines[number - 1]
        if IGNORE_STOP.search(text):
            return None
        match = IGNORE.search(text)
        if match and match.group(1) == "start":
            return "dsh marks it `v8 ignore start`" + (f": {match.group(2)}" if match.group(2) else "")
    return None
