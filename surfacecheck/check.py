"""``surfacecheck check``: replay every scenario and corpus log through a runtime and judge it.

Logs checked, in this order:

1. every generated scenario log, ``scenarios/logs/*.jsonl`` (shipped with the package);
2. if a corpus is found, every ``dsh-sessions/*.jsonl`` and every ``dsh-generated/*.jsonl``.

Per log it records the event count, surface size, replace generation and replacements, and
checks that

* the log reads and replays with no model error (``ReplayResult.error is None``);
* when the log is fully metered, the O(1) projection total equals the full recount;
* for a ``dsh-generated`` log, the replay agrees with ``dsh-generated/expected.json`` (final
  surface, generation, and per replacement: seq, kind, start, end, shadowed seqs, logged shadow
  price, replacement price; and the recomputed shadow price equals the logged one).

Any failed check is a *violation*. Exit codes: 0 every check held, 1 a violation was found,
2 bad input or usage (unknown runtime, missing corpus, no scenario logs, unwritable report
directory), 3 inconclusive (no violation, but some check reached no verdict: the model is not
importable yet, or raised ``NotImplementedError``).

Outputs: a human summary (or with ``json_out`` exactly one JSON document) on stdout, progress on
stderr, and ``report.json`` plus ``junit.xml`` (one test case per log) in the report directory.
"""
from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Sequence, TextIO

from surfacecheck import scenarios
from surfacecheck.core.cases import Outcome, TestCase
from surfacecheck.reports.junit import write_junit

from . import __version__
from .core.corpus import (
    GENERATED_DIR,
    SESSIONS_DIR,
    CorpusError,
    corpus_root,
    generated_expected,
    generated_logs,
    session_logs,
)
from .options import DEFAULT_RUNTIME
from .runtime.select import runtime_problem as select_runtime_problem
from .stages import CAPABILITY_STAGES, add_stages, format_stages, run_stages, verdict_line
from .core.words import count
from .core.stage import DEFAULT_REPORT_DIR, INTERRUPT_EXIT, CheckContext, Terminated
from .core.verdict import Verdict
from surfacecheck.reports.html_report import write_html
from surfacecheck.reports.screenshot import PNG_FILE, render as render_png
from surfacecheck.reports.stage_lines import stage_line

from .catalogue_table import coverage_table
from .coverage.code import Collector
from .coverage.report import for_check
from .logcheck import (  # noqa: F401 - re-exported for callers and tests
    SOURCE_SCENARIO,
    SOURCES,
    LogIssue,
    LogResult,
    Runtime,
    _log_row,
    _short,
    _summary,
    apply_known,
    check_log,
    junit_cases,
    known_corpus,
    load_runtime,
)

EXIT_OK = Verdict.OK.exit_code
EXIT_VIOLATION = Verdict.VIOLATION.exit_code
EXIT_USAGE = Verdict.BAD_INPUT.exit_code
EXIT_INCONCLUSIVE = Verdict.INCONCLUSIVE.exit_code

REPORT_FILE = "report.json"
JUNIT_FILE = "junit.xml"
REPORT_SCHEMA = "surfacecheck-report/1"
COVERAGE_DIR = "coverage"  # raw V8 dumps of the dsh processes
COVERAGE_FILE = "coverage.json"
COBERTURA_FILE = "coverage.xml"
NO_CORPUS_IN_CI = ("CI is set but no corpus was found: only the scenario logs were checked, none of the recorded "
                   "dsh logs (set SURFACECHECK_CORPUS or pass --corpus)")


def runtime_problem(runtime: str) -> str | None:
    """Why ``runtime`` cannot be used (a message), or ``None`` if it can (see :mod:`.runtime.select`)."""
    return select_runtime_problem(runtime)


# -- reporting -----------------------------------------------------------------------------------


