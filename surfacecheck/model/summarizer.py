"""The summary request, the checkpoint frame, and a scriptable summarizer stand-in (seed §8, §10; spec 8.2, 8.5).

The real summarizer is a language model; the model replaces it with :class:`SummaryScript`, a
deterministic outcome per call — summary text (of a chosen size), failure, empty or image output,
truncation, cancellation, or a concurrent surface change while it "runs" — so that every branch
of the transaction can be driven. `frame_summary` and `checkpoint_message` are dsh's exact frame
(98 tokens of fixed framing, spec 8.2 step 9), so checkpoint prices match real logs.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .errors import SummarizerError
from .estimate import canonical_header
from .jsvalue import js_join
from .seams import active
from .session import Session, request_header
from .surface import derive_event_message

PREAMBLE = (
    "This is an automatically generated checkpoint condensing an earlier span of the conversation to free up "
    "context. Treat the captured context as established background and build on it without restating it. "
    "Continue the task directly from the messages that follow, without acknowledging this checkpoint."
)
OPEN_TAG = "\n\n<compacted-summary>"
CLOSE_TAG = "</compacted-summary>"
CHECKPOINT_PLUGIN = "compact"
INSTRUCTION_SOURCE = {"kind": "plugin", "plugin": "dsh-compaction-basic"}
INSTRUCTION_SECTIONS = (
    "Primary Request and Intent", "Key Technical Concepts", "Files and Code", "Errors and Fixes",
    "Pending Jobs", "Current Work", "Next Step", "Critical Context",
)


def frame_summary(summary: list[dict]) -> list[dict]:
    """`frameSummary` (spec 8.2 step 9): preamble block, the summary blocks, closing tag."""
    return [{"type": "text", "text": PREAMBLE + OPEN_TAG}, *summary, {"type": "text", "text": CLOSE_TAG}]


def checkpoint_source(compaction_id: str, source_command_id: str | None) -> dict:
    """`compactCheckpointSource` (spec 8.2 step 9; seed §10: provenance kept apart from surfacecheck.model text)."""
    source = {"kind": "plugin", "plugin": CHECKPOINT_PLUGIN, "compactionId": compaction_id}
    if source_command_id is not None:
        source["sourceCommandId"] = source_command_id
    return source


def checkpoint_message(summary: list[dict], compaction_id: str, source_command_id: str | None, message_id: str) -> dict:
    """`createUserMessage({content: frameSummary(s), source})` with dsh's key order."""
    return {"content": active().frame_summary(summary), "source": checkpoint_source(compaction_id, source_command_id),
            "role": "user", "id": message_id}


def is_checkpoint(message: Any) -> bool:
    """`isCompactCheckpointSource`: only `kind` + `plugin` are checked."""
    source = message.get("source") if isinstance(message, dict) else None
    return isinstance(source, dict) and source.get("kind") == "plugin" and source.get("plugin") == CHECKPOINT_PLUGIN


@dataclass(frozen=True)
class SummarizationInput:
    """`buildSummarizationInput` (spec 8.2 step 7; DISAGREES D6): the *logged* header's system and tools,
    then the shadowed nodes' derived messages (nulls dropped)."""

    system: str | None
    tools: tuple | None
    messages: tuple


def summarization_input(session: Session, shadowed: tuple[int, ...]) -> SummarizationInput:
    """The header is `session.requestHeader()`: the latest logged one, canonical (spec 4.1: an empty system or tool
    list is absent), so an empty one sends none."""
    header = request_header(session) or {}
    if isinstance(header, dict):
        header = canonical_header(header)
    messages = tuple(m for m in (derive_event_message(session.log[seq]) for seq in shadowed) if m is not None)
    tools = header.get("tools")
    return SummarizationInput(header.get("system"), tuple(tools) if tools is not None else None, messages)


NO_TARGET = ("no provider/model available for summarization: set both BasicCompactionConfig summarization fields, "
             "route one request, or set both AgentOptions fields")


def complete_pair(provider, model) -> tuple[str, str] | None:
    """A provider/model pair when both are non-empty strings (AgentOptions' completeness test, spec 8.5)."""
    if isinstance(provider, str) and provider and isinstance(model, str) and model:
        return provider, model
    return None


