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

from .reasons import reasons
from .conversation_drawing import draw as draw_conversation
from .stage_lines import stage_line
from .trace_drawing import svg

HTML_FILE = "report.html"
STATUS_WORD = {"ok": "held", "violation": "violated", "inconclusive": "inconclusive", "skipped": "skipped"}


def _drawn(path: str, runtime: str, why: str, now: dict | None = None) -> dict | None:
    """One trace file read and drawn (None when it is not a readable trace). ``now`` (``property``, ``step``,
    ``message``) is where this run's replay of the trace fails, drawn instead of the violation it records;
    ``now`` ``{}`` says the replay held (no step highlighted)."""
    from surfacecheck.properties.trace_check import TraceError, read_valid_trace

    if not path or not Path(path).is_file() or not path.endswith(".jsonl"):
        return None
    try:
        trace = read_valid_trace(path)
    except (TraceError, OSError, ValueError):
        return None
    violation = trace.violation
    recorded = violation.message if violation else ""
    broken = now if now else {"property": trace.property, "step": violation.step if violation else None,
                              "message": recorded}
    if now == {}:
        broken = {"property": trace.property, "step": None,
                  "message": f"held in this run; it recorded: {recorded}" if recorded else "held in this run"}
    return {"path": path, "why": why, "source": trace.source, "level": trace.level, "property": broken["property"],
            "recorded": trace.property, "steps": len(trace.steps), "message": broken["message"],
            "step": broken["step"], "replay": f"surfacecheck replay {path} --runtime {runtime}",
            "svg": svg(trace, broken["step"])}


def _regression_why(entry: dict) -> str:
    name = str(entry.get("trace", "")).rsplit("/", 1)[-1]
    now, recorded = entry.get("now") or {}, entry.get("recorded")
    if entry.get("verdict") == "failing-differently":
        return f"verify: old regression {name} (recorded {recorded}) replayed: fails differently now"
    if now:
        return f"verify: old regression {name} replayed: still fails"
    return f"verify: regression {name} replayed, {entry.get('verdict')}"


def _failure_items(stages: dict) -> list[tuple]:
    """This run's counterexamples as ``(path, why, now)``: a violation, a divergence, a NEW finding, an old
    regression failing on replay (``now``: where it fails in this run)."""
    verify = stages.get("verify", {})
    items = [(t, "verify: a lockstep violation", None) for t in verify.get("traces") or []]
    items += [(t, "dsh: a lockstep violation on dsh's library", None)
              for t in (stages.get("dsh", {}).get("verify") or {}).get("traces") or []]
    items += [(v.get("trace"), "explore: a violation at the least depth", None)
              for v in stages.get("explore", {}).get("violations") or []]
    items += [(n.get("trace"), "findings: a NEW broken promise", None) for n in stages.get("findings", {}).get("new") or []]
    for script in stages.get("e2e", {}).get("scripts") or []:
        if script.get("bundle"):
            items.append((str(Path(script["bundle"]) / "trace.jsonl"), f"e2e: script {script['name']} differed", None))
    for obligation in stages.get("prove", {}).get("obligations") or []:
        if obligation.get("status") not in ("proved", None):
            items.append((obligation.get("trace"), f"prove: {obligation['name']} {obligation['status']}", None))
    items += [(r.get("trace"), _regression_why(r), r.get("now")) for r in verify.get("regressions") or []
              if str(r.get("verdict", "")).startswith("failing")]
    return items


def _draw_all(items, runtime: str) -> list[dict]:
    seen, drawn = set(), []
    for path, why, *now in items:  # now: where this run's replay fails ({} it held), when it was replayed
        if path and path not in seen:
            seen.add(path)
            one = _drawn(str(path), runtime, why, now[0] if now else None)
            if one is not None:
                drawn.append(one)
    return drawn


def failure_groups(failures: list[dict]) -> list[dict]:
    """The failure cards grouped by the property that breaks now (an old regression failing differently joins
    the group of the property it breaks), the shortest trace first; the groups by their shortest trace."""
    groups: dict[str, list[dict]] = {}
    for card in failures:
        groups.setdefault(card["property"], []).append(card)
    out = [{"property": name, "traces": sorted(cards, key=lambda c: c["steps"])} for name, cards in groups.items()]
    return sorted(out, key=lambda g: (g["traces"][0]["steps"], g["property"]))


