"""What ``surfacecheck bench`` measures and how it is judged.

In-process (``model``, ``embedded``): every variant timed at every size (:mod:`benchmarks.harness`),
the cost model read off the same run, the projection's state size at two log lengths
(:mod:`benchmarks.memory`). Over the protocol (``cmd:...`` or a registered variant): one ``bench``
request; the runtime times its own appends in-process and answers nanoseconds per append per size.
The gate (``--check``) is :func:`benchmarks.harness.gate`: ratio <= 1.5 and <= 2x the bare pricing.
"""
from __future__ import annotations

import os
import platform
from typing import Any, Callable

from surfacecheck.bench.costmodel import cost_model_failures, growth
from surfacecheck.bench.harness import BATCH_EVENTS, MAX_FLOOR_FACTOR, MAX_RATIO, Point, Series, gate, run
from surfacecheck.bench.memory import state_bytes
from surfacecheck.bench.variants import EMBEDDED, FLOOR, MODEL, VARIANTS, lookup
from surfacecheck.core.protocol import ProtocolError, RuntimeUnavailable
from surfacecheck.runtime.select import open_runtime, runtime_problem

SCHEMA = "surfacecheck-bench/1"
PROTOCOL_TIMEOUT = 1800.0  # one bench request builds every size in the child


def machine() -> dict[str, Any]:
    """Where the figures were measured: CPU model, CPU count, Python, load average (other work on the box)."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            cpu = next((line.split(":", 1)[1].strip() for line in info if line.startswith("model name")), cpu)
    except OSError:
        pass
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    return {"cpu": cpu, "cpus": os.cpu_count(), "python": platform.python_version(),
            "platform": platform.platform(terse=True), "loadavg": [round(x, 2) for x in load] if load else None}


def in_process(runtime: str) -> bool:
    return runtime in ("model", "embedded")


def default_variants(runtime: str) -> tuple[str, ...]:
    return MODEL if runtime == "model" else EMBEDDED


def default_gated(runtime: str) -> str:
    return "model-projection" if runtime == "model" else "projection" if in_process(runtime) else "runtime"


def bench_in_process(variant_names: list[str], sizes: list[int], *, seed: int, batch_events: int = BATCH_EVENTS,
                     memory_events: list[int], progress: Callable[[str], None] | None = None
                     ) -> tuple[dict[str, Series], dict[str, dict[str, int]]]:
    """Time every variant at every size, then the state size of each O(1)-expected live variant."""
    variants = lookup(variant_names)
    series = run(variants, sizes, seed=seed, batch_events=batch_events, progress=progress)
    memory: dict[str, dict[str, int]] = {}
    for v in variants:
        if v.bulk or v.stateless or not memory_events:
            continue
        memory[v.name] = {str(n): state_bytes(v, n, seed=seed, progress=progress) for n in memory_events}
    return series, memory


def bench_protocol(runtime: str, sizes: list[int], appends: int | None,
                   timeout: float = PROTOCOL_TIMEOUT) -> dict[str, Series]:
    """One ``bench`` request to ``runtime``; RuntimeUnavailable / ProtocolError propagate (inconclusive)."""
    return series_from_result(bench_request(runtime, sizes, appends, timeout))


def bench_request(runtime: str, sizes: list[int], appends: int | None,
                  timeout: float = PROTOCOL_TIMEOUT) -> dict[str, Any]:
    """The raw ``bench`` result of ``runtime`` (its series are read by :func:`series_from_result`); the
    ``bench`` request may take ``timeout`` seconds, the handshake the ordinary timeout."""
    handle = open_runtime(runtime)  # the handshake gets the ordinary timeout: a hung child is killed fast
    if hasattr(handle, "timeout"):
        handle.timeout = timeout  # only the bench request itself may take long
    try:
        args: dict[str, Any] = {"sizes": sizes}
        if appends is not None:
            args["appends"] = appends
        return handle.call("bench", args)
    finally:
        handle.close()


EXPECTATIONS = ("constant", "linear")


def series_from_result(result: dict[str, Any]) -> dict[str, Series]:
    """A ``bench`` result as series: ``runtime`` (the gated subject, ``ns_per_append``), ``bare-pricing``
    when it reports a floor, and each further series the runtime names in ``series``
    (``{name: {"label", "expected", "ns_per_append", "ops_per_append"?}}``, e.g. dsh's meter fold beside
    its projection fold): shown in the same table and plot, and selectable with ``--gated NAME``."""
    if isinstance(result.get("error"), dict):
        raise RuntimeUnavailable("protocol", f"bench refused: {result['error'].get('message')}")
    timings = result.get("ns_per_append")
    if not isinstance(timings, dict) or not timings:
        raise RuntimeUnavailable("protocol", "bench result has no ns_per_append figures")
    ops = result.get("ops_per_append") or {}
    out = {"runtime": _series("runtime", f"runtime ({result.get('variant', 'its projection')})", timings, ops)}
    floor = result.get("floor_ns_per_append")
    if isinstance(floor, dict) and floor:
        out[FLOOR] = _series(FLOOR, VARIANTS[FLOOR].label, floor, {})
    extra = result.get("series") or {}
    if not isinstance(extra, dict):
        raise RuntimeUnavailable("protocol", "bench result's series is not an object")
    for name, spec in extra.items():
        if name in out or not isinstance(spec, dict):
            raise RuntimeUnavailable("protocol", f"bench result's series {name!r} is a duplicate or not an object")
        figures = spec.get("ns_per_append")
        if not isinstance(figures, dict) or not figures:
            continue  # a series the runtime could not measure here
        expected = spec.get("expected") if spec.get("expected") in EXPECTATIONS else "constant"
        out[name] = _series(name, str(spec.get("label") or name), figures, spec.get("ops_per_append") or {}, expected)
    return out


def _series(name: str, label: str, timings: dict, ops: dict, expected: str = "constant") -> Series:
    try:
        points = sorted((Point(int(size), 0, float(ns), float(ops[size]) if size in ops else None)
                         for size, ns in timings.items()), key=lambda p: p.size)
    except (TypeError, ValueError) as exc:
        raise RuntimeUnavailable("protocol", f"bench result is malformed: {exc}") from None
    if any(not p.median_ns > 0 for p in points):
        raise RuntimeUnavailable("protocol", "bench result has a non-positive time per append")
    return Series(name, label, expected, points)


def judge(series: dict[str, Series], gated: str, check: bool) -> dict[str, Any]:
    """The gate's and the cost model's findings (the gate only decides the exit status with ``check``).

    ``beside``: every other series' ratio and expectation, for the record (e.g. dsh's meter fold growing
    next to its flat projection fold); ``beside_flat`` names the linear-expected ones that did not rise
    above the gate's ratio (information: the sizes may be too close to tell O(1) from O(surface))."""
    failures = gate(series, gated) if gated in series else [f"no variant {gated!r} was measured"]
    costed = {name: s for name, s in series.items() if all(p.ops is not None for p in s.points) and s.points}
    beside = {name: {"label": s.label, "expected": s.expected, "ratio": _finite_ratio(s)}
              for name, s in series.items() if name not in (gated, FLOOR) and s.points}
    return {
        "checked": check, "gated": gated, "floor": FLOOR if FLOOR in series else None,
        "max_ratio": MAX_RATIO, "max_floor_factor": MAX_FLOOR_FACTOR,
        "held": not failures, "failures": failures,
        "cost_model": {name: growth(s) for name, s in costed.items()},
        "cost_model_failures": cost_model_failures(costed) if gated != "runtime" and gated in VARIANTS else [],
        "beside": beside,
        "beside_flat": [name for name, b in beside.items()
                        if b["expected"] == "linear" and b["ratio"] is not None and b["ratio"] <= MAX_RATIO],
    }


