"""The compaction contract's promises (``docs/contract.md``): each catches the reference variant that breaks it, and
only that promise catches it; the plain reference keeps every promise on the same scenario; the provider role
rules and the edge readings of the promises, one by one."""
from __future__ import annotations

import pytest

from surfacecheck.contract.promises import PROMISES, judge
from surfacecheck.contract.record import record
from surfacecheck.contract.roles import PROVIDERS, problems
from surfacecheck.contract.session import Exchange, Session
from surfacecheck.core.catalogue import CATALOGUE
from surfacecheck.runtime.conversation.variants import BREAKS
from surfacecheck.runtime.registry import open_spec

SYSTEM = "You are terse."


def fetch(cid: str, size: int) -> dict:
    return {"calls": [{"id": cid, "name": "fetch", "args": {"size": size, "tag": cid}}]}


TURN_1 = ("turn", {"user": "Find the bug in module A.", "replies": [fetch("c1", 600), fetch("c2", 400),
                                                                    {"text": "found it"}]})
TURN_2 = ("turn", {"user": "Now fix it.", "replies": [fetch("c3", 800), {"text": "fixed"}]})
TURN_3 = ("turn", {"user": "Check it again.", "replies": [fetch("c4", 600), {"text": "ok"}]})
COMPACT = ("compact", {})


def _open(compaction: bool = True, **settings) -> dict:
    return {"settings": {"trigger_tokens": 2000, "keep_tokens": 150, "compaction": compaction, **settings},
            "system": SYSTEM}


# variant -> (open args, requests, provider, the trace step its first breach is at)
SCENARIOS = {
    "orphan-cut": (_open(), [TURN_1, TURN_2, COMPACT], "anthropic", 3),
    "rewrite-kept": (_open(keep_tokens=300), [TURN_1, TURN_2, COMPACT], "anthropic", 3),
    "drop-prompt": (_open(trigger_tokens=400), [TURN_1, TURN_2], "anthropic", 2),
    "drop-system": (_open(trigger_tokens=400), [TURN_1, TURN_2], "anthropic", 2),
    "bigger-summary": (_open(), [TURN_1, TURN_2, COMPACT], "anthropic", 3),
    "keep-too-much": (_open(trigger_tokens=350), [TURN_1, TURN_2], "anthropic", 2),
    "skip-removed": (_open(), [TURN_1, TURN_2, COMPACT], "anthropic", 3),
    "constant-summary": (_open(), [TURN_1, TURN_2, COMPACT], "anthropic", 3),
    "ignore-window": (_open(keep_tokens=250), [TURN_1, TURN_2, ("compact", {"summarizer_window": 400})],
                      "anthropic", 3),
    "nested-summary": (_open(), [TURN_1, TURN_2, COMPACT, TURN_3, COMPACT], "anthropic", 5),
    "user-after-summary": (_open(trigger_tokens=400), [TURN_1, TURN_2], "bedrock", 2),
    "compact-when-disabled": (_open(compaction=False, trigger_tokens=400), [TURN_1, TURN_2], "anthropic", 2),
    "compact-early": (_open(trigger_tokens=400), [TURN_1, TURN_2], "anthropic", 1),
}


def run(spec: str, variant: str) -> Session:
    open_args, requests, provider, _ = SCENARIOS[variant]
    runtime = open_spec(spec, 10)
    try:
        return record(runtime, open_args, requests, provider)
    finally:
        runtime.close()


def test_every_promise_has_a_variant_and_a_catalogue_entry():
    assert sorted(BREAKS.values()) == sorted(p.id for p in PROMISES)
    assert all(CATALOGUE[p.id].meaning == p.meaning and CATALOGUE[p.id].level == "conversation" for p in PROMISES)


@pytest.mark.parametrize("variant", sorted(BREAKS, key=lambda v: [p.id for p in PROMISES].index(BREAKS[v])))
def test_the_variant_is_caught_by_exactly_its_promise(variant):
    promise, step = BREAKS[variant], SCENARIOS[variant][3]
    assert judge(run("reference", variant)) == []
    breaches = judge(run(f"reference:{variant}", variant))
    assert breaches, f"reference:{variant} keeps every promise"
    assert {b.promise for b in breaches} == {promise}, [b.message for b in breaches]
    first = breaches[0]
    assert first.step == step
    assert first.expected is not None and first.observed is not None and first.message
