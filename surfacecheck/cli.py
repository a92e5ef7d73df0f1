"""Command line: ``surfacecheck <command> [options]`` (see ``surfacecheck --help``)."""
from __future__ import annotations

import argparse
import importlib
import json
import os
import signal
import sys
from collections.abc import Sequence

from .core.verdict import INTERRUPT_EXIT, Verdict
from . import __version__
from .check import (
    DEFAULT_REPORT_DIR,
    DEFAULT_RUNTIME,
    EXIT_INCONCLUSIVE,
    EXIT_OK,
    EXIT_USAGE,
    EXIT_VIOLATION,
    JUNIT_FILE,
    REPORT_FILE,
    run_check,
)
from .core.corpus import ENV_VAR
from .options import HelpFormatter, add_common, command_parser, help_epilog
from .stages import ALL_STAGES

EXIT_CODES = f"""\
exit codes:
  {EXIT_OK}  every check held
  {EXIT_VIOLATION}  a violation was found
  {EXIT_USAGE}  bad input or usage (unknown runtime, missing corpus, no scenario logs, ...)
  {EXIT_INCONCLUSIVE}  inconclusive: no violation, but some check reached no verdict
"""

MAIN_DESCRIPTION = """\
surfacecheck verifies an agent runtime's context compaction against an executable reference
model of the DeepSeek Harness (dsh) session log: it audits real logs, drives the runtime in
lockstep with the model (Hypothesis), proves properties with Z3, model-checks a bounded world
and benchmarks the pressure projection. 'surfacecheck check' runs all of it and writes a report."""

CHECK_DESCRIPTION = f"""\
Run every capability stage against the chosen runtime and fold them into one
verdict and one report: the logs are judged by the reference model, then the
runtime is driven in lockstep, its findings replayed, the model proved,
explored and benchmarked. Any violation in any stage is a violation of the run.

Stages, in order (--only/--skip select them; logs always runs):
  logs      every generated scenario log (scenarios/logs/*.jsonl) and, if a corpus is found, every corpus log (dsh-sessions/, dsh-generated/) replayed through the model: no model error; the O(1) projection equals the full recount on fully metered logs; dsh-generated logs match dsh-generated/expected.json (final surface, generation, every replacement);
  runtime   protocol conformance (a sample session through every op, results checked against their JSON Schemas and the model's) and, for a runtime other than the model, every scenario and corpus log appended event by event and compared with the model;
  audit     every log audited rule by rule (surfacecheck audit);
  verify    the Hypothesis lockstep machines at every level, CI profile (surfacecheck verify);
  dsh       verify and the findings' traces on dsh's own library (--runtime dsh), whatever is tested;
  findings  dsh's own broken promises (spec 15): known ones from properties/findings.json, new ones fail (surfacecheck findings; --strict fails on known ones too);
  contract  on a conversation-level runtime (langchain, strands, deepagents, adk, openhands, gemini, ai, reference): the compaction contract's search, each promise held, broken, n/a or unexercised, a broken one known (contract/findings.json) or NEW (surfacecheck contract); there, findings replays the contract's registered witnesses and bench times the runtime's own trigger check, and every other stage says why it does not apply;
  prove     the Z3 obligations and their negative controls (surfacecheck prove);
  explore   bounded exhaustive model checking at small bounds (surfacecheck explore);
  e2e       the seed scripts on the real dsh runtime from PyPI (surfacecheck e2e dsh);
  bench     the per-append cost model of the pressure projection (surfacecheck bench);
  mutate    opt-in (--only mutate): mutation testing of the runtime's own code, dsh or embedded, and the gate's score (surfacecheck mutate; tens of minutes for dsh's default files on two cores).

Prints one line per stage, the failures in full and the verdict on stdout (-v: every stage's and every log's detail; --json: exactly one JSON document), progress on stderr, and writes into the report directory {REPORT_FILE}, {JUNIT_FILE} (one test case per log, stage run and trace), report.html (the page to open: every failure and finding drawn as the surface step by step, the coverage), coverage.json and coverage.xml (Cobertura): the runtime's code coverage (coverage.py; V8 per dsh source file for dsh), transitions and rules per source, and the sometimes-witnesses (--strict fails when one is never reached).

Runtimes: embedded (the suite's own independent runtime), model (the reference model behind the protocol), dsh (dsh's own npm packages behind a node adapter), langchain, strands, deepagents, adk, openhands, gemini and ai (those frameworks in their own environments, the conversation level: docs/conversation-protocol.md), cmd:COMMAND (a child process speaking docs/protocol.md; one that hangs or dies makes the run inconclusive, exit {EXIT_INCONCLUSIVE}). The logs are always judged by the model.

The corpus is --corpus DIR, else ${ENV_VAR}, else <checkout>/../shared/corpus; if none is found only the scenario logs are checked (under CI, with a warning)."""

