"""The drift report: the seed scripts and a probe on 0.1.x (else the spec's facts) and on 0.2.x (docs/e2e-drift.md).

``python -m surfacecheck.e2e.drift_run [--python PY] [--json] [--known]``: 0.2.x's interpreter is ``--python``
or ``$SURFACECHECK_DSH_V2_PYTHON`` (neither: exit 2, naming the variable). Exit 0 no drift (with ``--known``: no
drift beyond :data:`KNOWN_DRIFT`), 1 drift, 3 a release could not be run. Both releases run through the one
pipeline, :func:`.runner.run_script`, with their :mod:`.release` descriptors.
"""
from __future__ import annotations

import json
import subprocess
import sys
from types import SimpleNamespace
from typing import Any

from .release import RELEASES, NoInterpreter, installed_version, line_of
from .runner import RuntimeFailed, RuntimeNotInstalled, run_script
from .server import script_json

V2 = RELEASES["0.2.x"]


def run_for(script: Any, *, python: str = sys.executable, **kwargs: Any):
    """Detect the SDK beside ``python`` and run ``script`` as that release; none installed -> RuntimeNotInstalled."""
    version = installed_version(python)
    if line_of(version) is None:
        raise RuntimeNotInstalled(f"{python}: deepseek-harness-sdk is not installed (pip install -e '.[dsh]')")
    return run_script(script, python=python, runtime=version, **kwargs)


def run_v2(script: Any, *, python: str | None = None, **kwargs: Any):
    """``script`` on 0.2.x: refuses an interpreter holding another release (RuntimeNotInstalled)."""
    python = V2.interpreter(python)
    version = installed_version(python)
    if line_of(version) != V2.name:
        raise RuntimeNotInstalled(f"{python}: deepseek-harness-sdk {V2.name} is not installed (found {version!r}); "
                                  f"create a venv with `pip install deepseek-harness-sdk=={V2.sdk_version}`")
    return run_script(script, python=python, release=V2, **kwargs)


HEADROOM_SMALL = 512
PROBE = {"format": "surfacecheck-e2e-script/1", "name": "drift-prune-probe", "usage": "fixed", "summaries": [],
         "description": "six 6000-char outputs on a 16000-token window: pressure prune under 0.1.1rc1; none under "
                        "0.2.x with default headroom; prune again with headroomTokens small",
         "config": {"contextWindow": 16000, "thresholdRatio": 0.5, "retainTokens": 2000, "maxTokens": 1024,
                    "compactionRetries": 1, "maxOverflowRetries": 1, "requestMaxTokens": 1024,
                    "pruner": {"thresholdChars": 2000, "headChars": 200, "tailChars": 200}},
         "turns": [{"prompt": "run the scripted commands", "compact": False,
                    "replies": [{"tool": {"output_chars": 6000}}] * 6 + [{"text": "done"}]}]}
DRIFT_SCRIPTS = (PROBE,)  # plus H8b's seed scripts (scenarios/e2e)


def scripts_for_drift() -> list[dict]:
    """The drift set: the probe plus the seed scripts (scenarios/e2e)."""
    try:
        from .script import seed_scripts

        seeds = [s.to_json() for s in seed_scripts()]
    except Exception:  # noqa: BLE001 - seeds are optional here
        seeds = []
    return [*DRIFT_SCRIPTS, *seeds]


