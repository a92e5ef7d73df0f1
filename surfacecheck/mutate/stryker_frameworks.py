"""StrykerJS over the Node frameworks' compaction code, the compaction contract as the gate (``mutate --runtime
gemini``, ``ai``; docs/mutate.md).

* **Code** (:data:`TARGETS`): a file of the installed package and the declarations in it that hold the compaction,
  found by their first line in the installed file (a declaration runs to the next line that is ``}`` alone, as the
  packages' emitted code ends a top-level declaration): gemini-cli-core's ``findCompressSplitPoint``,
  ``truncateHistoryToBudget`` and the ``ChatCompressionService`` class (``compress``); the AI SDK's one bundled
  ``dist/index.js``, of which only ``pruneMessages`` is mutated. Stryker's ``mutate`` gets each range
  (``FILE:START-END``), never a hard-coded line.
* **Working copy** (``stryker.working_copy`` with ``link_rest``): the package copied to ``pkgs/`` and symlinked
  back from ``node_modules/``, every other package a symlink into the cached install (401 MB is not copied); the
  adapters are pointed at it by ``SURFACECHECK_CONVERSATION_NODE_MODULES``. The cache is only read.
* **The gate** (``gate.py serve --framework``, ``node_gate.py``): the framework gate's scenarios as Stryker's
  tests, behind the same test runner as dsh; perTest coverage tells which scenarios reach which mutant.
* ``--max-mutants N``: Stryker's instrumenter lists the mutants of the ranges (the same instrumenter, the same
  mutants), N of them evenly spread are kept; the runner answers any other at once and it is left out of the
  figures.
"""
from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

from .run import MutationRun, _read_json, working_folder
from .score import Place, read_times, score

TARGETS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "gemini": ("@google/gemini-cli-core", "dist/src/context/chatCompressionService.js",
               ("export function findCompressSplitPoint(", "async function truncateHistoryToBudget(",
                "export class ChatCompressionService ")),
    "ai": ("ai", "dist/index.js", ("function pruneMessages(",)),
}
"""Per Node runtime: the package, the file inside it, and the first line's start of each mutated declaration."""


def runtimes() -> tuple[str, ...]:
    return tuple(TARGETS)


@dataclass(frozen=True)
class Region:
    """One mutated declaration: its name and 1-based line range in the installed file."""

    name: str
    start: int
    end: int


def regions(modules: Path, runtime: str) -> list[Region]:
    """Each declaration of ``TARGETS[runtime]`` located in the installed file (ValueError when one is missing)."""
    package, file, starts = TARGETS[runtime]
    lines = (modules / package / file).read_text(encoding="utf-8").split("\n")
    out = []
    for head in starts:
        first = next((i for i, line in enumerate(lines) if line.startswith(head)), None)
        if first is None:
            raise ValueError(f"{package}/{file} has no line starting {head!r}: another version?")
        end = next((i for i in range(first + 1, len(lines)) if lines[i] == "}"), None)
        if end is None:
            raise ValueError(f"{package}/{file}: {head!r} has no closing line")
        name = head.rstrip("( ").split()[-1]
        out.append(Region(name, first + 1, end + 1))
    return out


def mutate_patterns(runtime: str, found: list[Region]) -> list[str]:
    package, file, _ = TARGETS[runtime]
    return [f"pkgs/{package}/{file}:{r.start}-{r.end}" for r in found]


LIST = r'''
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
const [instrumenter, file, ranges] = process.argv.slice(1);
const { Instrumenter } = await import(pathToFileURL(instrumenter).href);
const quiet = () => false, none = () => {};
const log = { isDebugEnabled: quiet, isTraceEnabled: quiet, isInfoEnabled: quiet, debug: none, trace: none, info: none,
  warn: none, error: (m) => process.stderr.write(String(m) + '\n') };
const mutate = JSON.parse(ranges).map(([s, e]) => ({ start: { line: s - 1, column: 0 }, end: { line: e, column: 0 } }));
const result = await new Instrumenter(log).instrument([{ name: file, content: readFileSync(file, 'utf8'), mutate }],
  { plugins: null, excludedMutations: [], ignorers: [] });
process.stdout.write(JSON.stringify(result.mutants.map((m) => ({ mutatorName: m.mutatorName, location: m.location, replacement: m.replacement }))));
'''
"""Stryker's own instrumenter over the ranges: its mutants (0-based lines, as the test runner sees them)."""


def key(mutant: dict, one_based: bool = False) -> str:
    """``mutantKey`` of ``surfacecheck-runner.mjs``; ``one_based``: a report's location (1-based line and column)."""
    start, end = mutant["location"]["start"], mutant["location"]["end"]
    d = 1 if one_based else 0
    return (f"{mutant['mutatorName']}|{start['line'] - d}:{start['column'] - d}-{end['line'] - d}:{end['column'] - d}"
            f"|{mutant['replacement']}")


def list_mutants(modules: Path, runtime: str, found: list[Region]) -> list[dict]:
    from surfacecheck.runtime.dsh import node_binary

    from .stryker import stryker_cli

    instrumenter = stryker_cli().parents[2] / "instrumenter" / "dist" / "src" / "index.js"
    package, file, _ = TARGETS[runtime]
    done = subprocess.run([node_binary() or "node", "--input-type=module", "-e", LIST, "--", str(instrumenter),
                           str(modules / package / file), json.dumps([[r.start, r.end] for r in found])],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"Stryker's instrumenter could not list the mutants: {done.stderr[-800:]}")
    return json.loads(done.stdout)


