"""Line coverage of dsh's own code from V8's block coverage (``NODE_V8_COVERAGE``), per dsh source file.

Every ``node`` process the ``dsh`` runtime starts writes ``coverage-*.json`` into ``NODE_V8_COVERAGE`` when it
exits: per script, its functions and their block ranges with execution counts (precise block coverage). A line's
count is the count of the innermost range holding its first non-blank character (V8's nesting rule: an inner
range overrides its container). dsh ships each package as one bundle ``lib/index.js`` whose ``//#region
lib/types/<file>.js`` markers delimit its source files (``region.js`` is ``region.ts``), so the lines are
attributed to those files; line numbers are the bundle's, the lines a dsh engineer opens in ``node_modules``.
Comment-only and blank lines are not counted. Branches (the blocks of a decision, and the arms never taken) are
summed by :mod:`.branches` and attributed to the same files.
"""
from __future__ import annotations

import bisect
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlparse

from .branches import Block, ignored, reasons, sum_blocks

REGION = re.compile(r"^//#region (\S+)")
ENDREGION = "//#endregion"
SCOPE = "@deepseek-ai/"


@dataclass
class FileCoverage:
    """One dsh source file: which of its lines ran (``hits[line] = count``, bundle line numbers)."""

    package: str
    name: str
    bundle: str
    hits: dict[int, int] = field(default_factory=dict)
    branches: int = 0  # blocks whose container ran
    branches_reached: int = 0
    unreached: list[dict] = field(default_factory=list)  # {line, end_line, kind, code, why}

    @property
    def key(self) -> str:
        return f"{self.package}/{self.name}"

    @property
    def lines(self) -> int:
        return len(self.hits)

    @property
    def covered(self) -> int:
        return sum(1 for count in self.hits.values() if count > 0)

    def missed(self) -> list[tuple[int, int]]:
        """The never-run lines as inclusive ranges of consecutive counted lines."""
        runs, start, last = [], None, None
        for line in sorted(self.hits):
            if self.hits[line] > 0:
                if start is not None:
                    runs.append((start, last))
                    start = None
                continue
            if start is None:
                start = line
            last = line
        if start is not None:
            runs.append((start, last))
        return runs


def _utf16_line_starts(text: str) -> tuple[list[str], list[int]]:
    lines = text.split("\n")
    starts, offset = [], 0
    for line in lines:
        starts.append(offset)
        offset += len(line.encode("utf-16-le")) // 2 + 1
    return lines, starts


def _counted(line: str) -> bool:
    stripped = line.strip()
    return bool(stripped) and not stripped.startswith(("//", "/*", "*", "*/")) and stripped not in ("}", "};", "});")


def line_counts(text: str, functions: list[dict]) -> dict[int, int]:
    """``{line: count}`` for the counted lines of one script (1-based), from its V8 ``functions``."""
    lines, starts = _utf16_line_starts(text)
    probes = []  # (offset of the first non-blank char, line number)
    for number, line in enumerate(lines, start=1):
        if _counted(line):
            indent = len(line) - len(line.lstrip())
            probes.append((starts[number - 1] + len(line[:indent].encode("utf-16-le")) // 2, number))
    offsets = [offset for offset, _ in probes]
    counts = {number: 0 for _, number in probes}
    ranges = [r for f in functions for r in f.get("ranges", [])]
    ranges.sort(key=lambda r: r["endOffset"] - r["startOffset"], reverse=True)  # containers before their blocks
    for r in ranges:
        low = bisect.bisect_left(offsets, r["startOffset"])
        high = bisect.bisect_left(offsets, r["endOffset"])
        for index in range(low, high):
            counts[probes[index][1]] = r["count"]
    return counts


def split_regions(bundle: Path, package: str, counts: dict[int, int]) -> list[FileCoverage]:
    """The bundle's per-line counts, attributed to the source files its ``//#region`` markers delimit."""
    files, current = [], None
    for number, line in enumerate(bundle.read_text(encoding="utf-8").split("\n"), start=1):
        match = REGION.match(line)
        if match:
            current = FileCoverage(package, Path(match.group(1)).name, str(bundle))
            files.append(current)
        elif line.startswith(ENDREGION):
            current = None
        elif current is not None and number in counts:
            current.hits[number] = counts[number]
    return files


def package_of(url: str) -> tuple[str, Path] | None:
    """``(package, bundle path)`` for a ``file://`` URL inside an ``@deepseek-ai`` package, else None."""
    if not url.startswith("file://"):
        return None
    path = Path(unquote(urlparse(url).path))
    parts = path.parts
    for index, part in enumerate(parts[:-1]):
        if part == "@deepseek-ai":
            return parts[index + 1], path
    return None


def attribute_blocks(files: list[FileCoverage], text: str, blocks: list[Block], known: dict[str, str]) -> None:
    """Count each file's branches and list its unreached blocks (bundle line numbers), with the reason known."""
    lines, starts = _utf16_line_starts(text)
    by_line = {}
    for f in files:
        for line in f.hits:
            by_line[line] = f
    for block in blocks:
        if block.parent == 0:
            continue  # inside code that never ran (or the script itself): its lines are the missed ones
        line = bisect.bisect_right(starts, block.start) - 1
        # a block starts at its `{` or just after a `return`/`}`: judge it by its first counted line
        first = next((n for n in range(line + 1, min(len(lines), line + 4) + 1) if n in by_line), None)
        f = by_line.get(first) if first is not None else None
        if f is None:
            continue
        if not block.function:
            f.branches += 1
            f.branches_reached += block.count > 0
        if block.unreached:
            code = lines[first - 1].strip()[:100]
            end = bisect.bisect_right(starts, max(block.start, block.end - 1))
            why = ignored(lines, first) or known.get(f"{f.key}: {code}")
            f.unreached.append({"line": first, "end_line": end, "kind": "function" if block.function else "branch",
                                "code": code, "why": why})


def read_dsh_coverage(folder: Path, wanted: dict[str, tuple[str, ...]]) -> list[FileCoverage]:
    """Every ``coverage-*.json`` in ``folder``, summed over processes, for the ``wanted`` files:
    ``{package: (file names...)}`` (an empty tuple: every file of the package)."""
    totals: dict[tuple[str, str], dict[int, int]] = {}
    bundles: dict[str, Path] = {}
    dumps: dict[str, list[list[dict]]] = {}
    texts: dict[Path, str] = {}  # bundle -> its text, read once
    for dump in sorted(folder.glob("coverage-*.json")):
        try:
            result = json.loads(dump.read_text(encoding="utf-8")).get("result", [])
        except (OSError, ValueError):
            continue  # a process killed while writing: its coverage is lost, the others stand
        for script in result:
            found = package_of(script.get("url", ""))
            if found is None or found[0] not in wanted or found[1].name != "index.js":
                continue
            package, bundle = found
            bundles[package] = bundle
            if bundle not in texts:
                texts[bundle] = bundle.read_text(encoding="utf-8")
            dumps.setdefault(package, []).append(script.get("functions", []))
            counts = line_counts(texts[bundle], script.get("functions", []))
            for line, count in counts.items():
                slot = totals.setdefault((package, str(bundle)), {})
                slot[line] = slot.get(line, 0) + count
    files, known = [], reasons()
    for package in sorted(wanted):
        if package not in bundles:
            continue
        counts = totals[(package, str(bundles[package]))]
        chosen = [f for f in split_regions(bundles[package], package, counts)
                  if not wanted[package] or f.name in wanted[package]]
        attribute_blocks(chosen, texts[bundles[package]], sum_blocks(dumps[package]), known)
        files += chosen
    return files