def run_drift(*, python_b: str | None = None, python_a: str = sys.executable, scripts: list | None = None,
              timeout: float = 120.0, progress=None) -> dict:
    """Run every script on A (0.1.x) and B (0.2.x: default headroom, then headroomTokens=HEADROOM_SMALL, which
    separates the headroom drift from the rest); return the drift report.

    A missing A falls back to the spec's recorded facts (``drift.SPEC_FACTS``); a missing B raises
    RuntimeNotInstalled (exit 3)."""
    from . import drift as d

    python_b = V2.interpreter(python_b)
    version_a, version_b = installed_version(python_a), installed_version(python_b)
    if line_of(version_b) != V2.name:
        raise RuntimeNotInstalled(f"{python_b}: no deepseek-harness-sdk {V2.name} (found {version_b!r})")
    found: list[tuple[str, d.DriftFinding]] = []
    per_script = []
    for doc in scripts if scripts is not None else scripts_for_drift():
        doc = script_json(doc)
        if progress:
            progress(f"drift: {doc['name']}")
        run_a = run_script(doc, python=python_a, timeout=timeout) if line_of(version_a) == "0.1.x" else None
        run_b = run_v2(doc, python=python_b, timeout=timeout)
        try:
            mine = d.drift(run_a if run_a is not None else d.SPEC_FACTS, run_b) + d.audit_drift(run_b, doc["config"])
            small = run_v2(doc, python=python_b, timeout=timeout, headroom_tokens=HEADROOM_SMALL)
            small.discard()
            if doc.get("name") == PROBE["name"]:
                mine += d.headroom_drift(run_a if run_a is not None else _spec_compacts(), run_b, small,
                                         config=doc["config"], headroom_small=HEADROOM_SMALL)
        finally:
            run_b.discard()
            if run_a is not None:
                run_a.discard()
        found += [(doc["name"], f) for f in mine]
        per_script.append({"script": doc["name"], "b_seconds": round(run_b.seconds, 2),
                           "a_compaction": dict(d.facts(run_a).compaction_first) if run_a else None,
                           "b_compaction": dict(d.facts(run_b).compaction_first),
                           f"b_compaction_headroom_{HEADROOM_SMALL}": dict(d.facts(small).compaction_first),
                           "findings": sorted({f.id for f in mine})})
    if progress:
        progress("drift: SDK arguments and config schema")
    extra = sdk_drift(python_a, python_b, str(version_a), str(version_b)) if version_a else []
    extra += d.config_drift(d.dump_config_schema(python_b), str(version_b))
    return report(merge(found) + extra, version_a=version_a or "0.1.1rc1 (spec facts)", version_b=version_b,
                  extra={"scripts": per_script})


PER_SCRIPT = {"compaction-paths"}
UNION = {"new-event-types", "missing-event-types"}


def merge(found: list[tuple[str, Any]]) -> list:
    """One finding per id across scripts: unions for event-type sets, ``{script: observed}`` where scripts
    disagree, one finding per script for ``compaction-paths`` (the behavioural table)."""
    from .drift import DriftFinding

    by_id: dict[str, list[tuple[str, Any]]] = {}
    for name, f in found:
        by_id.setdefault(f.id, []).append((name, f))
    out = []
    for fid, items in by_id.items():
        names = [n for n, _ in items]
        first = items[0][1]
        if fid in PER_SCRIPT:
            out += [DriftFinding(f"{fid}:{n}", f.what, f.expected, f.observed, f.evidence) for n, f in items]
        elif fid == "audit-event-types":
            joined: dict[str, set] = {}
            for _, f in items:
                for t, rules in f.observed.items():
                    joined.setdefault(t, set()).update(rules)
            out.append(DriftFinding(fid, first.what, {}, {t: sorted(r) for t, r in sorted(joined.items())},
                                    f"{first.evidence}; scripts: {', '.join(names)}"))
        elif fid in UNION:
            union = lambda key: sorted({x for _, f in items for x in getattr(f, key)})  # noqa: E731
            first_at: dict[str, str] = {}
            for n, f in items:
                for part in f.evidence.split(", "):
                    first_at.setdefault(part.split("@")[0], f"{part} ({n})")
            evidence = "first seen: " + ", ".join(first_at[k] for k in sorted(first_at))
            out.append(DriftFinding(fid, first.what, union("expected"), union("observed"), evidence))
        else:
            observed = [f.observed for _, f in items]
            same = all(o == observed[0] for o in observed)
            out.append(DriftFinding(fid, first.what, first.expected, observed[0] if same else
                                    {n: f.observed for n, f in items},
                                    f"{first.evidence}; scripts: {', '.join(names)}"))
    return out


def _spec_compacts():
    """Stand-in A for the probe when 0.1.1rc1 is not installed: the spec says it compacts (recorded fact)."""
    return SimpleNamespace(log_path=None, events=[{"type": "compaction/prune", "seq": -1}], header=None, requests=[],
                           version="0.1.1rc1 (spec)")


