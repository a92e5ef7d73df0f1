"""Command line of ``surfacecheck verify`` and ``surfacecheck replay``."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from surfacecheck.core import cluster
from surfacecheck.core.argtypes import writable_dir
from surfacecheck.core.memory import parse_size
from surfacecheck.core.protocol import LEVELS
from surfacecheck.options import DEFAULT_RUNTIME, add_common, command_parser
from surfacecheck.runtime.select import DEFAULT_TIMEOUT

EXITS = """\
exit codes:
  0  every property held ({what})
  1  a violation was found{still}
  2  bad input or usage{unreadable}
  3  inconclusive: the runtime hung, exited or broke the protocol (its stderr is shown)
"""

VERIFY_DESCRIPTION = """\
Drive a runtime with Hypothesis-generated protocol operations, level by level (log, compaction,
policy), in lockstep with the reference model: after every step the results and the state
(surface, generation, cuts, measure, projection) must be equal, and the standard invariants must
hold (generation counts replaces, projection equals recount when metered, balanced cuts at
replacement edges, summaries smaller, bracket order, overflow retry only after progress, retries
within budgets). The regression folder is replayed first. A failure writes a trace (JSON lines)
and a standalone pytest reproducer, and keeps the trace in the regression folder."""

REPLAY_DESCRIPTION = """\
Replay a counterexample trace (from verify, prove or explore) against a runtime, in lockstep
with the model, re-checking the trace's property and the standard invariants."""

VERIFY_EXAMPLES = (
    "surfacecheck verify",
    "surfacecheck verify --runtime dsh --level compaction --profile smoke",
    "surfacecheck verify --runtime cmd:./my-runtime --seed 7 --json",
)
REPLAY_EXAMPLES = (
    "surfacecheck replay reports/out/traces/TRACE.jsonl",
    "surfacecheck replay TRACE.jsonl --runtime model",
    "surfacecheck replay reports/out/e2e/BUNDLE/",
)


def register(commands) -> None:
    """Add ``verify`` and ``replay`` to the ``surfacecheck`` parser."""
    from surfacecheck.verify.profiles import PROFILES

    p = command_parser(commands, "verify",
                       help="drive a runtime in lockstep with the model under Hypothesis stateful testing",
                       description=VERIFY_DESCRIPTION, examples=VERIFY_EXAMPLES,
                       epilog=EXITS.format(what="at every level run", still="", unreadable=" (unknown runtime)"))
    add_common(p, runtime=DEFAULT_RUNTIME, timeout=DEFAULT_TIMEOUT)
    p.add_argument("--level", choices=LEVELS, default=None,
                   help="one level only (default: every level the runtime supports)")
    p.add_argument("--profile", choices=sorted(PROFILES), default=None,
                   help="ci (default when CI is set: bounded, fixed seed), dev (default otherwise), deep, "
                        "or smoke (a few seconds)")
    p.add_argument("--seed", type=int, default=None, help="Hypothesis seed (printed; ci uses a fixed one)")
    p.add_argument("--trace-dir", type=writable_dir, default="reports/out/traces", metavar="DIR",
                   help="where traces go (default: %(default)s)")
    p.add_argument("--regressions", default=None, metavar="DIR",
                   help="regression folder replayed first and where new traces are kept "
                        "(default: properties/regressions in a checkout of this suite, else ./.surfacecheck/regressions; "
                        "the shipped properties/regressions are always replayed)")
    p.add_argument("--no-save", action="store_true", help="do not keep new traces in the regression folder")
    p.add_argument("--no-shrink", action="store_true", help="report the first failing example unshrunk (faster)")
    p.add_argument("--max-memory", type=parse_size, default=None, metavar="SIZE",
                   help="stop before an example would start with this process's resident memory above SIZE (512M, "
                        "2G, ...): the run ends 'incomplete after N examples' (exit 3) unless a violation came first; "
                        "a cmd: runtime's own memory is not counted; default: no bound")
    cluster.add_arguments(p, "each level's examples, in 8 shards with derived seeds (the same shards at any N)")
    p.set_defaults(func=run_verify_command)

    p = command_parser(commands, "replay",
                       help="replay a counterexample trace against a runtime; exit 1 while it still fails",
                       description=REPLAY_DESCRIPTION, examples=REPLAY_EXAMPLES,
                       epilog=EXITS.format(what="the recorded violation is gone", still=" (the failure persists)",
                                           unreadable=" (unreadable trace, unknown runtime or property)"))
    p.add_argument("trace", metavar="TRACE", help="a trace file (surfacecheck-trace/1 JSON lines), or an e2e bundle "
                   "folder (surfacecheck e2e dsh), whose script is run again on the real runtime")
    add_common(p, runtime=None, runtime_why="the runtime the trace names, since a trace replays where it failed",
               timeout=DEFAULT_TIMEOUT)
    p.set_defaults(func=run_replay_command)


def _usage(args, message: str) -> int:
    if args.json:
        print(json.dumps({"verdict": "error", "exit_code": 2, "error": message}))
    sys.stderr.write(f"surfacecheck {args.command}: error: {message}\n")
    return 2


def run_verify_command(args) -> int:
    from surfacecheck.verify.run import REGRESSIONS, default_regressions, verify

    profile = args.profile or ("ci" if os.environ.get("CI") else "dev")
    regressions = Path(args.regressions) if args.regressions else default_regressions()
    replay_also = (REGRESSIONS,) if args.regressions is None and regressions != REGRESSIONS else ()
    try:
        report = verify(args.runtime, level=args.level, profile=profile, seed=args.seed,
                        trace_dir=Path(args.trace_dir), regressions=regressions, replay_also=replay_also, save_regressions=not args.no_save,
                        timeout=args.timeout, command="surfacecheck " + " ".join(sys.argv[1:]),
                        shrink=not args.no_shrink, max_memory=args.max_memory, workers=args.workers,
                        scheduler=args.scheduler)
    except cluster.ClusterUnavailable as exc:
        return _usage(args, str(exc))
    except cluster.WorkerLost as exc:
        out = {"command": "verify", "verdict": "inconclusive", "exit_code": 3, "error": str(exc)}
        print(json.dumps(out) if args.json else f"verify: INCONCLUSIVE: {exc}")
        return 3
    except ValueError as exc:
        return _usage(args, str(exc))
    except OSError as exc:
        return _usage(args, f"cannot write traces: {exc}")
    print(json.dumps(report.to_json()) if args.json else report.text())
    return report.exit_code


def run_replay_command(args) -> int:
    from surfacecheck.properties.trace_check import TraceError, read_valid_trace
    from surfacecheck.verify.replay import replay_trace

    try:
        trace = read_valid_trace(args.trace)
    except TraceError as exc:
        return _usage(args, str(exc))
    try:
        outcome = replay_trace(trace, args.runtime, timeout=args.timeout)
    except (ValueError, KeyError) as exc:  # the runtime spelling: --runtime's, else the header's (line 1)
        where = args.trace if args.runtime else f"{args.trace}:1: header runtime"
        return _usage(args, f"{where}: {exc.args[0] if exc.args else exc}")
    if args.json:
        print(json.dumps({"command": "replay", "trace": args.trace, **outcome.to_json()}))
    else:
        print(f"replay {args.trace} ({len(trace.steps)} steps, {trace.level} level) on {outcome.runtime}: "
              f"{outcome.describe()}")
        if outcome.stderr:
            print("runtime stderr:\n" + outcome.stderr.strip()[-1500:])
    return outcome.exit_code
