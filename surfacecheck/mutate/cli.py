"""``surfacecheck mutate``: how strong is the gate? Mutation testing of the runtime under test."""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from surfacecheck.core import cluster
from surfacecheck.core.argtypes import positive_count

from surfacecheck.options import DEFAULT_RUNTIME, add_common, command_parser
from surfacecheck.runtime.registry import mutable

from .framework import runtimes as framework_runtimes
from .stryker_frameworks import runtimes as node_runtimes
from .units import STAGES

DESCRIPTION = """\
Change the runtime's code in small ways (mutants) and run the gate against each: what it catches is how strong
the gate is, what survives is what it would miss.

  --runtime dsh       StrykerJS over a working copy of dsh's installed packages (default files: the compaction-
                      relevant source files of dsh-session, dsh-compaction, dsh-compaction-basic, dsh-token-meter,
                      the pruner, dsh-command-compact and agent-loop's runtime-context). Stryker's mutation switching
                      activates one mutant at a time (__STRYKER_ACTIVE_MUTANT__); surfacecheck's gate is its test
                      runner, one gate process per Stryker worker, with per-unit coverage so a mutant runs only the
                      units that reach it. The cache the dsh runtime normally uses is never touched.
  --runtime embedded  mutmut over a copy of the suite's embedded Python runtime, the gate run once per mutant.
                      With --workers N (or --scheduler ADDRESS) each mutant is one Dask task: mutmut's preparation
                      runs here once, every worker keeps one warmed-up gate that forks each mutant as mutmut does;
                      the same verdicts and report at any N, times aside (--concurrency is not used).
  --runtime langchain, strands
                      mutmut over the framework's own compaction modules, read from its cached environment and
                      mutated in a temporary copy; the gate is the compaction contract: the registered findings'
                      witnesses and a fixed-seed contract search of --examples sessions, each verdict compared with
                      the unmutated one. One adapter process serves every mutant (switched per session); a mutant
                      runs only the scenarios that reach its function. --max-mutants / --functions run a subset.
  --runtime gemini, ai
                      StrykerJS over the Node framework's compaction code (gemini-cli-core's chat compression,
                      the AI SDK's pruneMessages: only that function's lines of its bundle), in a working copy of
                      the cached install; the same contract gate as langchain, as Stryker's test runner: each
                      scenario one test, perTest coverage, one adapter process switched per mutant.

The gate is built from stages (--gate): runtime (protocol conformance and every scenario and corpus log appended
event by event next to the model), findings (every registered finding's witness must still reproduce), verify
(the Hypothesis lockstep machines at a fixed seed, --verify-profile). A unit that fails kills the mutant.

Scoring: score = killed / (killed + survived + not reached + timed out + crashed). A timeout or a crash of the
gate is not a kill and is reported apart; timeouts are scaled from the unmutated (dry) run; that run must pass
first or the score is void. Survivors are listed with their diff, file and line; those judged equivalent say why
(runtimes/dsh/mutate/equivalent.json) and still count as survivors; a second figure sets them apart.
"""
EPILOG = """\
exit status: 0 the run finished (and the score meets --min-score, when given), 1 the score is below --min-score,
2 usage, 3 void (the unmutated gate failed, the tool failed or was interrupted, Dask gave up on a mutant)
writes into --report-dir: mutate.json, and for dsh stryker/mutation.html (Stryker's own report),
stryker/mutation.json, stryker/stryker.log, stryker/gate.log
"""


def _stages(value: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in value.split(",") if n.strip())
    unknown = [n for n in names if n not in STAGES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown gate stage(s) {', '.join(unknown) or value!r}; "
                                         f"stages: {', '.join(STAGES)}")
    return names


