"""Quotes from npm packages, checked against an installed ``node_modules``: the Node conversation runtimes'
(``gemini``, ``ai``: their cached ``conversation-node`` install) and dsh's (``dsh``, ``embedded``, ``model``: the
pinned packages ``surfacecheck.runtime.dsh`` installs, which the model reproduces).

A finding names the npm package as its ``distribution``, the version, the file inside the package folder and the
line; the quote is looked up in comment-or-prose form by :data:`~surfacecheck.core.quotes.JS_MARKER` (``//``, ``*``
and ``/**`` markers dropped), so JSDoc comments, ``.d.ts`` declarations, bundles that keep their doc comments and
the Markdown docs the packages ship match the same way.
"""
from __future__ import annotations

import json
from pathlib import Path

from surfacecheck.core.quotes import JS_MARKER, QuoteCheck, check_installed


def is_node_modules(environment: Path | None) -> bool:
    return environment is not None and environment.name == "node_modules"


def dsh_modules() -> Path | None:
    """The cached ``node_modules`` of dsh's pinned packages, or None when they are not installed (never installs)."""
    from surfacecheck.runtime.dsh import _cached_modules, modules_problem

    folder = _cached_modules()
    return folder if folder.is_dir() and modules_problem(folder) is None else None


def installed_version(modules: Path, package: str) -> str | None:
    try:
        return json.loads((modules / package / "package.json").read_text(encoding="utf-8")).get("version")
    except (OSError, ValueError):
        return None


def check_npm_quote(evidence: dict, modules: Path | None = None) -> QuoteCheck:
    """Is ``evidence['quote']`` in ``modules/<distribution>/<file>`` (default: dsh's packages), at the version and
    line the entry says?"""
    where = f"{evidence['distribution']}@{evidence['version']} {evidence['file']}"
    modules = modules or dsh_modules()
    if modules is None or not modules.is_dir():
        return QuoteCheck(None, where, why="the runtime's node_modules is not installed")
    return check_installed(evidence, where, installed_version(modules, evidence["distribution"]),
                           f"{evidence['distribution']} is not installed in {modules}",
                           modules / evidence["distribution"] / evidence["file"],
                           f"{evidence['file']} is not in {evidence['distribution']}", JS_MARKER)
