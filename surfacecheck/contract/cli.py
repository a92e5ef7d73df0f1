"""Command line of ``surfacecheck contract``, and the conversation branch of ``surfacecheck replay``."""
from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

from surfacecheck.core.argtypes import positive_count, positive_seconds, writable_dir
from surfacecheck.options import add_common, command_parser
from surfacecheck.runtime.select import DEFAULT_TIMEOUT

DESCRIPTION = """\
Search a conversation-level runtime (langchain, strands, deepagents, adk, openhands, gemini, ai, reference, a cmd:
child; docs/conversation-protocol.md) for the compaction contract's broken promises; dsh and embedded are driven
through their event-log protocol (docs/conversation-protocol.md, "dsh and the model through the event-log
protocol"). A Hypothesis state machine opens a session with the runtime's
own compaction settings (its defaults first and often), an initial history (many turns, parallel and consecutive
tool calls, huge and tiny tool results, a pending call, a system message inside, earlier summaries), then sends
turns (scripted model replies, fetch calls, overflow limits) and direct compactions (scripted summarizers that
answer, fail, answer empty or slowly). After every step the session is judged against every promise.

The first example that breaks a promise is shrunk to a small witness and written as a trace; the search then runs
again with that promise marked found, until two rounds in a row find nothing new, every promise is found, or the
budget ends. One runtime process serves the whole search. The seed and one line per round go to stderr.

Output: one row per promise: held (sessions met what it judges and none broke it), unexercised (none met it),
n/a (the runtime has nothing it judges) or broken, with the witness trace (DIR/traces/contract-RUNTIME-PROMISE.jsonl),
its steps and the most messages a history held in it. 'surfacecheck replay TRACE' runs a witness again."""

EPILOG = """\
exit codes:
  0  no promise broken in the examples run
  1  a promise is broken (its witness trace is written)
  2  bad usage (unknown runtime, one that does not serve the conversation level)
  3  inconclusive: the runtime hung, exited or refused every session (its stderr is shown)
"""
EXAMPLES = (
    "surfacecheck contract --runtime langchain",
    "surfacecheck contract --runtime strands --seed 7 --budget 120",
    "surfacecheck contract --runtime dsh",
    "surfacecheck contract --runtime cmd:./my-runtime --examples 50 --json",
)
DEFAULT_OUT = str(Path("reports") / "out")
RUNTIME_WHY = "none: required, a runtime that serves the conversation level"


def register(commands) -> None:
    """Add ``contract`` to the ``surfacecheck`` parser."""
    from .search import BUDGET_SECONDS, EXAMPLES as PER_ROUND

    p = command_parser(commands, "contract", help="search a conversation-level runtime for broken promises of the "
                       "compaction contract; a small replayable witness for each", description=DESCRIPTION,
                       epilog=EPILOG, examples=EXAMPLES)
    add_common(p, runtime=None, runtime_why=RUNTIME_WHY, timeout=DEFAULT_TIMEOUT)
    next(a for a in p._actions if "--runtime" in a.option_strings).required = True
    p.add_argument("--provider", default=None, metavar="P",
                   help="the provider whose role rules the promises apply (default: langchain openai, strands "
                        "bedrock, otherwise anthropic)")
    p.add_argument("--seed", type=int, default=None, help="Hypothesis seed (default: fixed under CI, else random; "
                   "printed)")
    p.add_argument("--examples", type=positive_count, default=PER_ROUND, metavar="N",
                   help="examples per round (default: %(default)s, the ci profile's)")
    p.add_argument("--budget", type=positive_seconds, default=BUDGET_SECONDS, metavar="SECONDS",
                   help="no new example starts after so many seconds (default: %(default)g)")
    p.add_argument("--out", type=writable_dir, default=DEFAULT_OUT, metavar="DIR",
                   help="witness traces go to DIR/traces/ (default: %(default)s)")
    p.set_defaults(func=main)


def _portable(argv: list[str]) -> list[str]:
    """The command line a witness records: without ``--out DIR`` (a folder of this machine, not of the witness)."""
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--out":
            skip = True
        elif not arg.startswith("--out="):
            out.append(arg)
    return out


def _usage(args, message: str) -> int:
    if args.json:
        print(json.dumps({"command": args.command, "verdict": "error", "exit_code": 2, "error": message}))
    sys.stderr.write(f"surfacecheck {args.command}: error: {message}\n")
    return 2


