"""Command line of ``surfacecheck explore``: exhaustive bounded model checking (see ``docs/explore.md``)."""
from __future__ import annotations

import argparse
import json
import sys

from surfacecheck.core import cluster
from surfacecheck.core.argtypes import writable_dir
from surfacecheck.core.memory import parse_size
from surfacecheck.options import add_common, command_parser

from .world import Bounds

DESCRIPTION = """\
Explore every reachable state of a bounded compaction world breadth-first (the model runs every
pressure check, overflow recovery, /compact, prune and reload), check the invariants in every
state and the progress properties on the state graph, and print the shortest counterexample of
any violation. States that differ only in seqs, ids, timestamps, turn numbers or the generation
are one state (the VIEW reduction; --no-symmetry turns it off and needs --max-seq).

Prints states, edges, depth, distinct states per second, the properties checked and the traces
of any violation (with --json exactly one JSON document on stdout); progress on stderr."""

EPILOG = """\
exit codes:
  0  every invariant and progress property held at these bounds
  1  a violation was found (its shortest trace is printed, and written with --trace-dir),
     or with --oracle a shared model run differed from the model run on the real surface
  2  bad usage
  3  incomplete: --max-memory stopped the search, or a Dask worker was lost for good (--workers)
"""

DEFAULTS = Bounds()