def _finite_ratio(s: Series) -> float | None:
    ratio = s.ratio
    return None if ratio != ratio else round(ratio, 3)


def protocol_series_problem(series: dict[str, Series], gated: str) -> str | None:
    """``--gated NAME`` over the protocol must name a series the runtime reported (a usage error otherwise)."""
    if gated in series:
        return None
    return f"--gated {gated!r}: the runtime reported no such series; it reported {', '.join(series)}"


def build_report(runtime: str, seed: int, sizes: list[int], series: dict[str, Series], memory: dict,
                 verdict: dict[str, Any], host: dict[str, Any], runtime_info: dict[str, Any] | None = None
                 ) -> dict[str, Any]:
    status = "violated" if verdict["checked"] and not verdict["held"] else "held" if verdict["checked"] else "measured"
    return {
        "schema": SCHEMA, "runtime": runtime, "seed": seed, "sizes": sizes, "machine": host,
        "verdict": status, "exit_code": 1 if status == "violated" else 0,
        "variants": {name: s.to_json() for name, s in series.items()},
        "memory_bytes": memory, "gate": verdict,
        **({"runtime_info": runtime_info} if runtime_info else {}),
    }


RUNTIME_INFO_KEYS = ("variant", "unavailable", "raw_folds_via", "checks", "setup_ms", "seconds", "node")


def runtime_info(result: dict[str, Any]) -> dict[str, Any]:
    """What a runtime says about its own bench run besides the figures (kept in the report as-is)."""
    return {key: result[key] for key in RUNTIME_INFO_KEYS if key in result}


def validate_variants(names: list[str]) -> str | None:
    unknown = [n for n in names if n not in VARIANTS]
    if unknown:
        return f"unknown variant {unknown[0]!r}; known: {', '.join(VARIANTS)}"
    return None


__all__ = ["ProtocolError", "RuntimeUnavailable", "runtime_problem", "bench_in_process", "bench_protocol",
           "bench_request", "series_from_result", "protocol_series_problem", "runtime_info",
           "build_report", "judge",
           "machine", "default_gated", "default_variants", "in_process", "validate_variants"]
