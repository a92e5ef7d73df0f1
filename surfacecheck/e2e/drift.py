"""Version drift: what another dsh release changes against 0.1.1rc1 / the spec, as named findings.

``drift(run_a, run_b)`` compares two runs of the same script (A = 0.1.1rc1 or the spec's recorded facts,
B = the other release) fact by fact: the log's header version and file name (spec 1.7), its event vocabulary
and surface events (spec 1.1-1.4), the surfaceOp replace shape (spec 1.4), the tool/result message shape
(spec 1.2), the wire (endpoint, auth headers, request body fields), and which compaction paths fired.
Further sources, each with its own function: the SDK's arguments (``sdk_drift``), the config schema
(``config_drift``: ``dsh --dump-config-schema`` rows against spec 6/9.1 keys), the pressure threshold observed
behaviourally (``headroom_drift``), and the model's audit of B's log (``audit_drift``: which rules fire).
Every finding is ``DriftFinding{id, what, expected (A/spec), observed (B), evidence}``.
"""
from __future__ import annotations

import json
import os
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from surfacecheck.model.estimate import estimate_message
from surfacecheck.model.event import SURFACE_EVENT_TYPES

COMPACTION_TYPES = ("compaction/prune", "compaction/start", "compaction/summary", "compaction/end")
# Spec 9.1 (compaction-basic), 6 (tool-result pruner) and 4 (token-meter: no config keys) key sets.
SPEC_KEYS = {
    "compaction-basic": {"thresholdRatio", "retainRatio", "retainTokens", "summarizationProvider",
                         "summarizationModel", "maxTokens", "compactionRetries", "maxOverflowRetries",
                         "modelPolicies", "auto"},
    "tool-result-pruner": {"thresholdChars", "headChars", "tailChars"},
    "token-meter": set(),
}
ROW_PACKAGES = {"compaction-basic": "@deepseek-ai/dsh-compaction-basic",
                "tool-result-pruner": "@deepseek-ai/dsh-compaction-tool-result-pruner",
                "token-meter": "@deepseek-ai/dsh-token-meter"}
SPEC_DEFAULTS = {"compaction-basic": {"maxTokens": 8192}, "tool-result-pruner":
                 {"thresholdChars": 8192, "headChars": 4096, "tailChars": 1024}}


@dataclass(frozen=True)
class DriftFinding:
    """One thing that changed: ``expected`` is 0.1.1rc1 / the spec, ``observed`` the other release."""

    id: str
    what: str
    expected: Any
    observed: Any
    evidence: str

    def to_json(self) -> dict:
        return {"id": self.id, "what": self.what, "expected": self.expected, "observed": self.observed,
                "evidence": self.evidence}


@dataclass(frozen=True)
class RunFacts:
    """What a run shows about its release, reduced to comparable values."""

    version: str | None
    log_name: str | None
    header_version: int | None
    event_types: tuple[str, ...]
    surface_types: tuple[str, ...]
    replace_shape: tuple[str, ...] | None
    tool_result_shape: str | None
    request_paths: tuple[str, ...]
    auth_headers: tuple[str, ...]
    body_fields: tuple[str, ...]
    compaction_first: tuple[tuple[str, int], ...]
    first_seq: dict
    overflow_event: str | None = None
    checkpoint_source: str | None = None
    checkpoint_start: str | None = None
    stream_storage: str | None = None

    def to_json(self) -> dict:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in self.__dict__.items()}


# What the spec (0.1.0-rc.8 = 0.1.1rc1's compaction code) and dsh-runtime-e2e-facts.md record for 0.1.1rc1.
SPEC_FACTS = RunFacts(
    version="0.1.1rc1 (spec)", log_name="session.jsonl", header_version=0, event_types=(),
    surface_types=tuple(sorted(SURFACE_EVENT_TYPES)), replace_shape=("end", "op", "start"),
    tool_result_shape="role=user, content=[tool-result{toolCallId, content[]}]",
    request_paths=("/chat/completions",), auth_headers=("authorization",), body_fields=(),
    compaction_first=(), first_seq={}, overflow_event="assistant/chunk (finish error)",
    checkpoint_source="plugin/compact", checkpoint_start="head (first surface node)",
    stream_storage="assistant/chunk events")


