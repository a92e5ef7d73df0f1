"""Command line of ``surfacecheck prove``: Z3 obligations with negative controls."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from surfacecheck.core.argtypes import writable_dir
from surfacecheck.options import add_common, command_parser

DESCRIPTION = """\
Prove six obligations about the reference model with Z3, each by running the model's own
functions on symbolic surfaces. Five hold for surfaces of any length: cut-legality,
pairing-ids and incremental-pairing by inductive invariants over the model's walks
(initiation and consecution checked against each walk's own step; bounded proofs up to
--bound nodes kept as cross-checks), generation-progress and projection-equivalence by
k-induction. smallest-compactable-span's retry clause is bounded by --bound:
  cut-legality              spec 7: range selection is balanced, head-anchored, nearest cut
  pairing-ids               spec 3: count-balanced == id-closed when ids answer uniquely
  incremental-pairing       spec 3: the cached cut fold == the full fold (append, replace)
  generation-progress       spec 2.1, 9.2, 10.2: replaces count; retries need progress
  projection-equivalence    spec 5.1: projection == recount on fully metered logs (k-induction)
  smallest-compactable-span spec 8.2, 9.4: spans <= 103 tokens never shrink;
                            retry picks the checkpoint
Every obligation has negative controls (deliberately wrong variants) that Z3 must refute; each
counterexample is written as a trace (surfacecheck-trace/1) and replayed through the model (or
the wrong variant, model:prove-...) to show the same violation. Progress goes to stderr."""

EPILOG = """\
exit codes:
  0  every obligation proved, every negative control refuted and replayed
  1  an obligation refuted, or a negative control not refuted / not replayed
  2  bad usage (unknown obligation, negative bound)
  3  inconclusive: some obligation unknown (solver gave up), nothing failed
"""

EXAMPLES = (
    "surfacecheck prove",
    "surfacecheck prove --only cut-legality,pairing-ids --bound 6",
    "surfacecheck prove --json --trace-dir reports/out/proofs",
)


def _bound(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--bound must be an integer, got {value!r}") from None
    if number < 0:
        raise argparse.ArgumentTypeError("--bound must be >= 0")
    return number


def register(commands) -> None:
    """Add ``prove`` to the ``surfacecheck`` parser."""
    from surfacecheck.properties.proofs import DEFAULT_BOUND
    from surfacecheck.core.stage import DEFAULT_REPORT_DIR

    p = command_parser(commands, "prove", help="prove cut legality, generation progress and projection equivalence with Z3",
                       description=DESCRIPTION, epilog=EPILOG, examples=EXAMPLES)
    p.add_argument("--bound", type=_bound, default=DEFAULT_BOUND, metavar="N",
                   help="largest surface of the bounded proofs and cross-checks, in nodes (default: %(default)s)")
    p.add_argument("--only", action="append", metavar="NAME",
                   help="run only this obligation (repeatable, or comma-separated)")
    add_common(p)
    p.add_argument("--trace-dir", type=writable_dir, metavar="DIR", default=str(DEFAULT_REPORT_DIR / "traces"),
                   help="where counterexample traces go (default: %(default)s)")
    p.set_defaults(func=main)


def main(args) -> int:
    from surfacecheck.properties.proofs import names

    from .run import prove

    only = [name.strip() for value in (args.only or []) for name in value.split(",") if name.strip()] or None
    unknown = [name for name in only or [] if name not in names()]
    if unknown:
        return _usage(args, f"unknown obligation {', '.join(unknown)}; known: {', '.join(names())}")
    trace_dir = Path(args.trace_dir)
    try:
        trace_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return _usage(args, f"{trace_dir}: cannot create the trace directory: {exc.strerror}")
    command = "surfacecheck prove " + " ".join(sys.argv[2:]) if len(sys.argv) > 1 else None
    report = prove(args.bound, only, trace_dir, err=sys.stderr, command=command)
    if args.json:
        sys.stdout.write(json.dumps(report.to_json(), indent=2) + "\n")
    else:
        sys.stdout.write(report.text() + "\n")
    return report.exit_code


def _usage(args, message: str) -> int:
    if args.json:
        sys.stdout.write(json.dumps({"command": "prove", "verdict": "error", "exit_code": 2, "error": message}) + "\n")
    sys.stderr.write(f"surfacecheck prove: error: {message}\n")
    return 2
