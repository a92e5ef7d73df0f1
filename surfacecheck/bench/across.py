"""The cost per appended message across runtimes, side by side in one run (``surfacecheck bench --across``).

What each runtime pays, after one message is appended, to decide whether to compact:

- dsh's own code (its ``bench`` request through the Node adapter): the O(1) shadow-price projection
  (``foldSurfaceProjection``) and the token meter's ``measure`` (an O(surface) fold), ``docs/bench.md``;
- the embedded runtime's projection, in process;
- each framework adapter's ``bench`` request (``docs/conversation-protocol.md`` § bench): its own trigger check as
  it runs before every model call (LangChain's token count and ``_should_summarize``, Strands' management and
  input-token estimate, ...);
- two suite-side baselines on the same sizes: an incremental running total (constant) and a full neutral recount
  (linear), the variant that loses.

Each series' growth is the least-squares slope of log(time) against log(size) (about 0 constant, about 1 linear).
The baselines must come out constant and linear or the run is inconclusive (the machine was too busy to tell).
A runtime that is missing or hangs is a row with its reason, never a figure.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from surfacecheck.contract.bench_stage import baselines, exponent, growth
from surfacecheck.core.protocol import ProtocolError, RuntimeUnavailable
from surfacecheck.runtime import registry

from .measure import bench_in_process, bench_request, machine, series_from_result

SIZES = (10**2, 10**3, 10**4)
REPEATS = 200
EVENT_LOG = ("dsh", "embedded")


@dataclass(frozen=True)
class Row:
    """One series: who pays, what is timed, seconds per append by size, or why it could not be measured."""

    runtime: str
    what: str
    points: tuple[tuple[int, float], ...] = ()
    unavailable: str | None = None
    kind: str = "runtime"  # "runtime" | "baseline"

    @property
    def slope(self) -> float | None:
        return round(exponent(list(self.points)), 2) if len(self.points) >= 2 else None

    @property
    def growth(self) -> str | None:
        return growth(list(self.points)) if len(self.points) >= 2 else None

    def to_json(self) -> dict:
        return {"runtime": self.runtime, "what": self.what, "kind": self.kind,
                "seconds_per_append": {str(n): s for n, s in self.points}, "slope": self.slope,
                "growth": self.growth, "unavailable": self.unavailable}


@dataclass
class Across:
    sizes: tuple[int, ...]
    rows: list[Row] = field(default_factory=list)
    machine: dict = field(default_factory=dict)

    @property
    def sane(self) -> bool:
        found = {r.runtime: r.growth for r in self.rows if r.kind == "baseline"}
        return found.get("incremental baseline") == "constant" and found.get("recount baseline") == "linear"

    @property
    def exit_code(self) -> int:
        return 0 if self.sane else 3

    def to_json(self) -> dict:
        return {"sizes": list(self.sizes), "machine": self.machine, "sane_baselines": self.sane,
                "exit_code": self.exit_code, "rows": [r.to_json() for r in self.rows]}


def _seconds(series) -> tuple[tuple[int, float], ...]:
    return tuple((p.size, p.median_ns / 1e9) for p in series.points)


def dsh_rows(sizes: tuple[int, ...]) -> list[Row]:
    """dsh's projection and its meter, from one ``bench`` request to dsh's own code."""
    try:
        series = series_from_result(bench_request("dsh", list(sizes), None))
    except (RuntimeUnavailable, ProtocolError, ValueError) as exc:
        return [Row("dsh", "shadow-price projection", unavailable=str(exc))]
    names = {"runtime": "shadow-price projection (foldSurfaceProjection)", "meter-measure": "token meter measure()"}
    return [Row("dsh", label, _seconds(series[name])) for name, label in names.items() if name in series]


def embedded_rows(sizes: tuple[int, ...]) -> list[Row]:
    series, _ = bench_in_process(["projection"], list(sizes), seed=0, memory_events=[])
    return [Row("embedded", "shadow-price projection (ShadowPriceProjection)", _seconds(series["projection"]))]


def conversation_row(spec: str, sizes: tuple[int, ...], repeats: int, timeout: float) -> Row:
    """The framework's own trigger check, timed inside its adapter (the ``bench`` request)."""
    try:
        runtime = registry.open_spec(spec, timeout)
    except (RuntimeUnavailable, ValueError) as exc:
        return Row(spec, "trigger check", unavailable=str(exc))
    try:
        answer = runtime.call("bench", {"sizes": list(sizes), "repeats": repeats})
        points = tuple((int(p["messages"]), float(p["seconds_per_append"])) for p in answer["points"])
        return Row(spec, str(answer.get("what") or "trigger check before each model call"), points)
    except (ProtocolError, RuntimeUnavailable, KeyError, TypeError, ValueError) as exc:
        return Row(spec, "trigger check", unavailable=f"{type(exc).__name__}: {exc}")
    finally:
        runtime.close()


