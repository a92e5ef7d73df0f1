"""The Markdown findings report: what ``surfacecheck findings --report`` writes.

It reads the findings JSON document (``FindingsReport.to_json()``) and renders, for a dsh maintainer
reading top to bottom: a summary table; one section per finding (the promise in plain words, class
and why, the responsible dsh function, observed vs expected, the explanation, the replay command)
with its witness trace DRAWN: the trace is replayed on the model runtime step by step and the surface
(``surface``, ``measure``, ``projection``) is drawn before and after every step; then the promises
that held with what was explored. No timing and no dates, so a committed copy stays comparable.
"""
from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SNIPPET = 14
"""Characters of message text shown per node."""
FOUND_BY = 5
"""Places shown per finding under 'Also found by'."""

LEGEND = ("Each node is drawn `[seq kind detail price]`: `user`/`asst`/`tool` messages (short text or the "
          "tool-call id), `ctx` a runtime-context snapshot, `CHECKPOINT<a..b>` a compaction checkpoint "
          "shadowing seqs a..b, `pruned` a pruned tool result, `replaced<...>` any other replacement. In "
          "`before`, `-` marks a node this step shadows; in `after`, `+` marks a node this step added. "
          "`gen` is the replace generation, `measure` the recount the policy uses (spec 4.3), `projection` "
          "the O(1) surface projection (spec 5.1).")


# -- drawing a witness -------------------------------------------------------------------------------------
def _text(message: dict) -> str:
    for block in message.get("content") or []:
        if isinstance(block, dict) and block.get("type") == "text":
            return block.get("text", "")
    return ""


def _snippet(text: str) -> str:
    text = " ".join(text.split())
    return json.dumps(text if len(text) <= SNIPPET else text[:SNIPPET] + "…", ensure_ascii=False)


def _message(event) -> dict:
    data = event.data if isinstance(event.data, dict) else {}
    inner = data.get("message")
    return inner if isinstance(inner, dict) else data


def node_label(event, log) -> str:
    """``kind detail`` of one surface node (spec 2.3: the message it derives)."""
    message, op = _message(event), getattr(event, "surface_op", None)
    replaced = isinstance(op, dict) and op.get("op") == "replace"
    source = message.get("source") if isinstance(message.get("source"), dict) else {}
    sources = event.source_event_seqs if isinstance(event.source_event_seqs, (list, tuple)) else []
    shadowed = [s for s in sources if 0 <= s < len(log) and not log[s].type.startswith("compaction/")]
    span = f"<{shadowed[0]}..{shadowed[-1]}>" if len(shadowed) > 1 else f"<{shadowed[0]}>" if shadowed else ""
    if source.get("plugin") == "compact":
        return f"CHECKPOINT{span}"
    if source.get("form") == "snapshot":
        return f"ctx {_snippet(' '.join(s.get('text', '') for s in source.get('sections', [])))}"
    if event.type == "tool/result":
        call = source.get("callId") or "?"
        return f"tool {call}{' pruned' if replaced else ''}"
    calls = [b.get("id") for b in message.get("content") or [] if isinstance(b, dict) and b.get("type") == "tool-call"]
    kind = "asst" if message.get("role") == "assistant" else "user"
    detail = ("call " + ",".join(map(str, calls))) if calls else _snippet(_text(message))
    return f"{kind}{' replaced' + span if replaced else ''} {detail}"


def _snapshot(runtime) -> dict:
    """The surface after a step: nodes, generation, ``measure`` and ``projection`` totals, node labels with
    their prices (from ``measure``; the model's node price, spec 4.1, when the meter refused)."""
    from surfacecheck.model.meter import node_price

    surface, measure, projection = (runtime.call(op, {}) for op in ("surface", "measure", "projection"))
    nodes = list(surface.get("nodes", [])) if "error" not in surface else []
    log = runtime.session.log
    prices = measure.get("prices") if isinstance(measure.get("prices"), list) else [node_price(log[s]) for s in nodes]
    total = measure.get("total") if "error" not in measure else f"refused ({measure['error'].get('message')})"
    return {"nodes": nodes, "generation": surface.get("generation"), "measure": total,
            "projection": projection.get("total"),
            "labels": {seq: f"{seq} {node_label(log[seq], log)} {price}" for seq, price in zip(nodes, prices)}}


