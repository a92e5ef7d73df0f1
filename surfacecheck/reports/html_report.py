"""``report.html``: the one page a runtime engineer opens when CI goes red.

Generated from the same data as ``report.json`` (and ``coverage.json``), self-contained (inline CSS, inline SVG,
the plot as an inline PNG; no script, no network) with a Jinja2 template (``templates/report.html.j2``):
the verdict and a stage table; every counterexample trace the run wrote or checked, drawn as the surface
changing step by step (:mod:`.trace_drawing`) with its replay command; the findings; the bench plot; the
explorer's statistics; the three kinds of coverage.
"""
from __future__ import annotations

import base64
import io
import json
from pathlib import Path

from jinja2 import Environment, PackageLoader, select_autoescape

from .stage_lines import stage_line
from .trace_drawing import svg

HTML_FILE = "report.html"
STATUS_WORD = {"ok": "held", "violation": "violated", "inconclusive": "inconclusive", "skipped": "skipped"}


def _drawn(path: str, runtime: str, why: str) -> dict | None:
    """One trace file read and drawn (None when it is not a readable trace)."""
    from surfacecheck.properties.trace_check import TraceError, read_valid_trace

    if not path or not Path(path).is_file() or not path.endswith(".jsonl"):
        return None
    try:
        trace = read_valid_trace(path)
    except (TraceError, OSError, ValueError):
        return None
    violation = trace.violation
    return {"path": path, "why": why, "source": trace.source, "level": trace.level, "property": trace.property,
            "steps": len(trace.steps), "message": violation.message if violation else "",
            "step": violation.step if violation else None,
            "replay": f"surfacecheck replay {path} --runtime {runtime}",
            "svg": svg(trace, violation.step if violation else None)}


def trace_sections(report: dict, runtime: str) -> dict[str, list[dict]]:
    """The traces a run wrote or checked, by what they mean: ``failures`` (this run's counterexamples: a
    violation, a divergence, a NEW finding), ``findings`` (the known findings' witnesses) and ``expected``
    (what held as it should: regressions replayed fixed, negative controls refuted)."""
    stages = {name: (row.get("summary") or {}) for name, row in (report.get("stages") or {}).items()}
    failures, findings, expected = [], [], []
    verify = stages.get("verify", {})
    failures += [(t, "verify: a lockstep violation") for t in verify.get("traces") or []]
    failures += [(v.get("trace"), "explore: a violation at the least depth") for v in (stages.get("explore", {}).get("violations") or [])]
    failures += [(n.get("trace"), "findings: a NEW broken promise") for n in stages.get("findings", {}).get("new") or []]
    for script in stages.get("e2e", {}).get("scripts") or []:
        if script.get("bundle"):
            failures.append((str(Path(script["bundle"]) / "trace.jsonl"), f"e2e: script {script['name']} differed"))
    for obligation in stages.get("prove", {}).get("obligations") or []:
        if obligation.get("status") not in ("proved", None):
            failures += [(obligation.get("trace"), f"prove: {obligation['name']} {obligation['status']}")]
        expected += [(c.get("trace"), f"prove: negative control {c.get('name')} of {obligation['name']} {c.get('status')}")
                     for c in obligation.get("negative_controls") or []]
    findings += [(k.get("trace_path"), f"finding {k.get('id')} ({k.get('class')}): its witness")
                 for k in stages.get("findings", {}).get("known") or []]
    for r in verify.get("regressions") or []:
        failing = str(r.get("verdict", "")).startswith("failing")
        (failures if failing else expected).append((r.get("trace"), f"verify: regression replayed, {r.get('verdict')}"))
    out = {}
    for name, items in (("failures", failures), ("findings", findings), ("expected", expected)):
        seen, drawn = set(), []
        for path, why in items:
            if path and path not in seen:
                seen.add(path)
                one = _drawn(str(path), runtime, why)
                if one is not None:
                    drawn.append(one)
        out[name] = drawn
    return out


def bench_png(summary: dict) -> str | None:
    """The bench stage's elementary operations per append against surface size (in-process runtimes), or the
    runtime's median time per append (a runtime over the protocol), as a data: URI (or None)."""
    ops = summary.get("ops_per_append") or {}
    sizes = summary.get("sizes") or []
    ylabel = "operations per append"
    if not ops and summary.get("timing_ns"):
        timing = summary["timing_ns"]
        sizes = [int(k) for k in timing]
        ops = {summary.get("subject", "runtime"): list(timing.values())}
        ylabel = "median ns per append"
    if not ops or not sizes:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 3.2), dpi=100)
    for name, values in ops.items():
        ax.plot(sizes[: len(values)], values, marker="o", label=f"{name} ({(summary.get('cost_model') or {}).get(name, '')})")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("surface size (events)")
    ax.set_ylabel(ylabel)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def render(report: dict, coverage: dict | None) -> str:
    """The page as a string (see the module docstring)."""
    env = Environment(loader=PackageLoader("surfacecheck.reports", "templates"), autoescape=select_autoescape(["html", "j2"]))
    stages = [{"name": name, "status": row["status"], "word": STATUS_WORD.get(row["status"], row["status"]),
               "seconds": row["seconds"], "line": stage_line(name, row)} for name, row in (report.get("stages") or {}).items()]
    summary = report.get("stages", {})
    findings = (summary.get("findings") or {}).get("summary") or {}
    explore = (summary.get("explore") or {}).get("summary") or {}
    bench = (summary.get("bench") or {}).get("summary") or {}
    return env.get_template("report.html.j2").render(
        report=report, stages=stages, traces=trace_sections(report, report.get("runtime", "embedded")),
        log_violations=report.get("violations") or [], findings=findings, explore=explore,
        bench_plot=bench_png(bench), coverage=coverage or {}, json=json)


def write_html(report: dict, coverage: dict | None, folder: Path) -> Path:
    path = Path(folder) / HTML_FILE
    path.write_text(render(report, coverage), encoding="utf-8")
    return path