def _percent(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number") from None
    if not 0.0 <= number <= 100.0:
        raise argparse.ArgumentTypeError(f"{value} is not a percentage between 0 and 100")
    return number
EXAMPLES = (
    "surfacecheck mutate --files claims.py --min-score 80",
    "surfacecheck mutate --runtime dsh --files 'dsh-token-meter/*' --incremental",
    "surfacecheck mutate --runtime langchain --max-mutants 50",
    "surfacecheck mutate --runtime ai --json",
)


def register(commands) -> None:
    p = command_parser(commands, "mutate", help="mutation testing of the runtime under test: how strong is the gate",
                       description=DESCRIPTION, epilog=EPILOG, examples=EXAMPLES)
    add_common(p, runtime=DEFAULT_RUNTIME, runtimes=mutable() + framework_runtimes() + node_runtimes(),
               runtimes_why="the runtimes with a mutation tool",
               timeout=10.0, timeout_note="one call inside the gate",
               report_dir=None, reports="default: reports/out/mutate-RUNTIME")
    p.add_argument("--files", nargs="+", metavar="GLOB", default=None,
                   help="dsh: PACKAGE/FILE globs (e.g. dsh-compaction-basic/region.js 'dsh-token-meter/*'); "
                        "embedded: module file globs (e.g. 'claims.py'); default: the compaction-relevant files")
    p.add_argument("--gate", type=_stages, default=STAGES, metavar="STAGES",
                   help=f"the gate's stages, comma-separated (of {', '.join(STAGES)}; default all)")
    p.add_argument("--verify-profile", default="smoke", choices=("smoke", "ci"),
                   help="verify's profile inside the gate (default smoke: the CI profile costs ~7x per mutant)")
    p.add_argument("--concurrency", type=positive_count, default=max(1, min(2, os.cpu_count() or 1)), metavar="N",
                   help="parallel gate workers (default: min(2, cores))")
    p.add_argument("--incremental", action="store_true",
                   help="dsh: reuse Stryker's results for mutants whose code is unchanged since the last run "
                        "in this --report-dir (its incremental.json)")
    p.add_argument("--no-shortcut", action="store_true",
                   help="dsh: a fresh runtime process per mutant and every unit in full (slower, the same "
                        "verdicts; by default one process per worker imported dsh unmutated switches each mutant "
                        "on, and a unit whose answers all have the unmutated digests passes in one round trip)")
    p.add_argument("--min-score", type=_percent, default=None, metavar="PERCENT",
                   help="exit 1 when the score is below PERCENT (default: off)")
    p.add_argument("--timeout-factor", type=float, default=2.0, metavar="F",
                   help="a mutant times out after F x its covering units' unmutated time + --timeout-ms (default 2)")
    p.add_argument("--timeout-ms", type=int, default=10000, metavar="MS", help="see --timeout-factor (default 10000)")
    p.add_argument("--corpus", type=Path, default=None, help="corpus directory (default: as check)")
    p.add_argument("--keep-work", action="store_true", help="keep the mutated working copy (its path is printed)")
    p.add_argument("--max-mutants", type=positive_count, default=None, metavar="N",
                   help="langchain, strands, gemini, ai: run at most N mutants, evenly spread over the tool's "
                        "order (a sample; the same at every run)")
    p.add_argument("--functions", nargs="+", metavar="GLOB", default=None,
                   help="langchain, strands: only the mutants of functions (or mutants) matching a glob over "
                        "mutmut's names, e.g. '*_should_summarize*' or 'xǁSummarizationMiddlewareǁbefore_model*'")
    p.add_argument("--examples", type=positive_count, default=None, metavar="N",
                   help="langchain, strands, gemini, ai: contract search sessions in the gate (default 30, seed "
                        "fixed)")
    p.add_argument("-v", "--verbose", action="store_true", help="list every survivor")
    cluster.add_arguments(p, "the mutants (--runtime embedded; one mutant per task)")
    p.set_defaults(func=run_mutate)


def run_mutate(args: argparse.Namespace) -> int:
    from surfacecheck.core.corpus import CorpusError, corpus_root

    from .run import run_dsh

    def say(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    report_dir = Path(args.report_dir or Path("reports") / "out" / f"mutate-{args.runtime}").resolve()
    report_dir.mkdir(parents=True, exist_ok=True)
    try:
        if args.corpus is not None and not args.corpus.is_dir():
            raise CorpusError(f"corpus directory {args.corpus} does not exist")
        corpus = args.corpus.resolve() if args.corpus is not None else corpus_root()
    except CorpusError as exc:
        return _usage(args, str(exc))
    try:
        if args.runtime == "dsh":
            from surfacecheck.runtime.dsh import explicit_modules, spec_problem

            if cluster.wanted(args):
                return _usage(args, "--workers/--scheduler work with --runtime embedded; with --runtime dsh "
                                    "Stryker schedules the mutants over its own --concurrency gate processes")

            problem = spec_problem("dsh")
            if problem:
                return _usage(args, problem)
            run = run_dsh(args.files, args.gate, report_dir, verify_profile=args.verify_profile,
                          concurrency=args.concurrency, incremental=args.incremental, timeout=args.timeout,
                          timeout_factor=args.timeout_factor, timeout_ms=args.timeout_ms, corpus=corpus,
                          modules=explicit_modules("dsh"), keep_work=args.keep_work, say=say,
                          min_score=args.min_score, shortcut=not args.no_shortcut)
        elif args.runtime in framework_runtimes():
            run = _framework(args, report_dir, say)
        elif args.runtime in node_runtimes():
            run = _node(args, report_dir, say)
        else:
            run = _embedded(args, report_dir, corpus, say)
    except (ValueError, cluster.ClusterUnavailable) as exc:
        return _usage(args, str(exc))
    document = run.to_json()
    (report_dir / "mutate.json").write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    if args.json:
        print(json.dumps(document))
    else:
        sys.stdout.write(run.text(verbose=args.verbose))
        print(f"report: {report_dir / 'mutate.json'}")
    return run.exit_code


def _embedded(args, report_dir: Path, corpus: Path, say):
    """``--runtime embedded`` in one mutmut run, or one mutant per task on Dask (``--workers``/``--scheduler``)."""
    from .embedded import run_embedded, select_files

    options = dict(verify_profile=args.verify_profile, concurrency=args.concurrency, timeout=args.timeout,
                   timeout_factor=args.timeout_factor, corpus=corpus, keep_work=args.keep_work, say=say,
                   min_score=args.min_score)
    if not cluster.wanted(args):
        return run_embedded(args.files, args.gate, report_dir, **options)
    files = select_files(args.files)  # a bad --files is a usage error before a cluster is started
    try:
        with cluster.pool(args.workers, args.scheduler) as pool:
            return run_embedded(args.files, args.gate, report_dir, pool=pool, **options)
    except cluster.WorkerLost as exc:  # the scheduler cannot be reached: no score (exit 3), no traceback
        from .run import MutationRun

        return MutationRun("embedded", "mutmut", args.gate, files, report_dir, min_score=args.min_score,
                           void=f"the Dask run was lost: {exc}")


def _framework(args, report_dir: Path, say):
    """``--runtime langchain`` (``strands``, ...): mutmut over the framework's compaction modules."""
    from .framework import run_framework

    if cluster.wanted(args):
        raise ValueError(f"--workers/--scheduler work with --runtime embedded; --runtime {args.runtime} runs its "
                         "mutants in one adapter process")
    return run_framework(args.runtime, report_dir, files_glob=args.files, functions=args.functions,
                         max_mutants=args.max_mutants, examples=args.examples, timeout=args.timeout,
                         keep_work=args.keep_work, say=say, min_score=args.min_score)


def _node(args, report_dir: Path, say):
    """``--runtime gemini``, ``ai``: StrykerJS over the Node framework's compaction code (concurrency 1: one
    adapter process serves every mutant)."""
    from surfacecheck.runtime.conversation.node import spec_problem

    from .stryker_frameworks import run_node

    if cluster.wanted(args) or args.files or args.functions:
        raise ValueError(f"--runtime {args.runtime} takes no --workers/--scheduler, --files or --functions: it "
                         "mutates the compaction declarations of stryker_frameworks.TARGETS")
    problem = spec_problem(args.runtime)
    if problem:
        raise ValueError(problem)
    return run_node(args.runtime, report_dir, max_mutants=args.max_mutants, examples=args.examples,
                    timeout=args.timeout, timeout_factor=args.timeout_factor, timeout_ms=args.timeout_ms,
                    keep_work=args.keep_work, say=say, min_score=args.min_score)


def _usage(args, message: str) -> int:
    if args.json:
        print(json.dumps({"command": "mutate", "verdict": "error", "exit_code": 2, "error": message}))
    print(f"surfacecheck mutate: {message}", file=sys.stderr)
    return 2