def _tool_result_shape(message: Any) -> str | None:
    if not isinstance(message, dict):
        return None
    content = message.get("content") or []
    if message.get("role") == "user" and content and all(isinstance(b, dict) and b.get("type") == "tool-result"
                                                           for b in content):
        return "role=user, content=[tool-result{toolCallId, content[]}]"
    kinds = sorted({b.get("type") for b in content if isinstance(b, dict)})
    where = "toolCallId on the message" if "toolCallId" in message else "no toolCallId"
    return f"role={message.get('role')}, {where}, content=[{', '.join(kinds)}]"


def facts(run: Any) -> RunFacts:
    """Reduce a run (``events``, ``requests``, ``version``, ``log_path`` / ``log_name`` / ``header``) to facts."""
    raw = list(getattr(run, "events", None) or [])
    events = [e for e in raw if e.get("type") != "session"]
    header = next((e for e in raw if e.get("type") == "session"), None) or getattr(run, "header", None)
    first: dict[str, int] = {}
    surface, replace_shape, tool_shape = set(), None, None
    for e in events:
        first.setdefault(e.get("type"), e.get("seq"))
        op = e.get("surfaceOp")
        if op is not None:
            surface.add(e.get("type"))
            if isinstance(op, dict) and replace_shape is None:
                replace_shape = tuple(sorted(op))
        if e.get("type") == "tool/result" and tool_shape is None:
            tool_shape = _tool_result_shape((e.get("data") or {}).get("message"))
    extra = _behaviour_facts(events)
    requests = list(getattr(run, "requests", None) or [])
    paths = sorted({str(r.get("path", "")).split("?")[0] for r in requests if "__surfacecheck__" not in str(r.get("path"))})
    auth = sorted({h for r in requests for h in (r.get("headers") or {})
                   if h in ("authorization", "x-api-key", "anthropic-version")})
    fields = sorted({k for r in requests if isinstance(r.get("body"), dict) for k in r["body"]})
    log_name = getattr(run, "log_name", None) or (Path(run.log_path).name if getattr(run, "log_path", None) else None)
    comp = tuple((t, first[t]) for t in COMPACTION_TYPES if t in first)
    return RunFacts(getattr(run, "version", None), log_name, header.get("version") if header else None,
                    tuple(sorted(first)), tuple(sorted(surface)), replace_shape, tool_shape, tuple(paths),
                    tuple(auth), tuple(fields), comp, first, **extra)


def _behaviour_facts(events: list[dict]) -> dict:
    """Where overflow is logged (spec 10.1), the checkpoint's source and range start (spec 7, 8), stream storage."""
    out: dict[str, Any] = {}
    surface_first = next((e for e in events if e.get("surfaceOp") is not None), None)
    for e in events:
        kind, data = e.get("type"), e.get("data") or {}
        if "overflow_event" not in out and "CONTEXT_WINDOW_EXCEEDED" in json.dumps(data):
            out["overflow_event"] = kind + (" (finish error)" if kind == "assistant/chunk" else "")
        if kind == "user/message" and isinstance(e.get("surfaceOp"), dict) and "checkpoint_source" not in out:
            src = data.get("source") or {}
            out["checkpoint_source"] = "/".join(str(src[k]) for k in ("kind", "plugin") if k in src)
        if kind == "compaction/summary" and "checkpoint_start" not in out and surface_first is not None:
            start = (data.get("shadowedRange") or {}).get("start")
            out["checkpoint_start"] = ("head (first surface node)" if start == surface_first.get("seq") else
                                       f"after the first surface node ({surface_first.get('type')}, pinned)")
    if any(e.get("type") == "assistant/chunk" for e in events):
        out["stream_storage"] = "assistant/chunk events"
    elif any("stream" in (e.get("data") or {}) for e in events if e.get("type") == "assistant/message"):
        out["stream_storage"] = "inline assistant/message.data.stream"
    return out


BEHAVIOUR = (("overflow_event", "overflow-failure-event", "event that carries the CONTEXT_WINDOW_EXCEEDED step "
              "failure (spec 10.1; the audit finds overflow recovery by it)"),
             ("checkpoint_source", "checkpoint-source", "checkpoint user/message source (spec A: {kind:'plugin', "
              "plugin:'compact'})"),
             ("checkpoint_start", "checkpoint-range-start", "where a summary's shadowed range starts (spec 7: "
              "head-anchored, no node type is pinned)"),
             ("stream_storage", "assistant-stream-storage", "where the streamed chunks are logged (spec 1.2: one "
              "assistant/chunk per streamed chunk)"))


