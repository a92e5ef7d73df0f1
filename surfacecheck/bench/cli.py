"""``surfacecheck bench``: per-append cost of pressure updates at growing surface sizes, and the O(1) gate.

Prints, per variant, the median time per append at each surface size and the ratio largest/smallest,
the cost model (operations per append) and the projection's state size; writes ``bench.json`` and a
log-log plot ``bench.png`` into the report directory. ``--check`` exits 1 when the gated variant's
ratio exceeds 1.5 or it costs more than 2x the bare pricing at the largest size.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from surfacecheck.bench.harness import BATCH_EVENTS, DEFAULT_SIZES, EVENTS_PER_APPEND, MAX_FLOOR_FACTOR, MAX_RATIO, batch_for
from surfacecheck.bench.variants import VARIANTS
from surfacecheck.options import DEFAULT_RUNTIME, add_common, command_parser

from . import measure

EXAMPLES = (
    "surfacecheck bench --check",
    "surfacecheck bench --sizes 1e2 1e3 1e4 --memory-events none",
    "surfacecheck bench --runtime dsh --gated meter-measure",
)
EXIT_OK, EXIT_VIOLATION, EXIT_USAGE, EXIT_INCONCLUSIVE = 0, 1, 2, 3
REPORT_FILE, PLOT_FILE = "bench.json", "bench.png"
DEFAULT_MEMORY_EVENTS = (10**3, 10**6)

DESCRIPTION = f"""\
Measure what one appended event costs the pressure projection as the surface grows, and confirm it
is O(1) (seed §16; spec 5.1). A deterministic dsh-shaped log (messages, tool calls and results,
periodic prune and summary replacements with their shadow prices) is folded up to each surface
size (setup, untimed); then each append of a batch is timed alone and the median reported.

Variants (runtime embedded): (a) projection — the embedded O(1) shadow-price projection;
(b) incremental — the embedded incremental meter; (c) copy-on-append — an immutable per-node fold;
(d) recount — re-price the whole surface; (e) bare-pricing — estimateMessage of one message.
Runtime model: the reference model's claim fold against (c)-(e). A cmd:COMMAND runtime (or dsh, or a
registered BASE:VARIANT) gets one `bench` protocol request and times its own appends in-process; it
may report further series beside its projection (dsh: the contextPressure unit, the meter's
foldSurfaceTokens and TokenMeter.measure()), shown alongside and selectable with --gated NAME.

