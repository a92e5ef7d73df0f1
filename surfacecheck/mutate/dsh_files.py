"""Which of dsh's code ``mutate --runtime dsh`` mutates by default, and where it lies in the installed bundles.

dsh ships each package as one bundle ``lib/index.js`` whose ``//#region lib/types/<file>.js`` markers delimit its
source files (``region.js`` is ``region.ts``); Stryker mutates a line range of a file (``FILE:START-END``), so a
dsh source file is its region of the bundle. Every default file names the spec sections its rules come from.
"""
from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from pathlib import Path

REGION = re.compile(r"^//#region lib/types/(\S+)")

DEFAULT_FILES: dict[tuple[str, str], str] = {
    ("dsh-session", "index.js"): "1.3, 1.5",  # Session.append, seeds, resume, fork
    ("dsh-session", "surface.js"): "1.4, 2",  # surface metadata, the surface fold
    ("dsh-session", "repair.js"): "1.6",  # crash repair: the `closers` view (persistence load's repair)
    ("dsh-session", "chunk-rows.js"): "1.7",  # JSONL packed rows: the `rows` and `decode` views
    ("dsh-compaction", "tool-pairing.js"): "3",
    ("dsh-compaction", "checkpoint.js"): "8",
    ("dsh-compaction", "index.js"): "3, 8",
    ("dsh-compaction-basic", "config.js"): "9.1",
    ("dsh-compaction-basic", "summarizer.js"): "8.5",
    ("dsh-compaction-basic", "region.js"): "7, 8",
    ("dsh-compaction-basic", "index.js"): "9, 10, 11.2",
    ("dsh-token-meter", "estimate.js"): "4.1",
    ("dsh-token-meter", "surface-projection.js"): "5.1",
    ("dsh-token-meter", "usage-projection.js"): "5.2",
    ("dsh-token-meter", "surface-fold.js"): "4.2",
    ("dsh-token-meter", "index.js"): "4.2-4.4",
    ("dsh-compaction-tool-result-pruner", "config.js"): "6",
    ("dsh-compaction-tool-result-pruner", "index.js"): "6",
    ("dsh-command-compact", "index.js"): "11.1",
    ("dsh-agent-loop", "runtime-context.js"): "12",
}
"""(package, source file) -> spec sections: the compaction-relevant files."""


@dataclass(frozen=True)
class SourceFile:
    """One dsh source file as a range of its package's bundle (1-based, inclusive lines)."""

    package: str
    name: str
    start: int
    end: int
    sections: str

    @property
    def key(self) -> str:
        return f"{self.package}/{self.name}"

    def bundle(self, root: Path) -> Path:
        return root / "@deepseek-ai" / self.package / "lib" / "index.js"


def regions(bundle: Path) -> list[tuple[str, int, int]]:
    """``(file, first line, last line)`` of every ``//#region`` of a bundle."""
    found, current = [], None
    lines = bundle.read_text(encoding="utf-8").split("\n")
    for number, line in enumerate(lines, start=1):
        match = REGION.match(line)
        if match:
            current = (match.group(1), number)
        elif line.startswith("//#endregion") and current is not None:
            found.append((current[0], current[1], number))
            current = None
    return found


def select_files(modules: Path, patterns: list[str] | None) -> list[SourceFile]:
    """The default files, or those of ``modules``' compaction packages matching a ``--files`` glob
    (``PACKAGE/FILE``, e.g. ``dsh-compaction-basic/region.js`` or ``dsh-token-meter/*``); ValueError names a glob
    that matches nothing."""
    packages = sorted({package for package, _ in DEFAULT_FILES})
    chosen: list[SourceFile] = []
    unmatched = list(patterns or [])
    for package in packages:
        bundle = modules / "@deepseek-ai" / package / "lib" / "index.js"
        for name, start, end in regions(bundle):
            key = f"{package}/{name}"
            if patterns:
                hits = [p for p in patterns if fnmatch.fnmatch(key, p)]
                unmatched = [p for p in unmatched if p not in hits]
                if not hits:
                    continue
            elif (package, name) not in DEFAULT_FILES:
                continue
            chosen.append(SourceFile(package, name, start, end, DEFAULT_FILES.get((package, name), "")))
    if unmatched:
        raise ValueError(f"--files {unmatched[0]!r} matches no dsh source file (PACKAGE/FILE of "
                         f"{', '.join(packages)}; e.g. dsh-compaction-basic/region.js)")
    return chosen
