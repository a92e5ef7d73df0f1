"""dsh's own words, checked: every finding's class is argued from a quote of dsh's published text.

A registry ``evidence`` object names a quote and where it stands — ``package`` (``@deepseek-ai/dsh-…``),
``file`` (relative to the package root: ``lib/index.js``, ``lib/types/….d.ts``, ``README.md``), the npm
``version`` and the 1-based ``line`` — or, with ``source: "spec-14.3"``, the name of a dsh test as the spec's
test inventory (§14.3) writes it. :func:`check_quote` finds the quote in the installed package (the cache the
``dsh`` runtime installs, or ``SURFACECHECK_DSH_MODULES``), so a registry that misquotes dsh, or a dsh release
that drops the words, is caught instead of trusted.

Matching is on comment text: per line, leading whitespace and comment markers (``/**``, ``*``, ``//``) are
dropped, lines are joined with one space and runs of whitespace collapse, so a JSDoc sentence wrapped over
three lines is quoted as one sentence.
"""
from __future__ import annotations

import json
from pathlib import Path

from surfacecheck.core.quotes import QuoteCheck, find_line, normalise  # noqa: F401 - dsh quotes match by these rules

VERSION = "0.1.0-rc.8"
"""The dsh release the registry quotes (the spec's commit 611615650f, the adapter's pinned packages)."""
KINDS = ("promise", "intent", "silent")
"""What a quote shows: dsh ``promise``s the property (a defect's evidence), documents or ``intent``s the
behaviour (a tradeoff's), or describes the mechanism and stays ``silent`` on the promise (a design question's)."""
SOURCES = ("package", "spec-14.3")


def installed_modules() -> Path | None:
    """The ``node_modules`` holding dsh's packages, without installing: ``SURFACECHECK_DSH_MODULES`` or the
    cache ``--runtime dsh`` fills; None when neither exists."""
    from surfacecheck.runtime import dsh

    folder = dsh.explicit_modules("dsh")
    if folder is not None:
        return folder if folder.is_dir() else None
    cached = dsh._cached_modules()
    return cached if cached.is_dir() else None


def spec_path() -> Path | None:
    """The dsh spec beside the corpus (``../shared/spec/dsh-compaction-spec.md``), if present."""
    from surfacecheck.core.corpus import corpus_root

    try:
        root = corpus_root()
    except Exception:  # a bad SURFACECHECK_CORPUS is reported by the commands that need the corpus
        root = None
    candidates = [root.parent / "spec" / "dsh-compaction-spec.md"] if root else []
    candidates.append(Path(__file__).resolve().parents[3] / "shared" / "spec" / "dsh-compaction-spec.md")
    return next((c for c in candidates if c.is_file()), None)


def check_quote(evidence: dict, modules: Path | None = None, spec: Path | None = None) -> QuoteCheck:
    """Is ``evidence['quote']`` where the entry says, at the version it says?"""
    quote = evidence["quote"]
    if evidence.get("source") == "spec-14.3":
        spec = spec or spec_path()
        if spec is None:
            return QuoteCheck(None, "spec §14.3", why="the dsh spec is not beside the corpus")
        text = spec.read_text(encoding="utf-8")
        begin = text.find("### 14.3")
        found = find_line(text[begin:text.find("### 14.4")], quote)
        line = None if found is None else text[:begin].count("\n") + found
        return _located(QuoteCheck(line is not None, f"{spec.name} §14.3", line,
                                   "" if line else "the test name is not in the spec's test inventory"), evidence)
    modules = modules or installed_modules()
    where = f"{evidence['package']}@{evidence['version']} {evidence['file']}"
    if modules is None:
        return QuoteCheck(None, where, why="dsh's packages are not installed (python -m surfacecheck.runtime.dsh)")
    package = modules / evidence["package"]
    try:
        installed = json.loads((package / "package.json").read_text(encoding="utf-8")).get("version")
    except (OSError, ValueError):
        return QuoteCheck(False, where, why=f"{evidence['package']} is not installed in {modules}")
    if installed != evidence["version"]:
        return QuoteCheck(None, where, why=f"installed {evidence['package']} is {installed}, the quote is of "
                                           f"{evidence['version']}")
    try:
        text = (package / evidence["file"]).read_text(encoding="utf-8")
    except OSError:
        return QuoteCheck(False, where, why=f"{evidence['file']} is not in {evidence['package']}")
    line = find_line(text, quote)
    if line is None:
        return QuoteCheck(False, where, why="the quote is not in the file")
    return _located(QuoteCheck(True, where, line), evidence)


def _located(result: QuoteCheck, evidence: dict) -> QuoteCheck:
    """A found quote must also start at the line the entry names (when it names one)."""
    if result.found and evidence.get("line") not in (None, result.line):
        return QuoteCheck(False, result.where, result.line,
                          f"the quote starts at line {result.line}, the entry says {evidence['line']}")
    return result


def quote_problem(evidence, where: str) -> str | None:
    """Why ``evidence`` is not a well-formed quote object (registry validation), or None."""
    if not isinstance(evidence, dict):
        return f"{where}: expected an object {{kind, quote, package, file, version, line}}"
    if evidence.get("kind") not in KINDS:
        return f"{where}: kind must be one of {KINDS}, got {evidence.get('kind')!r}"
    if evidence.get("source", "package") not in SOURCES:
        return f"{where}: source must be one of {SOURCES}"
    needed = ("quote",) if evidence.get("source") == "spec-14.3" else ("quote", "package", "file", "version")
    missing = [k for k in needed if not isinstance(evidence.get(k), str) or not evidence[k].strip()]
    if missing:
        return f"{where}: missing or empty {', '.join(missing)}"
    if "line" in evidence and not (isinstance(evidence["line"], int) and evidence["line"] >= 1):
        return f"{where}: line must be a positive integer"
    return None