The cost model (elementary operations per append) comes from the same run and is exact.
--check: exit 1 when the gated variant's largest/smallest median exceeds {MAX_RATIO} or its median
at the largest size exceeds {MAX_FLOOR_FACTOR}x the bare pricing's. Timings depend on the machine and
its load; the report records the CPU and load average."""

EPILOG = """\
exit codes:
  0  measured (with --check: the gate held)
  1  --check: the gate failed
  2  bad usage (sizes, variants, report directory, runtime spelling)
  3  inconclusive: the runtime could not answer the bench request"""


def _size(text: str) -> int:
    try:
        value = int(float(text)) if "e" in text.lower() else int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a surface size (an integer such as 1000 or 1e6)") from None
    if not 1 <= value <= 10**7:
        raise argparse.ArgumentTypeError(f"surface size {value} is outside 1..10000000")
    return value


ACROSS_FILE, ACROSS_PLOT = "bench-across.json", "bench-across.png"


def register(commands) -> None:
    """Add ``bench`` to the ``surfacecheck`` parser."""
    p = command_parser(commands, "bench", help="measure the per-append cost of pressure updates and confirm it is O(1)",
                       description=DESCRIPTION, epilog=EPILOG, examples=EXAMPLES)
    add_common(p, runtime=DEFAULT_RUNTIME, timeout=measure.PROTOCOL_TIMEOUT, timeout_note="here its one bench request (cmd: and dsh runtimes)",
               report_dir=str(Path("reports") / "out"), reports=f"{REPORT_FILE}, {PLOT_FILE}")
    p.add_argument("--check", action="store_true", help=f"gate: exit 1 unless ratio <= {MAX_RATIO} and cost <= "
                                                          f"{MAX_FLOOR_FACTOR}x bare pricing at the largest size")
    p.add_argument("--sizes", nargs="+", type=_size, default=list(DEFAULT_SIZES), metavar="N",
                   help="surface sizes (default: 1e2 1e3 1e4 1e5 1e6)")
    p.add_argument("--variants", nargs="+", metavar="NAME", default=None,
                   help=f"in-process variants to time (default: all for the runtime); known: {', '.join(VARIANTS)}")
    p.add_argument("--gated", metavar="NAME", default=None,
                   help="the variant --check judges (default: the runtime's projection); e.g. --gated "
                        "copy-on-append shows the gate failing. Over the protocol: a series the runtime "
                        "reports, e.g. --runtime dsh --gated meter-measure (dsh's O(surface) meter fold)")
    p.add_argument("--memory-events", nargs="*", type=_memory_size, default=list(DEFAULT_MEMORY_EVENTS), metavar="N",
                   help="log lengths at which to measure each live variant's state size with tracemalloc "
                        "(default: 1e3 1e6; 'none', or no N, to skip)")
    p.add_argument("--appends", type=int, default=None, metavar="N",
                   help=f"appends timed per size (default: ~{round(BATCH_EVENTS / EVENTS_PER_APPEND)}; "
                        "linear variants fewer)")
    p.add_argument("--seed", type=int, default=0, help="workload seed (default: %(default)s)")
    p.add_argument("--across", nargs="?", const="all", default=None, metavar="R,R...",
                   help="instead: the cost per appended message across runtimes, side by side in one run: dsh's "
                        "projection and meter, the embedded projection, each framework's own trigger check, and a "
                        "constant and a linear baseline (default runtimes: all; sizes 1e2 1e3 1e4 unless --sizes); "
                        f"writes {ACROSS_FILE}, {ACROSS_PLOT} and prints the Markdown table")
    p.set_defaults(func=run_bench)


def _memory_size(text: str) -> int | None:
    """A ``--memory-events`` length, or ``None`` for the word ``none`` (measure no state size)."""
    return None if text.strip().lower() == "none" else _size(text)


def _fail(args, message: str, code: int) -> int:
    if args.json:
        print(json.dumps({"verdict": "error" if code == EXIT_USAGE else "inconclusive", "exit_code": code,
                          "error": message}))
    sys.stderr.write(f"surfacecheck bench: {'error' if code == EXIT_USAGE else 'inconclusive'}: {message}\n")
    return code


def _usage_problem(args) -> str | None:
    problem = measure.runtime_problem(args.runtime)
    if problem:
        return problem
    if None in args.memory_events:
        if len(args.memory_events) > 1:
            return "--memory-events takes lengths or the word none, not both"
        args.memory_events = []
    if len(set(args.sizes)) < 2:
        return "give at least two different --sizes (the ratio compares the largest with the smallest)"
    if args.appends is not None and args.appends < 1:
        return "--appends must be a positive integer"
    names = args.variants if args.variants is not None else []
    if args.gated:
        names = names + [args.gated]
    if measure.in_process(args.runtime):
        return measure.validate_variants(names)
    if args.variants or (args.gated and args.gated in VARIANTS):
        return ("--variants and the in-process variants' names for --gated apply to in-process runtimes (model, "
                "embedded) only; over the protocol --gated names a series the runtime reports (runtime, or e.g. "
                "meter-measure for dsh)")
    return None


def run_across(args) -> int:
    """``bench --across``: one table and plot of every runtime's cost per append (:mod:`.across`)."""
    from . import across
    from .plot import write_plot

    specs = across.runtimes() if args.across == "all" else [r.strip() for r in args.across.split(",") if r.strip()]
    for spec in specs:
        problem = measure.runtime_problem(spec)
        if problem:
            return _fail(args, problem, EXIT_USAGE)
    sizes = tuple(sorted(set(args.sizes))) if list(args.sizes) != list(DEFAULT_SIZES) else across.SIZES
    report_dir = Path(args.report_dir)
    report_dir.mkdir(parents=True, exist_ok=True)
    result = across.measure_across(specs, sizes=sizes, timeout=args.timeout,
                                   say=lambda line: (sys.stderr.write(line + "\n"), sys.stderr.flush()))
    document = result.to_json()
    plot = write_plot(across.plot_series(result), report_dir / ACROSS_PLOT,
                      f"cost per appended message across runtimes — {result.machine.get('cpu')}, "
                      f"{result.machine.get('cpus')} CPUs")
    document.update(plot=str(plot), report=str(report_dir / ACROSS_FILE), markdown=across.markdown(result))
    (report_dir / ACROSS_FILE).write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    if args.json:
        print(json.dumps(document))
    else:
        sys.stdout.write(document["markdown"])
        if not result.sane:
            sys.stdout.write("inconclusive: the baselines did not come out constant and linear (a busy machine?)\n")
    return result.exit_code


