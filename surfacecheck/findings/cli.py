"""Command line of ``surfacecheck findings``: findings about dsh itself (see ``docs/findings.md``)."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

DESCRIPTION = """\
Findings about dsh itself, kept apart from divergences. The promise monitors (properties/promises.py)
state what the design promises, stronger than what dsh does (spec section 15); where dsh breaks a
promise the model breaks it too. Known findings live in properties/findings.json with their gap,
class (defect or tradeoff), reason and a minimal witness trace.

This command replays every witness (on the model: a witness that no longer fails is STALE; on another
runtime: the known findings it does not reproduce are listed), then discovers: every scenario and
corpus log appended event by event through the model with the promises watching, and a short seeded
Hypothesis search of the policy machine. A violation of an unregistered promise is NEW (its trace is
written to --trace-dir)."""

EPILOG = """\
exit codes:
  0  only known findings (each printed with its class and reason)
  1  a NEW finding, a STALE registry entry, or with --strict any finding
  2  bad usage or a malformed registry
  3  inconclusive: the runtime failed while replaying a witness
"""


def register(commands) -> None:
    """Add ``findings`` to the ``surfacecheck`` parser."""
    p = commands.add_parser("findings", help="known and new findings about dsh itself (promises it breaks)",
                            description=DESCRIPTION, epilog=EPILOG,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runtime", default="model", metavar="R",
                   help="also replay the witnesses on R (model, embedded, cmd:COMMAND); default %(default)s")
    p.add_argument("--strict", action="store_true", help="exit 1 on known findings too")
    p.add_argument("--json", action="store_true", help="print exactly one JSON document on stdout")
    p.add_argument("--trace-dir", metavar="DIR", default=str(Path("reports") / "out" / "traces"),
                   help="where NEW findings' traces go (default %(default)s)")
    p.add_argument("--registry", metavar="FILE", default=None, help="the registry (default properties/findings.json)")
    p.add_argument("--corpus", metavar="DIR", default=None, help="the corpus root (default: found as check finds it)")
    p.add_argument("--no-logs", action="store_true", help="skip the scan of scenario and corpus logs")
    p.add_argument("--search-seconds", type=float, default=None, metavar="S",
                   help="cap on the Hypothesis search (default 15; it normally ends sooner; 0 turns it off)")
    p.add_argument("--seed", type=int, default=None, help="Hypothesis seed (default fixed, printed)")
    p.set_defaults(func=main)


def _corpus(value: str | None) -> Path | None:
    from surfacecheck.corpus import CorpusError, corpus_root

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
        sys.stderr.write(f"surfacecheck findings: seed {seed}\n")
        report = run_findings(args.runtime, strict=args.strict, registry_path=args.registry, corpus=corpus,
                              trace_dir=Path(args.trace_dir), search_seconds=seconds, seed=seed,
                              scan=not args.no_logs, command=_command())
    except (RegistryError, ValueError) as exc:
        sys.stderr.write(f"surfacecheck findings: {exc}\n")
        return 2
    if args.json:
        sys.stdout.write(json.dumps(report.to_json(), indent=2) + "\n")
    else:
        sys.stdout.write(report.text() + "\n")
    return report.exit_code


def _command() -> str:
    import shlex

    return "surfacecheck " + " ".join(shlex.quote(a) for a in sys.argv[1:])