class _Progress:
    """``[n/total] name`` on stderr: rewritten in place on a terminal, every 25 logs otherwise."""

    def __init__(self, total: int, stream: TextIO):
        self.total = total
        self.stream = stream
        self.tty = hasattr(stream, "isatty") and stream.isatty()
        self.width = 0

    def step(self, index: int, name: str) -> None:
        line = f"[{index}/{self.total}] {name}"
        if self.tty:
            self.stream.write("\r" + line.ljust(self.width))
            self.width = len(line)
        elif index == 1 or index % 25 == 0 or index == self.total:
            self.stream.write(line + "\n")
        self.stream.flush()

    def done(self) -> None:
        if self.tty and self.width:
            self.stream.write("\r" + " " * self.width + "\r")
            self.stream.flush()


def _verdict(results: list[LogResult]) -> tuple[str, int]:
    verdict = Verdict.fold(r.status for r in results if r.status in (Verdict.VIOLATION, Verdict.INCONCLUSIVE))
    return verdict.word, verdict.exit_code


def build_report(
    results: list[LogResult], runtime: str, corpus: Path | None, scenario_dir: Path, seconds: float
) -> dict[str, Any]:
    """The JSON report document (also what ``--json`` prints)."""
    verdict, exit_code = _verdict(results)
    logs = []
    for r in results:
        entry = asdict(r)
        entry["violations"] = [{k: v for k, v in asdict(v).items() if k != "log"} for v in r.violations]
        entry["seconds"] = round(r.seconds, 4)
        logs.append(entry)
    return {
        "schema": REPORT_SCHEMA,
        "tool": "surfacecheck",
        "version": __version__,
        "generated_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "runtime": runtime,
        "corpus": str(corpus) if corpus is not None else None,
        "scenario_dir": str(scenario_dir),
        "verdict": verdict,
        "exit_code": exit_code,
        "seconds": round(seconds, 3),
        "summary": _summary(results),
        "violations": [asdict(v) for r in results for v in r.violations],
        "logs": logs,
        "catalogue": [row.to_json() for row in coverage_table()],  # which engine checks each property
    }


def format_human(report: dict[str, Any], results: list[LogResult], report_files: list[Path], verbose: bool) -> str:
    """The human summary: per-source table, per-log rows, violations, verdict."""
    out = [
        f"surfacecheck {report['version']}  runtime={report['runtime']}  "
        f"corpus={report['corpus'] or '(none found)'}",
    ] + [f"WARNING: {warning}" for warning in report.get("warnings", ())]
    if verbose:  # the per-source table; without -v one line per stage says it
        out += ["", f"  {'source':<14} {'logs':>5} {'held':>5} {'violated':>9} {'inconcl.':>9} {'events':>8} {'replacements':>13}"]
        for key, row in report["summary"].items():
            out.append(
                f"  {key:<14} {row['logs']:>5} {row['held']:>5} {row['violated']:>9} {row['inconclusive']:>9} "
                f"{row['events']:>8} {row['replacements']:>13}"
            )
    shown = results if verbose else [r for r in results if r.status not in ("ok", "known")]
    if shown:
        width = max(len(_short(r.name)) for r in shown)
        out += [
            "",
            ("every log:" if verbose else "every log that did not hold:"),
            f"  {'log':<{width}} {'events':>6} {'surface':>7} {'gen':>4} {'repl':>5}  {'proj=recount':<13} {'expected':<8} status",
        ]
        out += [_log_row(r, width) for r in shown]
    violations = report["violations"]
    if violations:
        limit = 100
        out += ["", f"violations ({len(violations)}):"]
        for v in violations[:limit]:
            seq = f" seq {v['seq']}" if v["seq"] is not None else ""
            out.append(f"  {v['log']}{seq} [{v['rule']}] {v['message']}")
        if len(violations) > limit:
            out.append(f"  ... {len(violations) - limit} more in {report_files[0] if report_files else 'the JSON report'}")
    notes = [(r.name, n) for r in results for n in r.notes if r.status == "inconclusive"]
    if notes:
        out += ["", "inconclusive:"] + [f"  {name}: {note}" for name, note in notes]
    total = report["summary"]["total"]
    verdict = {
        "held": f"ALL HELD: {count(total['logs'], 'log')}, no violation"
        + (f" ({count(total['known'], 'known corpus log')} dsh cannot load either; --strict fails on them)"
           if total.get("known") else ""),
        "violated": f"VIOLATED: {count(total['violations'], 'violation')} in {total['violated']} of "
                    f"{count(total['logs'], 'log')}",
        "inconclusive": f"INCONCLUSIVE: {total['inconclusive']} of {count(total['logs'], 'log')} reached no verdict",
    }[report.get("logs_verdict", report["verdict"])]
    if report.get("logs_not_applicable"):
        verdict = f"({report['logs_not_applicable']})"
    if report.get("logs_interrupted"):
        cut = report["logs_interrupted"]
        verdict = f"INTERRUPTED after {cut['checked']} of {cut['of']} logs" + (
            f" ({count(total['violations'], 'violation')} so far)" if total["violations"] else "")
    stages = report.get("stages") or {}
    if not stages:
        out += ["", f"{verdict} (exit {report['exit_code']})"]
    else:
        out += ["", "stages:", f"  {'logs':<9} {'skipped' if report.get('logs_not_applicable') else report.get('logs_verdict') or report['verdict']:<13} {'':>7}    {verdict}"]
        out += [f"  {name:<9} {row['status']:<13} {row['seconds']:>7.1f} s  {stage_line(name, row)}"
                for name, row in stages.items()]
        out += ["", verdict_line(report)]
    coverage = report.get("coverage") or {}
    if coverage.get("strict_failure"):
        out.append(coverage["strict_failure"] + " (exit 1)")
    elif coverage.get("sometimes_unreached"):
        unreached = coverage["sometimes_unreached"]
        out.append(f"coverage: {count(len(unreached), 'sometimes-witness', 'sometimes-witnesses')} never reached: "
                   f"{', '.join(unreached)} (the run proved little about the paths behind them; --strict fails)")
    if report_files:
        out.append("reports: " + ", ".join(str(p) for p in report_files))
        html = [p for p in report_files if p.name == "report.html"]
        if html:
            out.append(f"open: {html[0]}")
    return "\n".join(out) + "\n"


