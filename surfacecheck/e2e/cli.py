"""Command line of ``surfacecheck e2e dsh`` and the e2e branch of ``surfacecheck replay``."""
from __future__ import annotations

import argparse
import json
import os
import sys
from contextlib import contextmanager
from pathlib import Path

from surfacecheck.options import HelpFormatter, add_common, command_parser, help_epilog

from .run import FOUR_PATHS, INSTALL_HINT, PATHS, SPEC_VERSION, E2EReport, Options, run_scripts
from surfacecheck.core import cluster
from surfacecheck.core.argtypes import positive_seconds, writable_dir

from .runner import DEFAULT_STALL

DESCRIPTION = f"""\
Drive the real DeepSeek Harness runtime (pip install -e '.[dsh]': deepseek-harness-sdk=={SPEC_VERSION})
through scripted conversations and judge it with the reference model. For each script: a scripted
model server on 127.0.0.1 answers the runtime (text, bash tool calls of a chosen output size,
context-overflow errors, summaries); the runtime runs in a fresh throwaway home, workspace and
temp folder; then its session log is
  (a) audited under the script's policy (surfacecheck audit): zero error findings expected;
  (b) compared with the model's prediction for the same conversation: when pressure compaction
      fires (prune or summary), which range, checkpoint and shadow prices, the overflow same-step
      retry, /compact's result; every difference names the first seq where they part;
  (c) on a difference or an audit error, kept as a counterexample bundle (script.json,
      session.jsonl, requests.jsonl, differences.json, audit.json, trace.jsonl) that
      'surfacecheck replay BUNDLE' or 'surfacecheck e2e dsh --script BUNDLE' re-runs;
  (d) scanned with every promise monitor (promise-*, the log scan of 'surfacecheck findings'):
      a violation of a promise registered in properties/findings.json is a known finding about
      dsh, named by its id (informational); any other is NEW (exit 1). --no-findings skips it;
  (e) its provider requests checked on the wire: tool calls and results pair by id in every request,
      every prompt reaches an answered request verbatim; classed like (d) (--no-findings skips it too).
Scripts: --script FILE (a script, a folder of scripts, or a bundle; repeatable), --generate N
(Hypothesis draws N scripts from --seed; the first failing one is shrunk to a short script), or by
default the seed scenarios in scenarios/e2e/*.json. --workers N runs the scripts on N Dask worker
processes (--generate draws them here first, so script i is the same at any N; shrinking stays here):
the report is the same as without it, times aside.
Paths reported per script with their seqs: {', '.join(PATHS[:3])},
{', '.join(PATHS[3:])}. --runtime-version another release: drift findings."""

EPILOG = f"""\
exit codes:
  0  every script ran, its log audited clean and the runtime agreed with the model
  1  a difference with the model or an audit error (a bundle is kept for each), or a NEW finding
     (a promise-* violation on a real log that properties/findings.json does not register)
  2  bad usage or a bad script file (printed as PATH: reason)
  3  inconclusive: the runtime could not be run ({INSTALL_HINT.split(':')[0]}), crashed, hung or timed out;
     or --workers/--scheduler: Dask gave up on a script (its workers kept dying) or the cluster went away
"""
EXAMPLES = (
    "surfacecheck e2e dsh",
    "surfacecheck e2e dsh --generate 20 --seed 3 --keep",
    "surfacecheck e2e dsh --script my-script.json --isolate-network",
    "surfacecheck e2e dsh --runtime-version 0.2.1rc2 --python PY",
)


