"""Per-runtime compaction settings for ``open`` (``docs/conversation-protocol.md``), as Hypothesis strategies.

One table per runtime, key -> strategy, in :data:`TABLES`: the adapters own the key names, so a renamed key is a
one-line fix here. Every strategy draws the runtime's defaults (``{}``) first and often, so a shrunk witness runs on
the defaults unless the breach needs a setting. Sizes are small (triggers in the hundreds to low thousands of
neutral tokens) so compaction happens within a few turns. A runtime without a table (``cmd:``) gets ``{}`` and
``{"compaction": false}``.
"""
from __future__ import annotations

from hypothesis import strategies as st

from surfacecheck.runtime.registry import base

COMPACTION_OFF = {"compaction": False}

LANGCHAIN = {
    "trigger": st.one_of(st.tuples(st.just("tokens"), st.integers(200, 2500)).map(list),
                         st.tuples(st.just("messages"), st.integers(3, 20)).map(list)),
    "keep": st.one_of(st.tuples(st.just("messages"), st.integers(1, 12)).map(list),
                      st.tuples(st.just("tokens"), st.integers(50, 1500)).map(list)),
    "trim_tokens_to_summarize": st.one_of(st.none(), st.integers(100, 4000)),
}
LANGCHAIN_FRACTION = st.fixed_dictionaries({
    "trigger": st.tuples(st.just("fraction"), st.sampled_from((0.3, 0.5, 0.8))).map(list),
    "max_input_tokens": st.integers(500, 4000),
})
"""A fractional trigger needs the model's window (``max_input_tokens``): drawn together."""

STRANDS = {
    "manager": st.sampled_from(("summarizing", "sliding_window")),
    "summary_ratio": st.sampled_from((0.1, 0.3, 0.5, 0.8)),
    "preserve_recent_messages": st.integers(1, 10),
    "window_size": st.integers(4, 40),
    "should_truncate_results": st.booleans(),
}

REFERENCE = {
    "trigger_tokens": st.integers(200, 2500),
    "keep_tokens": st.integers(50, 1500),
}

OPENHANDS = {  # LLMSummarizingCondenser's own fields (it refuses keep_first >= max_size // 2 - 1: bad-args)
    "max_size": st.integers(4, 30),
    "keep_first": st.integers(0, 4),
    "max_tokens": st.one_of(st.none(), st.integers(200, 2500)),
    "minimum_progress": st.sampled_from((0.05, 0.1, 0.5)),
}

TABLES: dict[str, dict] = {"langchain": LANGCHAIN, "strands": STRANDS, "reference": REFERENCE}
TABLES["openhands"] = OPENHANDS
SMALL: dict[str, list[dict]] = {
    "langchain": [{"keep": ["messages", k]} for k in (1, 2, 3, 5, 8)]
    + [{"trigger": ["messages", 2], "keep": ["messages", k]} for k in (1, 2, 3, 5)],
    "strands": [{"preserve_recent_messages": k} for k in (1, 2, 3, 5)] + [{"window_size": 4}],
    "reference": [{"keep_tokens": 50}],
}
SMALL["openhands"] = [{"max_size": 8, "keep_first": k} for k in (0, 1, 2)] + [{"max_size": 6, "keep_first": 0}]
"""Settings that keep little, for the minimizer: a witness that needs a long history under the defaults (LangChain
keeps 20 messages) often breaks the same promise on a short one when less is kept."""
EXTRA: dict[str, list] = {"langchain": [LANGCHAIN_FRACTION]}
"""Settings drawn together (keys that only make sense as a pair)."""


def table(spec: str) -> dict | None:
    """The settings table of ``spec``'s runtime (``reference:<name>`` -> reference's), or None."""
    return TABLES.get(base(spec))


def small(spec: str) -> list[dict]:
    """Settings overlays that keep little, for ``spec``'s runtime (none for a runtime without a table)."""
    return SMALL.get(base(spec), [])


def settings_for(spec: str):
    """``open``'s settings for ``spec``: ``{}`` (the defaults) first and often, else some keys of its table, and
    sometimes compaction turned off."""
    keys = table(spec)
    if keys is None:
        return st.sampled_from(({}, COMPACTION_OFF))
    some = st.fixed_dictionaries({}, optional=keys)
    drawn = [some] + [st.tuples(some, extra).map(lambda pair: {**pair[0], **pair[1]})
                      for extra in EXTRA.get(base(spec), [])]
    return st.one_of(st.just({}), st.just({}), *drawn, st.just(COMPACTION_OFF))
