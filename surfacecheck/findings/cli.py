"""Command line of ``surfacecheck findings``: findings about dsh itself (see ``docs/findings.md``)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from surfacecheck.core.argtypes import writable_dir, writable_file
from surfacecheck.options import DEFAULT_RUNTIME, add_common, command_parser
from surfacecheck.runtime.select import DEFAULT_TIMEOUT

DESCRIPTION = """\
Findings about dsh itself, kept apart from divergences. The promise monitors (properties/promises.py)
state what the design promises, stronger than what dsh does (spec section 15); where dsh breaks a
promise the model breaks it too. Known findings live in properties/findings.json with their gap,
class, reason and a minimal witness trace. The class is argued from dsh's own published text: a
defect quotes what dsh promises, a tradeoff what dsh documents or intends, a design question is a
promise only the seed or spec makes; each quote (package, file, npm version, line) is checked verbatim
against the installed dsh packages (SURFACECHECK_DSH_MODULES or the dsh runtime's cache; unchecked
when neither exists). Each finding states its reachability (shipped-runtime, public-api,
foreign-producer, not-reachable); the corpus logs a foreign-producer claim names are scanned here.

This command replays every witness (on the model: a witness that no longer fails is STALE; on another
runtime, the --runtime: the known findings it does not reproduce are listed), then discovers: every scenario and
corpus log appended event by event through the model with the promises watching, and a short seeded
Hypothesis search of the policy and compaction machines, and an explorer pass (the bounded world of
`surfacecheck explore`, every state's shortest path run on the model with the promises watching). A
violation of an unregistered promise is NEW (its trace is written to --trace-dir).

On a conversation-level runtime (--runtime langchain, strands, reference) the command reports the compaction
contract's findings about that runtime instead (docs/contract.md): every witness in contract/findings.json replayed
on it and every quote checked against its installed package (STALE when either fails), then the contract search
for --search-seconds (0: none): a broken promise with no registered finding is NEW, its witness in --trace-dir.

Output: every violation as a finding, reachable defects first (id, promise with spec/seed sections,
class defect/design-question/tradeoff/new, dsh's words, reachability, where it was reproduced, witness
trace + replay command, observed vs expected, dsh source function, explanation), then every
promise-* monitor as violated or held with what was explored while it watched (logs and events,
Hypothesis examples and steps, explorer states, covering Z3 obligations). --report writes the same
as a Markdown report with each witness drawn as the surface before and after each step."""

EPILOG = """\
exit codes:
  0  only known findings (each printed with its class and reason)
  1  a NEW finding, a STALE registry entry (a witness that no longer fails, a quote dsh does not
     contain, a corpus log that does not show its finding), or with --strict any finding
  2  bad usage or a malformed registry
  3  inconclusive: the runtime failed while replaying a witness
"""
EXAMPLES = (
    "surfacecheck findings",
    "surfacecheck findings --runtime dsh --strict",
    "surfacecheck findings --no-logs --explore-bounds off --report",
    "surfacecheck findings --runtime langchain --registry empty.json --json",
)


def register(commands) -> None:
    """Add ``findings`` to the ``surfacecheck`` parser."""
    p = command_parser(commands, "findings", help="known and new findings about dsh itself (promises it breaks), "
                       "or about a conversation-level runtime (the compaction contract's)",
                       description=DESCRIPTION, epilog=EPILOG, examples=EXAMPLES)
    add_common(p, runtime=DEFAULT_RUNTIME, timeout=DEFAULT_TIMEOUT)
    p.add_argument("--strict", action="store_true", help="exit 1 on known findings too")
    p.add_argument("--trace-dir", type=writable_dir, metavar="DIR", default=str(Path("reports") / "out" / "traces"),
                   help="where NEW findings' traces go (default %(default)s)")
    p.add_argument("--registry", metavar="FILE", default=None, help="the registry (default properties/findings.json)")
    p.add_argument("--corpus", metavar="DIR", default=None, help="the corpus root (default: found as check finds it)")
    p.add_argument("--no-logs", action="store_true", help="skip the scan of scenario and corpus logs")
    p.add_argument("--search-seconds", type=float, default=None, metavar="S",
                   help="cap on starting Hypothesis runs (default 60; the fixed examples per run normally "
                        "end it sooner; 0 turns the search off)")
    p.add_argument("--seed", type=int, default=None, help="Hypothesis seed (default fixed, printed)")
    p.add_argument("--explore-bounds", default=None, metavar="E/P/C",
                   help="explorer pass bounds: events/tool-pairs/compactions (default 4/2/1, a few seconds; "
                        "'off' skips it)")
    p.add_argument("--report", nargs="?", type=writable_file, const=DEFAULT_REPORT, default=None, metavar="PATH",
                   help=f"also write the Markdown findings report (default path {DEFAULT_REPORT})")
    p.set_defaults(func=main)


DEFAULT_REPORT = str(Path("reports") / "out" / "findings.md")


def explore_bounds(value: str | None):
    """``E/P/C`` -> a bounds tuple, ``off`` -> None; ``ValueError`` otherwise."""
    from .search import EXPLORE_BOUNDS

    if value is None:
        return EXPLORE_BOUNDS
    if value.strip().lower() in ("off", "0", "none"):
        return None
    parts = value.split("/")
    if len(parts) != 3 or not all(p.strip().isdigit() for p in parts):
        raise ValueError(f"--explore-bounds must be E/P/C (three non-negative integers) or off, got {value!r}")
    return tuple(int(p) for p in parts)


def _corpus(value: str | None) -> Path | None:
    from surfacecheck.core.corpus import CorpusError, corpus_root

    if value is not None:
        path = Path(value)
        if not path.is_dir():
            raise ValueError(f"{value}: corpus directory not found")
        return path
    try:
        return corpus_root()
    except CorpusError as exc:
        raise ValueError(str(exc)) from None


def main(args) -> int:
    from surfacecheck.runtime.select import runtime_problem
    from surfacecheck.verify.replay import ensure_variants

    ensure_variants()  # the seeded-bug variants (embedded:<bug>) are runtimes too
    from .registry import RegistryError
    from .run import SEARCH_SECONDS, SEED, run_findings

    problem = runtime_problem(args.runtime)
    if problem:
        sys.stderr.write(f"surfacecheck findings: {problem}\n")
        return 2
    try:
        corpus = _corpus(args.corpus)
        seconds = SEARCH_SECONDS if args.search_seconds is None else args.search_seconds
        if seconds < 0:
            raise ValueError(f"--search-seconds must be >= 0, got {seconds}")
        seed = SEED if args.seed is None else args.seed
        bounds = explore_bounds(args.explore_bounds)
        sys.stderr.write(f"surfacecheck findings: seed {seed}\n")
        report = run_findings(args.runtime, strict=args.strict, registry_path=args.registry, corpus=corpus,
                              trace_dir=Path(args.trace_dir), search_seconds=seconds, seed=seed,
                              scan=not args.no_logs, explore_bounds=bounds, command=_command(), timeout=args.timeout)
    except (RegistryError, ValueError) as exc:
        sys.stderr.write(f"surfacecheck findings: {exc}\n")
        return 2
    if args.report is not None:
        from surfacecheck.findings.report import write_report

        try:
            path = write_report(report.to_json(), Path(args.report))
        except OSError as exc:
            sys.stderr.write(f"surfacecheck findings: {args.report}: cannot write the report: {exc.strerror or exc}\n")
            return 2
        sys.stderr.write(f"surfacecheck findings: report written to {path}\n")
    if args.json:
        sys.stdout.write(json.dumps(report.to_json(), indent=2) + "\n")
    else:
        sys.stdout.write(report.text() + "\n")
    return report.exit_code


def _command() -> str:
    import shlex

    return "surfacecheck " + " ".join(shlex.quote(a) for a in sys.argv[1:])