def summary_target(session: Session, summarization: tuple[str, str], agent_target: tuple[str, str] | None
                   ) -> tuple[str, str]:
    """`summarizeWithLlm`'s route (spec 8.5): the configured pair when its provider is non-empty, else the latest
    logged header's config, else the agent's complete AgentOptions pair; none of them: dsh throws before streaming."""
    if summarization[0] != "":
        return summarization
    header = request_header(session)
    config = header.get("config") if isinstance(header, dict) else None
    if isinstance(config, dict):
        return config.get("provider"), config.get("model")
    if agent_target is not None:
        return agent_target
    raise SummarizerError(NO_TARGET)


def summary_request(inp: SummarizationInput, provider: str, model: str, max_tokens: int, session_id: str) -> dict:
    """The summary call the conversation runtimes' summarizer prompt renders (spec 8.5; seed §8): region messages,
    then a short stand-in for the fixed English instruction; route, cap, session id and purpose. The request dsh
    streams, its instruction word for word, is :func:`summary_request.stream_request`."""
    instruction = {
        "role": "user", "source": INSTRUCTION_SOURCE,
        "content": [{"type": "text", "text": "Summarize the conversation above. Sections: "
                     + ", ".join(INSTRUCTION_SECTIONS)
                     + ". Merge any prior <compacted-summary> block instead of nesting it."}],
    }
    request: dict[str, Any] = {"provider": provider, "model": model, "messages": [*inp.messages, instruction]}
    if inp.system is not None:
        request["system"] = inp.system
    if inp.tools is not None:
        request["tools"] = list(inp.tools)
    request.update({"maxTokens": max_tokens, "sessionId": session_id, "purpose": "compaction"})
    return request


# -- the scripted stand-in ---------------------------------------------------------------------
AGENT_OPTIONS = ("model", "model-summarizer")
"""The agent's provider and model (AgentOptions) unless a driver sets others: the scripted summarizer's route."""
OUTCOMES = ("text", "failure", "empty", "image", "truncated", "cancel", "agent-cancel", "late-cancel")


@dataclass(frozen=True)
class SummaryScript:
    """What one summarizer call does (issue: scriptable stand-in).

    * ``text``: returns a summary; ``text`` verbatim if given, else a deterministic digest of about
      ``ratio`` × the span's characters (so ``ratio >= 1`` makes a summary that is not smaller).
    * ``failure`` / ``empty`` / ``image`` / ``truncated``: the summarizer errors of spec 8.5.
    * ``cancel`` / ``agent-cancel``: the caller's / the agent's signal aborts while it runs and the
      summarizer rejects with the abort; ``late-cancel``: the signal aborts but the summarizer still
      returns text (spec §15 G12: automatic compaction then commits).
    * ``concurrent``: events appended by another producer while it runs (spec 8.2 step 12), as
      ``(type, data, surfaceOp)`` or ``(type, data, surfaceOp, sourceEventSeqs)`` applied in order.
    """

    outcome: str = "text"
    text: str | None = None
    ratio: float = 0.25
    concurrent: tuple = ()
    usage: tuple[int, int] | None = None

    def __post_init__(self):
        if self.outcome not in OUTCOMES:
            raise ValueError(f"unknown summary outcome {self.outcome!r}; expected one of {OUTCOMES}")


@dataclass(frozen=True)
class Summarized:
    """`SummarizeResult`: summary text blocks, raw output, route, cap, usage (spec 8.5)."""

    summary: tuple[dict, ...]
    raw_output: tuple[dict, ...]
    provider: str
    model: str
    max_tokens: int
    usage: dict | None


def summary_event_data(summarized: Summarized, hook: str, lifecycle: dict, shadowed_range: dict, shadowed: list,
                       shadowed_tokens: int) -> dict:
    """`compaction/summary`'s data in dsh's key order (spec 8.2 step 13, `commitCompactionBody`): the lifecycle ids,
    the summary, the call's provenance (`summarizeWithLlm`'s raw output with `llmStreamCall: true`; a `summarize()`
    hook's raw output when it returns one), the span and its price, the route, then the cap and usage when
    returned (a hook returns neither)."""
    data = {**lifecycle, "summary": list(summarized.summary)}
    if hook != "bare":
        data["rawOutput"] = list(summarized.raw_output)
    if hook == "llm":
        data["llmStreamCall"] = True
    data.update({"shadowedRange": shadowed_range, "shadowedSeqs": shadowed, "shadowedTokenCount": shadowed_tokens,
                 "provider": summarized.provider, "model": summarized.model})
    if hook == "llm":
        data["maxTokens"] = summarized.max_tokens
        if summarized.usage is not None:
            data["usage"] = summarized.usage
    return data


