"""The agent loop's step sequence, driven by a script (seed §4, §12; spec 13, 10.1-10.3).

A turn: `turn/start`; per step the pre-step (inbox claim → runtime-context candidate →
`agent/pre-step` waterfall, where the pressure listener runs and cannot see the claimed batch);
`step/start`; the entered messages; the request (header/context records, streamed chunks); on a
context-overflow finish the `agent/request-error` listener may compact and retry *the same step*;
on success the `assistant/message` and tool executions; `step/end`. Every transition writes
dsh-format events through :mod:`model.session`, so what this produces is a real-shaped log.

The language model is replaced by :class:`Reply` scripts and the summarizer by
:class:`~model.summarizer.SummaryScript` — the whole loop is deterministic.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from .estimate import header_equals
from .manual import compact_command
from .policy import (PRESSURE, Environment, OverflowState, compact_if_needed, on_request_error, reset_overflow,
                     summary_options)
from .runtime_context import NEVER, fold_retained, project_sections
from .session import Session, append, derive_messages, request_header, seeded

DEFAULT_HEADER = {
    "config": {"provider": "model", "model": "model-chat"},
    "system": "You are an AI agent powered by DeepSeek Harness.",
    "tools": [
        {"name": "bash", "description": "Run a shell command in the workspace and return its output.",
         "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}},
        {"name": "read_file", "description": "Read a UTF-8 text file from the workspace.",
         "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}},
    ],
}


@dataclass(frozen=True)
class ToolCall:
    """One tool call the scripted model makes, and the text its tool returns."""

    name: str
    arguments: str
    result: str
    is_error: bool = False


@dataclass(frozen=True)
class Reply:
    """One provider response: text and tool calls, or a context-overflow failure (spec 10.1)."""

    text: str = ""
    calls: tuple[ToolCall, ...] = ()
    overflow: bool = False
    usage: tuple[int, int] = (12, 8)


@dataclass(frozen=True)
class Turn:
    """A user prompt and the replies of its steps, in order. Overflowed attempts consume a reply each.

    ``context`` is the runtime-context sections (``{name, text}``) active for this turn's steps."""

    prompt: str
    replies: tuple[Reply, ...]
    context: tuple[dict, ...] = ()


@dataclass(frozen=True)
class Agent:
    """Loop state (spec Appendix B `Agent`): the session, the last turn number, runtime-context
    retention, overflow bookkeeping, the environment, and the labelled trace so far."""

    session: Session = field(default_factory=Session)
    env: Environment = field(default_factory=Environment)
    last_turn: int = 0
    retained: object = NEVER
    overflow: OverflowState = field(default_factory=OverflowState)
    header: dict = field(default_factory=lambda: DEFAULT_HEADER)
    context_window: int | None = None
    clock: int = 1_800_000_000_000
    trace: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    session_id: str = "model-session"


def _emit(agent: Agent, type_: str, data, **kw) -> tuple[Agent, object]:
    """Append one event with a deterministic clock, and follow it with the live projections."""
    clock = agent.clock + 1
    session, event = append(agent.session, type_, data, time=clock, **kw)
    retained = fold_retained(agent.retained, event)
    overflow = reset_overflow(agent.overflow, type_, data.get("status") if isinstance(data, dict) else None,
                              agent.env.policy.compaction.auto)
    return replace(agent, session=session, clock=clock, retained=retained, overflow=overflow), event


def _absorb(agent: Agent, before: Session, after: Session, labels: tuple[str, ...]) -> Agent:
    """Take a policy outcome's session: fold the projections over the events it wrote."""
    retained, overflow = agent.retained, agent.overflow
    for event in after.log[len(before.log):]:
        retained = fold_retained(retained, event)
        overflow = reset_overflow(overflow, event.type, auto=agent.env.policy.compaction.auto)
    clock = after.log[-1].time if len(after.log) > len(before.log) else agent.clock
    return replace(agent, session=after, retained=retained, overflow=overflow, clock=max(clock, agent.clock),
                   trace=agent.trace + labels)


def _label(agent: Agent, text: str) -> Agent:
    return replace(agent, trace=agent.trace + (text,))


def queue_prompt(agent: Agent, prompt: dict) -> Agent:
    """`agent/inbox/spliced` insert into `next-turn` (the prompt is queued, not yet on the surface)."""
    agent, _ = _emit(agent, "agent/inbox/spliced", {"target": "next-turn", "start": 0, "inserted": [prompt]})
    return agent


def _user_message(agent: Agent, text: str) -> dict:
    return {"content": [{"type": "text", "text": text}], "source": {"kind": "user"}, "role": "user",
            "id": f"user-{agent.session.next_seq}"}


