"""Quotes from npm packages (the Node conversation runtimes' findings), checked against the installed ``node_modules``.

A finding of ``gemini`` or ``ai`` names the npm package as its ``distribution``, the version, the file inside the
package folder and the line; the quote is looked up in comment-or-prose form by :data:`~surfacecheck.core.quotes.
JS_MARKER` (``//``, ``*`` and ``/**`` markers dropped), so JSDoc comments, ``.d.ts`` declarations and the
Markdown docs the packages ship match the same way.
"""
from __future__ import annotations

import json
from pathlib import Path

from surfacecheck.core.quotes import JS_MARKER, QuoteCheck, find_line


def is_node_modules(environment: Path | None) -> bool:
    return environment is not None and environment.name == "node_modules"


def installed_version(modules: Path, package: str) -> str | None:
    try:
        return json.loads((modules / package / "package.json").read_text(encoding="utf-8")).get("version")
    except (OSError, ValueError):
        return None


def check_quote(evidence: dict, modules: Path) -> QuoteCheck:
    """Is ``evidence['quote']`` in ``modules/<distribution>/<file>``, at the version and line the entry says?"""
    where = f"{evidence['distribution']}@{evidence['version']} {evidence['file']}"
    if not modules.is_dir():
        return QuoteCheck(None, where, why="the runtime's node_modules is not installed")
    installed = installed_version(modules, evidence["distribution"])
    if installed is None:
        return QuoteCheck(False, where, why=f"{evidence['distribution']} is not installed in {modules}")
    if installed != evidence["version"]:
        return QuoteCheck(None, where, why=f"installed {evidence['distribution']} is {installed}, "
                                           f"the quote is of {evidence['version']}")
    try:
        text = (modules / evidence["distribution"] / evidence["file"]).read_text(encoding="utf-8")
    except OSError:
        return QuoteCheck(False, where, why=f"{evidence['file']} is not in {evidence['distribution']}")
    line = find_line(text, evidence["quote"], JS_MARKER)
    if line is None:
        return QuoteCheck(False, where, why="the quote is not in the file")
    if evidence.get("line") not in (None, line):
        return QuoteCheck(False, where, line, f"the quote starts at line {line}, the entry says {evidence['line']}")
    return QuoteCheck(True, where, line)
