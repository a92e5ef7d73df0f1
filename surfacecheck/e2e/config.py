"""The cordis composition a scripted run of dsh 0.1.1-rc.1 loads (``DSH_CORDIS_CONFIG``).

``cordis=`` replaces the bundled ``runtime/cordis.yml`` wholesale, and the bundled default has no token-meter,
compaction-basic or pruner rows (nothing would ever compact), so this module writes a complete composition.
Unknown keys stop the runtime at load (the SDK then times out waiting for ``initialize``): every key below was
seen accepted by the pinned executable. The file is JSON, which is YAML 1.2, so no YAML writer is needed and no
``!!js`` expression is used (paths are absolute, the run is hermetic).

Rows that worked (0.1.1rc1, verified by the runs in ``tests/test_e2e_runner.py``):

* ``sdk-jsonrpc-server`` (stdio JSON-RPC for the SDK), ``subprocess`` + ``bash`` (``cwd``: the run's workspace),
  ``fs-local`` (``cwd``), ``session-checkpoints`` (``dsh-session-checkpoint-policy``): as in the bundled default.
* ``agent-core`` = ``dsh-agent-spine-demo`` with ``workspaceContext: false`` and ``skills: {enabled: false}``:
  a hermetic system prompt (no AGENTS.md or skill discovery from the machine).
* ``llm-deepseek``: ``thinking: disabled`` + ``reasoningEffort: off`` (no reasoning blocks),
  ``maxTokens`` = the script's ``requestMaxTokens``, ``defaultContextWindow`` and one ``models`` entry giving
  the scripted model id its ``contextWindow`` (spec 4.4: capacity is resolved live from the adapter),
  ``retryPolicy: {mode: normal, maxRetries: 0}`` so a scripted 500 reaches compaction at once (the adapter's
  default retries five times with backoff). The endpoint and key come from the SDK (``DEEPSEEK_BASE_URL``,
  ``DEEPSEEK_API_KEY``), not from this file.
* ``sessions`` = ``dsh-session-persistence-jsonl`` with ``root`` (the run's session root) and
  ``compression: none`` (plain ``session.jsonl``, header version 0).
* ``token-meter``, ``compaction-basic`` (``thresholdRatio``, ``retainTokens``, ``maxTokens``,
  ``compactionRetries``, ``maxOverflowRetries``; spec 9.1: threshold = ``floor(contextWindow * thresholdRatio)``
  and ``retainTokens`` must be below it), ``tool-result-pruner`` (``thresholdChars``, ``headChars``,
  ``tailChars``; spec 6: ``headChars + 39 + tailChars <= thresholdChars``), ``commands``, ``command-compact``.
* ``surfacecheck-compact``: our test plugin (``plugin/compact_on_marker.mjs``), a local module row given by its
  absolute path; it runs the shipped /compact when the agent goes idle after a reply carrying the marker.
* ``approval`` = ``dsh-user-approval`` with ``policy: never``, only when the script sets ``runtimeContext``
  (:data:`APPROVAL_ROW`, third row): its ``approval:policy`` section is a runtime-context contributor, so each
  step's start enters a runtime-context snapshot after the prompt (spec 12, D9; what §15 G2 and G2b need). Without
  it the composition has no contributor (``workspaceContext: false``) and no snapshot is ever entered. ``never``
  rejects any approval ask at once (nothing here asks: no sandbox rows) instead of waiting for an answerer.

No telemetry row is composed (``dsh-session-telemetry-otel`` defaults to DISABLED and is absent here), and no
sandbox rows: tool calls run for real, so the scripted server only ever asks for ``head -c N /dev/zero | tr``.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from surfacecheck.e2e.server import COMPACT_MARKER, MODEL_ID

PLUGIN_PATH = Path(__file__).resolve().parent / "plugin" / "compact_on_marker.mjs"
PROVIDER = "deepseek-official"

#: Defaults for a script config key that is absent (the runtime's own defaults where sensible, spec A).
DEFAULTS: dict[str, Any] = {
    "contextWindow": 16000, "thresholdRatio": 0.8, "retainTokens": 2000, "maxTokens": 1024,
    "compactionRetries": 1, "maxOverflowRetries": 1, "requestMaxTokens": 1024,
    "pruner": {"thresholdChars": 8192, "headChars": 4096, "tailChars": 1024},
}
CONFIG_KEYS = frozenset(DEFAULTS) | {"auto", "runtimeContext"}
#: The runtime-context contributor ``runtimeContext: true`` composes (inserted after ``agent-core``).
APPROVAL_ROW: dict[str, Any] = {"id": "approval", "name": "@deepseek-ai/dsh-user-approval",
                                "config": {"policy": "never"}}


class ConfigError(ValueError):
    """A script config the runtime would refuse at load (named key, reason)."""


def resolve(config: dict | None) -> dict:
    """The script's config with defaults filled in; unknown keys refused (the runtime would hang on them)."""
    config = dict(config or {})
    unknown = sorted(set(config) - CONFIG_KEYS)
    if unknown:
        raise ConfigError(f"config: unknown key(s) {', '.join(unknown)} (known: {', '.join(sorted(CONFIG_KEYS))})")
    merged = {**DEFAULTS, **config}
    pruner = merged["pruner"]
    if pruner is not None:
        merged["pruner"] = {**DEFAULTS["pruner"], **pruner}
    threshold = int(merged["contextWindow"] * merged["thresholdRatio"])
    if merged["retainTokens"] >= threshold:
        raise ConfigError(f"config: retainTokens {merged['retainTokens']} must be below the threshold "
                          f"floor(contextWindow*thresholdRatio) = {threshold} (spec 9.1)")
    return merged


