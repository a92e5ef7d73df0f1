"""Corruptions nobody wrote a test for: the audit answers with findings (or exit-2 input errors),
never a crash. Hypothesis mutates one to three fields of real corpus logs."""
from __future__ import annotations

import copy
import json

from hypothesis import given, strategies as st

from surfacecheck.audit.reader import AuditInputError
from surfacecheck.audit.rules import RULES
from surfacecheck.audit.run import audit_log

LOGS = ("dsh-sessions/examples__headless-agent__tests__snapshots__compaction-recovery__session.jsonl",
        "dsh-generated/01-prune.jsonl", "dsh-generated/06-manual-compact.jsonl", "dsh-generated/07-overflow-recovery.jsonl")
VALUES = st.sampled_from([None, 0, -1, 1.5, "x", [], {}, [1, 2], {"op": "replace", "start": 0, "end": 0}, True,
                          "append", 2**60, "compaction/start", "tool/result", "session/end-seed"])


def _paths(obj, prefix=()):
    yield prefix
    if isinstance(obj, dict):
        for key, value in obj.items():
            yield from _paths(value, prefix + (key,))
    elif isinstance(obj, list):
        for index, value in enumerate(obj):
            yield from _paths(value, prefix + (index,))


@given(log=st.sampled_from(LOGS), edits=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 10**6),
                                                            st.booleans(), VALUES), min_size=1, max_size=3))
def test_mutated_logs_never_crash_the_audit(corpus, tmp_path_factory, log, edits):
    lines = (corpus / log).read_text().splitlines()
    records = [json.loads(line) for line in lines[1:]]
    for which, where, delete, value in edits:
        record = records[which % len(records)]
        paths = [p for p in _paths(record) if p and p[0] not in ("seq", "time")]
        if not paths:  # an earlier edit left the record nothing but its seq and time
            continue
        path = paths[where % len(paths)]
        parent = record
        for key in path[:-1]:
            parent = parent[key]
        if delete and isinstance(parent, dict):
            parent.pop(path[-1])
        else:
            parent[path[-1]] = copy.deepcopy(value)
    out = tmp_path_factory.mktemp("fuzz") / "mutated.jsonl"
    out.write_text("\n".join([lines[0]] + [json.dumps(r) for r in records]) + "\n")
    try:
        result = audit_log(out)
    except AuditInputError as exc:
        assert str(exc).startswith(f"{out}:")
        return
    assert all(f.rule in RULES and (f.seq is None or isinstance(f.seq, int)) for f in result.findings)
