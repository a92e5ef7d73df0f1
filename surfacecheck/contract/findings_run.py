"""The contract's findings about one runtime: the registry's witnesses replayed, its quotes checked, the search's
broken promises sorted into known and NEW (``surfacecheck findings --runtime langchain``; ``docs/contract.md``).

A registered finding is *known* while its witness still breaks its promise on the runtime and its quotes stand in the
installed package; it is STALE when the witness no longer breaks the promise (the runtime fixed it: take the entry
out) or a quote is no longer in the package. A promise the search breaks with no registered finding is NEW, its
witness written to the trace folder. NEW or STALE fails; known findings pass unless ``strict``.
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from surfacecheck.core.trace import TraceError
from surfacecheck.core.verdict import Verdict
from surfacecheck.runtime.registry import base

from . import registry
from .replay import read_contract_trace, replay


def environment(spec: str) -> Path | None:
    """Where a runtime's quotes are checked, or None: a Python runtime's virtual environment, a Node runtime's
    ``node_modules`` in the cache, dsh's installed packages for dsh and the model that reproduces it."""
    from surfacecheck.runtime.conversation import node
    from surfacecheck.runtime.conversation.pyenv import RUNTIMES

    from .npm_quotes import dsh_modules

    if base(spec) in node.SCRIPTS:
        return node.entry() / "node_modules"
    if base(spec) in ("dsh", "embedded", "model"):
        return dsh_modules()
    runtime = RUNTIMES.get(base(spec))
    return runtime.entry() if runtime is not None else None


@dataclass
class ContractFindings:
    """Known, new and stale findings of one runtime; the search's summary when it ran."""

    runtime: str
    strict: bool
    known: list[dict] = field(default_factory=list)
    new: list[dict] = field(default_factory=list)
    stale: list[dict] = field(default_factory=list)
    inconclusive: list[str] = field(default_factory=list)
    search: dict | None = None
    seconds: float = 0.0

    @property
    def verdict(self) -> Verdict:
        if self.new or self.stale or (self.strict and self.known):
            return Verdict.VIOLATION
        return Verdict.INCONCLUSIVE if self.inconclusive else Verdict.OK

    @property
    def exit_code(self) -> int:
        return self.verdict.exit_code

    def to_json(self) -> dict:
        return {"runtime": self.runtime, "verdict": self.verdict.word, "exit_code": self.exit_code,
                "strict": self.strict, "known": self.known, "new": self.new, "stale": self.stale,
                "inconclusive": self.inconclusive, "search": self.search, "seconds": round(self.seconds, 3)}

    def text(self) -> str:
        out = [f"contract findings on {self.runtime}: {len(self.known)} known, {len(self.new)} new, "
               f"{len(self.stale)} stale"]
        for n in self.new:
            out += [f"  NEW {n['promise']}: {n['message']}", f"      witness: {n['trace']} ({n['messages']} messages)"]
        for s in self.stale:
            out.append(f"  STALE {s['id']} ({s['promise']}): {s['why']}")
        for k in self.known:
            quote = {True: "quote verified", False: "QUOTE NOT FOUND", None: "quote not checked"}[k["quote"]["found"]]
            out += [f"  known {k['id']} [{k['class']}] {k['promise']}: {k['reason']}",
                    f"      {k['evidence']['distribution']}=={k['evidence']['version']} {k['evidence']['file']}"
                    f":{k['quote']['line'] or '?'} ({quote}): \"{k['evidence']['quote'][:160]}\"",
                    f"      reachable: {k['reachability']['kind']}: {k['reachability']['how'][:160]}",
                    f"      issue: {k['issue'] or 'none found'}; witness: {k['trace']} ({k['replay']})"]
        for why in self.inconclusive:
            out.append(f"  inconclusive: {why}")
        word = {Verdict.OK: "HELD (known findings only)", Verdict.VIOLATION: "VIOLATED",
                Verdict.INCONCLUSIVE: "INCONCLUSIVE"}[self.verdict]
        return "\n".join(out + [f"{word} (exit {self.exit_code})"])


def check_registered(spec: str, findings: list[registry.Finding], report: ContractFindings, *,
                     timeout: float, say: Callable[[str], None]) -> None:
    """Replay each registered witness of ``spec``'s runtime and check its quotes (known or STALE)."""
    env = environment(spec)
    for f in findings:
        quote = registry.check_quote(f.evidence, env)
        also = [registry.check_quote(q, env) for q in f.evidence_also]
        entry = {**f.to_json(), "quote": quote.to_json(), "quotes_also": [q.to_json() for q in also]}
        missing = [q for q in [quote, *also] if q.found is False]
        if missing:
            report.stale.append({**entry, "why": f"a quote is not in the installed package: {missing[0].where}: "
                                                 f"{missing[0].why}"})
            continue
        try:
            trace = read_contract_trace(f.trace_path)
        except (TraceError, OSError) as exc:
            report.stale.append({**entry, "why": f"its witness cannot be read: {exc}"})
            continue
        say(f"contract findings: replaying {f.id} ({f.promise}) on {spec}")
        outcome = replay(trace, spec, timeout=timeout)
        entry["replay"] = outcome.verdict
        if outcome.unavailable:
            report.inconclusive.append(f"{f.id}: {outcome.describe()}")
            report.known.append(entry)
        elif outcome.breach is None:
            report.stale.append({**entry, "why": f"its witness no longer breaks {f.promise} on {spec}: "
                                                 f"{outcome.describe()}"})
        else:
            report.known.append(entry)


def classify_search(spec: str, result, findings: list[registry.Finding], report: ContractFindings,
                    trace_dir: Path) -> None:
    """Each promise the search broke: known when the registry has a finding of it for this runtime, else NEW."""
    from .search import write_traces

    report.search = result.to_json()
    if result.inconclusive:
        report.inconclusive.append(f"search: {result.inconclusive}")
    fresh = [p for p in result.found if registry.match(findings, base(spec), p) is None]
    if not fresh:
        return
    written = write_traces(result, trace_dir)
    for promise in fresh:
        f = result.found[promise]
        report.new.append({"promise": promise, "message": f.breach.message, "step": f.breach.step,
                           "trace": str(written[promise]), "messages": f.messages,
                           "replay": f"surfacecheck replay {written[promise]}"})


def run_findings(spec: str, *, registry_path: str | Path | None = None, strict: bool = False,
                 trace_dir: Path, seed: int | None = None, budget: float | None = None, search: bool = True,
                 timeout: float = 60.0, progress: Callable[[str], None] | None = None) -> ContractFindings:
    """Known, new and stale contract findings of ``spec`` (see the module docstring); ``RegistryError`` for a
    malformed registry."""
    from . import promises
    from .search import BUDGET_SECONDS
    from .search import search as run_search

    say = progress or (lambda line: (sys.stderr.write(line + "\n"), sys.stderr.flush()))
    started = time.perf_counter()
    ids = tuple(p.id for p in promises.PROMISES)
    findings = registry.for_runtime(registry.load(registry_path, ids), base(spec))
    report = ContractFindings(spec, strict)
    check_registered(spec, findings, report, timeout=timeout, say=say)
    if search:
        result = run_search(spec, seed=seed, deadline_seconds=BUDGET_SECONDS if budget is None else budget,
                            progress=say, timeout=timeout)
        classify_search(spec, result, findings, report, trace_dir)
    report.seconds = time.perf_counter() - started
    return report
