"""Why a run is not held, in words: for the top of ``report.html``.

Each stage that ended in a violation or inconclusive gives its reasons from its summary in ``report.json``:
an ``error``, a runtime ``unavailable``, an ``interrupted`` signal, a violation's property and message, a
negative control missed, an obligation not proved. The logs stage gives its violations and its interruption.
A reason is one sentence; long messages are kept whole (the page wraps them).
"""
from __future__ import annotations

from collections import Counter

from .stage_lines import stage_line

SHOWN = 5  # reasons per stage; the rest are counted


def _verify_reasons(s: dict) -> list[str]:
    """A verify summary (the verify stage's, or the dsh stage's ``verify``)."""
    out = [f"runtime unavailable: {s['unavailable']}"] if s.get("unavailable") else []
    for level in s.get("levels") or []:
        v = level.get("violation")
        if v:
            out.append(f"level {level['level']}: {v['property']} at step {v['step']}: {v['message']}")
        elif level.get("unavailable"):
            out.append(f"level {level['level']}: runtime unavailable: {level['unavailable']}")
        elif level.get("incomplete"):
            out.append(f"level {level['level']}: incomplete: {level['incomplete']}")
    regressions = s.get("regressions") or []
    failing = Counter((r.get("now") or {}).get("property") or r.get("verdict") for r in regressions
                      if str(r.get("verdict", "")).startswith("failing"))
    if failing:
        out.append("regression traces failing again: " + ", ".join(f"{n} × {p}" for p, n in failing.most_common()))
    out += [f"regression {r['trace'].rsplit('/', 1)[-1]}: {r['detail']}" for r in regressions
            if r.get("verdict") in ("inconclusive", "unreadable")]
    return out


def _stage_reasons(name: str, s: dict) -> list[str]:
    """The reasons one stage's summary gives (empty when it names none)."""
    if "interrupted" in s:
        return [f"interrupted by {s['interrupted']} before it finished"]
    out = [str(s["error"])] if s.get("error") else []
    if name == "verify":
        out += _verify_reasons(s)
    elif name == "dsh":
        out += _verify_reasons(s.get("verify") or {})
        out += [f"registry reachability trace of {w['id']} does not reproduce on dsh" for w in s.get("witnesses") or []
                if "reachability_reproduces" in w and w["reachability_reproduces"] is not True]
    elif name == "explore":
        out += [f"{v['property']} after {v.get('length', '?')} steps: {v['message']}" for v in s.get("violations") or []]
        out += [f"negative control {c} not caught" for c, row in (s.get("controls") or {}).items() if not row.get("caught")]
    elif name == "prove":
        out += [f"obligation {o['name']}: {o['status']}" + (f": {o['message']}" if o.get("message") else "")
                for o in s.get("obligations") or [] if o.get("status") != "proved"]
        out += [str(p) for p in s.get("problems") or []]
    elif name == "findings":
        out += [f"NEW finding: {n.get('promise') or n.get('property')}" for n in s.get("new") or []]
        out += [f"stale finding {x.get('id', x) if isinstance(x, dict) else x}" for x in s.get("stale") or []]
    elif name == "e2e":
        out += [f"script {x['name']} {x['verdict']}" + (f": {x['message']}" if x.get("message") else "")
                for x in s.get("scripts") or [] if x.get("verdict") not in ("agreed", "held", "ok")]
        out += [f"registry claim {r['id']} not reproduced by {r['e2e']}" for r in s.get("shipped_runtime_claims") or []
                if not r.get("shows")]
    elif name == "bench" and isinstance(s.get("cost_model"), dict):
        out += [f"{k}: {v} operations per append" + (" (expected constant)" if k == s.get("subject") else " (expected linear)")
                for k, v in (s.get("cost_model") or {}).items()
                if (k == s.get("subject")) != (v == "constant")]
    elif name == "runtime":
        for run in s.get("runs") or []:
            if run.get("inconclusive"):
                out.append(f"{run['runtime']}: {run['inconclusive']}")
            elif run.get("divergence_count"):
                first = run["divergences"][0]
                out.append(f"{run['runtime']}: {run['divergence_count']} divergences from the model, the first at step "
                           f"{first['step']} ({first['op']})")
            out += [f"{run['runtime']}: schema: {p}" for p in run.get("schema_problems") or []]
        out += [f"log replayed event by event diverges: {d.get('log', d) if isinstance(d, dict) else d}"
                for d in (s.get("corpus_equivalence") or {}).get("divergent") or []]
    elif name == "audit":
        for log, found in (s.get("findings") or {}).items():
            out += [f"{log} seq {f.get('seq')}: {f['rule']}: {f['message']}" for f in found
                    if f.get("severity") == "error" and not f.get("known")]
    return out


def _logs_reasons(report: dict) -> list[str]:
    out = []
    cut = report.get("logs_interrupted")
    if cut:
        out.append(f"interrupted by {report.get('interrupted')} after {cut['checked']} of {cut['of']} logs")
    out += [f"{v['log']}" + (f" seq {v['seq']}" if v.get("seq") is not None else "") + f": {v['rule']}: {v['message']}"
            for v in report.get("violations") or []]
    out += [f"{log['name']}: {note}" for log in report.get("logs") or [] if log.get("status") == "inconclusive"
            for note in log.get("notes") or []]
    return out


def reasons(report: dict) -> list[dict]:
    """One entry per stage (``logs`` first) that is not held: ``stage``, ``status``, ``reasons`` (at most
    :data:`SHOWN`), ``more`` (how many were left out). A stage that names no reason gives its one-line summary."""
    out = []
    if report.get("logs_verdict", report.get("verdict")) not in (None, "held"):
        found = _logs_reasons(report)
        out.append({"stage": "logs", "status": report.get("logs_verdict") or report.get("verdict"),
                    "reasons": found[:SHOWN], "more": max(0, len(found) - SHOWN)})
    for name, row in (report.get("stages") or {}).items():
        if row.get("status") not in ("violation", "inconclusive"):
            continue
        found = _stage_reasons(name, row.get("summary") or {}) or [stage_line(name, row) or "it gave no reason"]
        out.append({"stage": name, "status": row["status"], "reasons": found[:SHOWN], "more": max(0, len(found) - SHOWN)})
    strict = (report.get("coverage") or {}).get("strict_failure")
    if strict:
        out.append({"stage": "coverage", "status": "violation", "reasons": [strict], "more": 0})
    if report.get("interrupted") and not out:
        out.append({"stage": "run", "status": "inconclusive", "reasons": [f"interrupted by {report['interrupted']}"],
                    "more": 0})
    return out