def _surface_line(name: str, snap: dict, marked: set, mark: str) -> str:
    head = f"{name}: gen {snap['generation']} · measure {snap['measure']} · projection {snap['projection']}"
    if not snap["nodes"]:
        return head + "  (empty surface)"
    drawn = " ".join(f"{mark if seq in marked else ''}[{snap['labels'][seq]}]" for seq in snap["nodes"])
    return f"{head}\n  {drawn}"


def _compact(value, limit: int = 110) -> str:
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _request(step) -> str:
    if step.op == "append":
        event = step.args.get("event", {})
        op = event.get("surfaceOp")
        extra = f" surfaceOp={_compact(op)}" if op else ""
        return f"append {event.get('type')}{extra}"
    args = {k: v for k, v in step.args.items() if k not in ("policy",)}
    return f"{step.op} {_compact(args, 90)}" if args else step.op


def _result(result: dict) -> str:
    keep = {k: result[k] for k in ("seq", "kind", "error", "failure", "outcome", "appended", "generation")
            if k in result}
    if isinstance(keep.get("failure"), dict):
        keep["failure"] = keep["failure"].get("message")
    if isinstance(keep.get("error"), dict):
        keep["error"] = keep["error"].get("message")
    return _compact(keep or result, 150)


def draw_trace(path: str | Path, violation_step: int | None = None) -> list[str]:
    """The trace replayed on the model runtime; per step its request, label and answer, and the surface
    before and after (one line when it did not change)."""
    from surfacecheck.runtime.model_runtime import ModelRuntime
    from surfacecheck.properties.trace_check import read_valid_trace

    trace = read_valid_trace(path)
    runtime = ModelRuntime()
    lines: list[str] = []
    before = _snapshot(runtime)
    for number, step in enumerate(trace.steps, 1):
        result = runtime.call(step.op, step.args)
        after = _snapshot(runtime)
        lines.append(f"step {number}  {_request(step)}" + (f"  — {step.label}" if step.label else ""))
        lines.append(f"  -> {_result(result)}")
        changed = (before["nodes"], before["generation"], before["measure"], before["projection"]) != \
                  (after["nodes"], after["generation"], after["measure"], after["projection"])
        if changed:
            lines.append(_surface_line("before", before, set(before["nodes"]) - set(after["nodes"]), "-"))
            lines.append(_surface_line("after", after, set(after["nodes"]) - set(before["nodes"]), "+"))
        else:
            lines.append(_surface_line("surface unchanged", after, set(), ""))
        if number == violation_step:
            lines.append(f"  ^^^ the promise breaks here ({trace.property})")
        lines.append("")
        before = after
    runtime.close()
    return lines[:-1]


# -- the document --------------------------------------------------------------------------------------------
def _resolve(path: str) -> Path:
    candidate = Path(path)
    return candidate if candidate.is_absolute() or candidate.exists() else ROOT / candidate


def _value(value) -> str:
    return f"`{_compact(value, 200)}`"


CLASS_WORDS = {
    "defect": "a **defect**: dsh's own text promises what this breaks, and none of it gives the promise up",
    "tradeoff": "a **tradeoff**: dsh's own text documents or intends this behaviour",
    "design-question": "a **design question**: the promise is the design's (seed essay or spec); dsh's own text "
                       "neither makes nor refuses it",
    "new": "**new**: not in the registry yet, so CI fails until it is classified"}
REACH_WORDS = {
    "shipped-runtime": "the shipped dsh binary reproduces it",
    "public-api": "dsh's own code reaches it through public calls, composed as shipped",
    "foreign-producer": "only a producer dsh does not ship writes what it needs",
    "not-reachable": "no shipped composition reaches it (latent)"}