def register(commands) -> None:
    """Add ``e2e`` (with the sub-command ``dsh``) to the ``surfacecheck`` parser."""
    e2e = commands.add_parser("e2e", help="drive the real dsh runtime through scripted conversations; judge it with the model",
                              description="End-to-end runs of real runtimes. 'surfacecheck e2e dsh --help' for details.",
                              epilog=help_epilog("", EXAMPLES[:1], "e2e"), formatter_class=HelpFormatter)
    runtimes = e2e.add_subparsers(dest="e2e_runtime", metavar="RUNTIME", required=True)
    p = command_parser(runtimes, "dsh", help="the DeepSeek Harness runtime installed from PyPI",
                       description=DESCRIPTION, epilog=EPILOG, examples=EXAMPLES, environment_of="e2e dsh")
    source = p.add_mutually_exclusive_group()
    source.add_argument("--script", action="append", metavar="FILE", default=None,
                        help="a script file, a folder of *.json scripts, or a bundle folder (repeatable)")
    source.add_argument("--generate", type=int, metavar="N", default=None,
                        help="run N scripts drawn by Hypothesis from --seed (reproducible), then shrink the first failure")
    p.add_argument("--seed", type=int, default=0, help="seed for --generate (default: %(default)s; printed)")
    p.add_argument("--keep", nargs="?", type=writable_dir, const="reports/out/e2e-runs", default=None, metavar="DIR",
                   help="keep every run folder (home, workspace, log, requests) under DIR (default DIR: %(const)s)")
    p.add_argument("--bundle-dir", type=writable_dir, default="reports/out/e2e", metavar="DIR",
                   help="where counterexample bundles go (default: %(default)s)")
    p.add_argument("--runtime-version", default=SPEC_VERSION, metavar="V",
                   help="the SDK release to judge (default: %(default)s, the release the spec describes; another "
                        "release is judged for drift against it, see --python)")
    p.add_argument("--python", default=None, metavar="PY",
                   help="with another --runtime-version: the interpreter whose venv has that SDK (default for 0.2.x: "
                        "$SURFACECHECK_DSH_V2_PYTHON; neither: exit 2); the script also runs on 0.1.1rc1 here and every change "
                        "between the two is reported as a drift:<id> finding (exit 1)")
    p.add_argument("--timeout", type=positive_seconds, default=180.0, metavar="S",
                   help="wall-clock limit per script run in seconds (default: %(default)s)")
    p.add_argument("--stall", type=positive_seconds, default=DEFAULT_STALL, metavar="S",
                   help="seconds without progress (no model request, no finished turn) before a run is declared "
                        "hung, killed and reported inconclusive (default: %(default)s)")
    p.add_argument("--shrink-budget", type=int, default=25, metavar="K",
                   help="at most K extra runtime runs while shrinking a failing generated script (default: %(default)s; 0: no shrinking)")
    p.add_argument("--isolate-network", action="store_true",
                   help="run each runtime inside a user+network namespace whose only interface is lo (unshare -rn)")
    p.add_argument("--trace-connect", action="store_true",
                   help="record every connect() of the runtime and its tools (strace -f); any address outside "
                        "loopback is reported per script under network.outside_loopback")
    p.add_argument("--no-findings", action="store_true",
                   help="do not scan the runtime's logs with the promise monitors (known findings are "
                        "informational; a NEW one exits 1)")
    add_common(p)
    cluster.add_arguments(p, "the scripts (one script per task)")
    p.set_defaults(func=run_dsh_command)


def _usage(args, message: str) -> int:
    if getattr(args, "json", False):
        print(json.dumps({"command": "e2e dsh", "verdict": "error", "exit_code": 2, "error": message}))
    sys.stderr.write(f"surfacecheck e2e dsh: error: {message}\n")
    return 2


def _script_files(target: str) -> list[Path]:
    from .bundle import resolve_script

    path = Path(target)
    if path.is_dir() and not (path / "script.json").is_file():
        return sorted(path.glob("*.json"))
    return [resolve_script(path)]


def load_scripts(targets: list[str] | None):
    """``(script, source)`` pairs from files/folders/bundles, or the seed scenarios; ScriptError on a bad one."""
    from .script import ScriptError, load_script, seed_dir

    if not targets:
        files = sorted(seed_dir().glob("*.json"))
        if not files:
            raise ScriptError(f"{seed_dir()}: no seed scripts (*.json)")
    else:
        files = []
        for target in targets:
            found = _script_files(target)
            if not found:
                raise ScriptError(f"{target}: no *.json scripts in this folder")
            files += found
    return [(load_script(f), str(f)) for f in files]


def _progress(items, err):
    from tqdm import tqdm

    bar = tqdm(items, desc="e2e dsh", unit="script", file=err, disable=None, leave=False)
    for item in bar:
        bar.set_postfix_str(getattr(item[0], "name", ""))
        yield item


@contextmanager
def _finished_bar(total: int, err):
    """A bar advanced as each script finishes on the cluster (completion order; the report keeps script order)."""
    from tqdm import tqdm

    bar = tqdm(total=total, desc="e2e dsh", unit="script", file=err, disable=None, leave=False)

    def update(outcome) -> None:
        bar.set_postfix_str(outcome.name)
        bar.update()
    try:
        yield update
    finally:
        bar.close()


def _run(args, scripts, options: Options, *, mode: str, seed) -> E2EReport:
    """The scripts in this process, or one per task on Dask (``--workers``/``--scheduler``); a run Dask gave
    up on is an inconclusive report (exit 3), never a short one. ClusterUnavailable: the caller's usage error."""
    if not cluster.wanted(args):
        return run_scripts(scripts, options, mode=mode, seed=seed, progress=lambda items: _progress(items, sys.stderr))
    from .sharded import run_scripts_on

    try:
        with cluster.pool(args.workers, args.scheduler) as pool, _finished_bar(len(scripts), sys.stderr) as done:
            return run_scripts_on(pool, scripts, options, mode=mode, seed=seed, done=done)
    except cluster.WorkerLost as exc:
        return E2EReport(mode=mode, runtime=options.runtime, seed=seed, error=f"the Dask run was lost: {exc}")


