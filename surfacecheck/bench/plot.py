"""The slope, drawn: per-append cost against surface size, log-log, one line per variant.

Left panel: the median time per append; right panel: the cost model's elementary operations per
append (nodes touched + list elements copied). An O(1) variant is a flat line in both; a recount or
a copy-on-append fold rises with slope 1.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after choosing the Agg backend)

_MARKERS = "osD^vP*X"


def write_plot(variants: dict[str, dict[str, Any]], path: Path, title: str) -> Path:
    """Write a PNG of ``variants`` (``{name: {"label", "points": [{"size", "median_ns", "ops"}]}}``)."""
    fig = figure(variants, title)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _measured(value: Any) -> bool:
    return isinstance(value, (int, float)) and value == value and value > 0  # not None, NaN or zero


def figure(variants: dict[str, dict[str, Any]], title: str):
    """The two log-log panels (time, operations), one line per variant; the time panel alone, its legend beside
    it, when no series reports operation counts (runtimes timed in their own process)."""
    counted = any(p.get("ops") is not None for s in variants.values() for p in s["points"])
    if counted:
        fig, (times, ops) = plt.subplots(1, 2, figsize=(13, 5.5))
    else:
        fig, times = plt.subplots(1, 1, figsize=(12, 5.5))
        ops = None
    for index, (name, series) in enumerate(variants.items()):
        points = [p for p in series["points"] if _measured(p.get("median_ns"))]
        if not points:
            continue
        sizes = [p["size"] for p in points]
        label = series.get("label", name)
        marker = _MARKERS[index % len(_MARKERS)]
        times.plot(sizes, [p["median_ns"] / 1000 for p in points], marker=marker, label=label)
        if ops is not None and all(p.get("ops") is not None for p in points):
            ops.plot(sizes, [max(p["ops"], 0.5) for p in points], marker=marker, label=label)
    panels = [(times, "median time per append (µs)", "time per append")]
    if ops is not None:
        panels.append((ops, "elementary operations per append", "cost model (nodes touched + elements copied)"))
    for axis, ylabel, heading in panels:
        axis.set_xscale("log")
        axis.set_yscale("log")
        axis.set_xlabel("surface size (nodes)")
        axis.set_ylabel(ylabel)
        axis.set_title(heading)
        axis.grid(True, which="both", alpha=0.3)
        if axis.get_lines():
            if ops is None:
                axis.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
            else:
                axis.legend(fontsize=8)
        elif axis is ops:
            axis.text(0.5, 0.5, "no operation counts reported", transform=axis.transAxes, ha="center", va="center")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig
