"""Command line of ``surfacecheck audit PATH... [--json] [--policy FILE] [--strict] [-v]``."""
from __future__ import annotations

import argparse
import json
import sys

from tqdm import tqdm

from surfacecheck.options import add_common, command_parser

from .format import as_json, human
from .rules import RULES
from .run import PolicyError, audit_paths, load_policy

DESCRIPTION = """\
Replay dsh session logs (a .jsonl file, or a folder searched recursively for *.jsonl) through the
reference model, streaming, and report every finding: rule id, severity, the seq it is about and
expected vs observed. Findings the spec explains and the corpus is known to contain are marked
known (surfacecheck/audit/known_findings.json); known errors only count with --strict."""

EPILOG = """\
exit codes:
  0  no error-severity finding
  1  an error-severity finding
  2  an input cannot be read as a log (printed as PATH:LINE: reason), or a bad --policy

rules (severity, spec section):
""" + "\n".join(f"  {r.id:<28} {r.severity:<8} {r.spec}" for r in RULES.values())


EXAMPLES = (
    "surfacecheck audit session.jsonl",
    "surfacecheck audit path/to/logs/ --strict -v",
    "surfacecheck audit run.jsonl --policy policies/run.json --json",
)


def _run(args: argparse.Namespace) -> int:
    try:
        policy = load_policy(args.policy)
    except PolicyError as exc:
        sys.stderr.write(f"{exc}\n")
        if args.json:
            sys.stdout.write(json.dumps({"error": str(exc), "exit_code": 2}) + "\n")
        return 2
    progress = (lambda paths: tqdm(paths, desc="audit", unit="log", file=sys.stderr, disable=None, leave=False))
    report = audit_paths(args.paths, None if args.policy is None else policy, strict=args.strict, progress=progress,
                         policy_name=args.policy)
    for problem in report.unreadable:
        sys.stderr.write(f"{problem}\n")
    sys.stdout.write(as_json(report) if args.json else human(report, args.verbose))
    return report.exit_code


def register(commands) -> None:
    """Add ``audit`` to the ``surfacecheck`` parser."""
    p = command_parser(commands, "audit", help="check real session logs against the model and explain every finding",
                       description=DESCRIPTION, epilog=EPILOG, examples=EXAMPLES)
    p.add_argument("paths", nargs="+", metavar="PATH", help="a log file or a folder of logs")
    add_common(p)
    p.add_argument("--policy", metavar="FILE", help="compaction policy JSON (corpus policies/*.json shape) for every "
                   "log; default: a log's sibling policies/<stem>.json if there is one (the dsh-generated layout), "
                   "else dsh's defaults with the context window the log records")
    p.add_argument("--strict", action="store_true", help="known (registered) errors count too")
    p.add_argument("-v", "--verbose", action="store_true", help="list every log, not only those with findings")
    p.set_defaults(func=_run)
