"""Counterexample bundles of ``surfacecheck e2e dsh``.

A bundle is a folder holding everything needed to see and reproduce one failing script::

  script.json       the conversation script (surfacecheck-e2e-script/1)
  session.jsonl     the runtime's session log, as written
  requests.jsonl    the scripted server's record: every request it received and what it answered
  differences.json  the model-vs-runtime differences, each with the first seq where they part
  audit.json        the audit of session.jsonl under the script's policy
  trace.jsonl       the same story in the one shared trace format (surfacecheck/trace.py), source
                    ``e2e``: one ``append`` step per logged event, the first difference as the violation;
                    its header names ``script.json`` so ``surfacecheck replay`` re-runs the script
  README.txt        the commands that reproduce it

``surfacecheck replay BUNDLE`` (or ``BUNDLE/trace.jsonl``) and ``surfacecheck e2e dsh --script
BUNDLE`` both re-run ``script.json`` against the real runtime: exit 1 while it still differs.
"""
from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

from surfacecheck.core.trace import E2E_PROPERTIES, Step, Trace, Violation, write_trace
from surfacecheck.properties.trace_check import read_valid_trace

SCRIPT, SESSION, REQUESTS, DIFFERENCES, AUDIT, TRACE, README = (
    "script.json", "session.jsonl", "requests.jsonl", "differences.json", "audit.json", "trace.jsonl", "README.txt")
PROPERTY_AGREEMENT, PROPERTY_AUDIT = E2E_PROPERTIES


def _events(run) -> list[dict]:
    """The log's events (chunk rows expanded, spec 1.7) as JSON; the raw records if the model cannot read it."""
    path = getattr(run, "log_path", None)
    if path and Path(path).is_file():
        try:
            from surfacecheck.model.jsonl import read_log

            return [e.to_json() for e in read_log(path).events]
        except Exception:  # noqa: BLE001 - a log the model rejects is still shown as recorded
            pass
    return [e for e in getattr(run, "events", []) if isinstance(e, dict) and "seq" in e]


def _append_args(event: dict) -> dict:
    """The protocol's ``append`` request for a logged event (the runtime assigns seq)."""
    keep = ("type", "data", "time", "surfaceOp", "sourceEventSeqs")
    return {"event": {k: event[k] for k in keep if k in event}}


def build_trace(script_obj: dict, run, outcome, *, command: str) -> Trace:
    """The bundle's trace: the runtime's log as ``append`` steps, the first difference (or audit error) last."""
    events = _events(run)
    step_of = {e.get("seq"): i for i, e in enumerate(events, 1)}
    steps = tuple(Step("append", _append_args(e), f"{e.get('type')} seq {e.get('seq')} (as the runtime logged it)")
                  for e in events)
    if outcome.differences:
        first = min(outcome.differences, key=lambda d: (d.get("seq") is None, d.get("seq") or 0))
        violation = Violation(PROPERTY_AGREEMENT, f"{first.get('kind')}: {first.get('message', '')}",
                              step_of.get(first.get("seq")), first.get("expected"), first.get("observed"))
    else:
        errors = [f for f in outcome.audit.get("findings", []) if f.get("severity") == "error"]
        first = errors[0] if errors else {}
        violation = Violation(PROPERTY_AUDIT, f"{first.get('rule')}: {first.get('message', '')}",
                              step_of.get(first.get("seq")), None, first)
    version = outcome.runtime_version or "unknown"
    notes = {"script": SCRIPT, "script_name": script_obj.get("name"), "runtime_version": version,
             "differences": len(outcome.differences), "audit_errors": outcome.audit.get("errors", 0),
             "reproduce": f"surfacecheck e2e dsh --script BUNDLE/{SCRIPT}"}
    return Trace(source="e2e", level="log", property=violation.property, steps=steps, violation=violation,
                 runtime=f"dsh-{version}", command=command, notes=notes)


def bundle_name(script_obj: dict) -> str:
    digest = hashlib.sha256(json.dumps(script_obj, sort_keys=True).encode()).hexdigest()[:8]
    name = "".join(c if c.isalnum() or c in "-_." else "-" for c in str(script_obj.get("name") or "script"))
    return f"{name}-{digest}"


def _dump_jsonl(path: Path, records: list[Any]) -> None:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")


def write_bundle(root: str | Path, script, run, outcome, *, command: str = "surfacecheck e2e dsh") -> Path:
    """Write the bundle for one failing script under ``root``; returns its folder (replaced if present)."""
    script_obj = script.to_json() if hasattr(script, "to_json") else dict(script)
    folder = Path(root) / bundle_name(script_obj)
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    (folder / SCRIPT).write_text(json.dumps(script_obj, indent=1) + "\n", encoding="utf-8")
    log = getattr(run, "log_path", None)
    if log and Path(log).is_file():
        shutil.copyfile(log, folder / SESSION)
    else:
        _dump_jsonl(folder / SESSION, list(getattr(run, "events", [])))
    _dump_jsonl(folder / REQUESTS, list(getattr(run, "requests", [])))
    (folder / DIFFERENCES).write_text(json.dumps(outcome.differences, indent=1) + "\n", encoding="utf-8")
    (folder / AUDIT).write_text(json.dumps(outcome.audit, indent=1) + "\n", encoding="utf-8")
    reproduce = f"surfacecheck e2e dsh --script {folder / SCRIPT}"
    write_trace(folder / TRACE, build_trace(script_obj, run, outcome, command=reproduce))
    (folder / README).write_text(
        f"e2e counterexample: script {script_obj.get('name')!r} on dsh {outcome.runtime_version or '?'}\n"
        f"{len(outcome.differences)} difference(s) with the model, {outcome.audit.get('errors', 0)} audit error(s).\n"
        f"Reproduce (exit 1 while it still fails):\n  {reproduce}\n  surfacecheck replay {folder}\n",
        encoding="utf-8")
    return folder


def resolve_script(target: str | Path) -> Path:
    """The script a bundle (its folder, trace.jsonl or script.json) or a plain script file names."""
    target = Path(target)
    if target.is_dir():
        return target / SCRIPT
    if target.suffix == ".jsonl":
        trace = read_valid_trace(target)
        return target.parent / str(trace.notes.get("script") or SCRIPT)
    return target


def is_e2e_target(target: str | Path) -> bool:
    """Whether ``surfacecheck replay TARGET`` names an e2e bundle (folder or trace with source ``e2e``)."""
    target = Path(target)
    if target.is_dir():
        return (target / TRACE).is_file() or (target / SCRIPT).is_file()
    try:
        with target.open(encoding="utf-8") as handle:
            header = json.loads(handle.readline() or "null")
    except (OSError, ValueError, UnicodeDecodeError, RecursionError):
        return False  # not an e2e trace: the ordinary trace reader says what is wrong with it
    return isinstance(header, dict) and header.get("source") == "e2e"
