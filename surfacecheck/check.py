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
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, TextIO

import scenarios
from reports.junit import Outcome, TestCase, write_junit

from . import __version__
from .corpus import (
    GENERATED_DIR,
    SESSIONS_DIR,
    CorpusError,
    corpus_root,
    generated_expected,
    generated_logs,
    session_logs,
)

EXIT_OK = 0
EXIT_VIOLATION = 1
EXIT_USAGE = 2
EXIT_INCONCLUSIVE = 3

RUNTIMES_AVAILABLE = ("model",)
RUNTIMES_PLANNED = ("embedded", "cmd:COMMAND")
DEFAULT_REPORT_DIR = Path("reports") / "out"
REPORT_FILE = "report.json"
JUNIT_FILE = "junit.xml"
REPORT_SCHEMA = "surfacecheck-report/1"

SOURCE_SCENARIO = "scenarios"
SOURCES = (SOURCE_SCENARIO, SESSIONS_DIR, GENERATED_DIR)

# expected.json says "checkpoint" where the model's Replacement.kind says "summary".
_KIND_ALIASES = {"checkpoint": {"checkpoint", "summary"}, "prune": {"prune"}}
_REPLACEMENT_FIELDS = ("seq", "start", "end", "shadowed_seqs", "logged_shadow_tokens", "replacement_tokens")


def runtime_problem(runtime: str) -> str | None:
    """Why ``runtime`` cannot be used (a message), or ``None`` if it can."""
    if runtime in RUNTIMES_AVAILABLE:
        return None
    if runtime == "embedded":
        return "runtime 'embedded' is not available yet (this version checks only --runtime model)"
    if runtime.startswith("cmd:"):
        if not runtime[4:].strip():
            return "runtime 'cmd:' needs a command after the colon, e.g. cmd:./my-runtime"
        return f"runtime {runtime!r} is not available yet (this version checks only --runtime model)"
    return f"unknown runtime {runtime!r}: expected model, embedded or cmd:COMMAND"


# -- results -------------------------------------------------------------------------------------


@dataclass
class Violation:
    """One failed check on one log; ``rule`` is a stable id, ``seq`` the event it is about."""

    log: str
    rule: str
    message: str
    seq: int | None = None


@dataclass
class LogResult:
    """What checking one log found. ``status`` is ``ok``, ``violation`` or ``inconclusive``."""

    name: str
    source: str
    path: str
    status: str = "ok"
    events: int | None = None
    surface_size: int | None = None
    generation: int | None = None
    replacements: int | None = None
    replayed: bool = False
    fully_metered: bool | None = None
    projection_total: int | None = None
    recount_total: int | None = None
    projection_matches: bool | None = None
    expected_checked: bool = False
    crashed: bool = False
    seconds: float = 0.0
    violations: list[Violation] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    known: list[dict] = field(default_factory=list)

    def violate(self, rule: str, message: str, seq: int | None = None) -> None:
        self.violations.append(Violation(self.name, rule, message, seq))
        self.status = "violation"

    def inconclusive(self, note: str) -> None:
        self.notes.append(note)
        if self.status == "ok":
            self.status = "inconclusive"


@dataclass
class Runtime:
    """The functions a runtime provides (the reference model's, for ``--runtime model``)."""

    read_log: Callable[[Any], Any]
    replay: Callable[[Any], Any]
    model_error: type[BaseException]


def load_runtime(runtime: str) -> Runtime:
    """Import the runtime's functions; raises ``ImportError`` when the model is not there yet."""
    if runtime != "model":  # pragma: no cover - guarded by runtime_problem()
        raise ValueError(runtime)
    from model.errors import ModelError
    from model.jsonl import read_log
    from model.replay import replay

    return Runtime(read_log=read_log, replay=replay, model_error=ModelError)


# -- checking one log ----------------------------------------------------------------------------


def _error_fields(error: Any) -> tuple[str, str, int | None]:
    rule = getattr(error, "rule", None) or type(error).__name__
    message = getattr(error, "message", None) or str(error)
    seq = getattr(error, "seq", None)
    return str(rule), str(message), seq if isinstance(seq, int) else None