CHECK_EXAMPLES = (
    "surfacecheck check",
    "surfacecheck check --runtime dsh --skip bench,explore",
    "surfacecheck check --runtime cmd:./my-runtime --timeout 30 --json",
    "surfacecheck check --only mutate --runtime embedded",
)
MAIN_EXAMPLES = (
    "surfacecheck check",
    "surfacecheck audit path/to/logs/",
    "surfacecheck verify --runtime dsh --profile smoke",
    "surfacecheck replay reports/out/traces/TRACE.jsonl",
)


class Parser(argparse.ArgumentParser):
    """argparse, keeping the ``--json`` promise on usage errors too: with ``--json`` among the arguments, a
    refused option still prints exactly one JSON document on stdout (then usage and reason on stderr, exit 2).
    Sub-command parsers are made of this class as well (argparse's ``add_subparsers`` default)."""

    wants_json = False

    def error(self, message: str):
        if Parser.wants_json:
            sys.stdout.write(json.dumps({"command": self.prog.removeprefix("surfacecheck").strip() or None,
                                         "verdict": "error", "exit_code": 2, "error": message}) + "\n")
            sys.stdout.flush()
        super().error(message)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="surfacecheck",
        description=MAIN_DESCRIPTION,
        epilog=help_epilog(EXIT_CODES + "\nRun 'surfacecheck COMMAND --help' for a command's options.", MAIN_EXAMPLES,
                           None),
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    check = command_parser(
        commands, "check",
        help="the main job: every capability against one runtime (embedded by default), one report",
        description=CHECK_DESCRIPTION, epilog=EXIT_CODES, examples=CHECK_EXAMPLES,
    )
    add_common(check, runtime=DEFAULT_RUNTIME, timeout=10.0, report_dir=str(DEFAULT_REPORT_DIR),
               timeout_note="in any stage; bench's one long request keeps its own bound",
               reports=f"{REPORT_FILE}, {JUNIT_FILE}")
    check.add_argument(
        "--corpus",
        metavar="DIR",
        default=None,
        help=f"corpus directory (default: ${ENV_VAR}, else <checkout>/../shared/corpus)",
    )
    check.add_argument(
        "--strict",
        action="store_true",
        help="also fail on known findings: the recorded corpus logs that dsh itself cannot load "
        "(listed with their reason in surfacecheck/known_corpus.json)",
    )
    check.add_argument(
        "-v", "--verbose", action="store_true", help="list every log in the summary, not just dsh-generated ones and failures"
    )
    check.add_argument(
        "--only", metavar="STAGES", type=_stage_list, default=None,
        help=f"run only these capability stages, comma-separated (of: {', '.join(ALL_STAGES)}; default: all; the logs stage always runs)",
    )
    check.add_argument(
        "--skip", metavar="STAGES", type=_stage_list, default=(),
        help="skip these stages, comma-separated (e.g. --skip bench,explore)",
    )
    check.add_argument(
        "--screenshot", action="store_true",
        help="also render report.html to report.png with a headless Chromium (apt-get install chromium)",
    )
    check.add_argument(
        "--no-coverage", action="store_true",
        help="do not measure coverage (default: code coverage of the runtime under test, transition and rule "
             "coverage, sometimes-witnesses: coverage.json and Cobertura coverage.xml in the report directory)",
    )
    check.set_defaults(func=_run_check)
    table = command_parser(
        commands, "catalogue",
        help="the property catalogue: every property and the engines that check it",
        description="Print one row per catalogue property (surfacecheck/core/catalogue.py): its kind and, per engine "
                    "(verify, audit, explore, prove, findings), whether it checks it (--json: the evaluators' names).",
        examples=("surfacecheck catalogue", "surfacecheck catalogue --json"),
    )
    table.add_argument("--json", action="store_true", help="one JSON document: the rows with each engine's evaluators")
    table.set_defaults(func=_run_catalogue)
    for module in CAPABILITIES:
        importlib.import_module(f"surfacecheck.{module}.cli").register(commands)
    commands.choices["replay"].set_defaults(func=run_replay)
    commands.choices["findings"].set_defaults(func=run_findings_command)
    return parser


def run_findings_command(args: argparse.Namespace) -> int:
    """``findings`` on a conversation-level runtime (LangChain, Strands, ...) is the contract's findings about it;
    on any other runtime, dsh's findings (spec 15)."""
    from surfacecheck.runtime.registry import serves_conversation

    if serves_conversation(args.runtime):
        from surfacecheck.contract.findings_cli import main as contract_findings
        return contract_findings(args)
    from surfacecheck.findings.cli import main as dsh_findings
    return dsh_findings(args)