def _positive(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {value!r}") from None
    if number < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {value}")
    return number
EXAMPLES = (
    "surfacecheck explore",
    "surfacecheck explore --events 6 --tool-pairs 2 --compactions 2 --max-memory 2G",
    "surfacecheck explore --variant unbalanced-cut --trace-dir reports/out/traces",
    "surfacecheck explore --list-variants",
)


def register(commands) -> None:
    """Add ``explore`` to the ``surfacecheck`` parser."""
    p = command_parser(commands, "explore", help="exhaustively model-check a bounded compaction world (BFS, shortest traces)",
                       description=DESCRIPTION, epilog=EPILOG, examples=EXAMPLES)
    p.add_argument("--events", type=_positive, default=DEFAULTS.events, metavar="N",
                   help="message events: prompts, replies, tool results (default %(default)s)")
    p.add_argument("--tool-pairs", type=_positive, default=DEFAULTS.tool_pairs, metavar="P",
                   help="tool calls in all (default %(default)s)")
    p.add_argument("--compactions", type=_positive, default=DEFAULTS.compactions, metavar="C",
                   help="checkpoints written, plus summaries raced by a concurrent change (default %(default)s)")
    p.add_argument("--variant", default="correct", metavar="NAME",
                   help="the model (correct) or a negative-control variant; --list-variants lists them")
    p.add_argument("--list-variants", action="store_true", help="list the negative-control variants and exit")
    p.add_argument("--window", type=_positive, default=1000, metavar="TOKENS", help="context window (default %(default)s)")
    p.add_argument("--response-bound", type=_positive, default=1, metavar="K",
                   help="bounded response: pre-steps allowed before a response (default %(default)s)")
    p.add_argument("--no-symmetry", action="store_true", help="turn the VIEW reduction off (safety only; needs --max-seq)")
    p.add_argument("--max-seq", type=_positive, default=None, metavar="N", help="cap the log length")
    p.add_argument("--reverse", action="store_true", help="try actions in reverse order (results must not change)")
    p.add_argument("--cache", metavar="FILE", default=None,
                   help="keep the model's transitions in FILE between runs (keyed by the model's source)")
    runs = p.add_mutually_exclusive_group()
    runs.add_argument("--oracle", action="store_true",
                      help="also run the model on every real surface and fail (exit 1) if a shared run differs")
    runs.add_argument("--exact", action="store_true",
                      help="one model run per distinct surface (no sharing across surfaces of one shape; slower)")
    p.add_argument("--trace-dir", type=writable_dir, metavar="DIR", default=None, help="write each counterexample trace here (JSONL)")
    p.add_argument("--max-memory", type=parse_size, default=None, metavar="SIZE",
                   help="stop before this process's resident memory passes SIZE (512M, 2G, ...): the states found "
                        "are still checked for safety, and the run ends 'incomplete at N states' (exit 3) unless "
                        "one violates (exit 1); default: no bound")
    add_common(p)
    cluster.add_arguments(p, "each level's new cores (their model runs)")
    p.set_defaults(func=main)


def main(args) -> int:
    from .variants import VARIANTS, variant

    if args.list_variants:
        rows = [{"name": v.name, "breaks": v.breaks, "section": v.section, "description": v.description}
                for v in VARIANTS.values()]
        print(json.dumps(rows, indent=2) if args.json else "\n".join(
            f"{r['name']:32} breaks {r['breaks']} ({r['section']}): {r['description']}" for r in rows))
        return 0
    try:
        chosen = variant(args.variant)
    except KeyError as exc:
        return _usage(args, str(exc.args[0]))
    if args.no_symmetry and args.max_seq is None:
        return _usage(args, "--no-symmetry needs --max-seq N (without the VIEW every append makes a new state)")
    if args.window < 10:
        return _usage(args, "--window must be at least 10 tokens")
    if cluster.wanted(args) and (args.oracle or args.cache):
        return _usage(args, "--oracle and --cache run in this process only; drop them or drop --workers/--scheduler")
    from surfacecheck.core.exit import without_teardown

    from .oracle import Settings
    from .run import run_explore

    bounds = Bounds(args.events, args.tool_pairs, args.compactions, args.max_seq)
    command = "surfacecheck explore " + " ".join(sys.argv[2:]) if len(sys.argv) > 1 else None
    bar = _progress()
    try:
        report = run_explore(bounds, variant=chosen, settings=Settings(context_window=args.window),
                             symmetry=not args.no_symmetry, reverse=args.reverse, k=max(1, args.response_bound),
                             trace_dir=args.trace_dir, command=command, on_level=bar.update if bar else None,
                             cache=args.cache, shared=not args.exact, oracle=args.oracle,
                             max_memory=args.max_memory, workers=args.workers, scheduler=args.scheduler)
    except cluster.ClusterUnavailable as exc:
        return _usage(args, str(exc))
    except cluster.WorkerLost as exc:
        report = {"verdict": "inconclusive", "exit_code": 3, "error": str(exc)}
        print(json.dumps(report, indent=2) if args.json else f"explore: INCONCLUSIVE: {exc}")
        return 3
    finally:
        if bar:
            bar.close()
    print(json.dumps(report, indent=2) if args.json else human(report))
    without_teardown()  # the graph is freed by the process's end, not object by object
    return report["exit_code"]


def _usage(args, message: str) -> int:
    if args.json:
        print(json.dumps({"verdict": "error", "exit_code": 2, "error": message}))
    sys.stderr.write(f"surfacecheck explore: error: {message}\n")
    return 2


class _Bar:
    def __init__(self):
        from tqdm import tqdm

        self.bar = tqdm(desc="explore", unit=" states", file=sys.stderr, leave=False, disable=None)  # on a terminal only

    def update(self, level: int, states: int, edges: int) -> None:
        self.bar.set_postfix(depth=level, edges=edges)
        self.bar.update(states - self.bar.n)

    def close(self) -> None:
        self.bar.close()


def _progress():
    try:
        return _Bar()
    except ImportError:  # pragma: no cover
        return None


def human(report: dict) -> str:
    b, s = report["bounds"], report["settings"]
    lines = [
        f"explore: model variant {report['variant']}; bounds events={b['events']} tool-pairs={b['tool_pairs']} "
        f"compactions={b['compactions']}" + (f" max-seq={b['max_seq']}" if b["max_seq"] is not None else "")
        + f"; window {s['context_window']} (threshold {s['threshold']}); VIEW reduction "
        + ("on" if report["symmetry"] else "off"),
        f"  states {report['states']}  edges {report['edges']}  depth {report['depth']}  "
        f"{report['seconds']} s  {report['states_per_second']} distinct states/s  model runs {report['model_runs']}"
        + (f" (+{report['cached_transitions']} cached)" if report.get("cached_transitions") else "")
        + ("" if report["complete"] else "  (INCOMPLETE)"),
        f"  invariants checked in every state/transition: {', '.join(report['invariants'])}",
        f"  progress checked on the graph: {', '.join(report['progress']) or ('none (the search is incomplete)' if report.get('stopped') else 'none (needs the VIEW reduction)')}",
    ]
    if report.get("oracle") is not None:
        o = report["oracle"]
        lines.append(f"  oracle: {o['checked']} shared model runs re-run on their real surface, "
                     f"{o['mismatch_count']} mismatches")
        for m in o["mismatches"][:5]:
            lines.append(f"    MISMATCH {m['op']}:{m['outcome'] or '-'} on {' '.join(m['surface'])}: "
                         f"model {m['model']} != shared {m['shared']}")
    if not report["violations"] and report["verdict"] == "ok":
        lines.append("  verdict: ok (no violation)")
    if report.get("stopped"):
        lines.append(f"  {report['stopped'].upper()[:10]}{report['stopped'][10:]}; safety checked on the states found, progress not checked"
                     + ("" if report["violations"] else " (exit 3)"))
    for v in report["violations"]:
        lines.append(f"  VIOLATION {v['property']} ({v['kind']}): {v['message']}")
        lines.append(f"    shortest trace, {v['length']} actions: {' '.join(v['actions'])}"
                     + (f" | loop: {' '.join(v['loop'])}" if v["loop"] else ""))
        if v["trace"]:
            lines.append(f"    trace: {v['trace']} (surfacecheck replay {v['trace']})")
    return "\n".join(lines)
