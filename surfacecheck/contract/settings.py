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

DEEPAGENTS = {
    "trigger": st.one_of(st.tuples(st.just("tokens"), st.integers(2800, 6000)).map(list),
                         st.tuples(st.just("messages"), st.integers(3, 20)).map(list)),
    "keep": st.one_of(st.tuples(st.just("messages"), st.integers(1, 12)).map(list),
                      st.tuples(st.just("tokens"), st.integers(50, 1500)).map(list)),
    "trim_tokens_to_summarize": st.one_of(st.none(), st.integers(100, 4000)),
}
"""deepagents counts the system prompt and every tool schema it sends (about 2,700 tokens for its own file tools and
``fetch``), so a token trigger below that fires on every model call."""
DEEPAGENTS_FRACTION = st.fixed_dictionaries({
    "trigger": st.tuples(st.just("fraction"), st.sampled_from((0.5, 0.85))).map(list),
    "max_input_tokens": st.integers(4000, 8000),
})

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

DSH = {  # dsh's own config names (spec 9.1, 6); the same table for the model that reproduces it
    "contextWindow": st.integers(400, 4000),
    "thresholdRatio": st.sampled_from((0.3, 0.5, 0.8, 1.0)),
    "retainTokens": st.integers(0, 600),
    "compactionRetries": st.integers(0, 2),
    "maxOverflowRetries": st.integers(0, 2),
    "toolResultPruner": st.one_of(st.none(), st.just({"thresholdChars": 1200, "headChars": 300, "tailChars": 200})),
}
DSH_WINDOW = st.fixed_dictionaries({"contextWindow": st.integers(400, 3000)})
"""dsh's default window (128 000, spec 10.4) never fills in a short session: drawn small often, alone."""

GEMINI = {
    # a fraction of tokenLimit(model) (1 048 576 for every Gemini model): 0.0002..0.002 is ~210..2100 tokens
    "compressionThreshold": st.sampled_from((0.0002, 0.0004, 0.0008, 0.0015)),
}
AI = {
    "toolCalls": st.sampled_from(("all", "before-last-message", "before-last-2-messages", "before-last-4-messages")),
    "emptyMessages": st.sampled_from(("keep", "remove")),
    "threshold": st.integers(0, 1500),
}

ADK = {
    "compaction_interval": st.integers(1, 4),
    "overlap_size": st.integers(0, 2),
}
ADK_TOKENS = st.fixed_dictionaries({
    "token_threshold": st.integers(200, 2500),
    "event_retention_size": st.integers(0, 8),
}, optional={"compaction_interval": st.none(), "overlap_size": st.none()}).filter(
    lambda d: ("compaction_interval" in d) == ("overlap_size" in d))
"""ADK refuses either pair of EventsCompactionConfig set alone: the token pair is drawn together, with or without the
sliding window (both nulled: token threshold only)."""

TABLES: dict[str, dict] = {
    "langchain": LANGCHAIN, "strands": STRANDS, "deepagents": DEEPAGENTS, "adk": ADK, "gemini": GEMINI, "ai": AI,
    "dsh": DSH, "embedded": DSH, "model": DSH, "openhands": OPENHANDS, "reference": REFERENCE,
}
_KEEP_FEW_MESSAGES = ([{"keep": ["messages", k]} for k in (1, 2, 3, 5, 8)]
                      + [{"trigger": ["messages", 2], "keep": ["messages", k]} for k in (1, 2, 3, 5)])
_DSH_SMALL = [{"contextWindow": w, "retainTokens": r} for w in (600, 1000) for r in (0, 50)]
SMALL: dict[str, list[dict]] = {
    "langchain": _KEEP_FEW_MESSAGES,
    "deepagents": _KEEP_FEW_MESSAGES,
    "strands": [{"preserve_recent_messages": k} for k in (1, 2, 3, 5)] + [{"window_size": 4}],
    "adk": [{"token_threshold": 200, "event_retention_size": k} for k in (0, 1, 2, 3)]
    + [{"compaction_interval": 1, "overlap_size": 0}],
    "gemini": [{"compressionThreshold": 0.0002}],
    "ai": [{"toolCalls": "before-last-message", "threshold": 0}],
    "dsh": _DSH_SMALL, "embedded": _DSH_SMALL, "model": _DSH_SMALL,
    "openhands": [{"max_size": 8, "keep_first": k} for k in (0, 1, 2)] + [{"max_size": 6, "keep_first": 0}],
    "reference": [{"keep_tokens": 50}],
}
"""Settings that keep little, for the minimizer: a witness that needs a long history under the defaults (LangChain
keeps 20 messages) often breaks the same promise on a short one when less is kept."""
EXTRA: dict[str, list] = {
    "langchain": [LANGCHAIN_FRACTION], "deepagents": [DEEPAGENTS_FRACTION], "adk": [ADK_TOKENS],
    "dsh": [DSH_WINDOW], "embedded": [DSH_WINDOW], "model": [DSH_WINDOW],
}
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