def run_replay(args: argparse.Namespace) -> int:
    """``replay`` hands a trace to the engine that wrote it: a conversation-level trace runs on its runtime and is
    judged by the contract's promises (``surfacecheck contract``), an e2e bundle folder re-runs its script on the
    real runtime (``surfacecheck e2e``), any other trace replays in lockstep with the model (``surfacecheck verify``)."""
    from surfacecheck.core.trace import CONVERSATION, peek_header
    from surfacecheck.e2e.bundle import is_e2e_target

    header = peek_header(args.trace)
    if header is not None and (header.get("level") == CONVERSATION or header.get("source") == "contract"):
        from surfacecheck.contract.cli import replay_command
        return replay_command(args)
    if is_e2e_target(args.trace):
        from surfacecheck.e2e.cli import replay_bundle
        return replay_bundle(args.trace, json_out=args.json)
    from surfacecheck.verify.cli import run_replay_command
    return run_replay_command(args)


# Each capability registers its own subcommands (``surfacecheck/<capability>/cli.py``).
CAPABILITIES = ("audit", "verify", "findings", "prove", "bench", "explore", "e2e", "mutate", "contract", "matrix")


def _stage_list(value: str) -> tuple[str, ...]:
    names = tuple(name.strip() for name in value.split(",") if name.strip())
    unknown = [name for name in names if name not in ALL_STAGES]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown stage(s) {', '.join(unknown) or value!r}; stages: {', '.join(ALL_STAGES)}")
    return names


def _run_check(args: argparse.Namespace) -> int:
    chosen = args.only if args.only is not None else ALL_STAGES
    stages = tuple(name for name in chosen if name not in args.skip and name != "logs")
    return run_check(
        runtime=args.runtime,
        report_dir=args.report_dir,
        json_out=args.json,
        corpus=args.corpus,
        verbose=args.verbose,
        strict=args.strict,
        stages=stages,
        requested=tuple(args.only or ()),
        timeout=args.timeout,
        coverage=not args.no_coverage,
        screenshot=args.screenshot,
    )


def _run_catalogue(args: argparse.Namespace) -> int:
    from .catalogue_table import coverage_table, format_table

    rows = coverage_table()
    if args.json:
        sys.stdout.write(json.dumps([row.to_json() for row in rows], indent=1) + "\n")
    else:
        sys.stdout.write(format_table(rows) + "\n")
    return EXIT_OK


DEBUG_ENV = "SURFACECHECK_DEBUG"
"""Set to 1 to let an unexpected internal error show its Python traceback."""


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``surfacecheck`` console script; returns the exit code.

    The last line of defence of the exit-code contract: a runtime that became unusable in a path no command
    anticipated is inconclusive (3), an interrupt exits 130 (SIGINT) and a bug of the suite itself is reported
    in one line and is inconclusive too, never a traceback and never 0 or 1 (a verdict nothing supports)."""
    from surfacecheck.core.protocol import RuntimeUnavailable
    from surfacecheck.runtime.client import kill_all, live
    from surfacecheck.core.stage import Terminated

    Parser.wants_json = "--json" in (sys.argv[1:] if argv is None else list(argv))
    args = build_parser().parse_args(argv)  # usage errors exit 2 here
    name = getattr(args, "command", None) or "surfacecheck"
    previous, spared = _on_sigterm(), live()  # a caller's own runtimes (main called in-process) are spared
    try:
        return args.func(args)
    except RuntimeUnavailable as exc:
        return _inconclusive(args, name, f"the runtime became unusable ({exc.kind}): {exc}")
    except KeyboardInterrupt:
        sys.stderr.write(f"surfacecheck {name}: interrupted\n")
        return INTERRUPT_EXIT["SIGINT"]
    except Terminated:
        sys.stderr.write(f"surfacecheck {name}: terminated\n")
        return INTERRUPT_EXIT["SIGTERM"]
    except BrokenPipeError:  # stdout closed by the reader (| head): nothing left to report to
        return Verdict.INCONCLUSIVE.exit_code
    except Exception as exc:  # noqa: BLE001 - see the docstring
        if os.environ.get(DEBUG_ENV):
            raise
        return _inconclusive(args, name, f"internal error (a bug in surfacecheck, not a verdict): "
                                         f"{type(exc).__name__}: {exc}; rerun with {DEBUG_ENV}=1 for the traceback")
    finally:
        kill_all(spared)  # no runtime child of this command outlives it, however it ended
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def entry() -> None:
    """The console script and ``python -m surfacecheck``: :func:`main`, then the process ends with its code (a
    command that built a large heap leaves without freeing it, :mod:`surfacecheck.core.exit`)."""
    from .core.exit import leave

    leave(main())


def _on_sigterm():
    """Make SIGTERM raise :class:`Terminated` (main thread only); the previous handler, to restore."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        return None

    from surfacecheck.core.stage import Terminated

    def handler(signum, frame):
        raise Terminated()

    return signal.signal(signal.SIGTERM, handler)


def _inconclusive(args: argparse.Namespace, name: str, message: str) -> int:
    if getattr(args, "json", False):
        print(json.dumps({"command": name, "verdict": Verdict.INCONCLUSIVE.word,
                          "exit_code": Verdict.INCONCLUSIVE.exit_code, "error": message}))
    sys.stderr.write(f"surfacecheck {name}: inconclusive: {message}\n")
    return Verdict.INCONCLUSIVE.exit_code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
