"""Minimal witnesses for the measurement, progress and projection promises dsh breaks (spec §15 G1, G2b, G5, G9, G13).

Each builder tells the smallest story its §15 text tells, from protocol ops only (the :class:`Story` of
:mod:`.witness`, which merges :data:`BUILDERS`); ``python -m surfacecheck.findings.witness properties/findings``
minimises and writes them. Every one replays to exit 1 on the model and on the embedded runtime.
"""
from __future__ import annotations

from surfacecheck.core.trace import Trace


def Story():  # noqa: N802 - the Story of .witness, imported late: witness.py imports this module at its end
    from .witness import Story as _Story

    return _Story()

CHECKPOINT_SOURCE = {"kind": "plugin", "plugin": "fixture"}


def _assistant(s, turn: int, step: int, text: str, usage: dict | None, label: str):
    msg = {"id": f"a-{turn}-{step}", "role": "assistant", "content": [{"type": "text", "text": text}],
           "source": {"kind": "model", "provider": "prov", "model": "mod"}}
    data = {"turn": turn, "step": step, "message": msg}
    if usage is not None:
        data["usage"] = usage
    return s.append({"type": "assistant/message", "data": data, "surfaceOp": "append"}, label)


def g1b_negative_projection() -> Trace:
    """§15 G1 (second half): a larger unclaimed replacement is folded at 0, so the projection under-counts the
    node; a claimed compaction of that node then subtracts its real price and drives the figure below zero."""
    s = Story().user("u-1", "short")
    data = {"id": "ck-1", "role": "user", "content": [{"type": "text", "text": "expanded " * 120}],
            "source": CHECKPOINT_SOURCE}
    s.append({"type": "user/message", "data": data, "surfaceOp": {"op": "replace", "start": 0, "end": 0},
              "sourceEventSeqs": [0]}, "user/message replaces node 0 by a 1080-char one, no compaction/prune|summary "
                                       "claim: folded at delta 0")
    s.user("u-2", "next").turn()
    s.op("compact", {"start": 1, "end": 1, "summaries": [{"outcome": "text", "text": "ok"}]},
         "compactRegion(node 1): the summary claims its real price, the checkpoint consumes the claim")
    return s.trace("G1b-projection-goes-negative", "promise-projection-nonnegative", "compaction")


def g13_entering_batch() -> Trace:
    """§15 G13 / seed S4.b: the pre-step's pressure listener measures before the claimed prompt is entered,
    so the request that step sends is priced above what the pressure decision saw."""
    s = Story().configure(1000).header()
    s.op("pre_step", {"step": {"turn": 1, "step": 1}, "claimed": [_prompt("u-1", "p" * 4000)]},
         "pre-step 1/1: pressure measures the empty surface (0 < threshold 800), then step/start and the claimed "
         "4000-char prompt: the request prices at 1008, over the 1000-token window")
    return s.trace("G13-entering-batch-blind-spot", "promise-measure-conservative", "policy")


def g9a_double_count() -> Trace:
    """§15 G9a: the usage anchor's stepStart is taken before the step's entered prompt, which the provider's
    input already counts, so measure() counts the prompt twice until the next anchor."""
    s = Story().header().turn().step_start(1, 1).user("u-1", "q" * 400)
    # an honest provider: input = header (0) + the prompt (108), output = the answer's price (9)
    _assistant(s, 1, 1, "ok", {"inputTokens": 108, "outputTokens": 9},
               "assistant/message with provider usage 108 in + 9 out (exactly the heuristic prices)")
    return s.trace("G9a-anchor-double-count", "promise-measure-tight", "log")


def g9b_stale_step_start() -> Trace:
    """§15 G9b: an in-step overflow compaction leaves stepStart at the pre-compaction surface; the retried
    request's usage (above the stale estimate: the heuristic under-prices, G19) anchors measure() below it."""
    s = Story().configure(200, auto=False).header().user("u-1", "x" * 800).user("u-2", "y" * 80)
    s.turn().step_start(1, 1)
    s.op("request_error", {"code": "CONTEXT_WINDOW_EXCEEDED", "summaries": [{"outcome": "text", "text": "gist"}]},
         "agent/request-error overflow: u-1 summarized in the open step; retry")
    _assistant(s, 1, 1, "ok", {"inputTokens": 240, "outputTokens": 6},
               "assistant/message answering the retry; the provider counts 240 input tokens (CJK-like, G19)")
    return s.trace("G9b-stale-step-start", "promise-measure-covers-usage", "policy")


