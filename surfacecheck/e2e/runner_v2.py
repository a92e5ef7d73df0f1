"""Run a script against dsh 0.2.x (``deepseek-harness-sdk>=0.2``) and build the drift report (docs/e2e-drift.md).

* SDK: ``DeepSeekHarness(dsh_home, profile="sdk", patches, ...)`` (no ``session_root``/``cordis``); it boots
  ``dsh --profile sdk --patch P``. The profile already lists token-meter, compaction-basic, the pruner and
  command-compact; a patch ``{id: ROW, config}`` replaces a row's whole config, ``{insert: [...]}`` adds a row.
* Log ``$DSH_HOME/sessions/--<cwd>--/<id>/session.v4.jsonl``; wire Anthropic Messages (``wire_anthropic``).
* Tool calls are sandboxed by default and refused without a usable sandbox backend: the runner sets
  ``DSH_PERMISSION_MODE=danger-full-access`` (harmless ``head | tr`` in the throwaway workspace); telemetry
  and the ``session-log-deepseek`` upload are patched off.
* ``headroom_tokens=None`` keeps the 65536 default of the new pressure term (the drift probe).

The SDK runs in a child process (the shared ``driver.py`` under the 0.2.x venv's python), in its own process
group; a timeout kills the group.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .server import COMPACT_MARKER, MODEL_ID, script_json
from .wire_anthropic import AnthropicScriptedServer

from .runner import RuntimeFailed, RuntimeNotInstalled

DEFAULT_V2_PYTHON: str | None = os.environ.get("SURFACECHECK_DSH_V2_PYTHON")
"""The python of a venv with dsh 0.2.x installed (``$SURFACECHECK_DSH_V2_PYTHON``); ``None`` when it is not set."""
NO_V2_PYTHON = ("no python for dsh 0.2.x: set SURFACECHECK_DSH_V2_PYTHON (or pass --python) to the interpreter of a "
                "venv made with `pip install deepseek-harness-sdk==0.2.1rc2`")
DRIVER = Path(__file__).with_name("driver.py")
PLUGIN = Path(__file__).resolve().parent / "plugin" / "compact_on_marker.mjs"
PROVIDER = "deepseek-official"
EXIT_NO_SDK = 10


def installed_version(python: str) -> str | None:
    """``deepseek-harness-sdk``'s version as seen by ``python`` (None when absent or not runnable)."""
    try:
        out = subprocess.run([python, "-c", "import importlib.metadata as m; print(m.version('deepseek-harness-sdk'))"],
                             capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def adapter_for(version: str | None) -> str | None:
    """Which runner speaks to ``version``: ``"v1"`` (0.1.x, OpenAI wire, cordis file) or ``"v2"`` (0.2.x+)."""
    if not version:
        return None
    parts = version.split(".")
    try:
        major, minor = int(parts[0]), int("".join(ch for ch in parts[1] if ch.isdigit()) or 0)
    except (ValueError, IndexError):
        return None
    return "v1" if (major, minor) < (0, 2) else "v2"


def run_for(script: Any, *, python: str = sys.executable, **kwargs: Any):
    """Detect the SDK beside ``python`` and run ``script`` with the matching adapter (v1: ``runner.run_script``,
    v2: ``run_script_v2``); neither installed -> RuntimeNotInstalled (exit 3)."""
    adapter = adapter_for(installed_version(python))
    if adapter == "v1":
        from .runner import run_script

        return run_script(script, python=python, **kwargs)
    if adapter == "v2":
        return run_script_v2(script, python=python, **kwargs)
    raise RuntimeNotInstalled(f"{python}: deepseek-harness-sdk is not installed (pip install -e '.[dsh]')")


def patch_entries(config: dict, *, headroom_tokens: int | None = None, compact_plugin: bool = False) -> list[dict]:
    """The ``--patch`` overlay for a script's config (each entry replaces that row's whole config)."""
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


@dataclass
class RunV2:
    """A 0.2.x run: the contract's RunResult fields plus the overlay and the log's own name."""

    log_path: Path | None
    events: list[dict]
    header: dict | None
    requests: list[dict]
    stderr_tail: str
    seconds: float
    run_dir: Path
    version: str | None
    patch_text: str = ""
    log_name: str | None = None
    server_errors: list[str] = field(default_factory=list)
    turns: list[dict] = field(default_factory=list)
    headroom_tokens: int | None = None


def find_log(sessions: Path) -> Path | None:
    """The session log under the sessions root (any ``session*.jsonl``, compressed or not)."""
    found = sorted(p for p in sessions.rglob("session*.jsonl*") if not p.name.endswith(".lock"))
    return found[0] if found else None


def read_log(path: Path) -> tuple[dict | None, list[dict]]:
    """Header line and events of a plain JSONL log (0.2.x: header ``{"type":"session","version":4,...}``)."""
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if rows and rows[0].get("type") == "session":
        return rows[0], rows[1:]
    return None, rows


def run_script_v2(script: Any, *, python: str | None = None, keep_dir: str | os.PathLike | None = None,
                  timeout: float = 120.0, headroom_tokens: int | None = None) -> RunV2:
    """Run ``script`` through the 0.2.x SDK in a fresh HOME/DSH_HOME/TMPDIR/workspace; return the log and record.
    ``python`` defaults to :data:`DEFAULT_V2_PYTHON`; with neither, :class:`RuntimeNotInstalled` says what to set."""
    python = python or DEFAULT_V2_PYTHON
    if not python:
        raise RuntimeNotInstalled(NO_V2_PYTHON)
    doc = script_json(script)
    version = installed_version(python)
    if adapter_for(version) != "v2":
        raise RuntimeNotInstalled(f"{python}: deepseek-harness-sdk 0.2.x is not installed (found {version!r}); "
                                  "create a venv with `pip install deepseek-harness-sdk==0.2.1rc2`")
    if keep_dir is not None:  # the run dir is created there and kept (as runner.run_script does)
        run_dir = Path(keep_dir).resolve()
        run_dir.mkdir(parents=True, exist_ok=True)
    else:  # a temp dir, removed by cleanup(run)
        run_dir = Path(tempfile.mkdtemp(prefix="sc-e2e-v2-"))
    dirs = {k: run_dir / k for k in ("home", "dsh-home", "tmp", "workspace")}
    for d in dirs.values():
        d.mkdir(exist_ok=True)
    sessions = dirs["dsh-home"] / "sessions"
    compact = [bool(t.get("compact")) for t in doc["turns"]]
    patch_text = patch_yaml(patch_entries(doc["config"], headroom_tokens=headroom_tokens,
                                          compact_plugin=any(compact)), str(sessions))
    (run_dir / "patch.yml").write_text(patch_text, encoding="utf-8")
    server = AnthropicScriptedServer(doc)
    base_url = server.start()
    env = {"HOME": str(dirs["home"]), "TMPDIR": str(dirs["tmp"]), "DSH_TELEMETRY_MODE": "DISABLED",
           "DSH_PERMISSION_MODE": "danger-full-access", "NO_PROXY": "*", "no_proxy": "*",
           "HTTP_PROXY": "", "HTTPS_PROXY": "", "http_proxy": "", "https_proxy": "", "ALL_PROXY": ""}
    args = {"sdk_kwargs": {"dsh_home": str(dirs["dsh-home"]), "profile": "sdk", "patches": [str(run_dir / "patch.yml")],
                           "cwd": str(dirs["workspace"]), "base_url": base_url, "api_key": "sk-surfacecheck-offline",
                           "provider": PROVIDER, "model": MODEL_ID, "env": env,
                           "request_timeout_seconds": timeout},
            "session_id": "surfacecheck-e2e", "prompts": [t["prompt"] for t in doc["turns"]],
            "compact_after": compact, "control_url": base_url + "/__surfacecheck__/turn",
            "result_path": str(run_dir / "driver-result.json")}
    (run_dir / "driver-args.json").write_text(json.dumps(args), encoding="utf-8")
    child_env = {**os.environ, **env}
    for key in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME"):
        child_env.pop(key, None)
    started = time.monotonic()
    proc = subprocess.Popen([python, str(DRIVER), str(run_dir / "driver-args.json")], cwd=str(dirs["workspace"]),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env,
                            start_new_session=True)
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        _, err = proc.communicate()
        raise RuntimeFailed(f"dsh {version} timed out after {timeout:.0f} s (run dir {run_dir}); "
                            f"server saw {len(server.requests)} requests; stderr: {err[-800:]}") from None
    finally:
        _kill_group(proc)
        server.stop()
    seconds = time.monotonic() - started
    try:
        result = json.loads((run_dir / "driver-result.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        result = {"error": f"driver wrote no result (exit {proc.returncode})", "turns": []}
    if proc.returncode == EXIT_NO_SDK:
        raise RuntimeNotInstalled(f"{python}: {result.get('error')}")
    if proc.returncode != 0 or result.get("error"):
        raise RuntimeFailed(f"dsh {version} failed (exit {proc.returncode}): {result.get('error')}; "
                            f"stderr: {err[-800:]} (run dir {run_dir})")
    log = find_log(sessions)
    if log is None:
        raise RuntimeFailed(f"dsh {version} finished but wrote no session log under {sessions}")
    kept = run_dir / log.name
    shutil.copyfile(log, kept)
    header, events = read_log(kept) if not log.name.endswith(".zstd") else (None, [])
    (run_dir / "requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in server.requests), encoding="utf-8")
    return RunV2(kept, events, header, list(server.requests), err[-2000:], seconds, run_dir, version, patch_text,
                 log.name, list(server.errors), result.get("turns", []), headroom_tokens)


def cleanup(run: RunV2) -> None:
    """Remove a run's temp folder (not a kept one the caller chose)."""
    if run.run_dir.name.startswith("sc-e2e-v2-"):
        shutil.rmtree(run.run_dir, ignore_errors=True)


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


HEADROOM_SMALL = 512
PROBE = {"format": "surfacecheck-e2e-script/1", "name": "drift-prune-probe", "usage": "fixed", "summaries": [],
         "description": "six 6000-char outputs on a 16000-token window: pressure prune under 0.1.1rc1; none under "
                        "0.2.x with default headroom; prune again with headroomTokens small",
         "config": {"contextWindow": 16000, "thresholdRatio": 0.5, "retainTokens": 2000, "maxTokens": 1024,
                    "compactionRetries": 1, "maxOverflowRetries": 1, "requestMaxTokens": 1024,
                    "pruner": {"thresholdChars": 2000, "headChars": 200, "tailChars": 200}},
         "turns": [{"prompt": "run the scripted commands", "compact": False,
                    "replies": [{"tool": {"output_chars": 6000}}] * 6 + [{"text": "done"}]}]}
DRIFT_SCRIPTS = (PROBE,)  # plus H8b's seed scripts (scenarios/e2e)


def scripts_for_drift() -> list[dict]:
    """The drift set: the probe plus the seed scripts (scenarios/e2e)."""
    try:
        from .script import seed_scripts

        seeds = [s.to_json() for s in seed_scripts()]
    except Exception:  # noqa: BLE001 - seeds are optional here
        seeds = []
    return [*DRIFT_SCRIPTS, *seeds]


def run_drift(*, python_b: str | None = None, python_a: str = sys.executable, scripts: list | None = None,
              timeout: float = 120.0, progress=None) -> dict:
    """Run every script on A (0.1.1rc1, H8a's runner) and B (0.2.x, this runner: default headroom, then
    headroomTokens=HEADROOM_SMALL, which separates the headroom drift from the rest); return the drift report.

    A missing A falls back to the spec's recorded facts (``drift.SPEC_FACTS``); a missing B (``python_b`` defaults
    to :data:`DEFAULT_V2_PYTHON`) raises RuntimeNotInstalled (exit 3)."""
    from . import drift as d

    python_b = python_b or DEFAULT_V2_PYTHON
    if not python_b:
        raise RuntimeNotInstalled(NO_V2_PYTHON)
    version_a, version_b = installed_version(python_a), installed_version(python_b)
    if adapter_for(version_b) != "v2":
        raise RuntimeNotInstalled(f"{python_b}: no deepseek-harness-sdk 0.2.x (found {version_b!r})")
    found: list[tuple[str, d.DriftFinding]] = []
    per_script = []
    for doc in scripts if scripts is not None else scripts_for_drift():
        doc = script_json(doc)
        if progress:
            progress(f"drift: {doc['name']}")
        run_a = _run_a(doc, python_a, timeout) if adapter_for(version_a) == "v1" else None
        run_b = run_script_v2(doc, python=python_b, timeout=timeout)
        try:
            mine = d.drift(run_a if run_a is not None else d.SPEC_FACTS, run_b) + d.audit_drift(run_b, doc["config"])
            small = run_script_v2(doc, python=python_b, timeout=timeout, headroom_tokens=HEADROOM_SMALL)
            cleanup(small)
            if doc.get("name") == PROBE["name"]:
                mine += d.headroom_drift(run_a if run_a is not None else _spec_compacts(), run_b, small,
                                         config=doc["config"], headroom_small=HEADROOM_SMALL)
        finally:
            cleanup(run_b)
        found += [(doc["name"], f) for f in mine]
        per_script.append({"script": doc["name"], "b_seconds": round(run_b.seconds, 2),
                           "a_compaction": dict(d.facts(run_a).compaction_first) if run_a else None,
                           "b_compaction": dict(d.facts(run_b).compaction_first),
                           f"b_compaction_headroom_{HEADROOM_SMALL}": dict(d.facts(small).compaction_first),
                           "findings": sorted({f.id for f in mine})})
    if progress:
        progress("drift: SDK arguments and config schema")
    extra = sdk_drift(python_a, python_b, str(version_a), str(version_b)) if version_a else []
    extra += d.config_drift(d.dump_config_schema(python_b), str(version_b))
    return report(merge(found) + extra, version_a=version_a or "0.1.1rc1 (spec facts)", version_b=version_b,
                  extra={"scripts": per_script})


PER_SCRIPT = {"compaction-paths"}
UNION = {"new-event-types", "missing-event-types"}


def merge(found: list[tuple[str, Any]]) -> list:
    """One finding per id across scripts: unions for event-type sets, ``{script: observed}`` where scripts
    disagree, one finding per script for ``compaction-paths`` (the behavioural table)."""
    from .drift import DriftFinding

    by_id: dict[str, list[tuple[str, Any]]] = {}
    for name, f in found:
        by_id.setdefault(f.id, []).append((name, f))
    out = []
    for fid, items in by_id.items():
        names = [n for n, _ in items]
        first = items[0][1]
        if fid in PER_SCRIPT:
            out += [DriftFinding(f"{fid}:{n}", f.what, f.expected, f.observed, f.evidence) for n, f in items]
        elif fid == "audit-event-types":
            joined: dict[str, set] = {}
            for _, f in items:
                for t, rules in f.observed.items():
                    joined.setdefault(t, set()).update(rules)
            out.append(DriftFinding(fid, first.what, {}, {t: sorted(r) for t, r in sorted(joined.items())},
                                    f"{first.evidence}; scripts: {', '.join(names)}"))
        elif fid in UNION:
            union = lambda key: sorted({x for _, f in items for x in getattr(f, key)})  # noqa: E731
            first_at: dict[str, str] = {}
            for n, f in items:
                for part in f.evidence.split(", "):
                    first_at.setdefault(part.split("@")[0], f"{part} ({n})")
            evidence = "first seen: " + ", ".join(first_at[k] for k in sorted(first_at))
            out.append(DriftFinding(fid, first.what, union("expected"), union("observed"), evidence))
        else:
            observed = [f.observed for _, f in items]
            same = all(o == observed[0] for o in observed)
            out.append(DriftFinding(fid, first.what, first.expected, observed[0] if same else
                                    {n: f.observed for n, f in items},
                                    f"{first.evidence}; scripts: {', '.join(names)}"))
    return out


def _run_a(doc: dict, python: str, timeout: float):
    from .runner import run_script

    return run_script(doc, python=python, timeout=timeout)


def _spec_compacts():
    """Stand-in A for the probe when 0.1.1rc1 is not installed: the spec says it compacts (recorded fact)."""
    return RunV2(None, [{"type": "compaction/prune", "seq": -1}], None, [], "", 0.0, Path("."), "0.1.1rc1 (spec)")


def sdk_fields(python: str) -> list[str] | None:
    """Field names of ``DeepSeekHarnessConfig`` as the SDK beside ``python`` defines it."""
    code = ("import dataclasses, json, deepseek_harness as d; "
            "print(json.dumps([f.name for f in dataclasses.fields(d.DeepSeekHarnessConfig)]))")
    try:
        out = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return json.loads(out.stdout) if out.returncode == 0 else None


def sdk_drift(python_a: str, python_b: str, version_a: str, version_b: str) -> list:
    """SDK arguments (``DeepSeekHarness(**kwargs)`` = ``DeepSeekHarnessConfig`` fields) that differ."""
    fa, fb = sdk_fields(python_a), sdk_fields(python_b)
    if fa is None or fb is None or set(fa) == set(fb):
        return []
    from .drift import DriftFinding

    return [DriftFinding("sdk-arguments", "DeepSeekHarness(...) keyword arguments", sorted(fa), sorted(fb),
                         f"dataclasses.fields(DeepSeekHarnessConfig): {version_b} adds {sorted(set(fb) - set(fa))}, "
                         f"drops {sorted(set(fa) - set(fb))} against {version_a}")]




def report(findings, *, version_a: str | None, version_b: str | None,
           extra: dict | None = None) -> dict:
    """One JSON document: the two versions, the findings (sorted by id), anything else the caller adds."""
    items = sorted(findings, key=lambda f: f.id)
    doc = {"format": "surfacecheck-e2e-drift/1", "a": version_a, "b": version_b, "count": len(items),
           "findings": [f.to_json() for f in items]}
    doc.update(extra or {})
    return doc


def human(doc: dict) -> str:
    """The report as text: one line per finding, then its evidence."""
    lines = [f"drift {doc['a']} -> {doc['b']}: {doc['count']} findings"]
    for f in doc["findings"]:
        lines.append(f"  {f['id']}: {f['what']}")
        lines.append(f"      expected {json.dumps(f['expected'])[:200]}")
        lines.append(f"      observed {json.dumps(f['observed'])[:200]}")
        lines.append(f"      evidence {f['evidence'][:300]}")
    return "\n".join(lines)


# Drift already reported and documented (docs/e2e-drift.md) per release: `--known` fails on anything else.
KNOWN_DRIFT = {"0.2.1rc2": frozenset({
    "pressure-threshold-headroom", "config-keys-compaction-basic", "compaction-paths", "log-header-version",
    "log-file-name", "audit-raw", "audit-normalised", "audit-event-types", "surface-event-types", "surface-op-replace-shape",
    "tool-result-shape", "checkpoint-source", "checkpoint-range-start", "overflow-failure-event",
    "assistant-stream-storage", "missing-event-types", "new-event-types", "wire-endpoint", "wire-auth",
    "wire-body-fields", "sdk-arguments"})}


def new_drift(doc: dict) -> list[str]:
    """Finding ids (``id`` or ``id:script``) whose base id is not known for B's version."""
    known = KNOWN_DRIFT.get(str(doc.get("b")), frozenset())
    return [f["id"] for f in doc["findings"] if f["id"].split(":")[0] not in known]


if __name__ == "__main__":  # python -m surfacecheck.e2e.runner_v2 [--python PY] [--json]: the drift report
    import argparse

    parser = argparse.ArgumentParser(prog="python -m surfacecheck.e2e.runner_v2",
                                     description="dsh version drift: 0.1.1rc1/spec vs another installed release")
    parser.add_argument("--python", default=DEFAULT_V2_PYTHON, help="python of the venv holding the other release")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--known", action="store_true",
                        help="exit 1 only on drift not already documented for that release (KNOWN_DRIFT)")
    ns = parser.parse_args()
    try:
        doc = run_drift(python_b=ns.python, timeout=ns.timeout, progress=lambda m: print(m, file=sys.stderr))
    except (RuntimeNotInstalled, RuntimeFailed) as exc:
        print(f"drift: inconclusive: {exc}", file=sys.stderr)
        sys.exit(3)
    doc["new"] = new_drift(doc)
    print(json.dumps(doc, indent=1) if ns.json else human(doc) + f"\nnew (not documented): {doc['new'] or 'none'}")
    sys.exit(1 if (doc["new"] if ns.known else doc["count"]) else 0)