def pressure_check(agent: Agent) -> Agent:
    """The pressure listener inside `agent/pre-step` (spec 9.3): errors are warned, never alter the step.
    With `auto: false` the engine registers neither automatic listener (spec 9.3), so nothing runs."""
    if not agent.env.policy.compaction.auto:
        return agent
    before = agent.session
    outcome = compact_if_needed(before, PRESSURE, agent.env)
    agent = _absorb(agent, before, outcome.session, outcome.labels)
    if outcome.error is not None:
        agent = replace(agent, warnings=agent.warnings + (f"step compaction failed: {outcome.error.message}; "
                                                          "continuing the turn",))
    return agent


def _request(agent: Agent) -> Agent:
    """`buildRequest` (spec 13 step 8): `request/header` initial/change, `request/context` if changed."""
    logged = request_header(agent.session)
    if logged is None or not header_equals(logged, agent.header):
        reason = "initial" if logged is None else "change"
        agent, _ = _emit(agent, "request/header", {"header": agent.header, "reason": reason})
    config = agent.header["config"]
    context = {"provider": config["provider"], "model": config["model"]}
    window = agent.context_window if agent.context_window is not None else agent.env.policy.context_window
    if window is not None:
        context["contextWindow"] = window
    last = next((e.data for e in reversed(agent.session.log) if e.type == "request/context"), None)
    if last != context:
        agent, _ = _emit(agent, "request/context", context)
    return agent


def _stream(agent: Agent, turn: int, step: int, reply: Reply) -> tuple[Agent, list[int], list[dict]]:
    """The provider stream as `assistant/chunk` events: blocks, usage, finish."""
    seqs: list[int] = []
    blocks: list[dict] = []

    def chunk(agent, body):
        agent, event = _emit(agent, "assistant/chunk", {"turn": turn, "step": step, "chunk": body})
        seqs.append(event.seq)
        return agent

    if reply.overflow:
        agent = chunk(agent, {"type": "finish", "reason": {"kind": "error", "failure": {
            "message": "request too large for model context (scripted provider)", "code": "CONTEXT_WINDOW_EXCEEDED"}}})
        return agent, seqs, blocks
    index = 0
    if reply.text:
        block = {"type": "text", "text": reply.text}
        agent = chunk(agent, {"type": "block-start", "index": index, "blockType": "text"})
        agent = chunk(agent, {"type": "text-delta", "index": index, "text": reply.text})
        agent = chunk(agent, {"type": "block-end", "index": index, "block": block})
        blocks.append(block)
        index += 1
    for number, call in enumerate(reply.calls):
        call_id = f"call-{turn}-{step}-{number + 1}"
        block = {"type": "tool-call", "id": call_id, "name": call.name, "arguments": call.arguments}
        agent = chunk(agent, {"type": "block-start", "index": index, "blockType": "tool-call"})
        agent = chunk(agent, {"type": "tool-call-delta", "index": index, "id": call_id, "name": call.name,
                              "argumentsDelta": call.arguments})
        agent = chunk(agent, {"type": "block-end", "index": index, "block": block})
        blocks.append(block)
        index += 1
    agent = chunk(agent, {"type": "usage", "usage": {"inputTokens": reply.usage[0], "outputTokens": reply.usage[1]}})
    agent = chunk(agent, {"type": "finish", "reason": {"kind": "tool-calls" if reply.calls else "stop"}})
    return agent, seqs, blocks


def _tools(agent: Agent, turn: int, step: int, reply: Reply, blocks: list[dict]) -> Agent:
    """Tool execution: `tool/call` then its `tool/result` (append, `sourceEventSeqs: [callSeq]`)."""
    for call, block in zip(reply.calls, [b for b in blocks if b["type"] == "tool-call"]):
        agent, call_event = _emit(agent, "tool/call", {"turn": turn, "step": step, "callId": block["id"],
                                                        "name": call.name, "arguments": call.arguments})
        message = {"source": {"kind": "tool", "callId": block["id"]},
                   "content": [{"type": "tool-result", "toolCallId": block["id"],
                                "content": [{"type": "text", "text": call.result}], "isError": call.is_error}],
                   "role": "user", "id": f"tool-result-{agent.session.next_seq}"}
        agent, _ = _emit(agent, "tool/result", {"turn": turn, "step": step, "message": message},
                         surface_op="append", source_event_seqs=[call_event.seq])
    return agent