def drift(run_a: Any, run_b: Any) -> list[DriftFinding]:
    """Findings for everything B's log and requests show differently from A's (A may be ``SPEC_FACTS``)."""
    a = run_a if isinstance(run_a, RunFacts) else facts(run_a)
    b = run_b if isinstance(run_b, RunFacts) else facts(run_b)
    va, vb = a.version, b.version
    out: list[DriftFinding] = []

    def add(fid, what, exp, obs, evidence):
        if exp != obs:
            out.append(DriftFinding(fid, what, exp, obs, evidence))

    add("log-header-version", "session log header version (spec 1.7: a foreign version is refused before any "
        "shape check)", a.header_version, b.header_version, f"line 1 of {b.log_name} ({vb})")
    add("log-file-name", "session log file name (spec 1.7: <root>/--<cwd>--/<id>/session.jsonl)", a.log_name,
        b.log_name, f"file found under the session root ({vb})")
    if a.event_types:
        new = sorted(set(b.event_types) - set(a.event_types))
        gone = sorted(t for t in set(a.event_types) - set(b.event_types)
                      if not t.startswith(("compaction/", "command/")))  # behaviour: see compaction-paths
        if new:
            out.append(DriftFinding("new-event-types", "event types this release writes that the same script did "
                                    f"not produce under {va}", [], new,
                                    ", ".join(f"{t}@{b.first_seq[t]}" for t in new)))
        if gone:
            out.append(DriftFinding("missing-event-types", f"event types {va} wrote for this script that this "
                                    "release does not", gone, [], f"script run under both ({va} vs {vb})"))
    extra_surface = sorted(set(b.surface_types) - set(SURFACE_EVENT_TYPES) - set(a.surface_types))
    if extra_surface:
        out.append(DriftFinding("surface-event-types", "event types carrying surfaceOp (spec 1.1: exactly "
                                "user/message, assistant/message, tool/result)", sorted(SURFACE_EVENT_TYPES),
                                sorted(b.surface_types), "first seqs: " + ", ".join(
                                    f"{t}@{b.first_seq[t]}" for t in extra_surface)))
    if b.replace_shape is not None:
        add("surface-op-replace-shape", "replace surfaceOp keys (spec 1.4: {op:'replace', start, end})",
            list(a.replace_shape or SPEC_FACTS.replace_shape), list(b.replace_shape),
            f"first replace surfaceOp in {b.log_name}")
    if b.tool_result_shape is not None:
        add("tool-result-shape", "tool/result message shape (spec 1.2 message shapes)",
            a.tool_result_shape or SPEC_FACTS.tool_result_shape, b.tool_result_shape,
            f"tool/result@{b.first_seq.get('tool/result')}")
    if b.request_paths:
        add("wire-endpoint", "model endpoint path the adapter posts to", list(a.request_paths or
            SPEC_FACTS.request_paths), list(b.request_paths), f"server record of {vb}")
        add("wire-auth", "auth/version headers on model requests", list(a.auth_headers or SPEC_FACTS.auth_headers),
            list(b.auth_headers), f"server record of {vb} (values redacted)")
    if a.body_fields and b.body_fields:
        new_fields = sorted(set(b.body_fields) - set(a.body_fields))
        if new_fields:
            out.append(DriftFinding("wire-body-fields", "request body fields not sent by " + str(va), [],
                                    new_fields, f"server record of {vb}"))
    for attr, fid, what in BEHAVIOUR:
        exp = getattr(a, attr) or getattr(SPEC_FACTS, attr)
        if getattr(b, attr) is not None and getattr(a, attr) is not None:
            add(fid, what, exp, getattr(b, attr), f"{attr.replace('_', ' ')} in {b.log_name} ({vb})")
    if a.compaction_first or b.compaction_first:
        add("compaction-paths", "compaction event types the same script produced (which paths fired)",
            [t for t, _ in a.compaction_first], [t for t, _ in b.compaction_first],
            f"first seqs: {va} {dict(a.compaction_first)}, {vb} {dict(b.compaction_first)}")
    return out


def prune_prices(events: Iterable[dict]) -> list[tuple[int, int, int]]:
    """``(seq, logged shadowedTokenCount, model's estimateMessage)`` per compaction/prune (spec 4.1, 6)."""
    by_seq = {e.get("seq"): e for e in events}
    out = []
    for e in by_seq.values():
        if e.get("type") != "compaction/prune":
            continue
        data = e.get("data") or {}
        priced = sum(estimate_message((by_seq.get(s, {}).get("data") or {}).get("message") or {"content": []})
                     for s in data.get("shadowedSeqs", []))
        out.append((e["seq"], data.get("shadowedTokenCount"), priced))
    return out