def g2b_prompt_summarized() -> Trace:
    """§15 G2b: step k enters [prompt P, runtime snapshot S]; the request overflows; retain 0 keeps only S and
    summarizes P, so the retry sends [checkpoint, S] and the model never sees P verbatim."""
    ctx = [{"name": "sandbox", "text": "sandbox: read-only"}]
    s = Story().configure(400, auto=False).header().turn()
    s.op("pre_step", {"context": ctx, "step": {"turn": 1, "step": 1}, "claimed": [_prompt("u-1", "p" * 1600)]},
         "pre-step 1/1: step/start, the claimed 1600-char prompt, then the runtime-context snapshot (D9)")
    s.op("request_error", {"code": "CONTEXT_WINDOW_EXCEEDED", "summaries": [{"outcome": "text", "text": "gist"}]},
         "agent/request-error overflow: retain 0 keeps the snapshot, summarizes the prompt; retry")
    return s.trace("G2b-prompt-summarized-before-seen", "promise-prompt-verbatim", "policy")


def g5_tool_unit() -> Trace:
    """§15 G5: the whole surface is one assistant tool call and its (non-prunable here) result: the cut before
    the result is unbalanced, so overflow recovery finds no range and the turn ends in error."""
    s = Story().configure(200, auto=False).header().turn().step_start(1, 1)
    s.tool_round(1, 1, "call-1", "r" * 2000)
    s.op("request_error", {"code": "CONTEXT_WINDOW_EXCEEDED"},
         "agent/request-error overflow: selectCompactableRange(retain 0) is null; next (terminal)")
    return s.trace("G5-indivisible-tool-unit", "promise-span-compactable", "policy")


def swapped_round(s, call: str, answers: str, text: str, label: str = ""):
    """An assistant message calling ``call`` and a tool result that answers ``answers`` (a producer's log the
    session accepts live: append checks no call ids, spec 1.3, 3)."""
    meta = {"turn": 1, "step": 1}
    msg = {"id": f"a-{call}", "role": "assistant", "content": [
        {"type": "tool-call", "id": call, "name": "read", "arguments": "{}"}],
        "source": {"kind": "model", "provider": "prov", "model": "mod"}}
    s.append({"type": "assistant/message", "data": {**meta, "message": msg}, "surfaceOp": "append"},
             f"assistant/message calls {call}")
    result = {"id": f"r-{answers}", "role": "user", "source": {"kind": "tool", "callId": answers}, "content": [
        {"type": "tool-result", "toolCallId": answers, "content": [{"type": "text", "text": text}], "isError": False}]}
    return s.append({"type": "tool/result", "data": {**meta, "message": result}, "surfaceOp": "append"},
                    label or f"tool/result answering {answers}")


def s7_pairing_by_count() -> Trace:
    """Seed §7 / spec 3: the pairing fold counts calls and results, ids unmatched. Two rounds whose results
    answer each other's call balance by count after the first, so overflow recovery summarizes [u-0, a-X, r-Y]
    and leaves r-X on the surface with its call gone (an orphan by id)."""
    s = Story().configure(200, auto=False).header().user("u-0", "h" * 800).turn().step_start(1, 1)
    swapped_round(s, "X", "Y", "r" * 40, "tool/result answering Y (the count balances: the cut after it is 'legal')")
    swapped_round(s, "Y", "X", "s" * 40, "tool/result answering X")
    s.op("request_error", {"code": "CONTEXT_WINDOW_EXCEEDED", "summaries": [{"outcome": "text", "text": "gist"}]},
         "agent/request-error overflow: retain 0; the cut before a-Y balances by count; [u-0, a-X, r-Y] summarized")
    return s.trace("S7-pairing-counts-not-ids", "promise-pairing-by-id", "policy")


def _prompt(uid: str, text: str) -> dict:
    return {"id": uid, "role": "user", "content": [{"type": "text", "text": text}], "source": {"kind": "user"}}


BUILDERS = {"G1b-projection-goes-negative": g1b_negative_projection,
            "G13-entering-batch-blind-spot": g13_entering_batch,
            "G9a-anchor-double-count": g9a_double_count,
            "G9b-stale-step-start": g9b_stale_step_start,
            "G2b-prompt-summarized-before-seen": g2b_prompt_summarized,
            "G5-indivisible-tool-unit": g5_tool_unit,
            "S7-pairing-counts-not-ids": s7_pairing_by_count}
