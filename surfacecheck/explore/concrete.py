"""The size classes of the bounded world and the real dsh events that carry them (spec 1.2, 2.3, 4.1).

A surface node of the explored world is a short *code*; each code has exactly one message text,
so its price (spec 4.1: priced by text length, never by ids) is one number. The same builders
make the events of a counterexample trace and of the canonical concretisation the oracle runs
the model on, so the two cannot drift apart. :func:`classify` is the inverse (the abstraction α).

Codes: ``U``/``V`` small/large user prompt, ``N`` a note another producer appends while a summary
runs, ``cX``/``cY``/``c0`` a runtime-context snapshot (spec 12; ``c0`` = CLEARED), ``A`` assistant
text, ``T1``/``T2`` assistant with one/two tool calls, ``R``/``S`` small/large tool result, ``p`` a
pruned large result (spec 6), ``K``/``KB`` a checkpoint with a good / too-big summary (spec 8.2 step 9).
"""
from __future__ import annotations

from surfacecheck.model.runtime_context import CLEARED, CONTEXT_HEADER, RUNTIME_CONTEXT_SOURCE
from surfacecheck.model.summarizer import CHECKPOINT_PLUGIN

PROVIDER, MODEL = "model", "model-chat"
OVERFLOW_CODE = "CONTEXT_WINDOW_EXCEEDED"
HEADER = {
    "config": {"provider": PROVIDER, "model": MODEL},
    "system": "You are an AI agent powered by DeepSeek Harness.",
    "tools": [{"name": "bash", "description": "Run a shell command in the workspace and return its output.",
               "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}],
}


def _filler(prefix: str, size: int) -> str:
    words = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma ".split()
    out, i, length = [prefix], 0, len(prefix) + 1  # length: the joined words with one space each
    while length < size:
        out.append(words[i % len(words)])
        length += len(out[-1]) + 1
        i += 1
    return " ".join(out)[:size]


PROMPTS = {"U": "Please list the files in the workspace.", "V": _filler("Analyse this build log:", 1900)}
NOTE = "steering: also check the tests"
REPLY = "Done: the workspace has three files."
CALL_ARGS = '{"command":"ls -la /proj/project"}'
RESULTS = {"R": "total 3 files: a.txt b.txt c.txt", "S": _filler("build output:", 2400)}
CONTEXTS = {"X": "cwd: /proj/alpha (branch main)", "Y": "cwd: /proj/beta (branch dev)"}
SUMMARY_TEXTS = {"good": "## Current Work\n- condensed earlier turns", "big": _filler("## Current Work\n-", 6000)}
PRUNER = {"thresholdChars": 1000, "headChars": 200, "tailChars": 100}
SURFACE_TYPES = ("user/message", "assistant/message", "tool/result")
TOOL_DELTA = {"T1": 1, "T2": 2, "R": -1, "S": -1, "p": -1}


def snapshot_text(ctx: str) -> str:
    """The rendered snapshot for context id ``ctx`` ('' = none active: CLEARED), spec 12."""
    return CLEARED if ctx == "" else CONTEXT_HEADER + CONTEXTS[ctx]


def sections(ctx: str) -> list[dict]:
    return [] if ctx == "" else [{"name": "workspace", "text": CONTEXTS[ctx]}]


_SNAPSHOT_CODE = {snapshot_text(c): "c" + (c or "0") for c in ("", "X", "Y")}
_PROMPT_CODE = {text: code for code, text in PROMPTS.items()}


def user_message(code: str, mid: str) -> dict:
    """A user prompt (``U``/``V``) or another producer's note (``N``), spec 1.2 `user/message`."""
    text = NOTE if code == "N" else PROMPTS[code]
    return {"content": [{"type": "text", "text": text}], "source": {"kind": "user"}, "role": "user", "id": mid}


def snapshot_message(ctx: str, mid: str) -> dict:
    """An owned runtime-context snapshot (spec 12 `project`), key order as dsh builds it."""
    source = {"kind": "plugin", "plugin": RUNTIME_CONTEXT_SOURCE}
    if ctx:
        source.update({"form": "snapshot", "sections": sections(ctx)})
    return {"content": [{"type": "text", "text": snapshot_text(ctx)}], "source": source, "role": "user", "id": mid}


def reply_blocks(code: str, call_ids: list[str]) -> list[dict]:
    if code == "A":
        return [{"type": "text", "text": REPLY}]
    return [{"type": "tool-call", "id": cid, "name": "bash", "arguments": CALL_ARGS} for cid in call_ids]


def assistant_data(turn: int, step: int, blocks: list[dict], mid: str) -> dict:
    message = {"role": "assistant", "content": blocks, "source": {"kind": "model", "provider": PROVIDER, "model": MODEL},
               "id": mid}
    return {"turn": turn, "step": step, "message": message, "usage": {"inputTokens": 12, "outputTokens": 8}}


def result_text(code: str) -> str:
    if code == "p":
        from surfacecheck.model.prune_content import PrunerConfig, prune_content

        config = PrunerConfig(PRUNER["thresholdChars"], PRUNER["headChars"], PRUNER["tailChars"])
        return prune_content([{"type": "text", "text": RESULTS["S"]}], config)[0]["text"]
    return RESULTS[code]


def result_data(turn: int, step: int, code: str, call_id: str, mid: str) -> dict:
    message = {"source": {"kind": "tool", "callId": call_id},
               "content": [{"type": "tool-result", "toolCallId": call_id,
                            "content": [{"type": "text", "text": result_text(code)}], "isError": False}],
               "role": "user", "id": mid}
    return {"turn": turn, "step": step, "message": message}


def chunks(turn: int, step: int, blocks: list[dict]) -> list[dict]:
    """The provider stream (dsh-llm chunk shapes) for a successful reply."""
    out = []
    for index, block in enumerate(blocks):
        kind = block["type"]
        out.append({"type": "block-start", "index": index, "blockType": kind})
        if kind == "text":
            out.append({"type": "text-delta", "index": index, "text": block["text"]})
        else:
            out.append({"type": "tool-call-delta", "index": index, "id": block["id"], "name": block["name"],
                        "argumentsDelta": block["arguments"]})
        out.append({"type": "block-end", "index": index, "block": block})
    out.append({"type": "usage", "usage": {"inputTokens": 12, "outputTokens": 8}})
    out.append({"type": "finish", "reason": {"kind": "tool-calls" if blocks and blocks[0]["type"] == "tool-call"
                                             else "stop"}})
    return [{"turn": turn, "step": step, "chunk": body} for body in out]


def overflow_chunk(turn: int, step: int) -> dict:
    """Spec 10.1: the terminal `finish {kind:'error'}` chunk of an overflowed request."""
    return {"turn": turn, "step": step, "chunk": {"type": "finish", "reason": {"kind": "error", "failure": {
        "message": "request too large for model context (bounded world provider)", "code": OVERFLOW_CODE}}}}


def note_concurrent(mid: str) -> list:
    """A summary script's ``concurrent`` entry: another producer appends a note while it runs (spec 8.2 step 12)."""
    return [["user/message", user_message("N", mid), "append"]]


def summary_script(outcome: str, note_id: str = "note") -> dict:
    """The protocol summary script for a world outcome (docs/protocol.md; model.summarizer.SummaryScript)."""
    if outcome == "good":
        return {"outcome": "text", "text": SUMMARY_TEXTS["good"]}
    if outcome == "big":
        return {"outcome": "text", "text": SUMMARY_TEXTS["big"]}
    if outcome == "fail":
        return {"outcome": "failure"}
    if outcome == "cancel":
        return {"outcome": "cancel"}
    if outcome == "concurrent":
        return {"outcome": "concurrent", "text": SUMMARY_TEXTS["good"], "concurrent": note_concurrent(note_id)}
    raise ValueError(f"unknown summary outcome {outcome!r}")


def classify(event) -> str:
    """α for one surface node: its code (the inverse of the builders above). ``?`` for anything else."""
    data = event.data if isinstance(event.data, dict) else {}
    if event.type == "user/message":
        source = data.get("source") or {}
        if source.get("kind") == "plugin" and source.get("plugin") == RUNTIME_CONTEXT_SOURCE:
            content = data.get("content") or [{}]
            return _SNAPSHOT_CODE.get(content[0].get("text"), "c?")
        if source.get("kind") == "plugin" and source.get("plugin") == CHECKPOINT_PLUGIN:
            content = data.get("content") or []
            summary = content[1].get("text") if len(content) == 3 else None
            return "K" if summary == SUMMARY_TEXTS["good"] else "KB" if summary == SUMMARY_TEXTS["big"] else "K?"
        text = (data.get("content") or [{}])[0].get("text")
        return "N" if text == NOTE else _PROMPT_CODE.get(text, "?")
    if event.type == "assistant/message":
        content = data["message"]["content"]
        calls = sum(1 for b in content if b.get("type") == "tool-call")
        return "A" if calls == 0 else f"T{calls}"
    if event.type == "tool/result":
        text = data["message"]["content"][0]["content"][0]["text"]
        return {RESULTS["R"]: "R", RESULTS["S"]: "S"}.get(text, "p")
    return "?"
