"""The two passes of a framework mutation run: the unmutated baseline, then every mutant in one adapter process.

The baseline records each scenario's verdict and the mutated functions it reaches (mutmut's ``stats`` mode, read
back with the adapter's ``hits`` op), runs every scenario a second time and drops one whose verdict does not
repeat (the gate must be a function of the code alone). A witness that no longer breaks its registered promise
with the trampolined module makes the run void: the unmutated gate must pass, as in every ``mutate`` run.
"""
from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from surfacecheck.core.protocol import RuntimeUnavailable

from . import framework_gate as gate

HERE = Path(__file__).resolve().parent
SAY_EVERY = 60.0
"""Seconds between progress lines when no progress bar is shown (stderr is not a terminal)."""


def open_adapter(runtime: str, work: Path, files: dict[str, str], timeout: float):
    """The runtime's adapter under ``mutant_peer.py`` with the mutated modules, in the runtime's environment."""
    from surfacecheck.runtime.client import ProcessRuntime
    from surfacecheck.runtime.conversation.pyenv import RUNTIMES, adapter_command

    argv, env = adapter_command(RUNTIMES[runtime])
    argv = [argv[0], str(HERE / "mutant_peer.py"), argv[1], str(work / "overlay"), json.dumps(files)]
    return ProcessRuntime(f"{runtime} (mutated)", timeout=timeout, argv=argv, env=env, name=runtime,
                          handshake_timeout=max(timeout, 60.0))


@dataclass
class BaselineRun:
    scenarios: list[gate.Baseline] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    void: str | None = None
    seconds: float = 0.0

    def summary(self) -> dict:
        kinds = {}
        for b in self.scenarios:
            kind = b.scenario.id.split(":", 1)[0]
            kinds[kind] = kinds.get(kind, 0) + 1
        return {"status": "failed" if self.void else "passed", "units": len(self.scenarios), "by_kind": kinds,
                "dropped_unstable": self.dropped, "seconds": round(self.seconds, 1),
                "broken_in_search": sorted({p for b in self.scenarios if b.scenario.id.startswith("search:")
                                            for p in gate.broken(b.verdict)})}


def baseline(runtime: str, work: Path, files: dict[str, str], timeout: float, provider: str, examples: int,
             say) -> BaselineRun:
    """The scenarios' unmutated verdicts and reach (see the module docstring)."""
    started = time.perf_counter()
    out = BaselineRun()
    adapter = None
    try:
        adapter = open_adapter(runtime, work, files, timeout)
        adapter.call("mutant", {"name": ""})
        scenarios = gate.witnesses(runtime)
        searched = gate.search_scripts(adapter, runtime, provider, examples=examples)
        scenarios += searched
        say(f"mutate: the gate: {len(scenarios)} scenarios (the witnesses, and {len(searched)} sessions of "
            f"{examples} search examples at seed {gate.SEED}, refused ones included); recording the unmutated "
            f"verdicts")
        adapter.call("mutant", {"name": "stats"})
        for scenario in scenarios:
            adapter.call("hits", {})
            began = time.perf_counter()
            found = gate.verdict(adapter, scenario, runtime)
            seconds = time.perf_counter() - began
            hits = frozenset(adapter.call("hits", {})["hits"])
            again = gate.verdict(adapter, scenario, runtime)
            if again != found:
                out.dropped.append(scenario.id)
                continue
            if scenario.promise and scenario.promise not in gate.broken(found):
                out.void = (f"the unmutated gate did not pass: {scenario.id} does not break {scenario.promise} "
                            f"with the trampolined module (its verdict: {found}); no score")
                break
            out.scenarios.append(gate.Baseline(scenario, found, hits, seconds))
    except RuntimeUnavailable as exc:
        out.void = f"the unmutated adapter is unavailable ({exc.kind}: {exc}); no score"
    finally:
        if adapter is not None:
            adapter.close()
    out.seconds = time.perf_counter() - started
    if out.dropped:
        say(f"mutate: dropped {len(out.dropped)} scenarios whose verdict did not repeat: {', '.join(out.dropped)}")
    return out


def each_mutant(runtime: str, work: Path, files: dict[str, str], timeout: float, mutants: list, scenarios: list,
                say, progress: bool = True) -> dict:
    """``{mutmut name: GateRun}`` for every mutant, in order, in one adapter process (restarted after a mutant
    hung it or killed it)."""
    from tqdm import tqdm

    results, adapter = {}, None
    counts: dict[str, int] = {}
    bar = tqdm(total=len(mutants), desc=f"mutate {runtime}", unit="mutant", file=sys.stderr,
               disable=None if progress else True, leave=False)
    last = time.monotonic()
    try:
        for i, m in enumerate(mutants, 1):
            result = None
            if any(m.function in b.hits for b in scenarios):
                if adapter is None:
                    adapter = open_adapter(runtime, work, files, timeout)
                dead = False
                try:
                    adapter.call("mutant", {"name": m.active})
                    result = gate.run_mutant(adapter, runtime, scenarios, m.function)
                    dead = result.status in ("Timeout", "RuntimeError")
                    if not dead:
                        adapter.call("mutant", {"name": ""})
                except RuntimeUnavailable as exc:  # switching the mutant on or off: the process is gone
                    dead = True
                    result = result or gate.GateRun("Timeout" if exc.kind == "timeout" else "RuntimeError",
                                                    why=f"{exc.kind}: {exc}")
                if dead:
                    adapter.close()
                    adapter = None
            results[m.name] = result or gate.GateRun("NoCoverage")
            counts[results[m.name].status] = counts.get(results[m.name].status, 0) + 1
            bar.update(1)
            bar.set_postfix_str(", ".join(f"{k} {v}" for k, v in sorted(counts.items())), refresh=False)
            if bar.disable and time.monotonic() - last > SAY_EVERY:
                last = time.monotonic()
                say(f"mutate: {i}/{len(mutants)} mutants: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    finally:
        bar.close()
        if adapter is not None:
            adapter.close()
    return results