def run_bench(args) -> int:
    if args.across is not None:
        return run_across(args)
    problem = _usage_problem(args)
    if problem:
        return _fail(args, problem, EXIT_USAGE)
    report_dir = Path(args.report_dir)
    try:
        report_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return _fail(args, f"{report_dir}: cannot create the report directory: {exc.strerror}", EXIT_USAGE)
    sizes = sorted(set(args.sizes))
    gated = args.gated or measure.default_gated(args.runtime)
    host = measure.machine()
    err = sys.stderr
    err.write(f"surfacecheck bench: runtime {args.runtime}, seed {args.seed}, sizes {' '.join(map(str, sizes))}; "
              f"{host['cpu']}, {host['cpus']} CPUs, load {host['loadavg']}\n")
    if measure.in_process(args.runtime):
        names = list(args.variants or measure.default_variants(args.runtime))
        if gated not in names:
            names.append(gated)
        batch = batch_for(args.appends)
        from tqdm import tqdm
        live = [n for n in names if not VARIANTS[n].bulk and not VARIANTS[n].stateless]
        with tqdm(total=2 * len(sizes) + len(args.memory_events) * len(live), desc="bench", file=err, leave=False,
                  disable=None) as bar:  # a bar on a terminal only: no carriage-return fragments in CI logs
            def progress(message: str) -> None:
                bar.set_postfix_str(message)
                bar.update(1)
            series, memory = measure.bench_in_process(names, sizes, seed=args.seed, batch_events=batch,
                                                      memory_events=args.memory_events, progress=progress)
    else:
        err.write("surfacecheck bench: sending the bench request; the runtime times its own appends ...\n")
        try:
            result = measure.bench_request(args.runtime, sizes, args.appends, args.timeout)
            series, memory, info = measure.series_from_result(result), {}, measure.runtime_info(result)
        except (measure.RuntimeUnavailable, measure.ProtocolError) as exc:
            return _fail(args, f"runtime {args.runtime} could not bench: {exc}", EXIT_INCONCLUSIVE)
        except ValueError as exc:  # an unknown BASE:VARIANT spelling
            return _fail(args, str(exc), EXIT_USAGE)
        problem = measure.protocol_series_problem(series, gated)
        if problem:
            return _fail(args, problem, EXIT_USAGE)
    verdict = measure.judge(series, gated, args.check)
    host["loadavg_after"] = measure.machine()["loadavg"]
    report = measure.build_report(args.runtime, args.seed, sizes, series, memory, verdict, host,
                                  None if measure.in_process(args.runtime) else info)
    from .plot import write_plot  # matplotlib: ~0.5 s to import, paid only by a run that draws

    plot_path = write_plot(report["variants"], report_dir / PLOT_FILE,
                           f"per-append cost, runtime {args.runtime} — {host['cpu']}, {host['cpus']} CPUs "
                           f"(load {host['loadavg']})")
    report["plot"], report["report"] = str(plot_path), str(report_dir / REPORT_FILE)
    (report_dir / REPORT_FILE).write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    if args.json:
        print(json.dumps(report))
    else:
        sys.stdout.write(format_human(report))
    return report["exit_code"]


def _ns(value: float | None) -> str:
    if value is None:
        return "-"
    if value < 10**3:
        return f"{value:.0f} ns"
    if value < 10**6:
        return f"{value / 1000:.1f} µs"
    return f"{value / 10**6:.1f} ms" if value < 10**9 else f"{value / 10**9:.2f} s"


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}" if value < 1000 else f"{value:.0f}"


def _bytes(value: int) -> str:
    return f"{value} B" if value < 10**4 else f"{value / 1024:.0f} KiB" if value < 10**7 else f"{value / 2**20:.0f} MiB"


def format_human(report: dict) -> str:
    """The table (median per append at each size, ratio, ops per append), memory, gate and files."""
    sizes = report["sizes"]
    lines = [f"runtime {report['runtime']}  seed {report['seed']}  machine {report['machine']['cpu']}, "
             f"{report['machine']['cpus']} CPUs, load {report['machine']['loadavg']}", ""]
    head = f"{'variant':<42}" + "".join(f"{size:>11}" for size in sizes) + f"{'ratio':>9}   ops/append"
    lines += [head, "-" * len(head)]
    for name, series in report["variants"].items():
        by_size = {p["size"]: p for p in series["points"]}
        ops = [p["ops"] for p in series["points"] if p.get("ops") is not None]
        ops_text = f"{ops[0]:g} -> {ops[-1]:g}" if ops else "-"
        ratio = series["ratio"]
        lines.append(f"{series['label'][:41]:<42}" + "".join(f"{_ns(by_size.get(s, {}).get('median_ns')):>11}"
                                                              for s in sizes)
                     + f"{_ratio(ratio):>9}   {ops_text}")
    for name, by_events in report["memory_bytes"].items():
        shown = ", ".join(f"{_bytes(b)} after {int(n):,} events" for n, b in by_events.items())
        lines.append(f"memory: {name} state {shown}")
    gate = report["gate"]
    lines.append("")
    for name, found in gate["cost_model"].items():
        lines.append(f"cost model: {name}: {found} operations per append")
    for failure in gate["cost_model_failures"]:
        lines.append(f"cost model: UNEXPECTED {failure}")
    if gate["held"]:
        lines.append(f"gate: {gate['gated']} ratio <= {gate['max_ratio']} and <= {gate['max_floor_factor']}x bare "
                     f"pricing: held" + ("" if gate["checked"] else " (informational; --check enforces it)"))
    for failure in gate["failures"]:
        lines.append(f"gate: FAILED {failure}" + ("" if gate["checked"] else " (informational; --check enforces it)"))
    for name, other in gate.get("beside", {}).items():
        lines.append(f"beside the gate: {name} ratio {_ratio(other['ratio'])} "
                     f"(expected {other['expected']})"
                     + (": did not rise; the sizes may be too close to tell" if name in gate.get("beside_flat", ())
                        else ""))
    lines += [f"plot: {report['plot']}", f"report: {report['report']}", f"verdict: {report['verdict']}"]
    return "\n".join(lines) + "\n"
