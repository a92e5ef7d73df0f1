"""JSON Schemas of every protocol message (``docs/schemas/*.json`` are written from these).

One schema per message: the request and response envelopes, the ``hello`` result, and for each op
its ``args`` and its ``result`` (the conversation level's ops, messages and steps in ``conversation.*.json``). A
result schema of an op that can be refused accepts the spec refusal ``{"error": {"type", "rule", "seq",
"message"}}`` as an alternative. ``python -m
surfacecheck.runtime.schemas DIR`` rewrites the files; a test checks they are up to date.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import jsonschema

from ..core.protocol import LEVELS, OPS, OPTIONAL_OPS, PROTOCOL, ProtocolError

DRAFT = "https://json-schema.org/draft/2020-12/schema"
ALL_OPS = ("hello", "bench") + tuple(op for level in LEVELS for op in OPS[level]) + OPTIONAL_OPS

INT = {"type": "integer"}
NAT = {"type": "integer", "minimum": 0}
SEQ_OR_NULL = {"type": ["integer", "null"]}
REFUSAL = {
    "type": "object", "required": ["error"], "additionalProperties": False,
    "properties": {"error": {"type": "object", "required": ["type", "rule", "seq", "message"],
                             "properties": {"type": {"type": "string"}, "rule": {"type": "string"},
                                            "seq": SEQ_OR_NULL, "message": {"type": "string"}}}},
}
FAILURE = {"oneOf": [{"type": "null"}, REFUSAL["properties"]["error"]]}
EVENT = {
    "type": "object", "required": ["type"], "additionalProperties": False,
    "properties": {"type": {"type": "string"}, "data": {}, "time": INT, "surfaceOp": {},
                   "sourceEventSeqs": {}},
}
SUMMARY = {
    "type": "object", "additionalProperties": False,
    "properties": {
        "outcome": {"enum": ["text", "failure", "empty", "image", "truncated", "cancel", "agent-cancel", "late-cancel",
                             "concurrent"]},
        "text": {"type": ["string", "null"]}, "ratio": {"type": "number", "minimum": 0},
        "concurrent": {"type": "array", "items": {"type": "array", "minItems": 3, "maxItems": 4,
                                                   "prefixItems": [{"type": "string"}]}},
        "usage": {"type": ["array", "null"], "items": INT, "minItems": 2, "maxItems": 2},
    },
}
SUMMARIES = {"type": ["array", "null"], "items": SUMMARY}
FAULTS = {"type": ["object", "null"], "additionalProperties": False, "properties": {
    "fail_appends": {"type": "array", "items": {"enum": ["compaction/summary", "checkpoint", "compaction/end",
                                                          "error-close", "prune-replace"]}},
    "flush_fails": {"type": "boolean"}, "cancel_during_flush": {"type": "boolean"}}}
RESULT = {"oneOf": [{"type": "null"}, {"type": "object", "required": [
    "compactionId", "sourceCommandId", "startSeq", "summarySeq", "endSeq", "start", "end", "shadowedSeqs",
    "shadowedTokenCount"], "properties": {"shadowedSeqs": {"type": "array", "items": NAT}}}]}
SUMMARY_REQUEST = {"type": "object", "additionalProperties": False,
                   "required": ["provider", "model", "messages", "maxTokens", "purpose"],
                   "properties": {"provider": {"type": "string"}, "model": {"type": "string"},
                                  "messages": {"type": "array", "items": {"type": ["object", "null"]}},
                                  "system": {"type": "string"}, "tools": {"type": "array"}, "maxTokens": INT,
                                  "purpose": {"const": "compaction"}}}
"""One request the summarizer received (spec 8.5), each message its role and content."""
COMMON = {"generation": NAT, "appended": {"type": "array", "items": {"type": "string"}},
          "requests": {"type": "array", "items": SUMMARY_REQUEST}}
TOKEN_USAGE = {"oneOf": [{"type": "null"}, {"type": "object", "additionalProperties": False, "required": [
    "inputTokens", "outputTokens", "cacheReadTokens", "cacheWriteTokens"], "properties": {
    k: {"type": "number"} for k in ("inputTokens", "outputTokens", "cacheReadTokens", "cacheWriteTokens")}}]}
"""`projection {usage: true}`: the cumulative `tokenUsage` buckets (spec 5.2), null once that fold is stuck."""
CONTEXT_BREAKDOWN = {"oneOf": [{"type": "null"}, {"type": "object", "additionalProperties": False, "required": [
    "systemTokens", "toolsTokens", "messageTokens"], "properties": {
    k: {"type": "integer"} for k in ("systemTokens", "toolsTokens", "messageTokens")}}]}
"""`projection {breakdown: true}`: the `contextBreakdown` composition (spec 5.2), null once that fold is stuck."""
CONTEXT_PRESSURE = {"oneOf": [{"type": "null"}, {"type": "object", "additionalProperties": False, "properties": {
    k: {"type": "number"} for k in ("contextWindow", "pressureTokens", "projectedTokens")}}]}
"""`projection {pressure: true}`: the `contextPressure` view (spec 5.2), each figure absent until known, null once
that fold is stuck."""
HEADER = {"oneOf": [{"type": "null"}, {"type": "object", "required": ["config"], "properties": {
    "config": {"type": "object"}, "system": {"type": "string"}, "tools": {"type": "array"},
    "adapterDefaults": {"type": "object"}}}]}
"""`measure`'s and `meter_replay`'s optional EpochHeader (`request/header`'s `data.header`), priced in place of the
latest logged one (spec 4.3 `measure(session, requestHeader?)`)."""
LOGGED_EVENT = {
    "type": "object", "required": ["type", "seq", "data"], "additionalProperties": False,
    "properties": {"type": {"type": "string"}, "seq": NAT, "time": INT, "data": {},
                   "surfaceOp": {"oneOf": [{"const": "append"}, {"type": "object", "required": ["op", "start", "end"],
                                                                 "additionalProperties": False, "properties": {
                                                                     "op": {"const": "replace"}, "start": NAT,
                                                                     "end": NAT}}]},
                   "sourceEventSeqs": {"type": "array", "items": NAT}, "ignorable": {}},
}
"""An event of a handed log (`meter_replay`): as `events` answers it, its seq its position (spec 1.1, 4.2)."""
RUN_ARGS = {"summaries": SUMMARIES, "summary": {"oneOf": [{"type": "null"}, SUMMARY]}, "faults": FAULTS}


def _obj(required=(), additional=False, **props) -> dict:
    return {"type": "object", "required": list(required), "additionalProperties": additional, "properties": props}


def _refusable(schema: dict) -> dict:
    return {"oneOf": [schema, REFUSAL]}


REFUSED_UNITS = {"type": "array", "minItems": 1, "items": {"enum": ["tokenUsage", "contextBreakdown", "contextPressure"]}}
"""The projection units whose value (given beside) their own schema refuses: dsh's `snapshot()` throws on it."""

UNIT_CHANGES = {"type": "object", "additionalProperties": False,
                "required": ["tokenUsage", "contextBreakdown", "contextPressure"],
                "properties": {unit: {"type": ["integer", "null"], "minimum": 0}
                               for unit in ("tokenUsage", "contextBreakdown", "contextPressure")}}
"""The seq at which each projection unit's state reference last changed (its registry's change feed), or null."""

LOGGED = {"type": "array", "items": _obj(("level", "text"), level={"enum": ["info", "warn"]}, text={"type": "string"})}
"""What the listener wrote to its logger during the op, in order (spec 9.3, 10.2)."""

ARGS: dict[str, dict] = {
    "hello": _obj(), "bench": _obj(("sizes",), True, sizes={"type": "array", "items": NAT}, appends=NAT),
    "reset": _obj(), "append": _obj(("event",), event=EVENT), "surface": _obj(), "cuts": _obj(seqs={"type": "array", "items": INT}),
    "measure": _obj(header=HEADER),
    "meter_replay": _obj(("events",), events={"type": "array", "items": LOGGED_EVENT}, header=HEADER),
    "projection": _obj(usage={"type": "boolean"}, breakdown={"type": "boolean"}, pressure={"type": "boolean"}),
    "events": _obj(**{"from": NAT}),
    "select_range": _obj(("retain_tokens",), retain_tokens=NAT),
    "prune": _obj(pruner={"type": ["object", "null"]}, **RUN_ARGS),
    "compact": _obj(("start", "end"), start=NAT, end=NAT, manual={"type": "boolean"}, aborted={"type": "boolean"},
                    signal={"type": "boolean"}, **RUN_ARGS),
    "configure": _obj(policy={"type": ["object", "null"]}, context_window={"type": ["integer", "null"]},
                      route={"oneOf": [{"type": "null"}, _obj(("provider", "model"), provider={"type": "string"},
                                                                model={"type": "string"})]},
                      agent=_obj(provider={"type": "string"}, model={"type": "string"}),
                      summarize={"enum": ["llm", "bare", "raw"]},
                      summaries=SUMMARIES, summary=RUN_ARGS["summary"]),
    "pre_step": _obj(context={"type": ["array", "null"], "items": _obj(("name", "text"), name={"type": "string"},
                                                                        text={"type": "string"})},
                     step={"oneOf": [{"type": "null"}, _obj(("turn", "step"), turn=INT, step=INT)]},
                     claimed={"type": ["array", "null"], "items": {"type": "object"}}, aborted={"type": "boolean"},
                     **RUN_ARGS),
    "request_error": _obj(("code",), code={"type": "string"}, aborted={"type": "boolean"}, **RUN_ARGS),
    "manual_compact": _obj(args={"type": "string"}, command_id={"type": "string"}, aborted={"type": "boolean"},
                           agent_idle={"type": "boolean"}, **RUN_ARGS),
    "reload": _obj(),
    "closers": _obj(), "rows": _obj(), "decode": _obj(("record",), record={}),
}

MEASUREMENT = {"oneOf": [_obj(("total", "prices"), True, total=NAT, prices={"type": "array", "items": NAT},
                               surface_tokens=INT, baseline=_obj(("kind", "tokens"), kind={"enum": [
                                   "usage", "estimated", "none"]}, tokens=INT)), REFUSAL]}
"""`TokenMeter.measure()`'s answer (spec 4.3), or the refusal of a meter that cannot fold the log (spec 4.2)."""

RESULTS: dict[str, dict] = {
    "hello": _obj(("protocol", "name", "levels"), True, protocol={"const": PROTOCOL}, name={"type": "string"},
                  levels={"type": "array", "minItems": 1, "items": {"enum": list(LEVELS)}},
                  ops={"type": "array", "items": {"enum": [op for level in LEVELS for op in OPS[level]]
                                                          + list(OPTIONAL_OPS)}}),
    "bench": _obj(("ns_per_append",), True, ns_per_append={"type": "object"}),
    "reset": _obj(("generation",), True, generation={"const": 0}),
    "append": _refusable(_obj(("seq", "generation"), seq=NAT, generation=NAT)),
    "surface": _obj(("nodes", "generation"), nodes={"type": "array", "items": NAT}, generation=NAT),
    "events": _obj(("events",), events={"type": "array", "items": _obj(("type", "seq", "time", "data"), True,
                                                                         type={"type": "string"}, seq=NAT)}),
    "cuts": _refusable({"oneOf": [
        _obj(("balanced",), balanced={"type": "array", "minItems": 1, "items": {"type": "boolean"}}, reads=NAT),
        _obj(("before", "after"), before={"type": "array", "items": {"type": "boolean"}},
             after={"type": "array", "items": {"type": "boolean"}}, reads=NAT)]}),
    "measure": MEASUREMENT,
    "meter_replay": MEASUREMENT,
    "projection": {"oneOf": [_obj(("total",), total=INT, usage=TOKEN_USAGE, breakdown=CONTEXT_BREAKDOWN,
                                  pressure=CONTEXT_PRESSURE, refused=REFUSED_UNITS, changed=UNIT_CHANGES),
                             _obj(("total", "error"), total={"type": "null"}, error=REFUSAL["properties"]["error"],
                                  usage=TOKEN_USAGE, breakdown=CONTEXT_BREAKDOWN, pressure=CONTEXT_PRESSURE,
                                  refused=REFUSED_UNITS, changed=UNIT_CHANGES)]},
    "select_range": _refusable(_obj(("range",), range={"oneOf": [{"type": "null"}, _obj(
        ("start", "end"), start=NAT, end=NAT)]})),
    "prune": _refusable(_obj(("kind", "pruned", "failure", "generation", "appended"),
                             kind={"enum": ["pruned", "none", "failed"]}, failure=FAILURE,
                             pruned={"type": "array", "items": _obj(
                                 ("originalSeq", "replacementSeq", "callId", "charsBefore", "charsAfter"),
                                 originalSeq=NAT, replacementSeq=NAT, callId={"type": "string"},
                                 charsBefore=NAT, charsAfter=NAT)}, charsRemoved=NAT, **COMMON)),
    "compact": _refusable(_obj(("kind", "result", "failure", "aborted", "generation", "appended"),
                               kind={"enum": ["success", "busy", "cancelled", "changed", "summary", "commit",
                                              "persistence", "aborted", "refused", "failed"]},
                               result=RESULT, failure=FAILURE, aborted={"type": "boolean"}, **COMMON)),
    "configure": _refusable(_obj(("configured", "auto", "generation"), configured={"const": True},
                                 auto={"type": "boolean"}, generation=NAT)),
    "pre_step": _refusable(_obj(("kind", "result", "failure", "generation", "appended"),
                                kind={"enum": ["disabled", "noop", "pruned", "compacted", "warned", "silent"]},
                                result=RESULT, failure=FAILURE, snapshot=SEQ_OR_NULL,
                                measured={"oneOf": [{"type": "null"}, NAT]}, logged=LOGGED, **COMMON)),
    "request_error": _refusable(_obj(("kind", "retries", "result", "failure", "generation", "appended"),
                                     kind={"enum": ["retry", "next"]}, retries=NAT, result=RESULT, failure=FAILURE,
                                     snapshot=SEQ_OR_NULL, logged=LOGGED, **COMMON)),
    "manual_compact": _refusable(_obj(("kind", "code", "text", "sourceEventSeq", "generation", "appended"),
                                      kind={"enum": ["success", "error"]},
                                      code={"enum": ["success", "nothing", "usage", "busy", "cancelled", "changed",
                                                     "summary", "commit", "persistence", "aborted"]},
                                      text={"type": "string"}, sourceEventSeq=SEQ_OR_NULL,
                                      compact_now={"oneOf": [{"type": "null"}, _obj(
                                          ("result", "failure", "cause"), result=RESULT, failure=FAILURE,
                                          cause=FAILURE)]}, **COMMON)),
    "reload": _refusable(_obj(("generation", "appended"), **COMMON)),
    "closers": _refusable(_obj(("closers",), closers={"type": "array", "items": _obj(
        ("type", "seq", "time", "data"), True, type={"enum": ["tool/result", "step/end", "turn/end"]}, seq=NAT)})),
    "rows": _obj(("records", "roundtrip"), records={"type": "array", "items": {"oneOf": [NAT, _obj(
        ("type", "seq0", "time0", "data"), type={"enum": ["text-chunks", "reasoning-chunks", "tool-call-chunks"]},
        seq0=NAT, time0=INT, data={"type": "object"})]}}, roundtrip={"type": "boolean"}),
    "decode": _refusable(_obj(("events",), events={"type": "array"})),
}

REQUEST = _obj(("id", "op"), id={"type": ["integer", "string"]}, op={"enum": list(ALL_OPS)}, args={"type": "object"})
RESPONSE = {"oneOf": [
    _obj(("id", "result"), id={"type": ["integer", "string"]}, result={"type": "object"}),
    _obj(("id", "error"), id={"type": ["integer", "string", "null"]},
         error=_obj(("type", "message"), type={"enum": list(ProtocolError.TYPES)}, message={"type": "string"})),
]}


# -- the conversation level (docs/conversation-protocol.md): its own ops, in files named conversation.*.json ------
CALL = _obj(("id", "name", "args"), id={"type": "string"}, name={"type": "string"}, args={"type": "object"})
MESSAGE = {**_obj(("role", "text"), role={"enum": ["system", "user", "assistant", "tool"]}, text={"type": "string"},
                  calls={"type": "array", "items": CALL}, call_id={"type": "string"}, summary={"type": "boolean"},
                  packed={"type": "integer"}),
           "if": {"properties": {"role": {"const": "tool"}}}, "then": {"required": ["call_id"]}}
MESSAGES = {"type": "array", "items": MESSAGE}
NAT_OR_NULL = {"type": ["integer", "null"], "minimum": 0}
STEP = {"oneOf": [
    _obj(("kind", "system", "messages", "overflow", "tokens"), kind={"const": "request"},
         system={"type": ["string", "null"]}, messages=MESSAGES, overflow={"type": "boolean"}, tokens=NAT_OR_NULL),
    _obj(("kind", "before", "after", "cause"), kind={"const": "compaction"}, before=MESSAGES, after=MESSAGES,
         cause={"enum": ["size", "overflow", "direct"]}, count_before=NAT_OR_NULL, count_after=NAT_OR_NULL),
    _obj(("kind", "prompt", "tokens", "outcome", "output"), kind={"const": "summarizer"}, prompt={"type": "string"},
         tokens=NAT, outcome={"enum": ["text", "fail", "empty", "slow", "overflow"]},
         output={"type": ["string", "null"]}),
    _obj(("kind", "type", "message", "typed"), kind={"const": "error"}, type={"type": "string"},
         message={"type": "string"}, typed={"type": "boolean"}),
]}
ANSWER = _obj(("steps", "history"), steps={"type": "array", "items": STEP}, history=MESSAGES)
TRIGGER = {"oneOf": [{"type": "null"}, _obj(("kind", "value", "counter"),
                                             kind={"enum": ["tokens", "messages", "overflow"]},
                                             value=NAT_OR_NULL, counter={"enum": ["runtime", "neutral"]},
                                             reaches={"type": "boolean"})]}
REPLY = _obj(text={"type": "string"}, calls={"type": "array", "items": CALL})
SUMMARY_ITEM = _obj(text={"type": "string"}, fail={"type": "string"}, empty={"type": "boolean"},
                    slow={"type": "number", "minimum": 0})
SCRIPTED = {"summaries": {"type": ["array", "null"], "items": SUMMARY_ITEM}, "summarizer_window": NAT_OR_NULL}
CONVERSATION_DOCS: dict[str, tuple[str, dict]] = {
    "hello.result": ("result of hello at the conversation level", _obj(
        ("protocol", "name", "levels", "runtime"), True, protocol={"const": PROTOCOL}, name={"type": "string"},
        levels={"type": "array", "minItems": 1, "items": {"const": "conversation"}},
        ops={"type": "array", "items": {"enum": ["open", "turn", "compact"]}},
        runtime=_obj(("name", "version"), True, name={"type": "string"}, version={"type": "string"}))),
    "open.args": ("args of open", _obj(settings={"type": ["object", "null"]}, system={"type": ["string", "null"]},
                                       history={"oneOf": [{"type": "null"}, MESSAGES]})),
    "open.result": ("result of open", _obj(("settings", "trigger"), settings={"type": "object"}, trigger=TRIGGER)),
    "turn.args": ("args of turn", _obj(("user",), user={"type": "string"},
                                       replies={"type": ["array", "null"], "items": REPLY},
                                       overflow_above=NAT_OR_NULL, **SCRIPTED)),
    "turn.result": ("result of turn: the Answer", ANSWER),
    "compact.args": ("args of compact", _obj(**SCRIPTED)),
    "compact.result": ("result of compact: the Answer", ANSWER),
    "message": ("A message in neutral form", MESSAGE),
    "step": ("A step of an Answer", STEP),
}
"""``conversation.<name>.json``: the conversation level's messages (its ops share names with the log levels')."""


_ARGS_VALIDATORS: dict[str, jsonschema.protocols.Validator] = {}


def _where(error: jsonschema.ValidationError) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path).lstrip(".")


