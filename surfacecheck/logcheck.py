"""Replaying one log through the model and judging it: the ``logs`` stage of ``surfacecheck check``.

Per log: it reads and replays with no model error; when fully metered, the O(1) projection total
equals the recount (spec 5.2); a ``dsh-generated`` log agrees with ``expected.json`` (surface,
generation, and per replacement seq, kind, range, shadowed seqs, logged/recomputed shadow price,
replacement price). Recorded logs that dsh itself cannot load are *known* (``known_corpus.json``).
"""
from __future__ import annotations

import json
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from surfacecheck.core.cases import Outcome, TestCase

from .core.corpus import GENERATED_DIR, SESSIONS_DIR

SOURCE_SCENARIO = "scenarios"
SOURCES = (SOURCE_SCENARIO, SESSIONS_DIR, GENERATED_DIR)

# expected.json says "checkpoint" where the model's Replacement.kind says "summary".
_KIND_ALIASES = {"checkpoint": {"checkpoint", "summary"}, "prune": {"prune"}}
_REPLACEMENT_FIELDS = ("seq", "start", "end", "shadowed_seqs", "logged_shadow_tokens", "replacement_tokens")


# -- results -------------------------------------------------------------------------------------


@dataclass
class LogIssue:
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
    violations: list[LogIssue] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    known: list[dict] = field(default_factory=list)

    def violate(self, rule: str, message: str, seq: int | None = None) -> None:
        self.violations.append(LogIssue(self.name, rule, message, seq))
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
    from surfacecheck.model.errors import ModelError
    from surfacecheck.model.jsonl import read_log
    from surfacecheck.model.replay import replay

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