def headroom_drift(run_a: Any, run_b_default: Any, run_b_small: Any, *, config: dict,
                   headroom_small: int, headroom_default: int = 65536) -> list[DriftFinding]:
    """Pressure threshold observed behaviourally: A compacts, B with default headroom does not, B with a
    small headroom does again (0.2.x: min(window*ratio, window - requestMaxTokens - headroomTokens))."""
    fa, fd, fs = (facts(r) for r in (run_a, run_b_default, run_b_small))
    window, ratio = config["contextWindow"], config["thresholdRatio"]
    request_max = config.get("requestMaxTokens", 1024)
    spec_threshold = int(window * ratio)
    budget_default = window - request_max - headroom_default
    budget_small = window - request_max - headroom_small
    fired = {name: bool(f.compaction_first) for name, f in (("a", fa), ("default", fd), ("small", fs))}
    if not (fired["a"] and not fired["default"] and fired["small"]):
        return []
    return [DriftFinding(
        "pressure-threshold-headroom",
        "pressure threshold (spec 9.1: floor(window x thresholdRatio)); 0.2.x subtracts requestMaxTokens and "
        "headroomTokens (default 65536) and silently never compacts when that budget is not positive",
        {"threshold": spec_threshold, "compacts": True},
        {"threshold_default": None if budget_default <= 0 else min(spec_threshold, budget_default),
         "budget_default": budget_default, "compacts_default": False,
         "threshold_headroom_small": min(spec_threshold, budget_small), "headroomTokens": headroom_small,
         "compacts_headroom_small": True},
        f"same script (window {window}, ratio {ratio}, requestMaxTokens {request_max}): {fa.version} first "
        f"compaction {dict(fa.compaction_first)}; {fd.version} default headroom: none "
        f"({len(getattr(run_b_default, 'events', []))} events); headroomTokens={headroom_small}: "
        f"{dict(fs.compaction_first)}")]


def dump_config_schema(python: str, timeout: float = 120.0) -> dict:
    """``dsh --profile sdk --dump-config-schema`` of the release installed beside ``python`` (fresh DSH_HOME)."""
    dsh = Path(python).with_name("dsh")
    with tempfile.TemporaryDirectory(prefix="sc-dsh-schema-") as home:
        env = {**os.environ, "DSH_HOME": home, "HOME": home, "TMPDIR": home, "DSH_TELEMETRY_MODE": "DISABLED"}
        out = subprocess.run([str(dsh), "--profile", "sdk", "--dump-config-schema"], capture_output=True,
                             text=True, timeout=timeout, env=env)
    if out.returncode != 0:
        raise RuntimeError(f"{dsh} --dump-config-schema failed ({out.returncode}): {out.stderr[-400:]}")
    return json.loads(out.stdout)


def schema_rows(schema: dict) -> dict[str, dict]:
    """Package name -> its config schema's properties (the object branch) from a dumped schema."""
    defs = schema.get("$defs", {})
    rows: dict[str, dict] = {}
    for clause in (defs.get("entry") or {}).get("allOf", []):
        name = (((clause.get("if") or {}).get("properties") or {}).get("name") or {}).get("const")
        try:
            ref = clause["then"]["properties"]["config"]["anyOf"][0]["$ref"].rsplit("/", 1)[-1]
        except (KeyError, IndexError, TypeError):
            continue
        branch = next((b for b in (defs.get(ref) or {}).get("anyOf", []) if "properties" in b), {})
        if name:
            rows[name] = branch.get("properties", {})
    return rows


def config_drift(schema: dict, version: str) -> list[DriftFinding]:
    """Compaction / pruner / token-meter rows of a dumped config schema against the spec's key sets."""
    rows = schema_rows(schema)
    out = []
    for row, package in ROW_PACKAGES.items():
        if package not in rows:
            out.append(DriftFinding(f"config-row-{row}", f"{row} row ({package}) in the config schema",
                                    "present", "absent", f"{version} --dump-config-schema"))
            continue
        keys = set(rows[package])
        added, removed = sorted(keys - SPEC_KEYS[row]), sorted(SPEC_KEYS[row] - keys)
        if added or removed:
            out.append(DriftFinding(f"config-keys-{row}", f"{row} config keys (spec: unknown keys are refused "
                                    "at load)", sorted(SPEC_KEYS[row]), sorted(keys),
                                    f"{version} --dump-config-schema: added {added}, removed {removed}"))
        for key, default in SPEC_DEFAULTS.get(row, {}).items():
            shown = (rows[package].get(key) or {}).get("default")
            if shown is not None and shown != default:
                out.append(DriftFinding(f"config-default-{row}-{key}", f"{row}.{key} default", default, shown,
                                        f"{version} --dump-config-schema"))
    return out