def _judge_logs(loaded, jobs: list, strict: bool, results: list, interrupted: list, err: TextIO) -> None:
    """The logs stage: each job's log judged by the model, appended to ``results``; an interrupt stops it with
    the logs judged so far (its signal's name appended to ``interrupted``)."""
    registry = known_corpus()
    progress = _Progress(len(jobs), err)
    try:
        for index, (path, source, name, exp) in enumerate(jobs, start=1):
            progress.step(index, name)
            result = check_log(loaded, path, source, name, exp)
            if source == SESSIONS_DIR:
                apply_known(result, registry.get(path.name), strict)
            results.append(result)
    except (KeyboardInterrupt, Terminated) as exc:  # report the logs checked so far, run no stage
        interrupted.append("SIGINT" if isinstance(exc, KeyboardInterrupt) else "SIGTERM")
        err.write(f"\nsurfacecheck check: logs interrupted by {interrupted[0]} after {len(results)} of {len(jobs)} "
                  "logs; writing the partial report\n")
    progress.done()


# -- coverage -------------------------------------------------------------------------


def _add_coverage(report: dict[str, Any], collector: Collector, logs: list, stage_results: list, report_path: Path,
                  strict: bool) -> dict[str, Any]:
    """``coverage.json`` and ``coverage.xml`` (Cobertura) beside the report, its summary in it; with ``--strict``
    a sometimes-witness never reached is a violation (the run proved little about the path behind it)."""
    doc = for_check([c.to_json() for c in collector.results()], logs,
                    {r.name: r.summary for r in stage_results})
    (report_path / COVERAGE_FILE).write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    collector.write_cobertura(report_path / COBERTURA_FILE)
    report["coverage"] = {"code": [{k: c[k] for k in ("runtime", "tool", "totals", "note")} for c in doc["code"]],
                          "rules_never_exercised": doc["transitions"]["rules_never_exercised"],
                          "sometimes_unreached": doc["sometimes"]["unreached"],
                          "files": [COVERAGE_FILE, COBERTURA_FILE]}
    if strict and doc["sometimes"]["unreached"] and report["verdict"] != "violated":
        report["verdict"], report["exit_code"] = "violated", EXIT_VIOLATION
        unreached = doc["sometimes"]["unreached"]
        report["coverage"]["strict_failure"] = (f"--strict: {count(len(unreached), 'sometimes-witness', 'sometimes-witnesses')}"
                                                f" never reached: {', '.join(unreached)}")
    return doc