def runtimes() -> list[str]:
    """Every runtime with a cost to show: dsh and the embedded runtime, then each framework adapter."""
    return list(EVENT_LOG) + [r for r in registry.conversation_runtimes() if r != "reference"]


def measure_across(specs: list[str], *, sizes: tuple[int, ...] = SIZES, repeats: int = REPEATS,
                   timeout: float = 600.0, say: Callable[[str], None] = lambda line: None) -> Across:
    """Every series, one runtime after another, then the two baselines (see the module docstring)."""
    out = Across(tuple(sizes), machine=machine())
    for spec in specs:
        say(f"bench --across: {spec} ...")
        if spec == "dsh":
            out.rows.extend(dsh_rows(sizes))
        elif spec == "embedded":
            out.rows.extend(embedded_rows(sizes))
        else:
            out.rows.append(conversation_row(spec, sizes, repeats, timeout))
    say("bench --across: baselines ...")
    base = baselines(sizes, repeats)
    out.rows.append(Row("incremental baseline", "a running total (constant)", tuple(base["incremental"]), kind="baseline"))
    out.rows.append(Row("recount baseline", "a full neutral recount (linear)", tuple(base["recount"]), kind="baseline"))
    return out


def markdown(result: Across) -> str:
    """The table for ``docs/bench.md``: one row per series, µs per append at each size, slope and growth."""
    head = "| runtime | what is timed | " + " | ".join(f"{n:,} msgs" for n in result.sizes) + " | slope | growth |"
    lines = [head, "|" + "---|" * (len(result.sizes) + 4)]
    for r in result.rows:
        if r.unavailable:
            lines.append(f"| {r.runtime} | {r.what} | " + " | ".join("–" for _ in result.sizes)
                         + f" | | unavailable: {r.unavailable[:120]} |")
            continue
        figures = dict(r.points)
        cells = [_us(figures.get(n)) for n in result.sizes]
        lines.append(f"| {r.runtime} | {r.what} | " + " | ".join(cells) + f" | {r.slope} | {r.growth} |")
    m = result.machine
    lines.append("")
    lines.append(f"Machine: {m.get('cpu')}, {m.get('cpus')} CPUs, Python {m.get('python')}, "
                 f"load average {m.get('loadavg')}.")
    return "\n".join(lines) + "\n"


def _us(seconds: float | None) -> str:
    if seconds is None:
        return "–"
    us = seconds * 1e6
    return f"{us:,.3f} µs" if us < 1 else f"{us:,.1f} µs" if us < 1000 else f"{us / 1000:,.2f} ms"


def plot_series(result: Across) -> dict:
    """The rows in :func:`surfacecheck.bench.plot.write_plot`'s shape (ns per append)."""
    return {f"{r.runtime}: {r.what}": {"label": f"{r.runtime}: {r.what}",
                                        "points": [{"size": n, "median_ns": s * 1e9, "ops": None} for n, s in r.points]}
            for r in result.rows if not r.unavailable}
