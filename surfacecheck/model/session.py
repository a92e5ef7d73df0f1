"""The session event log as an immutable value (seed §2 "append-only log"; spec 1.3-1.5, 2.3).

A :class:`Session` is ``(log, surface, first_live_seq)``. :func:`append` returns a new session and
the frozen event, applying dsh's checks in `Session.append` order; :func:`seeded` builds a session
from a seed the way the `Session` constructor does (envelope and message-shape checks, contiguity,
surface validation, then `session/end-seed`). Nothing here mutates: a refused append raises and
leaves the caller's session as it was.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from .errors import SeedError, SessionAppendError, SurfaceError
from .event import ABSENT, ENVELOPE_KEYS, Event
from .frozen import quick_init
from .jsvalue import is_nonneg_safe_integer, is_safe_integer, plain_json_first
from .seams import active
from .surface import Surface, derive_event_message, next_surface

END_SEED = "session/end-seed"
LLM_EVENT_TYPES = frozenset({"request/header", "user/message", "assistant/message", "tool/result"})


@quick_init
@dataclass(frozen=True)
class Session:
    """Spec Appendix B `Session`: the log, its surface, and where live appends began."""

    log: tuple[Event, ...] = ()
    surface: Surface = field(default_factory=Surface)
    first_live_seq: int = 0

    @property
    def next_seq(self) -> int:
        """`Session.seq`: the seq the next append receives (== log length)."""
        return len(self.log)

    def event_at(self, seq: int) -> Event | None:
        return self.log[seq] if 0 <= seq < len(self.log) else None

    @property
    def nodes(self) -> tuple[int, ...]:
        return self.surface.nodes

    @property
    def generation(self) -> int:
        """`surface.replaceGeneration`."""
        return self.surface.generation

    @property
    def last_time(self) -> int:
        return self.log[-1].time if self.log else 0


# -- JSON value check (spec 1.3 step 1, `snapshotJsonValue`) ------------------------------------
def is_lossless_json(value: Any) -> bool:
    """JSON values only: no NaN/Infinity, no -0, string keys, no tuples-as-sets (spec 1.1 `data`). Plain
    leaves, dicts and lists by exact type first (it runs on every append); anything else (a float, a tuple,
    a subclass) as :func:`lossless_by_definition` says."""
    return plain_json_first(value, lossless_by_definition)


def lossless_by_definition(value: Any) -> bool:
    """The check as spec 1.1/1.3 words it, type by type (``is_lossless_json`` answers as this does)."""
    if value is None or isinstance(value, (bool, str)):
        return True
    if isinstance(value, int):
        return True
    if isinstance(value, float):
        return math.isfinite(value) and not (value == 0 and math.copysign(1.0, value) < 0)
    if isinstance(value, (list, tuple)):
        return all(lossless_by_definition(item) for item in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and lossless_by_definition(v) for k, v in value.items())
    return False


def _assert_supported_request_header(type_: str, data: Any, location: str, error=SessionAppendError, seq=None):
    """`assertSupportedRequestHeader` (spec 1.3 step 2): legacy header formats are refused."""
    if type_ == "request/header-delta":
        raise error(f"{location} uses unsupported legacy request/header-delta format", seq=seq)
    if type_ == "request/header" and isinstance(data, dict) and data.get("reason") == "fallback":
        raise error(f'{location} uses unsupported legacy request/header reason "fallback"', seq=seq)


def append(
    session: Session,
    type_: str,
    data: Any,
    *,
    surface_op: Any = ABSENT,
    source_event_seqs: Any = ABSENT,
    time: int | None = None,
) -> tuple[Session, Event]:
    """`Session.append(type, data, opts)` (spec 1.3): checks in dsh order, then the new session and event.

    Message shapes are deliberately *not* checked here (spec 1.3 "Not checked on live append"; §15 G18).
    """
    seq = session.next_seq
    if data is ABSENT or not is_lossless_json(data):
        raise SessionAppendError(f'session event "{type_}" carries non-JSON-serializable data', seq=seq)
    _assert_supported_request_header(type_, data, f'session event "{type_}"', seq=seq)
    if not is_lossless_json(None if surface_op is ABSENT else surface_op) or not is_lossless_json(
        None if source_event_seqs is ABSENT else source_event_seqs
    ):
        raise SessionAppendError(f'session event "{type_}" carries non-JSON-serializable surface metadata', seq=seq)
    if isinstance(source_event_seqs, tuple):
        source_event_seqs = list(source_event_seqs)
    event = Event(
        type=type_,
        seq=seq,
        time=session.last_time if time is None else time,
        data=data,
        surface_op=surface_op,
        source_event_seqs=source_event_seqs,
    )
    return active().commit(session, event), event


def commit(session: Session, event: Event) -> Session:
    """`validateNext` then `log.push` (spec 1.3 steps 6, 8): raises SurfaceError, leaving `session` unchanged."""
    surface, _ = next_surface(session.surface, event, session.next_seq, session.event_at)
    return Session(session.log + (event,), surface, session.first_live_seq)


# -- seeds (spec 1.5) --------------------------------------------------------------------------
def _has_provider_model(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and isinstance(value.get("provider"), str)
        and value["provider"] != ""
        and isinstance(value.get("model"), str)
        and value["model"] != ""
    )


def envelope_problem(record: Any, index: int) -> str | None:
    """`assertSessionEventEnvelope` (spec 1.5 step 2): the reason a stored record is not an event, or None."""
    if not isinstance(record, dict):
        return f"seed event at index {index} has an invalid event envelope"
    if record.get("type") == "request/header-delta":
        return f"seed event at index {index} uses unsupported legacy request/header-delta format"
    if any(key not in ENVELOPE_KEYS for key in record):
        return f"seed event at index {index} has an invalid event envelope"
    if (
        not isinstance(record.get("type"), str)
        or not is_nonneg_safe_integer(record.get("seq"))
        or not is_safe_integer(record.get("time"))
        or "data" not in record
        or ("ignorable" in record and record["ignorable"] is not True)
    ):
        return f"seed event at index {index} has an invalid event envelope"
    return message_shape_problem(record, index)


def message_shape_problem(record: dict, index: int) -> str | None:
    """`assertCurrentLlmShape` (spec 1.5 step 3): header route and message identity/role/source/content."""
    type_ = record.get("type")
    data = record.get("data")
    body = data if isinstance(data, dict) else None
    if type_ == "request/header":
        header = body.get("header") if body else None
        header = header if isinstance(header, dict) else None
        config = header.get("config") if header else None
        if not _has_provider_model(config):
            return f"seed request/header at index {index} lacks provider/model"
        effort = config.get("reasoningEffort", ABSENT)
        if effort is not ABSENT and (not isinstance(effort, str) or effort == ""):
            return f"seed request/header at index {index} has an invalid reasoningEffort"
        defaults = header.get("adapterDefaults", ABSENT)
        if defaults is not ABSENT:
            if (
                not isinstance(defaults, dict)
                or any(key not in ("reasoningEffort", "maxTokens") for key in defaults)
                or any(marker is not True for marker in defaults.values())
                or (defaults.get("reasoningEffort") is True and "reasoningEffort" not in config)
                or (defaults.get("maxTokens") is True and "maxTokens" not in config)
            ):
                return f"seed request/header at index {index} has invalid adapterDefaults"
        return None
    if type_ not in ("user/message", "assistant/message", "tool/result"):
        return None
    subject = f"seed {type_} at index {index}"
    message = body if type_ == "user/message" else (body.get("message") if body else None)
    if not isinstance(message, dict) or not isinstance(message.get("id"), str) or message["id"] == "":
        return f"{subject} lacks an identified message"
    role = "assistant" if type_ == "assistant/message" else "user"
    if message.get("role") != role:
        return f'{subject} message must have role "{role}"'
    source = message.get("source")
    if not isinstance(source, dict) or not isinstance(source.get("kind"), str) or source["kind"] == "":
        return f"{subject} message has invalid source"
    if not isinstance(message.get("content"), list):
        return f"{subject} message has invalid content"
    if type_ == "assistant/message":
        if source["kind"] != "model" or not _has_provider_model(source):
            return f"{subject} message must have model source"
        return None
    if type_ != "tool/result":
        return None
    if source["kind"] != "tool" or not isinstance(source.get("callId"), str) or source["callId"] == "":
        return f"{subject} message must have tool source"
    content = message["content"]
    block = content[0] if content else None
    if (
        len(content) != 1
        or not isinstance(block, dict)
        or block.get("type") != "tool-result"
        or not isinstance(block.get("content"), list)
    ):
        return f"{subject} message must contain one tool-result block"
    if block.get("toolCallId") != source["callId"]:
        return f"{subject} message has mismatched tool call ids"
    return None


def seed_step(session: Session, event: Event, index: int) -> Session:
    """One seed entry (spec 1.5 steps 1-7): lossless JSON, envelope, shapes, legacy reason, contiguity, surface."""
    record = {key: value for key, value in event.to_json().items() if value is not ABSENT}
    if not is_lossless_json(record):
        raise SeedError(f"seed event at index {index} is not losslessly JSON-serializable", seq=index)
    problem = envelope_problem(record, index)
    if problem:
        raise SeedError(problem, seq=event.seq if isinstance(event.seq, int) else index)
    _assert_supported_request_header(event.type, event.data, f"seed event at index {index}", SeedError, index)
    if event.seq != index:
        raise SeedError(
            f"seed event at index {index} has seq {event.seq} (expected {index}); seed must be contiguous from 0",
            seq=event.seq,
        )
    try:
        return active().commit(session, event)
    except SurfaceError as error:
        raise SeedError(f"invalid seed event at index {index}: {error.message}", seq=event.seq) from error


def seeded(seed: Iterable[Event] | None, *, end_seed: bool = True) -> Session:
    """`new Session(id, seed)` (spec 1.5): validate each entry, then append `session/end-seed` unless the
    seed already ends with one (idempotent reopen). An omitted seed (None) writes nothing."""
    session = Session()
    if seed is None:
        return session
    for index, event in enumerate(seed):
        session = seed_step(session, event, index)
    session = Session(session.log, session.surface, first_live_seq=len(session.log))
    if end_seed and (not session.log or session.log[-1].type != END_SEED):
        session, _ = append(session, END_SEED, {})
    return session


def derive_messages(session: Session) -> list[dict]:
    """`Session.deriveMessages()` (spec 2.3): surface nodes through `deriveEventMessage`, nulls dropped."""
    messages = []
    for seq in session.surface.nodes:
        message = derive_event_message(session.log[seq])
        if message is not None:
            messages.append(message)
    return messages


def request_header(session: Session) -> dict | None:
    """`session.requestHeader()` (spec 4.4): the latest logged `request/header`'s header."""
    for event in reversed(session.log):
        if event.type == "request/header" and isinstance(event.data, dict):
            return event.data.get("header")
    return None


def replay_events(events: Sequence[Event]) -> Session:
    """Rebuild a session from a stored log without adding an end-seed (spec 2.2 `foldSurface` checks only)."""
    session = Session()
    for event in events:
        session = active().commit(session, event)
    return session