def main(args) -> int:
    from surfacecheck.runtime import registry

    from .search import search, write_traces

    from surfacecheck.runtime.conversation.bridge import through_event_log

    entry = registry.entry(args.runtime)
    if entry is not None and entry.levels and "conversation" not in entry.levels \
            and not through_event_log(args.runtime):
        return _usage(args, f"runtime {args.runtime!r} does not serve the conversation level; conversation-level "
                            f"runtimes: {', '.join(registry.conversation_runtimes())}, cmd:COMMAND (dsh and embedded "
                            "through the event-log bridge)")
    command = "surfacecheck " + " ".join(shlex.quote(a) for a in _portable(sys.argv[1:])) \
        if sys.argv[1:2] == ["contract"] else None
    try:
        result = search(args.runtime, seed=args.seed, examples=args.examples, provider=args.provider,
                        deadline_seconds=args.budget, timeout=args.timeout, command=command)
    except ValueError as exc:
        return _usage(args, str(exc))
    try:
        paths = write_traces(result, Path(args.out) / "traces")
    except OSError as exc:
        return _usage(args, f"cannot write the witness traces: {exc}")
    if args.json:
        document = {"command": "contract", **result.to_json(),
                    "promises": _rows(result, paths)}
        print(json.dumps(document))
    else:
        print(text(result, paths))
    return result.exit_code


def status(result, promise: str) -> str:
    """``broken`` (a witness), ``n/a`` (the runtime has nothing the promise judges), ``unexercised`` (no session
    met what the promise judges, :mod:`.premises`: no claim either way), else ``held``."""
    from surfacecheck.runtime.registry import not_applicable

    from .premises import PREMISES

    if promise in result.found:
        return "broken"
    if promise in not_applicable(result.runtime):
        return "n/a"
    judged = promise not in PREMISES or result.exercised.get(promise, 0) > 0  # no premise: every session judges it
    return "held" if judged else "unexercised"


def _rows(result, paths: dict) -> list[dict]:
    order = list(result.promises) + [p for p in result.found if p not in result.promises]
    rows = []
    for promise in order:
        found = result.found.get(promise)
        row = {"promise": promise, "status": status(result, promise), "trace": None,
               "exercised": result.exercised.get(promise, 0)}
        if found:
            row.update(trace=str(paths[promise]), steps=len(found.steps), messages=found.messages,
                       step=found.breach.step, message=found.breach.message)
        rows.append(row)
    return rows


def text(result, paths: dict) -> str:
    """The table: promise -> held or broken, the witness and its size; then the totals and the verdict."""
    rows = _rows(result, paths)
    width = max([len("promise")] + [len(r["promise"]) for r in rows])
    lines = [f"contract: runtime {result.runtime}, provider {result.provider}, seed {result.seed}",
             f"{'promise'.ljust(width)}  verdict      witness"]
    for r in rows:
        witness = f"{r['trace']} ({r['steps']} steps, {r['messages']} messages)" if r["trace"] else ""
        lines.append(f"{r['promise'].ljust(width)}  {r['status'].ljust(11)}  {witness}".rstrip())
        if r["trace"]:
            lines.append(f"{''.ljust(width)}               step {r['step']}: {r['message']}")
    lines.append(f"{result.examples} examples ({result.steps} steps) in {result.rounds} rounds, "
                 f"{result.seconds:.1f} s" + (", budget spent" if result.out_of_time else ""))
    refused = {k: v for k, v in result.refusals.items() if k != "first"}
    if refused:
        lines.append(f"the runtime refused {sum(refused.values())} requests, first: {result.refusals.get('first')}")
    if result.inconclusive:
        lines.append(f"inconclusive: {result.inconclusive}")
        if result.stderr:
            lines.append("runtime stderr:\n" + result.stderr.strip()[-1500:])
    verdict = {"broken": f"BROKEN: {len(result.found)} promise(s)", "held": "HELD: no promise broken",
               "inconclusive": "INCONCLUSIVE"}[result.verdict]
    lines.append(f"contract: {verdict}")
    return "\n".join(lines)


def replay_command(args) -> int:
    """``surfacecheck replay TRACE`` for a contract trace (level ``conversation``)."""
    from surfacecheck.core.trace import TraceError

    from .replay import read_contract_trace, replay

    try:
        trace = read_contract_trace(args.trace)
    except TraceError as exc:
        return _usage(args, str(exc))
    try:
        outcome = replay(trace, args.runtime, timeout=args.timeout)
    except ValueError as exc:
        where = args.trace if args.runtime else f"{args.trace}:1: header runtime"
        return _usage(args, f"{where}: {exc.args[0] if exc.args else exc}")
    if args.json:
        print(json.dumps({"command": "replay", "trace": args.trace, **outcome.to_json()}))
    else:
        print(f"replay {args.trace} ({len(trace.steps)} steps, conversation level) on {outcome.runtime}: "
              f"{outcome.describe()}")
        if outcome.stderr:
            print("runtime stderr:\n" + outcome.stderr.strip()[-1500:])
    return outcome.exit_code