def trace_sections(report: dict, runtime: str) -> dict[str, list[dict]]:
    """The traces a run wrote or checked, by what they mean: ``failures`` (this run's counterexamples, drawn
    where they fail in this run), ``groups`` (the failures by property), ``findings`` (the known findings'
    witnesses) and ``expected`` (what held as it should: regressions replayed fixed, negative controls refuted)."""
    stages = {name: (row.get("summary") or {}) for name, row in (report.get("stages") or {}).items()}
    findings = [(k.get("trace_path"), f"finding {k.get('id')} ({k.get('class')}): its witness")
                for k in stages.get("findings", {}).get("known") or []]
    expected = [(c.get("trace"), f"prove: negative control {c.get('name')} of {o['name']} {c.get('status')}")
                for o in stages.get("prove", {}).get("obligations") or [] for c in o.get("negative_controls") or []]
    expected += [(r.get("trace"), f"verify: regression replayed, {r.get('verdict')}", {} if r.get("verdict") == "fixed" else None)
                 for r in stages.get("verify", {}).get("regressions") or []
                 if not str(r.get("verdict", "")).startswith("failing")]
    failures = _draw_all(_failure_items(stages), runtime)
    return {"failures": failures, "groups": failure_groups(failures), "findings": _draw_all(findings, runtime),
            "expected": _draw_all(expected, runtime)}


STYLES = (("o", "-", 7), ("s", "--", 9), ("^", ":", 11), ("D", "-.", 6))  # marker, line, size: none hides another


def bench_png(summary: dict) -> str | None:
    """The bench stage's elementary operations per append against surface size (in-process runtimes), or the
    runtime's median time per append (a runtime over the protocol), as a data: URI (or None). Each line has its
    own marker, line style and marker size (hollow markers), so a line lying on another stays visible."""
    ops = summary.get("ops_per_append") or {}
    sizes = summary.get("sizes") or []
    ylabel = "operations per append (count)"
    if not ops and summary.get("timing_ns"):
        timing = summary["timing_ns"]  # {size: ns} from a runtime over the protocol, else {name: {size: ns}}
        if not all(isinstance(v, dict) for v in timing.values()):
            timing = {summary.get("subject", "runtime"): timing}
        sizes = [int(k) for k in next(iter(timing.values()))]
        ops = {name: list(by_size.values()) for name, by_size in timing.items()}
        ylabel = "median time per append (ns)"
    if not ops or not sizes:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 3.4), dpi=100)
    models = summary.get("cost_model") or {}
    models = models if isinstance(models, dict) else {summary.get("subject", "runtime"): models}
    for (name, values), (marker, line, size) in zip(ops.items(), STYLES * 4):
        ax.plot(sizes[: len(values)], values, marker=marker, linestyle=line, markersize=size, markerfacecolor="none",
                markeredgewidth=1.4, linewidth=1.6, label=f"{name} ({models[name]})" if name in models else name)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("surface size (events)")
    ax.set_ylabel(ylabel)
    ax.set_title("both axes log scale", fontsize=8, loc="right", color="#57606a")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def plain(value) -> str:
    """A value as words for a table cell: a mapping as ``events 4 · tool pairs 2``, a list joined with commas,
    None as an empty cell; never a Python repr."""
    if value is None:
        return ""
    if isinstance(value, dict):
        return " · ".join(f"{str(k).replace('_', ' ')} {plain(v)}" for k, v in value.items() if v is not None)
    if isinstance(value, (list, tuple)):
        return ", ".join(plain(v) for v in value)
    return str(value)


def count(items, noun: str) -> str:
    """``1 trace``, ``2 traces``, ``2 properties``."""
    plural = noun[:-1] + "ies" if noun.endswith("y") else noun + "s"
    return f"{len(items)} {noun if len(items) == 1 else plural}"


def render(report: dict, coverage: dict | None) -> str:
    """The page as a string (see the module docstring)."""
    env = Environment(loader=PackageLoader("surfacecheck.reports", "templates"), autoescape=select_autoescape(["html", "j2"]))
    env.filters["plain"] = plain
    stages = [{"name": name, "status": row["status"], "word": STATUS_WORD.get(row["status"], row["status"]),
               "seconds": row["seconds"], "line": stage_line(name, row)} for name, row in (report.get("stages") or {}).items()]
    summary = report.get("stages", {})
    findings = (summary.get("findings") or {}).get("summary") or {}
    explore = (summary.get("explore") or {}).get("summary") or {}
    bench = (summary.get("bench") or {}).get("summary") or {}
    contract = (summary.get("contract") or {}).get("summary") or {}
    for row in contract.get("promises") or []:
        row["drawn"] = draw_conversation(row["witness"]) if row.get("witness") else ""
    return env.get_template("report.html.j2").render(
        report=report, stages=stages, traces=trace_sections(report, report.get("runtime", "embedded")),
        why=reasons(report),
        log_violations=report.get("violations") or [], findings=findings, explore=explore,
        bench_plot=bench_png(bench), coverage=coverage or {}, json=json, count=count, contract=contract)


def write_html(report: dict, coverage: dict | None, folder: Path) -> Path:
    path = Path(folder) / HTML_FILE
    path.write_text(render(report, coverage), encoding="utf-8")
    return path
