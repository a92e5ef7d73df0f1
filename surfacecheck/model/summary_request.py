"""The one request `summarizeWithLlm` streams (spec 8.5; seed §8), and who saw it.

The request is the replayed region (`buildSummarizationInput`: the logged header's system and tools, the shadowed
nodes' derived messages, spec 8.2 step 7) followed by dsh's fixed English instruction, on the summary route, with
the summary cap and purpose `compaction`. The session id is not part of what is compared, nor a message's id and
source (dsh mints ids, and a checkpoint's source names the command that asked for it): a message is its role and
content.

:func:`recording` collects the requests a transition makes (the summarizer is the outside world: what it is asked
is an observation, like a logger line), so a runtime can answer them beside the events it wrote.
"""
from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Iterator

INSTRUCTION_SOURCE = {"kind": "plugin", "plugin": "dsh-compaction-basic"}
COMPACTION_INSTRUCTION = "\n".join([
    "You are now acting as a compaction engine for this AI coding assistant. Condense the conversation ABOVE into a "
    "structured checkpoint that lets another model resume the work with no loss of essential context.",
    "",
    "Output EXACTLY the Markdown structure below: keep every section, in order. Use terse bullets, not prose "
    "paragraphs. Write \"(none)\" for an empty section — never drop a section.",
    "",
    "## Primary Request and Intent",
    "- [the user's original and evolving goals; quote verbatim where the exact wording matters]",
    "",
    "## Key Technical Concepts",
    "- [technologies, frameworks, patterns, and conventions in play]",
    "",
    "## Files and Code",
    "- [exact path: why it matters, key changes or snippets]",
    "",
    "## Errors and Fixes",
    "- [error: how it was resolved, plus any related user feedback]",
    "",
    "## Pending Jobs",
    "- [explicitly requested work not yet completed]",
    "",
    "## Current Work",
    "- [precisely what was in progress at this checkpoint]",
    "",
    "## Next Step",
    "- [the single next action, directly in line with the most recent request, or \"(none)\"]",
    "",
    "## Critical Context",
    "- [decisions and their rationale, constraints, user preferences, open questions, data needed to continue]",
    "",
    "Rules:",
    "- Write concise English engineering prose. Preserve exact file paths, commands, error strings, identifiers, "
    "numeric values, function signatures, and syntax fragments.",
    "- Capture user feedback and explicit instructions faithfully, especially corrections.",
    "- Do NOT mention this summarization request or that the context was compacted.",
    "- Output only the checkpoint text: do not call any tool or take any other action.",
    "- If the conversation already contains a <compacted-summary> block, it is a PRIOR checkpoint. Do not copy it "
    "forward verbatim: preserve still-true facts, drop stale ones, and merge newer information into a single "
    "consolidated summary under the same structure.",
])
"""dsh-compaction-basic's `COMPACTION_INSTRUCTION`, word for word."""


def stream_request(system: str | None, tools: tuple | None, messages: tuple, provider: str, model: str,
                    max_tokens: int) -> dict:
    """The stream options `summarizeWithLlm` builds (spec 8.5), without the session id and the signal: region
    messages then the instruction, each as :func:`as_asked`; system and tools only when the header has them."""
    instruction = {"role": "user", "content": [{"type": "text", "text": COMPACTION_INSTRUCTION}],
                   "source": INSTRUCTION_SOURCE}
    request: dict[str, Any] = {"provider": provider, "model": model,
                               "messages": [as_asked(m) for m in (*messages, instruction)]}
    if system is not None:
        request["system"] = system
    if tools is not None:
        request["tools"] = list(tools)
    request.update({"maxTokens": max_tokens, "purpose": "compaction"})
    return request


def as_asked(message: dict | None) -> dict | None:
    """A request message as compared: its role and content (its id and source carry ids dsh mints)."""
    return None if message is None else {"role": message.get("role"), "content": message.get("content")}


_SEEN: ContextVar[list | None] = ContextVar("summary requests", default=None)


def record_request(request: dict) -> None:
    """Note one request the summarizer receives (nothing when no one is recording)."""
    seen = _SEEN.get()
    if seen is not None:
        seen.append(request)


@contextmanager
def recording() -> Iterator[list[dict]]:
    """The requests the summarizer receives inside the block, in order."""
    seen: list[dict] = []
    token = _SEEN.set(seen)
    try:
        yield seen
    finally:
        _SEEN.reset(token)