def args_error(op: str, args: dict) -> str | None:
    """Why ``args`` is not a request of ``op`` under its schema (``args of append: event: 5 is not of type
    'object'``), or None when it is; the trace readers check every step with it before anything runs."""
    if op not in ARGS:
        return f"unknown op {op!r}"
    validator = _ARGS_VALIDATORS.get(op)
    if validator is None:
        validator = _ARGS_VALIDATORS[op] = jsonschema.Draft202012Validator(ARGS[op])
    best = jsonschema.exceptions.best_match(validator.iter_errors(args))
    if best is None:
        return None
    where = _where(best)
    return f"args of {op}: {where + ': ' if where else ''}{best.message}"


def documents() -> dict[str, dict]:
    """File name -> schema document, for ``docs/schemas/``."""
    docs = {"request.json": ("A request line", REQUEST), "response.json": ("A response line", RESPONSE),
            "refusal.json": ("A spec refusal (a result)", REFUSAL), "event.json": ("An append's event", EVENT),
            "summary-script.json": ("A summary script", SUMMARY)}
    for op in ALL_OPS:
        docs[f"{op}.args.json"] = (f"args of {op}", ARGS[op])
        docs[f"{op}.result.json"] = (f"result of {op}", RESULTS[op])
    for name, (title, schema) in CONVERSATION_DOCS.items():
        docs[f"conversation.{name}.json"] = (title, schema)
    return {name: {"$schema": DRAFT, "$id": f"surfacecheck-runtime/1/{name}", "title": title, **schema}
            for name, (title, schema) in docs.items()}


def write(directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, doc in documents().items():
        path = directory / name
        path.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        written.append(path)
    return written


if __name__ == "__main__":
    target = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/schemas")
    print(f"wrote {len(write(target))} schemas to {target}")