def _compare_expected(result: LogResult, replay_result: Any, expected: dict[str, Any]) -> None:
    result.expected_checked = True
    surface = list(replay_result.surface_nodes)
    if surface != list(expected["surface_nodes"]):
        result.violate("expected-surface", f"final surface {surface}, expected {expected['surface_nodes']}")
    if replay_result.generation != expected["generation"]:
        result.violate(
            "expected-generation",
            f"generation {replay_result.generation}, expected {expected['generation']}",
        )
    got_list = list(replay_result.replacements)
    want_list = list(expected["replacements"])
    if len(got_list) != len(want_list):
        result.violate(
            "expected-replacements",
            f"{len(got_list)} replacements at seqs {[r.seq for r in got_list]}, "
            f"expected {len(want_list)} at seqs {[r['seq'] for r in want_list]}",
        )
    for index, (got, want) in enumerate(zip(got_list, want_list)):
        where = f"replacement #{index + 1} (expected seq {want['seq']})"
        for name in _REPLACEMENT_FIELDS:
            value = getattr(got, name)
            if isinstance(value, tuple):
                value = list(value)
            if value != want.get(name):
                result.violate("expected-replacement", f"{where}: {name} is {value!r}, expected {want.get(name)!r}", want["seq"])
        kinds = _KIND_ALIASES.get(want.get("kind"), {want.get("kind")})
        if got.kind not in kinds:
            result.violate("expected-replacement", f"{where}: kind is {got.kind!r}, expected {want['kind']!r}", want["seq"])
        if got.recomputed_shadow_tokens != want.get("logged_shadow_tokens"):
            result.violate(
                "shadow-price",
                f"{where}: recomputed shadow price {got.recomputed_shadow_tokens}, "
                f"logged {want.get('logged_shadow_tokens')}",
                want["seq"],
            )


KNOWN_CORPUS_FILE = Path(__file__).with_name("known_corpus.json")


def known_corpus() -> dict[str, dict[str, str]]:
    """Recorded logs dsh itself cannot load, with the rule the model must reject them by."""
    data = json.loads(KNOWN_CORPUS_FILE.read_text(encoding="utf-8"))
    return {name: entry for name, entry in data.items() if not name.startswith("_")}


def apply_known(result: LogResult, known: dict[str, str] | None, strict: bool) -> None:
    """A registered log rejected by its registered rule is ``known``, not a violation (unless strict)."""
    if known is None or strict or result.status != "violation":
        return
    if all(v.rule == known["rule"] for v in result.violations):
        result.status = "known"
        result.notes.append(f"known: {known['reason']}")
        result.known = [asdict(v) for v in result.violations]
        result.violations = []


def check_log(
    runtime: Runtime, path: Path, source: str, name: str, expected: dict[str, Any] | None = None
) -> LogResult:
    """Read and replay one log and run every check on it. Never raises for a bad log."""
    result = LogResult(name=name, source=source, path=str(path))
    started = time.perf_counter()
    try:
        _check_log(runtime, result, path, source, expected)
    finally:
        result.seconds = time.perf_counter() - started
    return result


def _check_log(
    runtime: Runtime, result: LogResult, path: Path, source: str, expected: dict[str, Any] | None
) -> None:
    def crashed(stage: str, exc: BaseException) -> None:
        if isinstance(exc, NotImplementedError):
            result.inconclusive(f"{stage}: model not implemented yet: {exc}")
            return
        result.crashed = True
        last = traceback.extract_tb(exc.__traceback__)[-1:]
        at = f" at {last[0].filename}:{last[0].lineno}" if last else ""
        result.violate("model-crash", f"{stage} raised {type(exc).__name__}: {exc}{at}")

    try:
        log = runtime.read_log(path)
    except runtime.model_error as exc:
        rule, message, seq = _error_fields(exc)
        result.violate(rule, f"read_log: {message}", seq)
        return
    except Exception as exc:  # noqa: BLE001 - any crash is reported, not raised
        crashed("read_log", exc)
        return
    if getattr(log, "torn_tail", False):
        result.notes.append("log has a torn tail (last line incomplete)")

    try:
        replayed = runtime.replay(log.events)
    except runtime.model_error as exc:
        rule, message, seq = _error_fields(exc)
        result.violate(rule, f"replay raised: {message}", seq)
        return
    except Exception as exc:  # noqa: BLE001
        crashed("replay", exc)
        return

    result.events = replayed.events
    result.surface_size = len(replayed.surface_nodes)
    result.generation = replayed.generation
    result.replacements = len(replayed.replacements)
    result.fully_metered = bool(replayed.fully_metered)
    result.projection_total = replayed.projection_total
    result.recount_total = replayed.recount_total
    if replayed.error is None:
        result.replayed = True
    else:
        rule, message, seq = _error_fields(replayed.error)
        result.violate(rule, message, seq)
    if result.fully_metered:
        result.projection_matches = replayed.projection_total == replayed.recount_total
        if not result.projection_matches:
            result.violate(
                "projection-recount",
                f"fully metered, but projection total {replayed.projection_total} "
                f"!= recount total {replayed.recount_total}",
            )
    if source == GENERATED_DIR:
        if expected is None:
            result.inconclusive(f"no entry for {path.name} in {GENERATED_DIR}/expected.json")
        else:
            _compare_expected(result, replayed, expected)


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
    if any(r.status == "violation" for r in results):
        return "violated", EXIT_VIOLATION
    if any(r.status == "inconclusive" for r in results):
        return "inconclusive", EXIT_INCONCLUSIVE
    return "held", EXIT_OK