def normalise_v4(lines: list[str]) -> list[str]:
    """A v4 log rewritten into the spec's shapes where the change is a pure renaming: header version 0,
    replace ``{startSeq, endSeq}`` -> ``{start, end}``. ``system/message`` keeps its surfaceOp (a real change)."""
    out = []
    for number, line in enumerate(lines):
        obj = json.loads(line)
        if number == 0 and obj.get("type") == "session":
            obj["version"] = 0
        op = obj.get("surfaceOp")
        if isinstance(op, dict) and "startSeq" in op:
            obj["surfaceOp"] = {"op": op.get("op"), "start": op["startSeq"], "end": op["endSeq"]}
        out.append(json.dumps(obj, separators=(",", ":")))
    return out


def policy_json(config: dict) -> dict:
    """The script config as the audit's policy (corpus ``policies/*.json`` shape)."""
    out = {k: config[k] for k in ("thresholdRatio", "retainTokens", "maxTokens", "compactionRetries",
                                  "maxOverflowRetries", "contextWindow") if k in config}
    if config.get("pruner"):
        out["toolResultPruner"] = dict(config["pruner"])
    return out


def _audit(path: Path, config: dict) -> tuple[str | None, dict[str, list]]:
    from surfacecheck.model.config import RuntimePolicy
    from surfacecheck.audit.reader import AuditInputError
    from surfacecheck.audit.run import audit_log

    try:
        log = audit_log(path, RuntimePolicy.from_json(policy_json(config)))
    except AuditInputError as exc:
        return f"line {exc.line}: {exc.reason}", {}
    fired: dict[str, list] = {}
    for f in log.findings:
        if f.severity == "error":
            fired.setdefault(f.rule, []).append(f.seq)
    return None, fired


def audit_drift(run_b: Any, config: dict) -> list[DriftFinding]:
    """The model's audit of B's log as-is, then after ``normalise_v4``: which rules fire, at which seqs."""
    log_path = getattr(run_b, "log_path", None)
    if not log_path or not Path(log_path).exists():
        return []
    version = getattr(run_b, "version", None)
    out = []
    refused, fired = _audit(Path(log_path), config)
    if refused or fired:
        out.append(DriftFinding("audit-raw", "the model's audit of the log as written (spec 1.7: a foreign "
                                "header version is refused)", "readable, no error findings",
                                refused or fired, f"surfacecheck audit {Path(log_path).name} ({version})"))
    lines = Path(log_path).read_text(encoding="utf-8").splitlines()
    with tempfile.TemporaryDirectory(prefix="sc-drift-") as tmp:
        copy = Path(tmp) / "session.normalised.jsonl"
        copy.write_text("\n".join(normalise_v4(lines)) + "\n", encoding="utf-8")
        refused_n, fired_n = _audit(copy, config)
    if refused_n or fired_n:
        out.append(DriftFinding("audit-normalised", "the model's audit after renaming header version 4 -> 0 and "
                                "replace {startSeq,endSeq} -> {start,end}: rules that still fire (real "
                                "behaviour or shape changes)", "no error findings", refused_n or fired_n,
                                f"normalised copy of {Path(log_path).name} ({version})"))
        types = {e.get("seq"): e.get("type") for e in getattr(run_b, "events", [])}
        by_type: dict[str, set] = {}
        for rule, seqs in fired_n.items():
            for seq in seqs:
                by_type.setdefault(str(types.get(seq)), set()).add(rule)
        out.append(DriftFinding("audit-event-types", "event types at whose seqs the model's rules fire (after "
                                "normalising; every other type is ignored by the model)", {},
                                {t: sorted(r) for t, r in sorted(by_type.items())}, f"{version} log"))
    mispriced = [(s, logged, model) for s, logged, model in prune_prices(getattr(run_b, "events", []))
                 if logged != model]
    if mispriced:
        out.append(DriftFinding("prune-prices", "compaction/prune shadowedTokenCount vs the model's "
                                "estimateMessage of the shadowed node (spec 4.1, 6)", "equal",
                                [{"seq": s, "logged": lg, "model": m} for s, lg, m in mispriced],
                                f"{len(mispriced)} prune events ({version})"))
    return out
