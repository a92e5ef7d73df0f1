"""Corrupt records are reported by the model, never crashed on (found by the audit's fuzzing)."""
from __future__ import annotations

import pytest

from surfacecheck.model.errors import ModelError
from surfacecheck.model.event import Event
from surfacecheck.model.jsonl import decode_record
from surfacecheck.model.replay import replay


def test_an_object_as_event_type_is_a_reason_not_a_type_error():
    with pytest.raises(ValueError, match="type must be a string"):
        decode_record({"type": {"nested": 1}, "seq": 0, "time": 0, "data": {}})


@pytest.mark.parametrize("data", [None, [1, 2], "text", 7])
def test_chunk_data_of_any_shape_replays_without_crashing(data):
    events = [Event("step/start", 0, 0, {"turn": 1, "step": 1}), Event("assistant/chunk", 1, 0, data),
              Event("step/start", 2, 0, {"turn": 1, "step": 2})]
    result = replay(events)  # returns (a reported error at worst), never raises
    assert result.error is None or isinstance(result.error, ModelError)


def test_only_the_previous_steps_chunks_are_remembered():
    events = []
    for step in range(50):
        events.append(Event("step/start", len(events), 0, {"turn": 1, "step": step}))
        events.append(Event("assistant/chunk", len(events), 0, {"turn": 1, "step": step, "chunk": {}}))
        events.append(Event("step/end", len(events), 0, {"turn": 1, "step": step}))
    from surfacecheck.model import replay as replay_mod
    seen = []
    original = replay_mod.BoundedLookup.remember

    def spy(self, event, on_surface, shadowed):
        original(self, event, on_surface, shadowed)
        seen.append(len(self.stale) + len(self.chunks))

    replay_mod.BoundedLookup.remember = spy
    try:
        result = replay(events)
    finally:
        replay_mod.BoundedLookup.remember = original
    assert result.error is None, result.error
    assert len(seen) == 150 and max(seen) <= 2
