"""The known-corpus registry: every registered log is rejected by exactly its registered rule,
and every other recorded log replays cleanly (the registry cannot hide a new failure)."""
from __future__ import annotations

from surfacecheck.model.jsonl import read_log
from surfacecheck.model.replay import replay
from surfacecheck.check import known_corpus


def test_registry_matches_the_model_exactly(corpus):
    registry = known_corpus()
    failing = {}
    for path in sorted((corpus / "dsh-sessions").glob("*.jsonl")):
        result = replay(read_log(path).events)
        if result.error is not None:
            failing[path.name] = result.error.rule
    assert failing == {name: entry["rule"] for name, entry in registry.items()}
    assert len(list((corpus / "dsh-sessions").glob("*.jsonl"))) - len(failing) == 146