def _message_text(message: dict) -> str:
    """The text a message gives the digest; a text that is not a string reads as JavaScript's `String()` of it."""
    parts = []
    for block in message.get("content", []):
        if block.get("type") in ("text", "reasoning"):
            parts.append(block.get("text", ""))
        elif block.get("type") == "tool-call":
            parts.append(f"[call {block.get('name', '')}]")
        elif block.get("type") == "tool-result":
            parts.append(js_join([b.get("text", "") for b in block.get("content", []) if b.get("type") == "text"],
                                 " "))
    return js_join(parts, " ")


def digest(inp: SummarizationInput, ratio: float) -> str:
    """A deterministic stand-in summary: section headings plus the span's text cut to `ratio` of its size."""
    body = " ".join(_message_text(m) for m in inp.messages)
    keep = max(1, int(len(body) * ratio))
    head = f"## Primary Request and Intent\n- condensed {len(inp.messages)} messages\n## Current Work\n- "
    text = head + body[: max(0, keep - len(head))]
    return text if text.strip() else "## Current Work\n- (empty span)"


def run_script(script: SummaryScript, inp: SummarizationInput, provider: str, model: str, max_tokens: int) -> Summarized:
    """Spec 8.5 output rules applied to a scripted outcome; raises SummarizerError for the failures."""
    if script.outcome == "failure":
        raise SummarizerError("summarizer request failed (scripted)", code="SCRIPTED_FAILURE")
    if script.outcome == "truncated":
        raise SummarizerError("summarization truncated at the token cap (incomplete checkpoint)", code="MAX_TOKENS")
    if script.outcome == "image":
        raise SummarizerError("compaction summary cannot contain image output", code="UNSUPPORTED_CONTENT")
    if script.outcome == "empty":
        raise SummarizerError("summarization produced no text summary content")
    text = script.text if script.text is not None else digest(inp, script.ratio)
    if not text.strip():
        raise SummarizerError("summarization produced no text summary content")
    blocks = ({"type": "text", "text": text},)
    usage = None if script.usage is None else {"inputTokens": script.usage[0], "outputTokens": script.usage[1]}
    return Summarized(blocks, blocks, provider, model, max_tokens, usage)


@dataclass(frozen=True)
class ScriptedSummarizer:
    """A queue of scripts: call k (the k-th `compaction/start` of the log) uses ``scripts[k]``, else ``default``.

    Deriving the call number from the log keeps the stand-in a pure function of model state."""

    scripts: tuple[SummaryScript, ...] = ()
    default: SummaryScript = field(default_factory=SummaryScript)
    provider: str | None = AGENT_OPTIONS[0]
    model: str | None = AGENT_OPTIONS[1]
    hook: str = "llm"
    """What the engine's `summarize()` returns (spec 8.5): ``llm`` `summarizeWithLlm`'s whole result; ``bare`` a
    subclass's summary, provider and model; ``raw`` those and the raw output (`runtime.codec.SUMMARIZE_HOOKS`)."""
    reroute: tuple[str, str] | None = None
    """The provider/model an `llm/stream` middleware rewrites the summary request to (spec 8.5: the recorded route is
    read back from the mutated options, as a real runtime's mock provider does); None: nothing reroutes it."""

    @property
    def target(self) -> tuple[str, str] | None:
        """The agent's own provider and model (its AgentOptions) when both are set: `conversationTarget`'s and the
        summary route's fallback (spec 8.5)."""
        return complete_pair(self.provider, self.model)

    def script_for(self, session: Session) -> SummaryScript:
        call = sum(1 for event in session.log if event.type == "compaction/start") - 1
        return self.scripts[call] if 0 <= call < len(self.scripts) else self.default
