"""The dsh releases the e2e pipeline can drive: one immutable :class:`Release` per SDK line.

A release says which SDK version it stands for, which interpreter runs its driver (this one, or the one an
environment variable names: two SDK lines install the same module, so another line lives in its own venv),
how the driver's ``DeepSeekHarness(...)`` arguments are built (``driver``), which wire the scripted model
endpoint speaks (``wire``) and whether its session log opens with a header row. :mod:`.runner` runs every
release the same way (process group, stall and wall-clock timeouts, strict log read, cleanup).

* ``0.1.x`` (the release the spec describes): a cordis file (:mod:`.config`) and a session root; OpenAI chat wire.
* ``0.2.x``: ``DeepSeekHarness(dsh_home, profile="sdk", patches, ...)`` (no ``session_root``/``cordis``); it
  boots ``dsh --profile sdk --patch P``. The profile already lists token-meter, compaction-basic, the pruner and
  command-compact; a patch ``{id: ROW, config}`` replaces a row's whole config, ``{insert: [...]}`` adds a row.
  The log is ``$DSH_HOME/sessions/--<cwd>--/<id>/session.v4.jsonl`` behind a ``{"type":"session"}`` header; the
  wire is Anthropic Messages (:mod:`.wire_anthropic`). Tool calls are sandboxed by default and refused without a
  usable sandbox backend, so the run sets ``DSH_PERMISSION_MODE=danger-full-access`` (harmless ``head | tr`` in
  the throwaway workspace); telemetry and the ``session-log-deepseek`` upload are patched off.
  ``headroom_tokens=None`` keeps the 65536 default of the release's pressure term.

Adding a release is one more :class:`Release` in :data:`RELEASES`.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from . import config as cordis
from .server import COMPACT_MARKER, MODEL_ID

PLUGIN = Path(__file__).resolve().parent / "plugin" / "compact_on_marker.mjs"
V2_PYTHON_ENV = "SURFACECHECK_DSH_V2_PYTHON"


class NoInterpreter(LookupError):
    """A release whose interpreter comes from an environment variable that is not set (CLI exit 2)."""


@dataclass(frozen=True)
class Layout:
    """Where one run keeps its folders (see :mod:`.runner`)."""
    run_dir: Path
    dirs: dict


@dataclass(frozen=True)
class Release:
    """One dsh SDK line: what the pipeline needs to drive it (immutable; see :data:`RELEASES`)."""
    name: str
    sdk_version: str
    python: str | None  # the environment variable naming its interpreter; None: this interpreter
    driver: Callable[[dict, Layout, dict], dict]  # (script, layout, options) -> DeepSeekHarness keyword arguments
    wire: str  # "openai-chat" | "anthropic-messages"
    log_header: bool = False  # the session log's first row is a ``{"type": "session"}`` header
    runtime_env: tuple = ()  # extra (name, value) pairs for the runtime's environment
    session_root: str = "sessions"  # where the runtime writes its session logs, under the run dir

    def interpreter(self, override: str | None = None) -> str:
        """``override``, else this interpreter or the one ``$<python>`` names; unset -> :class:`NoInterpreter`."""
        if override:
            return override
        if self.python is None:
            return sys.executable
        value = os.environ.get(self.python)
        if not value:
            raise NoInterpreter(f"dsh {self.name} runs in its own venv: set {self.python} to its python "
                                f"(or pass --python), e.g. python -m venv .venv-dsh-v2 && .venv-dsh-v2/bin/pip "
                                f"install deepseek-harness-sdk=={self.sdk_version}")
        return value


def _cordis_driver(doc: dict, layout: Layout, options: dict) -> dict:
    dirs = layout.dirs
    config_path = cordis.write_cordis(layout.run_dir / "cordis.json", doc.get("config"),
                                      session_root=str(dirs["sessions"]), workspace=str(dirs["workspace"]))
    return {"provider": cordis.PROVIDER, "model": MODEL_ID, "cwd": str(dirs["workspace"]),
            "session_root": str(dirs["sessions"]), "cordis": str(config_path), "api_key": "sk-surfacecheck",
            "request_timeout_seconds": None, "shutdown_timeout_seconds": 2.0}


def patch_entries(config: dict, *, headroom_tokens: int | None = None, compact_plugin: bool = False) -> list[dict]:
    """The 0.2.x ``--patch`` overlay for a script's config (each entry replaces that row's whole config)."""
    basic = {"thresholdRatio": config["thresholdRatio"], "retainTokens": config["retainTokens"],
             "maxTokens": config.get("maxTokens", 1024), "compactionRetries": config.get("compactionRetries", 1),
             "maxOverflowRetries": config.get("maxOverflowRetries", 1)}
    if headroom_tokens is not None:
        basic["headroomTokens"] = int(headroom_tokens)
    window = int(config["contextWindow"])
    entries = [
        {"id": "compaction-basic", "config": basic},
        {"id": "llm-deepseek", "config": {"thinking": "disabled", "maxTokens": config.get("requestMaxTokens", 1024),
                                          "defaultContextWindow": window,
                                          "models": [{"id": MODEL_ID, "contextWindow": window}]}},
        {"id": "session-persistence-jsonl", "config": {"root": "@@SESSIONS@@", "compression": "none"}},
        {"id": "session-telemetry-otel", "config": {"mode": "DISABLED"}},
        {"id": "session-log-deepseek", "config": {"enabled": False}},
        {"id": "repeat-tool-reminder", "disabled": True},
        {"id": "session-title-llm", "disabled": True},
    ]
    pruner = config.get("pruner")
    if pruner:
        entries.append({"id": "tool-result-pruner", "config": dict(pruner)})
    if compact_plugin:  # the shared /compact test plugin, appended as a new top-level row
        entries.append({"insert": [{"id": "surfacecheck-compact", "name": str(PLUGIN),
                                    "config": {"marker": COMPACT_MARKER}}]})
    return entries


def patch_yaml(entries: list[dict], sessions_root: str) -> str:
    """YAML text of the overlay (JSON is YAML; one entry per line keeps it diffable)."""
    lines = [f"- {json.dumps(e)}" for e in entries]
    return "\n".join(lines).replace('"@@SESSIONS@@"', json.dumps(sessions_root)) + "\n"


def _profile_driver(doc: dict, layout: Layout, options: dict) -> dict:
    dirs = layout.dirs
    compact = any(bool(t.get("compact")) for t in doc.get("turns", []))
    text = patch_yaml(patch_entries(doc["config"], headroom_tokens=options.get("headroom_tokens"),
                                    compact_plugin=compact), str(dirs["sessions"]))
    patch = layout.run_dir / "patch.yml"
    patch.write_text(text, encoding="utf-8")
    return {"dsh_home": str(dirs["dsh-home"]), "profile": "sdk", "patches": [str(patch)], "cwd": str(dirs["workspace"]),
            "api_key": "sk-surfacecheck-offline", "provider": "deepseek-official", "model": MODEL_ID,
            "request_timeout_seconds": options.get("timeout")}


RELEASES: dict[str, Release] = {r.name: r for r in (
    Release(name="0.1.x", sdk_version="0.1.1rc1", python=None, driver=_cordis_driver, wire="openai-chat"),
    Release(name="0.2.x", sdk_version="0.2.1rc2", python=V2_PYTHON_ENV, driver=_profile_driver,
            wire="anthropic-messages", log_header=True, session_root="dsh-home/sessions",
            runtime_env=(("DSH_PERMISSION_MODE", "danger-full-access"),)),
)}
DEFAULT = RELEASES["0.1.x"]


def line_of(version: str | None) -> str | None:
    """The release line (``"0.1.x"``) of a version string (``"0.1.1rc1"``); None when it is not one."""
    if not version:
        return None
    parts = version.split(".")
    try:
        major, minor = int(parts[0]), int("".join(ch for ch in parts[1] if ch.isdigit()) or 0)
    except (ValueError, IndexError):
        return None
    return f"{major}.{minor}.x"


def release(name_or_version: str | None) -> Release:
    """The release named ``"0.2.x"`` or holding version ``"0.2.1rc2"``; a later line is driven as the newest."""
    if not name_or_version:
        return DEFAULT
    if name_or_version in RELEASES:
        return RELEASES[name_or_version]
    line = line_of(name_or_version)
    if line is None:
        raise KeyError(f"unknown dsh release {name_or_version!r}; one of {', '.join(RELEASES)} or a version")
    if line in RELEASES:
        return RELEASES[line]
    newest = max(RELEASES.values(), key=_line_key)
    return newest if _line_key(line) > _line_key(newest.name) else DEFAULT


def _line_key(item) -> tuple[int, int]:
    major, minor = (item if isinstance(item, str) else item.name).split(".")[:2]
    return int(major), int(minor)


def installed_version(python: str) -> str | None:
    """``deepseek-harness-sdk``'s version as seen by ``python`` (None when absent or not runnable)."""
    try:
        out = subprocess.run([python, "-c", "import importlib.metadata as m; print(m.version('deepseek-harness-sdk'))"],
                             capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None