def _summary(results: list[LogResult]) -> dict[str, dict[str, int]]:
    table: dict[str, dict[str, int]] = {}
    for key in (*SOURCES, "total"):
        rows = results if key == "total" else [r for r in results if r.source == key]
        table[key] = {
            "logs": len(rows),
            "held": sum(r.status == "ok" for r in rows),
            "violated": sum(r.status == "violation" for r in rows),
            "inconclusive": sum(r.status == "inconclusive" for r in rows),
            "known": sum(r.status == "known" for r in rows),
            "events": sum(r.events or 0 for r in rows),
            "replacements": sum(r.replacements or 0 for r in rows),
            "violations": sum(len(r.violations) for r in rows),
        }
    return table


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
    }


def junit_cases(results: list[LogResult]) -> list[TestCase]:
    """One JUnit test case per log: failure = violations, error = model crash, skipped = no verdict."""
    cases = []
    for r in results:
        case = TestCase(name=r.name, classname=f"surfacecheck.{r.source}", time=r.seconds)
        case.properties = {
            key: str(value)
            for key, value in (
                ("events", r.events),
                ("surface_size", r.surface_size),
                ("generation", r.generation),
                ("replacements", r.replacements),
                ("fully_metered", r.fully_metered),
            )
            if value is not None
        }
        lines = [f"[{v.rule}]" + (f" seq {v.seq}" if v.seq is not None else "") + f": {v.message}" for v in r.violations]
        if r.crashed:
            crash = next(v for v in r.violations if v.rule == "model-crash")
            case.error = Outcome(message=crash.message, type="model-crash", text="\n".join(lines))
        elif r.violations:
            first = r.violations[0]
            more = f" (+{len(r.violations) - 1} more)" if len(r.violations) > 1 else ""
            case.failure = Outcome(message=f"[{first.rule}] {first.message}{more}", type=first.rule, text="\n".join(lines))
        elif r.status == "inconclusive":
            case.skipped = Outcome(message="; ".join(r.notes) or "inconclusive")
        if r.notes:
            case.system_out = "\n".join(r.notes)
        cases.append(case)
    return cases


def _cell(value: Any) -> str:
    return "-" if value is None else str(value)


_NAME_WIDTH = 72