def _coverage_cases(report: dict[str, Any]) -> list[TestCase]:
    """One JUnit case for the sometimes-witnesses: a failure under ``--strict`` when one was never reached."""
    coverage = report.get("coverage")
    if not coverage:
        return []
    unreached = coverage["sometimes_unreached"]
    case = TestCase(name="sometimes-witnesses", classname="surfacecheck.coverage",
                    properties={"unreached": ",".join(unreached) or "none"})
    if unreached and coverage.get("strict_failure"):
        case.failure = Outcome(message=coverage["strict_failure"], type="sometimes-unreached", text="\n".join(unreached))
    return [case]


# -- entry point ---------------------------------------------------------------------------------


def _fail(message: str, json_out: bool, out: TextIO, err: TextIO, code: int = EXIT_USAGE) -> int:
    err.write(f"surfacecheck check: error: {message}\n")
    if json_out:
        out.write(json.dumps({"schema": REPORT_SCHEMA, "verdict": "error", "exit_code": code, "error": message}) + "\n")
    return code


def run_check(
    runtime: str = DEFAULT_RUNTIME,
    report_dir: str | os.PathLike | None = None,
    json_out: bool = False,
    corpus: str | os.PathLike | None = None,
    *,
    scenario_dir: str | os.PathLike | None = None,
    verbose: bool = False,
    strict: bool = False,
    stages: Sequence[str] | None = None,
    requested: Sequence[str] = (),
    timeout: float = 10.0,
    coverage: bool = True,
    screenshot: bool = False,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """Run ``surfacecheck check``; returns the exit code (0 held, 1 violation, 2 usage, 3 inconclusive).

    ``corpus`` ``None`` means discover it (:func:`surfacecheck.core.corpus.corpus_root`); if none is
    found only the scenario logs are checked. ``scenario_dir`` defaults to the package's
    ``scenarios/logs``. ``report_dir`` defaults to ``./reports/out``.
    """
    out = out if out is not None else sys.stdout
    err = err if err is not None else sys.stderr
    started = time.perf_counter()

    problem = runtime_problem(runtime)
    if problem:
        return _fail(problem, json_out, out, err)

    from .stages import not_applicable

    logs_not_applicable = not_applicable("logs", runtime)
    if logs_not_applicable:  # a conversation-level runtime: dsh's logs say nothing about it
        corpus, scenario_dir = None, scenario_dir or scenarios.LOGS_DIR
        coverage = False
    try:
        if logs_not_applicable:
            corpus_dir: Path | None = None
        elif corpus is not None:
            corpus_dir = Path(corpus)
            if not corpus_dir.is_dir():
                raise CorpusError(f"corpus directory {corpus_dir} does not exist")
        else:
            corpus_dir = corpus_root()
    except CorpusError as exc:
        return _fail(str(exc), json_out, out, err)

    scenario_path = Path(scenario_dir) if scenario_dir is not None else scenarios.LOGS_DIR
    scenario_files = sorted(scenario_path.glob("*.jsonl")) if scenario_path.is_dir() else []
    if not scenario_files:
        return _fail(
            f"no scenario logs in {scenario_path} (expected scenarios/logs/*.jsonl; generate them first)",
            json_out, out, err,
        )

    jobs: list[tuple[Path, str, str, dict[str, Any] | None]] = [
        (p, SOURCE_SCENARIO, f"{SOURCE_SCENARIO}/{p.name}", None) for p in scenario_files
    ]
    if logs_not_applicable:
        jobs = []
    elif corpus_dir is None:
        err.write(f"surfacecheck check: {'warning' if os.environ.get('CI') else 'note'}: no corpus found, checking "
                  "scenario logs only (set SURFACECHECK_CORPUS=/path/to/shared/corpus or pass --corpus)\n")
    else:
        try:
            sessions = session_logs(corpus_dir)
            generated = generated_logs(corpus_dir)
            expected = generated_expected(corpus_dir) if generated else {}
        except CorpusError as exc:
            return _fail(str(exc), json_out, out, err)
        if not sessions and not generated:
            return _fail(f"corpus {corpus_dir} holds no {SESSIONS_DIR}/ or {GENERATED_DIR}/ logs", json_out, out, err)
        jobs += [(p, SESSIONS_DIR, f"{SESSIONS_DIR}/{p.name}", None) for p in sessions]
        jobs += [(p, GENERATED_DIR, f"{GENERATED_DIR}/{p.name}", expected.get(p.name)) for p in generated]

    report_path = Path(report_dir) if report_dir is not None else DEFAULT_REPORT_DIR
    try:
        report_path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return _fail(f"cannot create report directory {report_path}: {exc}", json_out, out, err)

    try:
        loaded = load_runtime("model")  # the logs are judged by the reference model, whatever runtime is tested
    except ImportError as exc:
        return _fail(f"inconclusive: the reference model cannot be loaded yet ({exc})", json_out, out, err, EXIT_INCONCLUSIVE)

    results: list[LogResult] = []
    interrupted: list[str] = []
    # With --json, stdout carries only the report: anything the model prints goes to stderr.
    quiet = contextlib.redirect_stdout(err) if json_out else contextlib.nullcontext()
    collector = Collector(runtime, report_path / COVERAGE_DIR) if coverage else None
    ctx = CheckContext(runtime=runtime, corpus=corpus_dir, strict=strict, report_dir=report_path, err=err,
                       timeout=timeout, requested=tuple(requested))
    stage_results = []
    with contextlib.ExitStack() as measuring:
        if collector is not None:
            measuring.enter_context(collector)
        around = collector.stage if collector is not None else None
        with quiet:
            with around("logs") if around and runtime == "model" else contextlib.nullcontext():
                _judge_logs(loaded, jobs, strict, results, interrupted, err)
            if not interrupted:
                stage_results = run_stages(ctx, CAPABILITY_STAGES if stages is None else stages, interrupted, around)

    report = build_report(results, runtime, corpus_dir, scenario_path, time.perf_counter() - started)
    if logs_not_applicable:
        report["logs_not_applicable"] = logs_not_applicable
    elif corpus_dir is None and os.environ.get("CI"):
        report["warnings"] = [NO_CORPUS_IN_CI]
    add_stages(report, stage_results)
    coverage_doc = None
    if collector is not None:
        coverage_doc = _add_coverage(report, collector, [(source, path) for (path, source, _n, _e), _r in zip(jobs, results)],
                                     stage_results, report_path, strict)
    if interrupted:  # a partial report: the stages run so far, the interrupted one, no verdict beyond them
        report["interrupted"] = interrupted[0]
        if len(results) < len(jobs):  # the unchecked logs reached no verdict: never "held"
            report["logs_interrupted"] = {"checked": len(results), "of": len(jobs)}
            report["logs_verdict"] = "inconclusive"
            report["verdict"] = "violated" if report["verdict"] == "violated" else "inconclusive"
        report["exit_code"] = INTERRUPT_EXIT[interrupted[0]]
    files = [report_path / REPORT_FILE, report_path / JUNIT_FILE]
    try:
        files[0].write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        cases = junit_cases(results) + [case for r in stage_results for case in r.cases] + _coverage_cases(report)
        write_junit(files[1], "surfacecheck check", cases)
    except OSError as exc:
        return _fail(f"cannot write reports into {report_path}: {exc}", json_out, out, err)
    try:
        files.append(write_html(report, coverage_doc, report_path))
        if screenshot:
            files.append(render_png(files[-1], report_path / PNG_FILE))
    except Exception as exc:  # noqa: BLE001 - the page is a view of the verdict, never its judge
        err.write(f"surfacecheck check: report.html/png could not be written: {type(exc).__name__}: {exc}\n")

    if json_out:
        out.write(json.dumps(report, indent=2) + "\n")
    else:
        out.write(format_stages(stage_results, verbose))
        out.write(format_human(report, results, files, verbose))
        if interrupted:
            out.write(f"INTERRUPTED by {interrupted[0]}: the report holds the stages run so far "
                      f"(exit {report['exit_code']})\n")
    out.flush()
    return report["exit_code"]