def quote_markdown(e: dict) -> str:
    """A dsh quote as a Markdown line: the words, where they stand, whether they were found there."""
    where = ("dsh's test inventory (spec §14.3)" if e.get("source") == "spec-14.3"
             else f"`{e['package']}@{e['version']}` `{e['file']}`" + (f" line {e['line']}" if e.get("line") else ""))
    check = e.get("check") or {}
    seen = {True: "quoted verbatim from the installed package", False: "**not found there**",
            None: f"not checked here ({check.get('why', 'no check run')})"}[check.get("found")]
    return f"> {e['quote']}\n\n— {where}, {e['kind']} ({seen})"


def argument_lines(f: dict) -> list[str]:
    """The class argued from dsh's text and the reachability with its proof."""
    lines: list[str] = []
    if f.get("argument"):
        lines += [f"**Why this class**: {f['argument']}", ""]
    if f.get("evidence"):
        lines += ["**dsh's own words**:", "", quote_markdown(f["evidence"]), ""]
        for extra in f.get("evidence_also") or []:
            lines += [quote_markdown(extra), ""]
    if f.get("design_source"):
        lines += [f"**Where the promise comes from**: {f['design_source']}", ""]
    if f.get("searched"):
        lines += [f"**Searched for text giving the promise up**: {f['searched']}", ""]
    reach = f.get("reachability")
    if reach:
        lines += [f"**Reachability**: `{reach['kind']}`, {REACH_WORDS[reach['kind']]}. {reach['how']}", ""]
        proof = reach.get("proof")
        if isinstance(proof, dict) and proof.get("command"):
            lines += [f"- proof: `{proof['command']}`"]
        for row in proof if isinstance(proof, list) else []:
            shown = {True: f"shows it at {row.get('at')}", False: "does **not** show it",
                     None: f"not checked ({row['why']})"}[row["shows"]]
            lines += [f"- corpus log `{row['log']}`: {shown}"]
        if reach.get("witness_order"):
            lines += [f"- the witness's event order: {reach['witness_order']}"]
        if reach.get("guard"):
            lines += ["- the guard:", "", quote_markdown(reach["guard"])]
        lines += [""]
    return lines


def finding_section(f: dict) -> list[str]:
    p = f["promise"]
    lines = [f"### {f['id']} ({f['class']})", "",
             f"**Promise** (`{p['name']}`; {p['section']}{'; ' + p['seed'] if p['seed'] else ''}): "
             f"{p['description'].removeprefix('PROMISE: ')}.", "",
             f"**Class**: {CLASS_WORDS[f['class']]}. {f['reason']}", "",
             *argument_lines(f),
             f"**Responsible dsh function**: {f['source'] or 'unknown (not in the registry)'}", "",
             f"**Observed vs expected** at step {f['step']} of {f['trace']['steps']}: {f['message']}", "",
             f"- observed: {_value(f['observed'])}", f"- expected: {_value(f['expected'])}", "",
             f"**Explanation**: {f['explanation']}", ""]
    if f.get("shown_on"):
        lines += [f"**Shown on**: {shown_on_text(f['shown_on'])}", ""]
    if f["trace"]["replay"]:
        lines += [f"**Reproduce** (exit 1 while dsh behaves so): `{f['trace']['replay']}`", ""]
    if f["found_by"]:
        shown = "; ".join(f"`{w}`" for w in f["found_by"][:FOUND_BY])
        more = len(f["found_by"]) - FOUND_BY
        lines += [f"**Also found by**: {shown}" + (f"; and {more} more (see the JSON output)" if more > 0 else ""), ""]
    if f["trace"]["path"]:
        lines += ["**The witness, drawn** (replayed on the model runtime):", "", "```text",
                  *draw_trace(_resolve(f["trace"]["path"]), f["step"]), "```", ""]
    return lines


SHOWN_ON_NAMES = (("model", "the model"), ("embedded", "embedded"), ("dsh_library", "dsh's library (npm 0.1.0-rc.8)"))