def run_turn(agent: Agent, script: Turn) -> Agent:
    """One turn of the loop (spec 13) over the scripted replies; returns the agent after `turn/end`."""
    turn = agent.last_turn + 1
    agent = queue_prompt(agent, _user_message(agent, script.prompt))
    agent, _ = _emit(agent, "turn/start", {"turn": turn})
    agent = replace(agent, last_turn=turn)
    agent = _label(agent, f"turn {turn} opened: prompt of {len(script.prompt)} chars queued")
    replies = list(script.replies)
    step, reason = 0, {"kind": "completed"}
    while replies:
        step += 1
        # -- pre-step: claim, runtime-context candidate, pressure (spec 13 steps 2-5) ------------
        claimed = []
        if step == 1:
            agent, _ = _emit(agent, "agent/inbox/spliced", {"target": "next-turn", "start": 0, "removedCount": 1,
                                                            "inserted": []})
            claimed.append(script.prompt)
        candidate = project_sections(agent.retained, script.context, id=f"runtime-context-{turn}-{step}")
        agent = pressure_check(agent)
        # -- step/start and the entered batch (spec 13 steps 6-7) ----------------------------------
        agent, _ = _emit(agent, "step/start", {"turn": turn, "step": step})
        for text in claimed:
            agent, _ = _emit(agent, "user/message", _user_message(agent, text), surface_op="append")
        if candidate is not None:
            agent, _ = _emit(agent, "user/message", candidate, surface_op="append")
            agent = _label(agent, f"step {turn}/{step}: runtime context entered")
        elif script.context:
            agent = _label(agent, f"step {turn}/{step}: no runtime-context candidate (retained text unchanged)")
        # -- the request, with same-step overflow retries (spec 10.1-10.3) ---------------------------
        while True:
            reply = replies.pop(0)
            agent = _request(agent)
            agent, chunk_seqs, blocks = _stream(agent, turn, step, reply)
            if not reply.overflow:
                break
            agent = _label(agent, f"step {turn}/{step}: provider overflow (CONTEXT_WINDOW_EXCEEDED)")
            before = agent.session
            if agent.env.policy.compaction.auto:
                outcome, overflow, retry = on_request_error(before, agent.overflow, "CONTEXT_WINDOW_EXCEEDED", agent.env)
                agent = replace(_absorb(agent, before, outcome.session, outcome.labels), overflow=overflow)
            else:  # no `agent/request-error` listener is registered (spec 9.3): the failure stands
                retry = False
            if not retry or not replies:
                reason = {"kind": "error", "error": {"message": "request too large for model context",
                                                     "code": "CONTEXT_WINDOW_EXCEEDED"}}
                agent = _label(agent, f"step {turn}/{step}: no retry; the turn ends with the overflow error")
                break
            agent = _label(agent, f"step {turn}/{step}: same-step retry with {len(derive_messages(agent.session))} "
                                  "derived messages")
        if reason["kind"] == "error":
            agent, _ = _emit(agent, "step/end", {"turn": turn, "step": step})
            break
        message = {"role": "assistant", "content": blocks,
                   "source": {"kind": "model", **agent.header["config"]}, "id": f"assistant-{agent.session.next_seq}"}
        agent, _ = _emit(agent, "assistant/message", {"turn": turn, "step": step, "message": message,
                                                      "usage": {"inputTokens": reply.usage[0],
                                                                "outputTokens": reply.usage[1]}},
                         surface_op="append", source_event_seqs=chunk_seqs)
        agent = _tools(agent, turn, step, reply, blocks)
        agent, _ = _emit(agent, "step/end", {"turn": turn, "step": step})
        if not reply.calls:
            break
    agent, _ = _emit(agent, "turn/end", {"turn": turn, "reason": reason})
    return _label(agent, f"turn {turn} closed: {reason['kind']}")


def manual_compact(agent: Agent, command_id: str | None = None, args: str = "") -> Agent:
    """`/compact` between turns (spec 11): the agent is idle, the bracket is standalone."""
    before = agent.session
    command_id = command_id or f"cmd-{before.next_seq}"
    session, result, labels = compact_command(before, command_id, args, summarizer=agent.env.summarizer,
                                              faults=agent.env.faults,
                                              **summary_options(before, agent.env.policy.compaction,
                                                                agent.env.summarizer.target))
    return _absorb(agent, before, session, labels)


def crash_and_reload(agent: Agent) -> Agent:
    """A process restart: the log is reloaded as a seed, which appends `session/end-seed` (spec 1.5)."""
    from .runtime_context import restore_retained

    session = seeded(agent.session.log)
    return replace(agent, session=session, retained=restore_retained(session), overflow=OverflowState(),
                   trace=agent.trace + ("crash and reload: session/end-seed appended",))
