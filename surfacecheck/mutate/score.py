"""Honest scoring of a mutation run, one format for both runtimes.

The input is a mutation-testing-report-schema document (Stryker's ``mutation.json``; mutmut's results are put in
the same shape) plus where each mutated line belongs (its source file and spec sections). Only a kill counts:

    score = killed / (killed + survived + no coverage + timed out + crashed)

and beside it ``score_argued_apart``, the same with the survivors a person argued equivalent or unreachable in a
shipped composition (``equivalent.json``) taken out of the denominator: what the gate kills of what can be killed.
A mutant the gate never reached (NoCoverage) is a survivor the run did not need to execute; a timeout or a crash of
the gate (Timeout, RuntimeError) is reported apart and counted as not killed — Stryker's own score counts
timeouts as detected, and is shown beside ours for comparison. Survivors are listed with their diff; one a person
judged equivalent (``equivalent.json``) carries the reason, and still counts as a survivor in ``score``.
"""
from __future__ import annotations

import json
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

KILLED, SURVIVED, NO_COVERAGE, TIMEOUT, CRASHED = "Killed", "Survived", "NoCoverage", "Timeout", "RuntimeError"
NOT_RUN = ("CompileError", "Ignored", "Pending")
COUNTED = (KILLED, SURVIVED, NO_COVERAGE, TIMEOUT, CRASHED)
LABEL = {KILLED: "killed", SURVIVED: "survived", NO_COVERAGE: "no_coverage", TIMEOUT: "timed_out",
         CRASHED: "crashed"}


@dataclass(frozen=True)
class Place:
    """Where a mutated line belongs: a source file (``package/file`` for dsh, the module for embedded) and the
    spec sections its rules come from."""

    file: str
    sections: tuple[str, ...]


def _line(source: str, number: int) -> str:
    lines = source.split("\n")
    return lines[number - 1] if 0 < number <= len(lines) else ""


def mutated_line(source: str, mutant: dict) -> tuple[str, str]:
    """The first line of the mutated span before and after the replacement (a one-line diff)."""
    start, end = mutant["location"]["start"], mutant["location"]["end"]
    lines = source.split("\n")
    first, last = start["line"], end["line"]
    before = "\n".join(lines[first - 1:last])
    offset_start = start["column"] - 1
    offset_end = len(before) - (len(lines[last - 1]) - (end["column"] - 1))
    after = before[:offset_start] + mutant.get("replacement", "") + before[offset_end:]
    return before.strip(), after.strip()


def signature(place: Place, mutant: dict, before: str) -> str:
    """What identifies a mutant across runs and versions: file, mutator, the original and the replacement."""
    return f"{place.file}|{mutant.get('mutatorName')}|{before}|{mutant.get('replacement', '')}"


def score(report: dict, locate: Callable[[str, int], Place | None], *, times: dict[str, float] | None = None,
          equivalent: dict[str, str] | None = None) -> dict:
    """The figures of one run: totals, score, per file, per spec section, time per mutant, survivors with diffs."""
    totals = {LABEL[s]: 0 for s in COUNTED} | {"not_run": 0}
    per_file: dict[str, dict] = {}
    per_section: dict[str, dict] = {}
    survivors, killers = [], {}
    equivalent = equivalent or {}
    for name, entry in sorted(report.get("files", {}).items()):
        source = entry.get("source", "")
        for mutant in entry.get("mutants", []):
            status = mutant.get("status")
            line = mutant["location"]["start"]["line"]
            place = locate(name, line)
            if place is None:
                continue
            if status not in COUNTED:
                totals["not_run"] += 1
                continue
            label = LABEL[status]
            totals[label] += 1
            for bucket in [per_file.setdefault(place.file, {"sections": ", ".join(place.sections)})] + [
                    per_section.setdefault(s, {}) for s in place.sections]:
                bucket[label] = bucket.get(label, 0) + 1
            if status == KILLED:
                for unit in mutant.get("killedBy") or []:
                    killers[unit.split(":", 1)[0]] = killers.get(unit.split(":", 1)[0], 0) + 1
            if status in (SURVIVED, NO_COVERAGE):
                if "diff" in mutant:  # a tool that reports its own diff (mutmut)
                    diff, sig = mutant["diff"], f"{place.file}|{mutant['id']}"
                else:
                    before, after = mutated_line(source, mutant)
                    diff, sig = f"- {before}\n+ {after}", signature(place, mutant, before)
                survivors.append({"id": mutant["id"], "file": place.file, "line": line, "sections": list(place.sections),
                                  "status": label, "mutator": mutant.get("mutatorName"), "diff": diff,
                                  "covered_by": len(mutant.get("coveredBy") or []), "signature": sig,
                                  **({"equivalent": equivalent[sig]} if sig in equivalent else {})})
                if sig in equivalent:
                    for bucket in [per_file[place.file]] + [per_section[s] for s in place.sections]:
                        bucket["argued"] = bucket.get("argued", 0) + 1
    for bucket in list(per_file.values()) + list(per_section.values()):
        bucket["score"] = percent(bucket)
        bucket["score_argued_apart"] = percent(bucket, argued_apart=True)
    durations = sorted((times or {}).values())
    return {
        "mutants": sum(totals[LABEL[s]] for s in COUNTED) + totals["not_run"],
        **totals,
        "score": percent(totals),
        "score_argued_apart": percent({**totals, "argued": sum(1 for s in survivors if "equivalent" in s)},
                                      argued_apart=True),
        "stryker_score": _stryker_score(totals),
        "killed_by_unit_kind": dict(sorted(killers.items())),
        "per_file": dict(sorted(per_file.items())),
        "per_section": dict(sorted(per_section.items(), key=lambda kv: _section_key(kv[0]))),
        "time_per_mutant": {"runs": len(durations),
                            "median_s": round(statistics.median(durations), 3) if durations else None,
                            "p90_s": round(durations[int(0.9 * (len(durations) - 1))], 3) if durations else None},
        "survivors": survivors,
        "judged_equivalent": sum(1 for s in survivors if "equivalent" in s),
    }


def percent(counts: dict, argued_apart: bool = False) -> float | None:
    """Killed over every mutant that counts (killed, survived, no coverage, timed out, crashed), in percent;
    ``argued_apart``: without the survivors argued equivalent or unreachable."""
    denominator = sum(counts.get(LABEL[s], 0) for s in COUNTED) - (counts.get("argued", 0) if argued_apart else 0)
    return round(100.0 * counts.get("killed", 0) / denominator, 1) if denominator else None


def _stryker_score(totals: dict) -> float | None:
    """Stryker's mutation score, for comparison: (killed + timeout) / (all but runtime and compile errors)."""
    valid = sum(totals[LABEL[s]] for s in (KILLED, SURVIVED, NO_COVERAGE, TIMEOUT))
    return round(100.0 * (totals["killed"] + totals["timed_out"]) / valid, 1) if valid else None


def _section_key(section: str) -> tuple:
    return tuple(int(p) if p.isdigit() else 0 for p in section.replace("-", ".").split("."))


def read_times(path: Path) -> dict[str, float]:
    """``{mutant id: seconds}`` from the runner's one-line-per-mutant timing file (absent: none)."""
    if not path.is_file():
        return {}
    times = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            entry = json.loads(line)
            times[str(entry["id"])] = entry["ms"] / 1000.0
    return times


def read_equivalent(path: Path) -> dict[str, str]:
    """``{signature: why}`` of the survivors a person judged equivalent (a committed JSON list)."""
    if not path.is_file():
        return {}
    return {entry["signature"]: entry["why"] for entry in json.loads(path.read_text(encoding="utf-8"))}