def shown_on_text(shown: dict) -> str:
    """Where the finding has been shown (registry ``shown_on``): each runtime yes / no / not run, and the e2e seed."""
    word = {True: "yes", False: "no", None: "not run (level not served)"}
    parts = [f"{name} {word[shown.get(key)]}" for key, name in SHOWN_ON_NAMES]
    binary = shown.get("dsh_binary")
    parts.append(f"the shipped binary: {'yes, e2e seed `' + binary + '`' if binary else 'not shown'}")
    return "; ".join(parts)


def _evidence_cells(e: dict) -> tuple[str, str, str, str]:
    logs, hyp, exp = e["logs"], e["hypothesis"], e.get("explore")
    return (f"{logs['logs']} logs, {logs['events']} events",
            f"{hyp['examples']} examples, {hyp['steps']} steps"
            + (f" ({', '.join(hyp['levels'])})" if hyp["levels"] else ""),
            f"{exp['bounds']}: {exp['states']} states, {exp['paths']} paths, {exp['steps']} steps"
            if exp else "not run",
            ", ".join(f"`{p['name']}`" for p in e["proofs"]) or "none")


def promises_section(promises: list[dict]) -> list[str]:
    held = [p for p in promises if p["status"] == "held"]
    lines = ["## Promises that hold", ""]
    if not held:
        return lines + ["Every promise monitored is violated (see above).", ""]
    lines += ["Each promise below was watched by its monitor through everything listed and never broke. "
              "*Logs*: every scenario and corpus log appended event by event through the model. *Hypothesis*: "
              "the policy and compaction state machines on the model (unshrunk, fixed examples per run). "
              "*Explorer*: the bounded world of `surfacecheck explore`, every state reached along its BFS "
              "shortest path and run concretely on the model. *Z3*: obligations of `surfacecheck prove` that "
              "cover the promise. Bounded evidence, not proof, except where a Z3 obligation says so; and a monitor "
              "judges only the answers it reads, so a promise judged on answers none of these searches request "
              "(such as a `bench` answer) holds here vacuously and is checked by its own command.", "",
              "| promise | spec | logs | Hypothesis | explorer | Z3 |", "|---|---|---|---|---|---|"]
    for p in held:
        lines.append(f"| `{p['name']}` | {p['section']} | " + " | ".join(_evidence_cells(p["evidence"])) + " |")
    lines.append("")
    for p in held:
        lines += [f"- **`{p['name']}`**: {p['description'].removeprefix('PROMISE: ')}."]
        lines += [f"  - Z3 `{q['name']}` ({q['section']}): {q['proves']}." for q in p["evidence"]["proofs"]]
    lines.append("")
    return lines


def render(document: dict) -> str:
    """The whole report from the findings JSON document."""
    findings, promises, d = document["findings"], document["promises"], document["discovery"]
    counts = {c: sum(1 for f in findings if f["class"] == c) for c in ("defect", "design-question", "tradeoff", "new")}
    violated = sum(1 for p in promises if p["status"] == "violated")
    measured = sum(1 for p in promises if p["status"] == "measured")
    explored = d.get("explore")
    lines = ["# Findings about dsh: where its behaviour breaks what its design promises", "",
             "Generated by `surfacecheck findings --report` (do not edit; regenerate with "
             "`surfacecheck findings --search-seconds 600 --report reports/findings.md`). Runtime "
             f"`{document['runtime']}`; Hypothesis seed {d.get('seed')}.", "",
             "A *promise* is what dsh's design (the seed essay, the spec) says its compaction guarantees, stated "
             "as a monitor (`properties/promises*.py`). The reference model reproduces dsh, quirks included, so "
             "where dsh breaks a promise the model breaks it too: each such *finding* has a minimal witness "
             "trace that `surfacecheck replay` re-runs (exit 1 while the behaviour persists). Each class is "
             "argued from dsh's own published text, quoted (and checked against the installed npm package): a "
             "**defect** breaks what dsh's text promises; a **tradeoff** is what dsh's text documents or intends; "
             "a **design question** is a promise of the design that dsh's text neither makes nor refuses; **new** "
             "is not in the registry (`properties/findings.json`) and fails CI. Each finding also says how far a "
             "real session is from it (*reachability*: the shipped runtime, dsh's public API, only a foreign "
             "producer, or not reachable) and where it was reproduced. Reachable defects come first.", "",
             f"**Verdict**: `{document['verdict']}`. {len(findings)} findings ({counts['defect']} defects, "
             f"{counts['design-question']} design questions, {counts['tradeoff']} tradeoffs, {counts['new']} new), {len(document.get('stale', []))} stale "
             f"registry entries; {violated} promises violated, {measured} broken in the cost model, "
             f"{len(promises) - violated - measured} held.", "",
             f"**Explored**: {d.get('logs', 0)} logs ({d.get('events', 0)} events); {d.get('examples', 0)} "
             f"Hypothesis examples (seed {d.get('seed')})"
             + (f"; explorer at {explored['bounds']}: {explored['states']} states, {explored['steps']} steps"
                if explored else "") + ".", "",
             "## Summary", "", "| finding | class | reachability | reproduced on | promise | dsh function | witness |",
             "|---|---|---|---|---|---|---|"]
    for f in findings:
        source = (f["source"] or "?").split(" (")[0]
        reach = (f.get("reachability") or {}).get("kind", "?")
        lines.append(f"| [{f['id']}](#{_anchor(f['id'] + ' (' + f['class'] + ')')}) | {f['class']} | {reach} | "
                     f"{', '.join(f.get('reproduced_on') or ['model'])} | "
                     f"`{f['promise']['name']}` | `{source}` | {f['trace']['steps']} steps |")
    lines += ["", "## Findings", "", LEGEND, ""]
    for f in findings:
        lines += finding_section(f)
    for s in document.get("stale", []):
        lines += [f"**STALE** `{s['id']}`: {s['why']} (the registry must be kept true).", ""]
    lines += measured_section(promises)
    lines += promises_section(promises)
    return "\n".join(lines).rstrip() + "\n"


def measured_section(promises: list[dict]) -> list[str]:
    """Promises about cost that a dsh path breaks in the deterministic cost model: no protocol trace can show
    what an append costs inside a runtime, so the evidence is operations per append (``benchmarks/``)."""
    measured = [p for p in promises if p["status"] == "measured"]
    if not measured:
        return []
    lines = ["## Broken in the cost model (measured, not traced)", "",
             "A runtime's answers do not show what an append costs inside it, so these promises are judged on "
             "the deterministic cost model of `surfacecheck bench` (elementary operations per append, no timing), "
             "run on the variant that reproduces each dsh path. They are reported, not registered; "
             "`--strict` fails on them.", ""]
    for p in measured:
        lines += [f"### `{p['name']}`", "", f"**Promise** ({p['section']}): {p['description'].removeprefix('PROMISE: ')}.", "",
                  "| dsh path | variant | " + " | ".join(f"ops/append at {s}" for s in p["evidence"]["cost_model"][0]["ops_per_append"])
                  + " | growth |", "|---|---|" + "---|" * (len(p["evidence"]["cost_model"][0]["ops_per_append"]) + 1)]
        for c in p["evidence"]["cost_model"]:
            lines.append(f"| {c['path']} | `{c['variant']}` | "
                         + " | ".join(f"{ops:g}" for ops in c["ops_per_append"].values()) + f" | {c['growth']} |")
        lines += ["", "The projection keeps its promise; the meter fold that `measure()` (and so every pressure "
                  "decision) reads copies the whole node array on each surface append, so a pressure update costs "
                  "O(surface) per appended event. Fix: keep the per-node prices in a mutable table (or a persistent "
                  "vector) and append in place, as the embedded runtime's incremental meter does "
                  "(`benchmarks/variants.py` `incremental`: 1 operation per append at every size).", ""]
    return lines


def _anchor(title: str) -> str:
    """GitHub's heading anchor: lower case, punctuation dropped, spaces to dashes."""
    return "".join(c for c in title.lower() if c.isalnum() or c in " -_").replace(" ", "-")


def write_report(document: dict, path: str | Path) -> Path:
    """Render ``document`` to ``path`` (parents created)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(document), encoding="utf-8")
    return path
