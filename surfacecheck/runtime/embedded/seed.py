"""Reopening a session from its log as a seed (spec 1.5): the checks a reload applies that a live
append does not (envelope and message shapes, spec §15 G18), then `session/end-seed`.

:func:`reopen` builds a fresh :class:`~.session.EmbeddedSession` by validating and committing each
stored event; any problem is a :class:`SeedError` and the caller keeps its session.
"""
from __future__ import annotations

from typing import Any

from surfacecheck.model.errors import SeedError, SurfaceError
from surfacecheck.model.jsvalue import is_nonneg_safe_integer, is_safe_integer

from .session import END_SEED, EmbeddedSession, is_lossless_json, legacy_header_problem

ENVELOPE_KEYS = frozenset({"type", "seq", "time", "data", "surfaceOp", "sourceEventSeqs", "ignorable"})


def _provider_model(value: Any) -> bool:
    return (isinstance(value, dict) and isinstance(value.get("provider"), str) and value["provider"] != ""
            and isinstance(value.get("model"), str) and value["model"] != "")


def envelope_problem(record: Any, index: int) -> str | None:
    """`assertSessionEventEnvelope` (spec 1.5 step 2) then the message shapes (step 3)."""
    if not isinstance(record, dict):
        return f"seed event at index {index} has an invalid event envelope"
    if record.get("type") == "request/header-delta":
        return f"seed event at index {index} uses unsupported legacy request/header-delta format"
    if any(key not in ENVELOPE_KEYS for key in record) or not isinstance(record.get("type"), str) \
            or not is_nonneg_safe_integer(record.get("seq")) or not is_safe_integer(record.get("time")) \
            or "data" not in record or ("ignorable" in record and record["ignorable"] is not True):
        return f"seed event at index {index} has an invalid event envelope"
    return shape_problem(record, index)


def _header_problem(body: dict | None, index: int) -> str | None:
    header = body.get("header") if body else None
    header = header if isinstance(header, dict) else None
    config = header.get("config") if header else None
    if not _provider_model(config):
        return f"seed request/header at index {index} lacks provider/model"
    if "reasoningEffort" in config and (not isinstance(config["reasoningEffort"], str) or config["reasoningEffort"] == ""):
        return f"seed request/header at index {index} has an invalid reasoningEffort"
    if "adapterDefaults" in header:
        defaults = header["adapterDefaults"]
        if (not isinstance(defaults, dict) or any(key not in ("reasoningEffort", "maxTokens") for key in defaults)
                or any(marker is not True for marker in defaults.values())
                or (defaults.get("reasoningEffort") is True and "reasoningEffort" not in config)
                or (defaults.get("maxTokens") is True and "maxTokens" not in config)):
            return f"seed request/header at index {index} has invalid adapterDefaults"
    return None


def shape_problem(record: dict, index: int) -> str | None:
    """`assertCurrentLlmShape` (spec 1.5 step 3): header route; message identity, role, source, content."""
    kind, data = record.get("type"), record.get("data")
    body = data if isinstance(data, dict) else None
    if kind == "request/header":
        return _header_problem(body, index)
    if kind not in ("user/message", "assistant/message", "tool/result"):
        return None
    subject = f"seed {kind} at index {index}"
    message = body if kind == "user/message" else (body.get("message") if body else None)
    if not isinstance(message, dict) or not isinstance(message.get("id"), str) or message["id"] == "":
        return f"{subject} lacks an identified message"
    role = "assistant" if kind == "assistant/message" else "user"
    if message.get("role") != role:
        return f'{subject} message must have role "{role}"'
    source = message.get("source")
    if not isinstance(source, dict) or not isinstance(source.get("kind"), str) or source["kind"] == "":
        return f"{subject} message has invalid source"
    if not isinstance(message.get("content"), list):
        return f"{subject} message has invalid content"
    if kind == "assistant/message":
        return None if source["kind"] == "model" and _provider_model(source) else f"{subject} message must have model source"
    if kind != "tool/result":
        return None
    if source["kind"] != "tool" or not isinstance(source.get("callId"), str) or source["callId"] == "":
        return f"{subject} message must have tool source"
    content = message["content"]
    block = content[0] if content else None
    if len(content) != 1 or not isinstance(block, dict) or block.get("type") != "tool-result" \
            or not isinstance(block.get("content"), list):
        return f"{subject} message must contain one tool-result block"
    if block.get("toolCallId") != source["callId"]:
        return f"{subject} message has mismatched tool call ids"
    return None


def reopen(log: list[dict], session_class=EmbeddedSession) -> EmbeddedSession:
    """`new Session(id, seed)` (spec 1.5): validate each entry, commit it, then `session/end-seed` unless
    the seed already ends with one (idempotent reopen)."""
    session = session_class()
    for index, record in enumerate(log):
        if not is_lossless_json(record):
            raise SeedError(f"seed event at index {index} is not losslessly JSON-serializable", seq=index)
        problem = envelope_problem(record, index)
        if problem:
            seq = record.get("seq")
            raise SeedError(problem, seq=seq if isinstance(seq, int) else index)
        problem = legacy_header_problem(record["type"], record["data"], f"seed event at index {index}")
        if problem:
            raise SeedError(problem, seq=index)
        if record["seq"] != index:
            raise SeedError(f"seed event at index {index} has seq {record['seq']} (expected {index}); seed must be "
                            "contiguous from 0", seq=record["seq"])
        try:
            session.commit(record)
        except SurfaceError as error:
            raise SeedError(f"invalid seed event at index {index}: {error.message}", seq=record["seq"]) from error
    session.first_live_seq = len(session.log)
    if not session.log or session.log[-1]["type"] != END_SEED:
        session.append(END_SEED, {})
    return session
