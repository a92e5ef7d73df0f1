"""Command line of ``surfacecheck matrix``: the compaction contract on every runtime, one table."""
from __future__ import annotations

import json
import os
import shlex
import sys
from pathlib import Path

from surfacecheck.core import cluster
from surfacecheck.core.argtypes import positive_count
from surfacecheck.options import add_common, command_parser

DESCRIPTION = """\
Run the compaction contract (docs/contract.md) on every runtime that can be asked it, and write one table:
runtimes x promises, each cell held, broken (the finding's id and class, or NEW, and its witness), not applicable
or not exercised (with the reason), stale or inconclusive.

The runtimes: dsh and the embedded model (through their event-log protocol), every framework adapter (langchain,
strands, deepagents, adk, openhands, gemini, ai: each installs on first use into its own cached environment), and
the reference conversation runtime, which keeps every promise and is the control every witness must hold on.
For each runtime its registered witnesses are replayed (surfacecheck/contract/findings.json), then a seeded
search bounded by examples, never by time, looks for every other promise: the same seed gives the same table.
A promise is held only where the search met what it judges (its premise) at least once.

Writes DIR/matrix.json, DIR/matrix.md, DIR/matrix.html and the NEW witnesses in DIR/traces/; --markdown also
writes the Markdown where you say (the committed reports/matrix.md).

With --workers N or --scheduler ADDRESS each runtime's row is one Dask task (docs/distributed.md): the same table,
one progress bar for the rows, the NEW witnesses shipped back and written here."""

EPILOG = """\
exit codes:
  0  every broken promise is a registered finding (with --strict: no promise broken)
  1  a promise is broken by a NEW witness, or a registered witness no longer breaks it (stale)
  2  bad usage (an unknown runtime, one that cannot be asked the contract)
  3  inconclusive: a runtime could not be installed, hung or died (the reason is in its row)
"""
EXAMPLES = (
    "surfacecheck matrix",
    "surfacecheck matrix --runtime langchain,strands --seed 7 --json",
    "surfacecheck matrix --markdown reports/matrix.md",
    "surfacecheck matrix --workers 4",
)
DEFAULT_DIR = str(Path("reports") / "out" / "matrix")


def register(commands) -> None:
    """Add ``matrix`` to the ``surfacecheck`` parser."""
    p = command_parser(commands, "matrix", help="the compaction contract on every runtime: one table of runtimes x "
                       "promises (held, broken with its witness, not applicable)", description=DESCRIPTION,
                       epilog=EPILOG, examples=EXAMPLES)
    add_common(p, timeout=60.0, report_dir=DEFAULT_DIR, reports="matrix.json, matrix.md, matrix.html, traces/")
    p.add_argument("--runtime", metavar="R[,R...]", default=None,
                   help="the runtime under test: several, comma-separated, in the table's order (default: every "
                        "runtime the contract can be asked of, dsh and embedded first, the reference runtime last)")
    p.add_argument("--seed", type=int, default=None, help="the search's seed (default: the fixed CI seed; printed)")
    p.add_argument("--examples", type=positive_count, default=None, metavar="N",
                   help="examples per search round (default: the ci profile's)")
    p.add_argument("--strict", action="store_true", help="also fail on registered findings")
    p.add_argument("--markdown", type=Path, default=None, metavar="FILE",
                   help="also write the Markdown table to FILE (e.g. reports/matrix.md)")
    cluster.add_arguments(p, "the runtimes (one row per task; a row Dask gave up on is inconclusive)")
    p.set_defaults(func=main)


def _usage(args, message: str) -> int:
    if args.json:
        print(json.dumps({"command": "matrix", "verdict": "error", "exit_code": 2, "error": message}))
    sys.stderr.write(f"surfacecheck matrix: error: {message}\n")
    return 2


def _command(args, runtimes: list[str], seed: int) -> str:
    parts = ["surfacecheck matrix", f"--seed {seed}"]
    if args.runtime:
        parts.append(f"--runtime {shlex.quote(','.join(runtimes))}")
    if args.examples:
        parts.append(f"--examples {args.examples}")
    if args.markdown:
        parts.append(f"--markdown {shlex.quote(str(args.markdown))}")
    return " ".join(parts)


def main(args) -> int:
    from surfacecheck.contract.search import SEED
    from surfacecheck.reports import matrix_page

    from .run import run_matrix
    from .runtimes import contract_runtimes, problem

    runtimes = [r.strip() for r in args.runtime.split(",") if r.strip()] if args.runtime else contract_runtimes()
    if not runtimes:
        return _usage(args, "--runtime names no runtime")
    for spec in runtimes:
        why = problem(spec)
        if why:
            return _usage(args, why)
    seed = SEED if args.seed is None else args.seed
    folder = Path(args.report_dir)

    def say(line: str) -> None:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()

    say(f"matrix: {len(runtimes)} runtimes ({', '.join(runtimes)}), seed {seed}")
    distributed = None
    if cluster.wanted(args):
        from .campaign import run_on_cluster

        try:
            matrix, distributed = run_on_cluster(runtimes, seed=seed, examples=args.examples,
                                                 trace_dir=folder / "traces", timeout=args.timeout,
                                                 workers=args.workers, scheduler=args.scheduler, say=say)
        except cluster.ClusterUnavailable as exc:
            return _usage(args, str(exc))
    else:
        matrix = run_matrix(runtimes, seed=seed, examples=args.examples, trace_dir=folder / "traces",
                            timeout=args.timeout, say=say)
    data = {"command": "matrix", **matrix.to_json(args.strict), "distributed": distributed}
    command = _command(args, runtimes, seed)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "matrix.json").write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    written = matrix_page.write(data, folder, command, _way_to_checkout(folder))
    if args.markdown:
        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        args.markdown.write_text(matrix_page.markdown(data, command, _way_to_checkout(args.markdown.parent)),
                                 encoding="utf-8")
    if args.json:
        print(json.dumps(data, indent=2))
    else:
        print(text(data))
        print(f"reports: {folder / 'matrix.json'}, {written['markdown']}, {written['html']}"
              + (f", {args.markdown}" if args.markdown else ""))
    return data["exit_code"]


def _way_to_checkout(folder: Path) -> str:
    """The relative way from ``folder`` to the checkout, for the Markdown's links to registered witnesses."""
    from .run import ROOT

    way = os.path.relpath(ROOT, folder.resolve())
    return "" if way == "." else way.rstrip("/") + "/"


def text(data: dict) -> str:
    """The table in the terminal: one line per runtime, then every broken cell."""
    out = [f"matrix: {data['verdict'].upper()} (seed {data['table']['seed']})"]
    for row in data["table"]["rows"]:
        states = [c["state"] for c in row["cells"]]
        out.append(f"  {row['runtime']:<12} {states.count('held'):>2} held  {states.count('broken'):>2} broken  "
                   f"{states.count('not-applicable') + states.count('not-exercised'):>2} not judged"
                   + (f"  INCONCLUSIVE: {row['inconclusive']}" if row.get("inconclusive") else ""))
        for c in row["cells"]:
            if c["state"] in ("broken", "stale"):
                what = "NEW" if c.get("finding") == "NEW" else f"{c.get('finding')} {c.get('class') or ''}".strip()
                out.append(f"      {c['state']} {c['promise']}: {what}  {c.get('witness') or ''}")
    return "\n".join(out)