def sdk_fields(python: str) -> list[str] | None:
    """Field names of ``DeepSeekHarnessConfig`` as the SDK beside ``python`` defines it."""
    code = ("import dataclasses, json, deepseek_harness as d; "
            "print(json.dumps([f.name for f in dataclasses.fields(d.DeepSeekHarnessConfig)]))")
    try:
        out = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return json.loads(out.stdout) if out.returncode == 0 else None


def sdk_drift(python_a: str, python_b: str, version_a: str, version_b: str) -> list:
    """SDK arguments (``DeepSeekHarness(**kwargs)`` = ``DeepSeekHarnessConfig`` fields) that differ."""
    fa, fb = sdk_fields(python_a), sdk_fields(python_b)
    if fa is None or fb is None or set(fa) == set(fb):
        return []
    from .drift import DriftFinding

    return [DriftFinding("sdk-arguments", "DeepSeekHarness(...) keyword arguments", sorted(fa), sorted(fb),
                         f"dataclasses.fields(DeepSeekHarnessConfig): {version_b} adds {sorted(set(fb) - set(fa))}, "
                         f"drops {sorted(set(fa) - set(fb))} against {version_a}")]


def report(findings, *, version_a: str | None, version_b: str | None,
           extra: dict | None = None) -> dict:
    """One JSON document: the two versions, the findings (sorted by id), anything else the caller adds."""
    items = sorted(findings, key=lambda f: f.id)
    doc = {"format": "surfacecheck-e2e-drift/1", "a": version_a, "b": version_b, "count": len(items),
           "findings": [f.to_json() for f in items]}
    doc.update(extra or {})
    return doc


def human(doc: dict) -> str:
    """The report as text: one line per finding, then its evidence."""
    lines = [f"drift {doc['a']} -> {doc['b']}: {doc['count']} findings"]
    for f in doc["findings"]:
        lines.append(f"  {f['id']}: {f['what']}")
        lines.append(f"      expected {json.dumps(f['expected'])[:200]}")
        lines.append(f"      observed {json.dumps(f['observed'])[:200]}")
        lines.append(f"      evidence {f['evidence'][:300]}")
    return "\n".join(lines)


# Drift already reported and documented (docs/e2e-drift.md) per release: `--known` fails on anything else.
KNOWN_DRIFT = {"0.2.1rc2": frozenset({
    "pressure-threshold-headroom", "config-keys-compaction-basic", "compaction-paths", "log-header-version",
    "log-file-name", "audit-raw", "audit-normalised", "audit-event-types", "surface-event-types", "surface-op-replace-shape",
    "tool-result-shape", "checkpoint-source", "checkpoint-range-start", "overflow-failure-event",
    "assistant-stream-storage", "missing-event-types", "new-event-types", "wire-endpoint", "wire-auth",
    "wire-body-fields", "sdk-arguments"})}


def new_drift(doc: dict) -> list[str]:
    """Finding ids (``id`` or ``id:script``) whose base id is not known for B's version."""
    known = KNOWN_DRIFT.get(str(doc.get("b")), frozenset())
    return [f["id"] for f in doc["findings"] if f["id"].split(":")[0] not in known]


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m surfacecheck.e2e.drift_run",
                                     description="dsh version drift: 0.1.1rc1/spec vs another installed release")
    parser.add_argument("--python", default=None,
                        help=f"python of the venv holding the other release (default: ${V2.python})")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--known", action="store_true",
                        help="exit 1 only on drift not already documented for that release (KNOWN_DRIFT)")
    ns = parser.parse_args(argv)
    try:
        doc = run_drift(python_b=ns.python, timeout=ns.timeout, progress=lambda m: print(m, file=sys.stderr))
    except NoInterpreter as exc:
        print(f"drift: {exc}", file=sys.stderr)
        return 2
    except (RuntimeNotInstalled, RuntimeFailed) as exc:
        print(f"drift: inconclusive: {exc}", file=sys.stderr)
        return 3
    doc["new"] = new_drift(doc)
    print(json.dumps(doc, indent=1) if ns.json else human(doc) + f"\nnew (not documented): {doc['new'] or 'none'}")
    return 1 if (doc["new"] if ns.known else doc["count"]) else 0


if __name__ == "__main__":
    sys.exit(main())
