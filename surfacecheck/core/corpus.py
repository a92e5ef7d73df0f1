"""Where the shared corpus of dsh session logs lives, and what is in it.

The corpus is *not* part of the project: it sits beside the checkout at ``../shared/corpus``
(the layout CI uses) or wherever the environment variable ``SURFACECHECK_CORPUS`` points.
It holds:

* ``dsh-sessions/*.jsonl`` -- session logs recorded by dsh's own snapshot/replay test suites;
* ``dsh-generated/*.jsonl`` -- logs written by the real dsh runtime for the compaction cases the
  recorded logs lack, with ``expected.json`` (the values dsh computed for each) and
  ``policies/NN-*.json`` (the compaction configuration each log ran under).
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

ENV_VAR = "SURFACECHECK_CORPUS"
SESSIONS_DIR = "dsh-sessions"
GENERATED_DIR = "dsh-generated"
EXPECTED_FILE = "expected.json"
POLICIES_DIR = "policies"

REPO_ROOT = Path(__file__).resolve().parents[2]
"""The checkout this package was imported from (meaningful for an editable install)."""

DEFAULT_LOCATION = REPO_ROOT.parent / "shared" / "corpus"
"""``<repo root>/../shared/corpus``: where CI and a developer's workplace keep the corpus."""


class CorpusError(Exception):
    """The corpus is missing, misplaced or malformed (a usage / input problem, exit code 2)."""


def corpus_root() -> Path | None:
    """The corpus directory, or ``None`` if there is none.

    ``$SURFACECHECK_CORPUS`` wins when set (non-empty); it must name an existing directory, else
    :class:`CorpusError`. Otherwise ``<repo root>/../shared/corpus`` if it exists, else ``None``.
    """
    configured = os.environ.get(ENV_VAR, "")
    if configured:
        path = Path(configured).expanduser()
        if not path.is_dir():
            raise CorpusError(f"{ENV_VAR}={configured} is not a directory")
        return path.resolve()
    if DEFAULT_LOCATION.is_dir():
        return DEFAULT_LOCATION
    return None


def _root(root: str | os.PathLike | None) -> Path:
    if root is not None:
        path = Path(root)
        if not path.is_dir():
            raise CorpusError(f"corpus directory {path} does not exist")
        return path
    found = corpus_root()
    if found is None:
        raise CorpusError(
            f"no corpus found: set {ENV_VAR}=/path/to/shared/corpus "
            f"(looked for {DEFAULT_LOCATION})"
        )
    return found


def session_logs(root: str | os.PathLike | None = None) -> list[Path]:
    """The recorded dsh session logs (``dsh-sessions/*.jsonl``), sorted by name."""
    return sorted((_root(root) / SESSIONS_DIR).glob("*.jsonl"))


def generated_logs(root: str | os.PathLike | None = None) -> list[Path]:
    """The logs the real dsh runtime generated (``dsh-generated/*.jsonl``), sorted by name."""
    return sorted((_root(root) / GENERATED_DIR).glob("*.jsonl"))


def generated_expected(root: str | os.PathLike | None = None) -> dict[str, dict[str, Any]]:
    """``dsh-generated/expected.json``, keyed by log file name (e.g. ``"01-prune.jsonl"``).

    Each value is the file's entry as stored: ``file``, ``surface_nodes``, ``generation``,
    ``replacements`` (``seq``, ``kind`` ``"prune"|"checkpoint"``, ``start``, ``end``,
    ``shadowed_seqs``, ``logged_shadow_tokens``, ``replacement_tokens``, ``details``) and ``details``.
    """
    path = _root(root) / GENERATED_DIR / EXPECTED_FILE
    try:
        entries = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise CorpusError(f"{path} is missing") from exc
    except (OSError, ValueError) as exc:
        raise CorpusError(f"{path} cannot be read: {exc}") from exc
    if not isinstance(entries, list) or not all(
        isinstance(entry, dict) and isinstance(entry.get("file"), str) for entry in entries
    ):
        raise CorpusError(f"{path}: expected a list of objects with a 'file' name")
    return {entry["file"]: entry for entry in entries}


def generated_policy(name: str, root: str | os.PathLike | None = None) -> dict[str, Any]:
    """The compaction policy a generated log ran under (``dsh-generated/policies/<stem>.json``).

    ``name`` may be the log's stem (``"01-prune"``) or file name (``"01-prune.jsonl"`` /
    ``"01-prune.json"``). Keys are dsh's own: thresholdRatio, retainTokens, compactionRetries,
    maxOverflowRetries, maxTokens, toolResultPruner{thresholdChars, headChars, tailChars},
    contextWindow.
    """
    stem = Path(name).name
    for suffix in (".jsonl", ".json"):
        if stem.endswith(suffix):
            stem = stem[: -len(suffix)]
            break
    path = _root(root) / GENERATED_DIR / POLICIES_DIR / f"{stem}.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise CorpusError(f"no policy for {name!r}: {path} is missing") from exc
    except (OSError, ValueError) as exc:
        raise CorpusError(f"{path} cannot be read: {exc}") from exc