def _paths_text(paths: dict) -> str:
    hit = [f"{p}@{','.join(map(str, seqs))}" for p, seqs in paths.items() if seqs]
    return " ".join(hit) or "no compaction"


def _short(value, width: int = 110) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= width else text[:width - 3] + "..."


def human(report: E2EReport) -> str:
    """One line per script, its differences, then totals and coverage."""
    lines = [f"e2e dsh ({report.mode}{f', seed {report.seed}' if report.seed is not None else ''}) "
             f"on deepseek-harness-sdk {report.runtime}"]
    for o in report.scripts:
        lines.append(f"  {o.name:<34} {o.verdict:<12} {o.seconds:6.1f} s  audit {o.audit.get('errors', 0)} errors "
                     f"{o.audit.get('warnings', 0)} warnings  {len(o.differences)} differences  {_paths_text(o.paths)}")
        if o.message:  # the first lines (a runtime failure's stderr tail is in --json)
            lines += [f"      {line}" for line in o.message.strip().splitlines()[:4]]
        for d in o.differences:
            lines.append(f"      seq {d.get('seq')}: {d.get('kind')}: {d.get('message', '')}")
            lines.append(f"        expected {_short(d.get('expected'))}; observed {_short(d.get('observed'))}")
        for f in o.audit.get("findings", []):
            if f.get("severity") == "error":
                lines.append(f"      audit {f['rule']} seq {f.get('seq')}: {f.get('message', '')}")
        for f in o.findings or ():
            lines.append(f"      {'finding ' + f['id'] if f['id'] else 'NEW finding'} ({f['class']}) {f['promise']} "
                         f"seq {f['seq']}: {f['message']}")
        if o.findings_note:
            lines.append(f"      {o.findings_note}")
        for w in o.wire or ():
            lines.append(f"      wire: {'finding ' + w['id'] if w['id'] else 'NEW finding'} ({w['class']}) {w['promise']} "
                         f"request {w['request']} turn {w['turn']}: {w['message']}")
        if o.wire_note:
            lines.append(f"      {o.wire_note}")
        if o.bundle:
            lines.append(f"      bundle: {o.bundle}  (surfacecheck replay {o.bundle})")
    t, c = report.totals(), report.coverage()
    lines.append(f"totals: {t['scripts']} scripts, {t['agreed']} agreed, {t['differed']} differed, "
                 f"{t['inconclusive']} inconclusive; {t['differences']} differences, {t['audit_errors']} audit errors, "
                 f"{t['audit_warnings']} warnings; {t['seconds']:.1f} s")
    lines.append("coverage (scripts per path): " + ", ".join(f"{p} {n}" for p, n in c["paths"].items())
                 + f"; {c['turns']} turns, {c['tool_calls']} tool calls, {c['overflows']} overflows, "
                 f"{c['manual_compacts']} /compact, {c['summaries_failed']} summaries failed"
                 + ("" if c["all_four_paths"] or not c["scripts_run"] or report.mode not in ("seeds", "generate") else
                    f"; NOT exercised: {', '.join(p for p in FOUR_PATHS if not c['paths'][p])}"))
    lines += findings_lines(report) + wire_lines(report)
    if report.shrunk:
        s = report.shrunk
        lines.append(f"shrunk {s['from']} in {s.get('runs')} runs: " + (
            f"{s.get('turns')} turns, {s.get('tool_calls')} tool calls, verdict {s.get('verdict')}, bundle {s.get('bundle')}"
            if s.get("script") else s.get("message", "")))
    if report.error:
        lines.append(f"inconclusive: {report.error}")
    lines.append(f"verdict: {report.verdict} (exit {report.exit_code})")
    return "\n".join(lines) + "\n"


def findings_lines(report: E2EReport) -> list[str]:
    """The promise findings of every scanned log: the known ids with their scripts, then each NEW one."""
    f = report.findings_summary()
    if not f["scanned"]:
        return []
    known = "; ".join(f"{i} (scripts {', '.join(names)})" for i, names in f["reproduced"].items())
    lines = [f"findings reproduced on the real dsh: {known or 'none'} ({f['scanned']} logs scanned; known "
             "findings are informational)"]
    for n in f["new"]:
        lines.append(f"NEW finding on the real dsh: {n['promise']} in {n['script']} at seq {n['seq']}: {n['message']} "
                     "(not in properties/findings.json: exit 1)")
    return lines


