"""Run the proof obligations and fold them into one report (``surfacecheck prove`` and its stage).

Verdicts: ``proved`` — every obligation proved and every negative control refuted and replayed to
its violation (exit 0); ``violation`` — an obligation refuted (the model breaks its rule) or a
control that Z3 did not refute or whose trace did not replay (the proof would be worthless) (exit 1);
``inconclusive`` — some obligation unknown, nothing failed (exit 3).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from surfacecheck.core.verdict import Verdict
from surfacecheck.properties.proofs import DEFAULT_BOUND, run_obligations
from surfacecheck.properties.proofs.obligation import PROVED, REFUTED, ObligationResult

PROVED_VERDICT, VIOLATION, INCONCLUSIVE = "proved", "violation", "inconclusive"
EXIT = {PROVED_VERDICT: Verdict.OK.exit_code, VIOLATION: Verdict.VIOLATION.exit_code,
        INCONCLUSIVE: Verdict.INCONCLUSIVE.exit_code}


@dataclass
class ProveReport:
    bound: int
    results: list[ObligationResult]
    seconds: float
    trace_dir: str | None = None
    problems: list[str] = field(default_factory=list)

    @property
    def verdict(self) -> str:
        if self.problems:
            return VIOLATION
        if any(r.status != PROVED for r in self.results):
            return INCONCLUSIVE
        return PROVED_VERDICT

    @property
    def exit_code(self) -> int:
        return EXIT[self.verdict]

    def to_json(self) -> dict:
        return {"command": "prove", "verdict": self.verdict, "exit_code": self.exit_code, "bound": self.bound,
                "seconds": round(self.seconds, 3), "trace_dir": self.trace_dir, "problems": self.problems,
                "obligations": [r.to_json() for r in self.results]}

    def text(self) -> str:
        lines = [f"{'obligation':28} {'section':38} {'status':8} {'bound':>30} {'seconds':>8}  controls"]
        for r in self.results:
            controls = ", ".join(f"{c.name}: {c.status}{'' if c.replayed else ' (NOT replayed)'}" for c in r.controls)
            lines.append(f"{r.name:28} {r.section[:38]:38} {r.status:8} {str(r.bound):>30} {r.seconds:8.2f}  {controls}")
        lines.append(f"verdict: {self.verdict} (bound {self.bound}, {self.seconds:.1f} s)")
        lines += [f"  problem: {p}" for p in self.problems]
        if self.trace_dir:
            lines.append(f"counterexample traces: {self.trace_dir}")
        return "\n".join(lines)


def problems_of(result: ObligationResult) -> list[str]:
    out = []
    if result.status == REFUTED:
        where = f" (trace {result.trace_path})" if result.trace_path else ""
        replay = "; the model shows it on replay" if result.replayed else ""
        out.append(f"{result.name}: refuted{where}{replay}: {result.replay_message or result.notes.get('counterexample')}")
    for control in result.controls:
        if control.status != REFUTED:
            out.append(f"{result.name}: negative control {control.name} was not refuted ({control.status}): "
                       "the proof cannot fail, so it shows nothing")
        elif not control.replayed:
            out.append(f"{result.name}: negative control {control.name}: its counterexample did not replay through "
                       f"{control.runtime} to the violation ({control.replay_message})")
    return out


def prove(bound: int = DEFAULT_BOUND, only: list[str] | None = None, trace_dir: Path | None = None,
          err: TextIO | None = None, command: str | None = None) -> ProveReport:
    """Run the obligations; progress (one tqdm bar) on ``err``. ``KeyError`` for an unknown name."""
    from tqdm import tqdm

    from surfacecheck.properties.proofs import names

    selected = only or names()
    bar = tqdm(total=len(selected), file=err, desc="prove", unit="obligation", disable=True if err is None else None,
               leave=False)  # a bar on a terminal only
    started = time.perf_counter()

    def progress(name: str) -> None:
        bar.set_postfix_str(name)

    try:
        results = []
        for result in run_obligations(bound, only, trace_dir, command, progress=_chain(progress, bar)):
            results.append(result)
        bar.update(1 if results else 0)
    finally:
        bar.close()
    report = ProveReport(bound, results, time.perf_counter() - started, str(trace_dir) if trace_dir else None)
    for result in results:
        report.problems += problems_of(result)
    return report


def _chain(progress, bar):
    first = [True]

    def step(name: str) -> None:
        if not first[0]:
            bar.update(1)
        first[0] = False
        progress(name)
    return step