def _short(name: str) -> str:
    if len(name) <= _NAME_WIDTH:
        return name
    keep = _NAME_WIDTH - 3
    return name[: keep // 2] + "..." + name[-(keep - keep // 2):]


def _log_row(r: LogResult, width: int) -> str:
    if r.fully_metered:
        projection = f"{r.projection_total}={r.recount_total}" if r.projection_matches else f"{r.projection_total}!={r.recount_total}"
    else:
        projection = "unmetered" if r.fully_metered is False else "-"
    expected = "-" if not r.expected_checked else ("ok" if not any(v.rule.startswith(("expected", "shadow")) for v in r.violations) else "MISMATCH")
    status = {"ok": "ok", "violation": "VIOLATION", "inconclusive": "inconclusive", "known": "known"}[r.status]
    return (
        f"  {_short(r.name):<{width}} {_cell(r.events):>6} {_cell(r.surface_size):>7} {_cell(r.generation):>4} "
        f"{_cell(r.replacements):>5}  {projection:<13} {expected:<8} {status}"
    )


def format_human(report: dict[str, Any], results: list[LogResult], report_files: list[Path], verbose: bool) -> str:
    """The human summary: per-source table, per-log rows, violations, verdict."""
    out = [
        f"surfacecheck {report['version']}  runtime={report['runtime']}  "
        f"corpus={report['corpus'] or '(none found)'}",
        "",
        f"  {'source':<14} {'logs':>5} {'held':>5} {'violated':>9} {'inconcl.':>9} {'events':>8} {'replacements':>13}",
    ]
    for key, row in report["summary"].items():
        out.append(
            f"  {key:<14} {row['logs']:>5} {row['held']:>5} {row['violated']:>9} {row['inconclusive']:>9} "
            f"{row['events']:>8} {row['replacements']:>13}"
        )
    shown = results if verbose else [r for r in results if r.source == GENERATED_DIR or r.status != "ok"]
    if shown:
        width = max(len(_short(r.name)) for r in shown)
        out += [
            "",
            ("every log:" if verbose else "dsh-generated logs and every log that did not hold:"),
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
        "held": f"ALL HELD: {total['logs']} logs, no violation"
        + (f" ({total['known']} known corpus logs dsh cannot load either; --strict fails on them)" if total.get("known") else ""),
        "violated": f"VIOLATED: {total['violations']} violation(s) in {total['violated']} of {total['logs']} logs",
        "inconclusive": f"INCONCLUSIVE: {total['inconclusive']} of {total['logs']} logs reached no verdict",
    }[report["verdict"]]
    out += ["", f"{verdict} (exit {report['exit_code']})"]
    if report_files:
        out.append("reports: " + ", ".join(str(p) for p in report_files))
    return "\n".join(out) + "\n"


# -- entry point ---------------------------------------------------------------------------------


def _fail(message: str, json_out: bool, out: TextIO, err: TextIO, code: int = EXIT_USAGE) -> int:
    err.write(f"surfacecheck check: error: {message}\n")
    if json_out:
        out.write(json.dumps({"schema": REPORT_SCHEMA, "verdict": "error", "exit_code": code, "error": message}) + "\n")
    return code


def run_check(
    runtime: str = "model",
    report_dir: str | os.PathLike | None = None,
    json_out: bool = False,
    corpus: str | os.PathLike | None = None,
    *,
    scenario_dir: str | os.PathLike | None = None,
    verbose: bool = False,
    strict: bool = False,
    out: TextIO | None = None,
    err: TextIO | None = None,
) -> int:
    """Run ``surfacecheck check``; returns the exit code (0 held, 1 violation, 2 usage, 3 inconclusive).

    ``corpus`` ``None`` means discover it (:func:`surfacecheck.corpus.corpus_root`); if none is
    found only the scenario logs are checked. ``scenario_dir`` defaults to the package's
    ``scenarios/logs``. ``report_dir`` defaults to ``./reports/out``.
    """
    out = out if out is not None else sys.stdout
    err = err if err is not None else sys.stderr
    started = time.perf_counter()

    problem = runtime_problem(runtime)
    if problem:
        return _fail(problem, json_out, out, err)

    try:
        if corpus is not None:
            corpus_dir: Path | None = Path(corpus)
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
    if corpus_dir is None:
        err.write(
            "surfacecheck check: note: no corpus found, checking scenario logs only "
            "(set SURFACECHECK_CORPUS=/path/to/shared/corpus or pass --corpus)\n"
        )
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
        loaded = load_runtime(runtime)
    except ImportError as exc:
        return _fail(f"inconclusive: the reference model cannot be loaded yet ({exc})", json_out, out, err, EXIT_INCONCLUSIVE)

    registry = known_corpus()
    results: list[LogResult] = []
    progress = _Progress(len(jobs), err)
    # With --json, stdout carries only the report: anything the model prints goes to stderr.
    quiet = contextlib.redirect_stdout(err) if json_out else contextlib.nullcontext()
    with quiet:
        for index, (path, source, name, exp) in enumerate(jobs, start=1):
            progress.step(index, name)
            result = check_log(loaded, path, source, name, exp)
            if source == SESSIONS_DIR:
                apply_known(result, registry.get(path.name), strict)
            results.append(result)
    progress.done()

    report = build_report(results, runtime, corpus_dir, scenario_path, time.perf_counter() - started)
    files = [report_path / REPORT_FILE, report_path / JUNIT_FILE]
    try:
        files[0].write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        write_junit(files[1], "surfacecheck check", junit_cases(results))
    except OSError as exc:
        return _fail(f"cannot write reports into {report_path}: {exc}", json_out, out, err)

    if json_out:
        out.write(json.dumps(report, indent=2) + "\n")
    else:
        out.write(format_human(report, results, files, verbose))
    out.flush()
    return report["exit_code"]
