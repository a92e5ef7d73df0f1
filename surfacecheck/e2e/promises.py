"""Design promises checked on the real runtime's own output (the e2e runs'): the session log
scanned with every promise monitor (:func:`scan_findings`, the scan of ``surfacecheck findings``) and the
provider requests the scripted server recorded (:mod:`.wire`), each violation classed as ``surfacecheck
findings`` classes it: a registered promise names its finding (known, informational), any other is NEW.
"""
from __future__ import annotations

import re
from pathlib import Path


_SEQ = re.compile(r" seq (\d+):")


def scan_findings(log_path, source: str = "e2e", registry_path=None) -> list[dict]:
    """The log appended event by event through the model with every promise watching
    (:func:`surfacecheck.findings.search.scan_logs`, the scan of ``surfacecheck findings``), each
    promise's first violation classed as ``surfacecheck findings`` does (``registry.match`` by promise):
    ``{id, promise, seq, step, message, class, status}``; ``id`` None and class/status ``new`` when the
    promise has no registered finding. Raises what the log reader raises on a log it cannot read."""
    from surfacecheck.findings.search import scan_logs

    found, _logs = scan_logs([(source, Path(log_path))])
    rows = []
    for d in found:
        step = d.violation.step
        note = d.steps[step - 1].label if isinstance(step, int) and 0 < step <= len(d.steps) else ""
        seq = _SEQ.search(note or "")
        rows.append({"promise": d.promise, "seq": int(seq.group(1)) if seq else None, "step": step,
                     "message": d.violation.message})
    rows = classify_wire(rows, registry_path)
    return sorted(rows, key=lambda r: (r["seq"] is None, r["seq"] or 0, r["promise"]))


def classify_wire(rows: list[dict], registry_path=None) -> list[dict]:
    """Each wire violation classed as the log scan classes a promise (``registry.match`` by promise): adds
    ``id`` (None when unregistered), ``class`` and ``status`` (``known``, or ``new`` for an unregistered one)."""
    from surfacecheck.findings import registry

    entries = registry.load(registry_path)
    out = []
    for row in rows:
        entry = registry.match(entries, row["promise"])
        rest = {k: v for k, v in row.items() if k not in ("id", "class", "status")}
        out.append({"id": entry.id if entry else None, **rest, "class": entry.klass if entry else "new",
                    "status": "known" if entry else "new"})
    return out


def find_on(outcome, run, options) -> None:
    """``outcome.findings`` from the run's log; a log the model cannot read is noted, not scanned (the
    audit judges the log's format). Anything else raised (a suite bug, a malformed registry) makes the
    script inconclusive in :func:`run_one`, never a pass."""
    log_path = getattr(run, "log_path", None)
    if log_path is None or not Path(log_path).is_file():
        outcome.findings_note = "no session log to scan for findings"
        return
    from surfacecheck.model.errors import LogFormatError

    try:
        outcome.findings = scan_findings(log_path, f"e2e/{outcome.name}", options.registry)
    except LogFormatError as exc:
        outcome.findings_note = f"log not scanned for findings: {str(exc).splitlines()[0][:300]}"


def wire_on(outcome, script, run, options) -> None:
    """``outcome.wire`` from the requests the scripted server recorded (:func:`.wire.wire_checks`), classed by
    :func:`classify_wire`; a run that recorded no request is noted, not checked."""
    from .wire import unanswered_prompts, wire_checks

    requests = list(getattr(run, "requests", None) or [])
    if not requests:
        outcome.wire_note = "no provider requests recorded: wire not checked"
        return
    data = script.to_json() if hasattr(script, "to_json") else script
    outcome.wire = classify_wire(wire_checks(data, requests), options.registry)
    unanswered = unanswered_prompts(data, requests)
    if unanswered:
        outcome.wire_note = (f"prompt of turn(s) {unanswered} not judged on the wire: no request was answered "
                             "after it (the runtime gave up on the turn)")
