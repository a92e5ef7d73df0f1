"""One ``surfacecheck mutate`` run: the tool, the gate, the figures and the verdict."""
from __future__ import annotations

import json
import shutil
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from surfacecheck.core.verdict import Verdict
from .score import Place, read_equivalent, read_times, score

EQUIVALENT = {"dsh": Path(__file__).resolve().parents[2] / "runtimes" / "dsh" / "mutate" / "equivalent.json",
              "embedded": Path(__file__).resolve().parent / "equivalent_embedded.json"}
SHOWN = 25


class VoidRun(Exception):
    """The score is void: the unmutated gate did not pass, or the tool did not finish (exit 3)."""


@dataclass
class MutationRun:
    runtime: str
    tool: str
    gate: tuple[str, ...]
    files: list[str]
    report_dir: Path
    figures: dict = field(default_factory=dict)
    baseline: dict = field(default_factory=dict)
    minutes: float = 0.0
    void: str | None = None
    min_score: float | None = None
    extra: dict = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        if self.void:
            return Verdict.INCONCLUSIVE.exit_code
        if self.min_score is not None and (self.figures.get("score") or 0.0) < self.min_score:
            return Verdict.VIOLATION.exit_code
        return Verdict.OK.exit_code

    @property
    def verdict(self) -> str:
        return {Verdict.OK.exit_code: "ok", Verdict.VIOLATION.exit_code: "below-min-score",
                Verdict.INCONCLUSIVE.exit_code: "void"}[self.exit_code]

    def to_json(self) -> dict:
        return {"command": "mutate", "runtime": self.runtime, "tool": self.tool, "gate": list(self.gate),
                "files": self.files, "verdict": self.verdict, "exit_code": self.exit_code, "void": self.void,
                "min_score": self.min_score, "minutes": self.minutes, "baseline": self.baseline, **self.figures,
                **self.extra, "report_dir": str(self.report_dir)}

    def text(self, verbose: bool = False) -> str:
        lines = [f"mutate: runtime {self.runtime} with {self.tool}, gate {','.join(self.gate)}, "
                 f"{len(self.files)} files"]
        if self.void:
            lines.append(f"VOID: {self.void}")
            return "\n".join(lines) + "\n"
        f = self.figures
        lines.append(f"{f['mutants']} mutants: {f['killed']} killed, {f['survived']} survived, {f['no_coverage']} "
                     f"not reached by the gate, {f['timed_out']} timed out, {f['crashed']} crashed "
                     f"(timeouts and crashes are not kills), {f['not_run']} not run")
        lines.append(f"score {f['score']} %, {f.get('score_argued_apart')} % with the {f.get('judged_equivalent', 0)} "
                     f"survivors argued equivalent or unreachable set apart (Stryker's own, timeouts as kills: "
                     f"{f['stryker_score']} %) in "
                     f"{self.minutes} min; per mutant median {f['time_per_mutant']['median_s']} s, "
                     f"p90 {f['time_per_mutant']['p90_s']} s")
        lines.append("per file:")
        for name, row in f["per_file"].items():
            lines.append(f"  {name:<52} {str(row['score']):>5} % ({str(row.get('score_argued_apart')):>5} % argued apart)"
                         f"  killed {row.get('killed', 0):>4}  survived {row.get('survived', 0):>4}  unreached "
                         f"{row.get('no_coverage', 0):>4}  argued {row.get('argued', 0):>3}  (spec {row['sections']})")
        lines.append("per spec section: " + ", ".join(f"{s} {row['score']} %" for s, row in f["per_section"].items()))
        survivors = [s for s in f["survivors"] if s["status"] == "survived"]
        shown = survivors if verbose else survivors[:SHOWN]
        if shown:
            lines.append(f"survivors ({len(survivors)}; unreached ones in the JSON and Stryker's report):")
            for s in shown:
                why = f"  [judged equivalent: {s['equivalent']}]" if "equivalent" in s else ""
                lines.append(f"  #{s['id']} {s['file']}:{s['line']} {s['mutator']}{why}")
                lines += [f"      {d[:160]}" for d in s["diff"].split("\n")]
            if len(survivors) > len(shown):
                lines.append(f"  ... {len(survivors) - len(shown)} more (-v, --json)")
        for name, value in self.extra.get("reports", {}).items():
            lines.append(f"{name}: {value}")
        if self.min_score is not None:
            lines.append(f"{'BELOW' if self.exit_code else 'MEETS'} --min-score {self.min_score} %")
        return "\n".join(lines) + "\n"


