"""Quotes of dsh's own words in its installed npm packages, for contract findings on dsh and on the model that
reproduces it (``contract/findings.json`` entries whose ``distribution`` is an npm package, ``@scope/name``).

The packages are the pinned ones ``surfacecheck.runtime.dsh`` installs into the cache (``python -m
surfacecheck.runtime.dsh``); ``file`` is relative to the package folder (``lib/index.js``, the bundle that runs,
doc comments kept) and matched as comment prose (:data:`surfacecheck.core.quotes.JS_MARKER`).
"""
from __future__ import annotations

import json
from pathlib import Path

from ..core.quotes import JS_MARKER, QuoteCheck, find_line


def is_npm(evidence: dict) -> bool:
    return str(evidence.get("distribution", "")).startswith("@")


def modules() -> Path | None:
    """The cached ``node_modules`` of dsh's pinned packages, or None when they are not installed (never installs)."""
    from ..runtime.dsh import _cached_modules, modules_problem

    folder = _cached_modules()
    return folder if folder.is_dir() and modules_problem(folder) is None else None


def check_npm_quote(evidence: dict, folder: Path | None = None) -> QuoteCheck:
    """Is ``evidence['quote']`` in the installed package's file, at the version and line the entry says?"""
    where = f"{evidence['distribution']}@{evidence['version']} {evidence['file']}"
    folder = folder or modules()
    if folder is None:
        return QuoteCheck(None, where, why="dsh's npm packages are not installed (python -m surfacecheck.runtime.dsh)")
    package = folder / evidence["distribution"]
    try:
        installed = json.loads((package / "package.json").read_text(encoding="utf-8")).get("version")
    except (OSError, ValueError):
        return QuoteCheck(False, where, why=f"{evidence['distribution']} is not installed in {folder}")
    if installed != evidence["version"]:
        return QuoteCheck(None, where, why=f"installed {evidence['distribution']} is {installed}, the quote is of "
                                           f"{evidence['version']}")
    try:
        text = (package / evidence["file"]).read_text(encoding="utf-8")
    except OSError:
        return QuoteCheck(False, where, why=f"{evidence['file']} is not in {package}")
    line = find_line(text, evidence["quote"], JS_MARKER)
    if line is None:
        return QuoteCheck(False, where, why="the quote is not in the file")
    if evidence.get("line") not in (None, line):
        return QuoteCheck(False, where, line, f"the quote starts at line {line}, the entry says {evidence['line']}")
    return QuoteCheck(True, where, line)
