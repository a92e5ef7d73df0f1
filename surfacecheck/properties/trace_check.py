"""The suite's one way to read a trace: :func:`read_valid_trace` refuses, before anything runs, any line that is
not what the trace format (:mod:`surfacecheck.core.trace`) and the runtime protocol say.

``core.trace.read_trace`` checks the structure; this layer adds what it cannot see from ``core``: each step's
``args`` against its op's request schema (:func:`surfacecheck.runtime.schemas.args_error`, the schemas of
``docs/schemas/``; a conversation trace's against the conversation requests), and that the header's and the violation's ``property`` is one the suite checks (a catalogue
id, a registered monitor, a lockstep divergence, or an engine's own failure). Every reader of traces (replay,
verify's regression replay, the findings, the HTML trace drawing, the e2e bundles) goes through it, so a bad
trace is exit 2 with ``PATH:LINE: reason`` and never a verdict about a runtime.
"""
from __future__ import annotations

from pathlib import Path

from surfacecheck.core import catalogue
from surfacecheck.core.protocol import CONVERSATION
from surfacecheck.core.trace import PropertyCheck, Trace, TraceError, peek_header, read_trace
from surfacecheck.properties.monitors import lookup
from surfacecheck.properties.stateful.lockstep import LOCKSTEP_PREFIX, RUNTIME_EXCEPTION
from surfacecheck.runtime.conversation.peer import BadArgs, check_messages
from surfacecheck.runtime.schemas import args_error

MACHINE_ERROR = "machine-error"
ENGINE_PROPERTIES = (RUNTIME_EXCEPTION, MACHINE_ERROR)
"""Failures an engine reports in a trace's name that are no catalogue property: the runtime raised, or the
stateful machine itself broke."""

__all__ = ["TraceError", "property_error", "read_valid_trace"]


def property_error(name: str) -> str | None:
    """Why no engine checks a property named ``name`` (None when one does)."""
    if name in catalogue.CATALOGUE or name in ENGINE_PROPERTIES:
        return None
    if name.startswith(LOCKSTEP_PREFIX) and len(name) > len(LOCKSTEP_PREFIX):
        return None
    try:
        lookup(name)
    except KeyError:
        return (f"unknown property {name!r}: not a catalogue id (surfacecheck catalogue), a registered monitor, "
                f"a {LOCKSTEP_PREFIX}<what> divergence nor one of {', '.join(ENGINE_PROPERTIES)}")
    return None


def conversation_args_error(op: str, args: dict) -> str | None:
    """Why ``args`` is not a request of ``op`` at the conversation level (``docs/conversation-protocol.md``), or
    None when it is."""
    try:
        if op == "open":
            if not isinstance(args.get("settings", {}), dict):
                return "args of open: settings must be an object"
            if args.get("system") is not None and not isinstance(args["system"], str):
                return "args of open: system must be a string or null"
            check_messages(args.get("history"))
        elif op == "turn":
            if not isinstance(args.get("user"), str):
                return "args of turn: user must be a string"
            replies = args.get("replies", [])
            if not isinstance(replies, list) or not all(isinstance(r, dict) for r in replies):
                return "args of turn: replies must be a list of objects"
        summaries = args.get("summaries", [])
        if not isinstance(summaries, list) or not all(isinstance(s, dict) for s in summaries):
            return f"args of {op}: summaries must be a list of summarizer scripts"
    except BadArgs as exc:
        return f"args of {op}: {exc}"
    return None


def read_valid_trace(path: str | Path, *, check_property: PropertyCheck | None = None) -> Trace:
    """Read ``path`` as a trace, every line checked (structure, each step's args, the properties named);
    :class:`TraceError` (``PATH:LINE: reason``) otherwise. A conversation-level trace's steps are checked against
    the conversation requests; ``check_property`` replaces the suite's check of the properties named (the
    contract passes its promises, which this layer cannot see)."""
    header = peek_header(path)
    conversation = header is not None and header.get("level") == CONVERSATION
    return read_trace(path, check_step=conversation_args_error if conversation else args_error,
                      check_property=check_property or property_error)