def sample(mutants: list, max_mutants: int | None) -> list:
    """At most ``max_mutants``, evenly spread over the instrumenter's order (the same sample at every run)."""
    if max_mutants is None or len(mutants) <= max_mutants:
        return list(mutants)
    step = len(mutants) / max_mutants
    return [mutants[int(i * step)] for i in range(max_mutants)]


def run_node(runtime: str, report_dir: Path, *, max_mutants: int | None = None, examples: int | None = None,
             timeout: float = 10.0, timeout_factor: float = 2.0, timeout_ms: int = 10000, keep_work: bool = False,
             say, min_score: float | None = None, lines: tuple[int, int] | None = None) -> MutationRun:
    """Stryker over ``runtime``'s compaction code with the contract as its test runner (the module docstring).
    ``lines``: mutate only this 1-based range of the first declaration (a smaller run, for tests)."""
    from surfacecheck.runtime.conversation.node import MODULES_ENV, ensure_installed

    from . import framework_gate as gate
    from .stryker import run_stryker, working_copy

    source = ensure_installed(say)
    found = regions(source, runtime)
    if lines is not None:
        found = [Region(found[0].name, max(found[0].start, lines[0]), min(found[0].end, lines[1]))]
    package, file, _ = TARGETS[runtime]
    examples = examples or gate.EXAMPLES
    run = MutationRun(runtime, "StrykerJS 9.6.1", ("findings", "contract"),
                      [f"{package}/{file}:{r.name} ({r.start}-{r.end})" for r in found], report_dir,
                      min_score=min_score)
    out = report_dir / "stryker"
    for stale in ("mutation.json", "baseline.json", "times.jsonl", "coverage.json"):
        (out / stale).unlink(missing_ok=True)
    select = None
    if max_mutants is not None:
        every = list_mutants(source, runtime, found)
        select = [key(m) for m in sample(every, max_mutants)]
        run.extra.update({"generated": len(every), "selected": len(select)})
    with working_folder(f"surfacecheck-mutate-{runtime}-", run, keep_work, say) as work:
        modules = working_copy(work, [package], source, link_rest=True)
        say(f"mutate: working copy of {package} in {work}: {', '.join(run.files)}")
        gate_args = ["--runtime", runtime, "--framework", "--examples", str(examples), "--timeout", str(timeout)]
        try:
            result = run_stryker(work, mutate_patterns(runtime, found), out, gate_args, concurrency=1,
                                 incremental=False, timeout_ms=timeout_ms + int(timeout * 1000),
                                 timeout_factor=timeout_factor, say=say, env={MODULES_ENV: str(modules)},
                                 select=select)
        except RuntimeError as exc:
            base = _read_json(out / "baseline.json")
            run.baseline = _summary(base)
            if base and base.get("status") != "passed":
                run.void = (f"the unmutated gate did not pass ({base.get('first')}: {base.get('message')}); "
                            "no score")
            else:
                run.void = f"Stryker did not finish: {exc}"
            return run
        run.baseline = _summary(_read_json(out / "baseline.json"))
        report = result["report"]
        if select is not None:
            chosen = set(select)
            for entry in report.get("files", {}).values():
                entry["mutants"] = [m for m in entry.get("mutants", []) if key(m, one_based=True) in chosen]
        run.figures = figures(report, runtime, found, out)
        run.extra.setdefault("generated", sum(len(e.get("mutants", [])) for e in report.get("files", {}).values()))
        run.extra.update({
            "gate_settings": run.baseline.pop("gate_settings", {}),
            "kills": [{"id": m["id"], "by": (m.get("killedBy") or [None])[0], "why": m.get("statusReason", "")}
                      for e in report.get("files", {}).values() for m in e.get("mutants", [])
                      if m.get("status") == "Killed"][:200],
            "reports": {"stryker_html": result["html"], "stryker_json": str(out / "mutation.json"),
                        "stryker_log": result["log"]},
            "stryker": {"concurrency": 1, "coverage_analysis": "perTest",
                        "timeout": f"{timeout_factor} x the covering scenarios' dry-run time + "
                                   f"{timeout_ms + int(timeout * 1000)} ms"}})
    return run


def figures(report: dict, runtime: str, found: list[Region], out: Path) -> dict:
    """The figures of the run: a mutant belongs to the declaration holding its line; Stryker names the killing
    test by its report id, mapped back to the scenario."""
    package, file, _ = TARGETS[runtime]

    def locate(name: str, line: int) -> Place | None:
        for r in found:
            if r.start <= line <= r.end:
                return Place(f"{package}/{file}:{r.name}", ())
        return None
    units = {t["id"]: t.get("name", t["id"]) for tf in (report.get("testFiles") or {}).values()
             for t in tf.get("tests", [])}
    for entry in report.get("files", {}).values():
        for mutant in entry.get("mutants", []):
            if mutant.get("killedBy"):
                mutant["killedBy"] = [units.get(k, k) for k in mutant["killedBy"]]
    return score(report, locate, times=read_times(out / "times.jsonl"))


def _summary(baseline: dict) -> dict:
    tests = baseline.get("tests") or []
    return {"status": baseline.get("status"), "units": len(tests),
            "seconds": round(sum(t.get("seconds", 0.0) for t in tests), 1), **(baseline.get("framework") or {})}
