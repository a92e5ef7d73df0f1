"""The coverage document of a ``check`` (``coverage.json``, the ``coverage`` section of ``report.json``).

Three kinds, per source (``scenarios``, ``corpus``, ``e2e``, ``verify``, ``explore``):

* ``code``: line coverage of the runtime under test (:mod:`.code`);
* ``transitions``: how often each kind of transition was taken: the event types the logs hold, the protocol
  operations the lockstep ran per level, the explorer's labelled actions; and ``rules``: how many events each
  audit rule judged (:data:`.situations.JUDGES`), the rules no source exercised listed;
* ``inputs``: per schema of dsh's input space, the kinds and forms verify generated (:mod:`surfacecheck.properties.stateful.inputs`);
* ``sometimes``: each named situation of :data:`.situations.WITNESSES` with the first place that reached it
  (source, log or script, seq), the ones never reached listed: ``check --strict`` fails on those.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .situations import JUDGES, WITNESSES, judged, witnesses


class Scan:
    """What the logs of one source showed: first witness per id, rule and event-type counts."""

    def __init__(self, source: str):
        self.source = source
        self.first: dict[str, dict] = {}
        self.counts: Counter = Counter()
        self.logs = 0

    def add(self, name: str, events: list) -> None:
        self.logs += 1
        for wid, seq in witnesses(events).items():
            self.first.setdefault(wid, {"source": self.source, "where": name, "seq": seq})
        self.counts.update(judged(events))

    def add_found(self, name: str, found: dict[str, int], counts: dict[str, int]) -> None:
        """A log scanned elsewhere (an e2e run, whose log is gone by now): its witnesses and counts."""
        self.logs += 1
        for wid, seq in found.items():
            self.first.setdefault(wid, {"source": self.source, "where": name, "seq": seq})
        self.counts.update(counts)


def scan_logs(paths: Iterable[tuple[str, Path]]) -> dict[str, Scan]:
    """``(source, path)`` pairs -> one :class:`Scan` per source (a log that does not read is skipped: the logs
    stage reports it)."""
    from surfacecheck.model.jsonl import read_log

    scans: dict[str, Scan] = {}
    for source, path in paths:
        try:
            events = list(read_log(path).events)
        except Exception:  # noqa: BLE001 - judged (and reported) by the logs stage, not here
            continue
        scans.setdefault(source, Scan(source)).add(Path(path).name, events)
    return scans


def build(code: list[dict], scans: dict[str, Scan], verify_ops: dict[str, dict[str, int]] | None = None,
          explore_actions: dict[str, int] | None = None, inputs: dict[str, dict] | None = None) -> dict[str, Any]:
    """The coverage document from what each source reported."""
    sources = {}
    for name, scan in scans.items():
        sources[name] = {"logs": scan.logs,
                         "event_types": {k[5:]: v for k, v in sorted(scan.counts.items()) if k.startswith("type:")},
                         "rules": {rule: scan.counts.get(rule, 0) for rule in JUDGES}}
    if verify_ops:
        sources["verify"] = {"operations": verify_ops}
    if explore_actions:
        sources["explore"] = {"actions": dict(sorted(explore_actions.items()))}
    rules_total = {rule: sum(s.counts.get(rule, 0) for s in scans.values()) for rule in JUDGES}
    reached = {}
    for scan in scans.values():
        for wid, where in scan.first.items():
            reached.setdefault(wid, where)
    sometimes = [{"id": wid, "description": text, "reached": wid in reached, "first": reached.get(wid),
                  "sources": sorted(s.source for s in scans.values() if wid in s.first)}
                 for wid, text in WITNESSES.items()]
    return {
        "code": code,
        "transitions": {"sources": sources,
                        "rules": rules_total,
                        "rules_never_exercised": [rule for rule, n in rules_total.items() if n == 0]},
        "sometimes": {"witnesses": sometimes, "unreached": [w["id"] for w in sometimes if not w["reached"]]},
        **({"inputs": inputs} if inputs else {}),
    }


SOURCE_OF = {"scenario": "scenarios", "dsh-sessions": "corpus", "dsh-generated": "corpus"}
"""The logs stage's sources, grouped as the coverage report names them."""


def for_check(code: list[dict], logs: Iterable[tuple[str, Path]], stages: dict[str, dict]) -> dict[str, Any]:
    """The coverage of one ``check``: ``logs`` are the ``(logs-stage source, path)`` pairs judged, ``stages`` the
    stage summaries (the e2e scripts' situations, verify's operations per level, the explorer's actions)."""
    scans = scan_logs((SOURCE_OF.get(source, source), path) for source, path in logs)
    e2e = stages.get("e2e") or {}
    for script in e2e.get("scripts") or []:
        if script.get("situations") is not None and script.get("verdict") != "inconclusive":
            scans.setdefault("e2e", Scan("e2e")).add_found(script["name"], script["situations"], script.get("judged") or {})
    verify = stages.get("verify") or {}
    ops = {lv["level"]: lv.get("operations") or {} for lv in verify.get("levels") or []}
    actions = ((stages.get("explore") or {}).get("model") or {}).get("actions")
    return build(code, scans, ops or None, actions, verify.get("inputs"))