def cordis_rows(config: dict | None, *, session_root: str, workspace: str,
                plugin_path: str | Path = PLUGIN_PATH, marker: str = COMPACT_MARKER) -> list[dict]:
    """The complete composition (list of cordis rows) for one run."""
    c = resolve(config)
    compaction = {k: c[k] for k in ("thresholdRatio", "retainTokens", "maxTokens",
                                    "compactionRetries", "maxOverflowRetries")}
    if "auto" in c:
        compaction["auto"] = bool(c["auto"])
    rows = [
        {"id": "sdk-jsonrpc-server", "name": "@deepseek-ai/dsh-sdk-jsonrpc-server"},
        {"id": "agent-core", "name": "@deepseek-ai/dsh-agent-spine-demo",
         "config": {"workspaceContext": False, "skills": {"enabled": False}}},
        {"id": "llm-deepseek", "name": "@deepseek-ai/dsh-llm-deepseek",
         "config": {"thinking": "disabled", "reasoningEffort": "off", "maxTokens": c["requestMaxTokens"],
                    "defaultContextWindow": c["contextWindow"],
                    "models": [{"id": MODEL_ID, "name": MODEL_ID, "contextWindow": c["contextWindow"]}],
                    "retryPolicy": {"mode": "normal", "maxRetries": 0}}},
        {"id": "sessions", "name": "@deepseek-ai/dsh-session-persistence-jsonl",
         "config": {"root": session_root, "compression": "none"}},
        {"id": "session-checkpoints", "name": "@deepseek-ai/dsh-session-checkpoint-policy"},
        {"id": "subprocess", "name": "@deepseek-ai/dsh-subprocess-local"},
        {"id": "bash", "name": "@deepseek-ai/dsh-bash-local", "config": {"cwd": workspace}},
        {"id": "fs-local", "name": "@deepseek-ai/dsh-fs-local", "config": {"cwd": workspace}},
        {"id": "token-meter", "name": "@deepseek-ai/dsh-token-meter"},
        {"id": "compaction-basic", "name": "@deepseek-ai/dsh-compaction-basic", "config": compaction},
        {"id": "commands", "name": "@deepseek-ai/dsh-commands"},
        {"id": "command-compact", "name": "@deepseek-ai/dsh-command-compact"},
        {"id": "surfacecheck-compact", "name": str(plugin_path), "config": {"marker": marker}},
    ]
    if c["pruner"] is not None:
        rows.insert(10, {"id": "tool-result-pruner", "name": "@deepseek-ai/dsh-compaction-tool-result-pruner",
                         "config": dict(c["pruner"])})
    if c.get("runtimeContext"):
        rows.insert(2, json.loads(json.dumps(APPROVAL_ROW)))  # a copy: callers may edit the rows
    return rows


def policy_json(config: dict | None) -> dict:
    """The run's policy in the corpus ``policies/*.json`` shape (``model.config.RuntimePolicy.from_json``).

    What ``surfacecheck audit --policy`` and the model's prediction use for the same run.
    """
    c = resolve(config)
    policy = {k: c[k] for k in ("thresholdRatio", "retainTokens", "maxTokens", "compactionRetries",
                                "maxOverflowRetries", "contextWindow")}
    if c["pruner"] is not None:
        policy["toolResultPruner"] = dict(c["pruner"])
    return policy


def write_cordis(path: str | Path, config: dict | None, **kwargs: Any) -> Path:
    """Write the composition for ``config`` to ``path`` (JSON, valid YAML) and return the path."""
    plugin = Path(kwargs.get("plugin_path", PLUGIN_PATH))
    if not plugin.is_file():  # the loader would only log an unresolved row, and /compact would never run
        raise ConfigError(f"{plugin}: the /compact test plugin is missing (package data e2e/plugin/*.mjs)")
    path = Path(path)
    path.write_text(json.dumps(cordis_rows(config, **kwargs), indent=1) + "\n", encoding="utf-8")
    return path
