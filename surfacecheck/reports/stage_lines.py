"""One line per stage of ``check``: what it found, for the terminal and ``report.html``."""
from __future__ import annotations

from surfacecheck.core.words import count, errors_line


def stage_line(name: str, stage: dict) -> str:
    """What one stage found, in one line, from its summary (``report.json``'s ``stages[name]``)."""
    s = stage.get("summary") or {}
    if "interrupted" in s:
        return f"interrupted by {s['interrupted']}"
    if "error" in s and len(s) == 1:
        return str(s["error"])[:160]
    if "skipped" in s:  # the status column already says "skipped": the line says why, once
        return f"({str(s['skipped']).removeprefix('skipped: ')})"[:160]
    if name == "verify":
        return f"{count(s.get('examples', 0), 'example')}, {count(s.get('steps', 0), 'step')}, seed {s.get('seed')}"
    if name == "explore":
        m = s.get("model") or {}
        caught = sum(1 for c in (s.get("controls") or {}).values() if c.get("caught"))
        return f"{m.get('states')} states, {m.get('edges')} edges; controls caught {caught}/{len(s.get('controls') or {})}"
    if name == "contract":
        rows = s.get("promises") or []
        broken = [r for r in rows if r.get("verdict") == "broken"]
        return (f"{len(rows) - len(broken)}/{len(rows)} promises held, {len(broken)} broken "
                f"({len(s.get('new') or [])} new), {count(s.get('examples', 0), 'example')}, seed {s.get('seed')}")
    if name == "findings":
        return f"{len(s.get('known') or [])} known, {len(s.get('new') or [])} new, {len(s.get('stale') or [])} stale"
    if name == "prove":
        obligations = s.get("obligations") or []
        proved = sum(1 for o in obligations if o.get("status") == "proved")
        return f"{proved}/{len(obligations)} obligations proved, bound {s.get('bound')}"
    if name == "e2e":
        t = s.get("totals") or {}
        return f"{count(t.get('scripts', 0), 'script')}, {t.get('agreed', 0)} agreed, {t.get('differed', 0)} differed"
    if name == "audit":
        return (f"{count(s.get('logs', 0), 'log')}, {errors_line(s.get('errors', 0), s.get('errors_set_aside', 0))}, "
                f"{count(s.get('warnings', 0), 'warning')}")
    if name == "bench":
        if s.get("cost_model"):
            return ", ".join(f"{k} {v}" for k, v in s["cost_model"].items())
        timing = s.get("timing_ns") or {}
        subject = s.get("subject", "runtime")
        grows = (f"; {s['growth'][subject]} (slope {s['exponent'][subject]})"
                 if subject in (s.get("growth") or {}) else "")
        return (f"{subject} per append: " + ", ".join(f"{v:.0f} ns at {k}" for k, v in timing.items())
                + (f"; ratio {s['ratio']}" if s.get("ratio") is not None else "") + grows) if timing else ""
    if name == "dsh":
        v, w = s.get("verify") or {}, s.get("witnesses") or []
        return (f"verify on dsh's library: {v.get('verdict', '')}, {v.get('examples', 0)} examples; "
                f"{sum(1 for x in w if x.get('reproduces'))}/{len(w)} finding witnesses reproduce on dsh")
    if name == "runtime":
        runs = s.get("runs") or []
        eq = s.get("corpus_equivalence") or {}
        return (f"{sum(r.get('requests', 0) for r in runs)} conformance requests, "
                f"{sum(r.get('divergence_count', 0) for r in runs)} divergences"
                + (f"; {eq.get('logs', 0)} logs replayed event by event, {len(eq.get('divergent') or [])} divergent"
                   if eq else ""))
    return ""