def wire_lines(report: E2EReport) -> list[str]:
    """The wire checks of every run: the known ids with their scripts, then each NEW one."""
    w = report.wire_summary()
    if not w["checked"]:
        return []
    known = "; ".join(f"{i} (scripts {', '.join(names)})" for i, names in w["reproduced"].items())
    lines = [f"on the wire (pairing by id, prompt verbatim; {w['checked']} runs' requests checked): "
             f"{known or 'both promises held'}"]
    for n in w["new"]:
        lines.append(f"NEW finding on the wire: {n['promise']} in {n['script']} at request {n['request']} "
                     f"(turn {n['turn']}): {n['message']} (not in properties/findings.json: exit 1)")
    return lines


def _emit(args, report: E2EReport) -> int:
    print(json.dumps(report.to_json()) if args.json else human(report), end="" if not args.json else "\n")
    return report.exit_code


def run_dsh_command(args) -> int:
    from surfacecheck.core.trace import TraceError

    from .script import ScriptError, from_json

    if args.generate is not None and args.generate < 1:
        return _usage(args, f"--generate must be at least 1 (got {args.generate})")
    command = "surfacecheck " + " ".join(sys.argv[1:]) if sys.argv[1:2] == ["e2e"] else "surfacecheck e2e dsh"
    network = {k: True for k, on in (("isolate_network", args.isolate_network), ("trace_connect", args.trace_connect)) if on}
    network["stall_timeout"] = args.stall
    from .release import NoInterpreter, release

    try:
        release(args.runtime_version).interpreter(args.python)
    except (KeyError, NoInterpreter) as exc:  # an unknown release, or one whose venv is not named
        return _usage(args, str(exc).strip("'\""))
    options = Options(runtime=args.runtime_version, keep=Path(args.keep) if args.keep else None, python=args.python,
                      network=network,
                      bundle_dir=Path(args.bundle_dir), timeout=args.timeout, err=sys.stderr, command=command,
                      findings=not args.no_findings)
    try:
        if args.generate is not None:
            from .generate import draw_scripts

            sys.stderr.write(f"surfacecheck e2e dsh: --generate {args.generate} --seed {args.seed}\n")
            generated = draw_scripts(args.generate, args.seed)
            scripts = [(from_json(obj, f"generated #{i}"), f"generated:{args.seed}:{i}") for i, obj in enumerate(generated)]
        else:
            scripts = load_scripts(args.script)
    except ScriptError as exc:
        return _usage(args, str(exc))
    except TraceError as exc:  # a trace given where a script was expected (resolve_script reads its notes)
        return _usage(args, str(exc))
    mode = "generate" if args.generate is not None else "script" if args.script else "seeds"
    try:
        report = _run(args, scripts, options, mode=mode, seed=args.seed if args.generate is not None else None)
    except cluster.ClusterUnavailable as exc:
        return _usage(args, str(exc))
    if report.error:
        sys.stderr.write(f"surfacecheck e2e dsh: {report.error}\n")
    if args.generate is not None and args.shrink_budget > 0 and not report.error:
        from .run import shrink_first_failure

        shrink_first_failure(report, generated, options, seed=args.seed, budget=args.shrink_budget,
                             load=lambda obj: from_json(obj, "shrunk"))
    return _emit(args, report)


def replay_bundle(target: str, *, json_out: bool = False, timeout: float = 180.0) -> int:
    """``surfacecheck replay BUNDLE``: re-run the bundle's script on the runtime version it names."""
    from .bundle import resolve_script
    from .script import ScriptError, load_script
    from surfacecheck.properties.trace_check import TraceError, read_valid_trace

    args = argparse.Namespace(json=json_out)
    try:
        path = resolve_script(target)
        trace_file = Path(target) / "trace.jsonl" if Path(target).is_dir() else Path(target)
        version = SPEC_VERSION
        if trace_file.suffix == ".jsonl" and trace_file.is_file():
            version = str(read_valid_trace(trace_file).notes.get("runtime_version") or SPEC_VERSION)
            version = SPEC_VERSION if version == "unknown" else version
        script = load_script(path)
    except (ScriptError, TraceError) as exc:
        return _usage(args, str(exc))
    options = Options(runtime=version, bundle_dir=Path(os.environ.get("SURFACECHECK_E2E_BUNDLES", "reports/out/e2e")),
                      timeout=timeout, command=f"surfacecheck replay {target}")
    report = run_scripts([(script, str(path))], options, mode="replay")
    if report.error:
        sys.stderr.write(f"surfacecheck replay: {report.error}\n")
    print(json.dumps({**report.to_json(), "command": "replay", "trace": str(target)}) if json_out else human(report),
          end="\n" if json_out else "")
    return report.exit_code