@contextmanager
def working_folder(prefix: str, run: MutationRun, keep: bool, say):
    """A fresh temporary folder for a tool's working copy; the run's minutes are taken when it closes, and the
    folder is removed unless ``keep`` (then its path is said)."""
    work = Path(tempfile.mkdtemp(prefix=prefix))
    started = time.perf_counter()
    try:
        yield work
    finally:
        run.minutes = round((time.perf_counter() - started) / 60.0, 2)
        if keep:
            say(f"mutate: working copy kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


def sections_of(text: str) -> tuple[str, ...]:
    """``"7, 8"`` -> ``("7", "8")``: the spec sections a file's rules come from."""
    return tuple(s.strip() for s in text.split(",") if s.strip())


def run_dsh(files_glob: list[str] | None, gate: tuple[str, ...], report_dir: Path, *, verify_profile: str,
            concurrency: int, incremental: bool, timeout: float, timeout_factor: float, timeout_ms: int,
            corpus: Path | None, modules: Path | None, keep_work: bool, say, min_score: float | None,
            shortcut: bool = True) -> MutationRun:
    """Stryker over a working copy of dsh's packages with the gate as its test runner."""
    from surfacecheck.runtime.dsh import ensure_installed

    from .dsh_files import select_files
    from .stryker import run_stryker

    source = modules or ensure_installed()
    files = select_files(source, files_glob)  # ValueError: usage
    run = MutationRun("dsh", "StrykerJS 9.6.1", gate, [f.key for f in files], report_dir, min_score=min_score)
    out = report_dir / "stryker"
    for stale in ("mutation.json", "baseline.json", "times.jsonl"):
        (out / stale).unlink(missing_ok=True)
    with working_folder("surfacecheck-mutate-dsh-", run, keep_work, say) as work:
        from .stryker import working_copy

        mutated_modules = working_copy(work, sorted({f"@deepseek-ai/{f.package}" for f in files}), source)
        say(f"mutate: working copy of {len(files)} dsh files in {work}")
        gate_args = ["--runtime", f"dsh:{mutated_modules}", "--gate", ",".join(gate), "--verify-profile",
                     verify_profile, "--timeout", str(timeout)] + (["--corpus", str(corpus)] if corpus else []) + \
            ([] if shortcut else ["--no-shortcut"])
        try:
            result = run_stryker(work, [f"pkgs/@deepseek-ai/{f.package}/lib/index.js:{f.start}-{f.end}" for f in files],
                                 out, gate_args, concurrency=concurrency, incremental=incremental,
                                 timeout_ms=timeout_ms, timeout_factor=timeout_factor, say=say)
        except RuntimeError as exc:
            run.baseline = _read_json(out / "baseline.json")
            if run.baseline and run.baseline.get("status") != "passed":
                run.void = (f"the unmutated gate did not pass ({run.baseline.get('status')} at "
                            f"{run.baseline.get('first')}: {run.baseline.get('message')}); no score")
            else:
                run.void = f"Stryker did not finish: {exc}"
            return run
        baseline = _read_json(out / "baseline.json")
        run.baseline = _baseline_summary(baseline)
        if baseline.get("status") != "passed":
            run.void = (f"the unmutated gate did not pass ({baseline.get('status')} at {baseline.get('first')}: "
                        f"{baseline.get('message')}); no score")
            return run
        run.figures = score_stryker(result["report"], files, out)
        run.extra["reports"] = {"stryker_html": result["html"], "stryker_json": str(out / "mutation.json"),
                                "stryker_log": result["log"]}
        run.extra["stryker"] = {"concurrency": concurrency, "coverage_analysis": "perTest", "incremental": incremental,
                                "shortcut": shortcut,
                                "timeout": f"{timeout_factor} x the covering units' dry-run time + {timeout_ms} ms"}
    return run


def score_stryker(report: dict, files, out: Path) -> dict:
    """The figures of a Stryker run over ``files`` (several dsh files share a bundle: a mutant belongs to the
    region holding its line). Stryker names the killing test by its report id: mapped back to the unit."""
    by_bundle: dict[str, list] = {}
    for f in files:
        by_bundle.setdefault(f"pkgs/@deepseek-ai/{f.package}/lib/index.js", []).append(f)

    def locate(name: str, line: int) -> Place | None:
        for f in by_bundle.get(name, []):
            if f.start <= line <= f.end:
                return Place(f.key, sections_of(f.sections))
        return None
    units = {t["id"]: t.get("name", t["id"]) for tf in (report.get("testFiles") or {}).values()
             for t in tf.get("tests", [])}
    for entry in report.get("files", {}).values():
        for mutant in entry.get("mutants", []):
            if mutant.get("killedBy"):
                mutant["killedBy"] = [units.get(k, k) for k in mutant["killedBy"]]
    return score(report, locate, times=read_times(out / "times.jsonl"), equivalent=read_equivalent(EQUIVALENT["dsh"]))


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def _baseline_summary(baseline: dict) -> dict:
    tests = baseline.get("tests") or []
    return {"status": baseline.get("status"), "units": len(tests),
            "seconds": round(sum(t.get("seconds", 0.0) for t in tests), 1)}
