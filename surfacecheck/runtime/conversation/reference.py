"""The reference conversation runtime: an in-process agent loop with summarizing compaction that keeps every promise
of the compaction contract (``docs/contract.md``), served at the ``conversation`` level
(``docs/conversation-protocol.md``).

Settings: ``trigger_tokens`` (neutral count of system plus history; it compacts when a request would be above it),
``keep_tokens`` (the most recent messages it keeps verbatim), ``compaction`` (false: never compacts; an
overflow then ends the turn with a typed error, and an assistant message naming it closes the turn). A compaction cuts only at an assistant message (so no call is
parted from its results and the summary, a user message, is followed by an assistant turn), summarizes exactly
the removed messages (in up to three calls, each within the summarizer's window), pins the turn's user request
(inside the summary when its message is removed), and commits only when the history shrinks and fits; otherwise, and when the summarizer fails, the step ends in a typed
``ContextTooLarge`` error. It never retries a request without progress.

The hooks (``_cut``, ``_chunks``, ``_prompt``, ``_summary_text``, ``_kept``, ``_system``, ``_wants_compaction``,
``_commits``) are where :mod:`.variants` seeds one broken promise each.
"""
from __future__ import annotations

import copy
import math
from typing import Any

from ...core.protocol import CONVERSATION, PROTOCOL, ProtocolError, dispatch
from . import peer
from .peer import BadArgs, Replies, Summaries, neutral_tokens, tool_result

VERSION = "1"
KNOWN = {"trigger_tokens": 2000, "keep_tokens": 600}
SUMMARY_PREFIX = "Summary of the earlier conversation:\n"
PINNED = "\n\nThe request being worked on: "
SUMMARY_ALLOWANCE = 48
"""Tokens a cut leaves for the summary message beyond its framing (scripted summaries are short)."""
ERROR = "ContextTooLarge"
MAX_CHUNKS = 3
"""Summarizer calls one compaction may make (the contract allows three between two requests)."""


class ContextTooLarge(Exception):
    """The runtime's documented failure: it cannot bring the history under its limit (typed)."""


class SummarizerFailed(Exception):
    pass


def _prompt_tokens(prompt: str) -> int:
    return math.ceil(len(prompt) / 4) + 4  # the scripted summarizer's own count (``peer.Summaries``)


class ReferenceRuntime:
    name = "reference"

    def __init__(self) -> None:
        self.settings: dict | None = None
        self.system: str | None = None
        self.history: list[dict] = []
        self.pin: str | None = None
        self.compactions = 0
        self.window = KNOWN["trigger_tokens"]  # the summarizer's window in the current exchange
        self._handlers = {"open": self._open, "turn": self._turn, "compact": self._compact_op}

    # -- the protocol ------------------------------------------------------------------------------------------
    def hello(self) -> dict[str, Any]:
        return {"protocol": PROTOCOL, "name": self.name, "levels": [CONVERSATION], "ops": list(peer.OPS),
                "runtime": {"name": self.name, "version": VERSION}}

    def call(self, op: str, args: dict[str, Any]) -> dict[str, Any]:
        try:
            return dispatch(self._handlers, op, args)
        except BadArgs as exc:
            raise ProtocolError("bad-args", str(exc)) from None

    def close(self) -> None:
        pass

    # -- ops ---------------------------------------------------------------------------------------------------
    def _open(self, args: dict) -> dict:
        self.settings = peer.check_settings(args.get("settings"), KNOWN)
        for key in KNOWN:
            if not isinstance(self.settings[key], int) or self.settings[key] < 0:
                raise BadArgs(f"setting {key} must be a non-negative integer")
        system = args.get("system")
        if system is not None and not isinstance(system, str):
            raise BadArgs("system must be a string or null")
        self.system, self.pin, self.compactions = system, None, 0
        self.history = copy.deepcopy(peer.check_messages(args.get("history")))
        return {"settings": dict(self.settings), "trigger": self._trigger()}

    def _trigger(self) -> dict | None:
        if not self.compaction:
            return None
        return {"kind": "tokens", "value": self.settings["trigger_tokens"], "counter": "neutral"}

    @property
    def compaction(self) -> bool:
        return bool(self.settings and self.settings.get("compaction"))

    def _session(self) -> None:
        if self.settings is None:
            raise BadArgs("open a session first")

    def _turn(self, args: dict) -> dict:
        self._session()
        user = args.get("user")
        if not isinstance(user, str):
            raise BadArgs("turn needs a string user")
        steps: list[dict] = []
        summaries = self._summaries(args, steps)
        overflow_above = args.get("overflow_above")
        replies = Replies(args.get("replies"))
        self.history.append({"role": "user", "text": user})
        self.pin = user
        try:
            for _ in range(replies.bound):
                if self._wants_compaction():
                    self._compact(steps, summaries, "size", self.settings["trigger_tokens"])
                request = {"kind": "request", "system": self._system(), "messages": copy.deepcopy(self.history),
                           "overflow": False, "tokens": neutral_tokens(self.history, self.system)}
                steps.append(request)
                if isinstance(overflow_above, int) and request["tokens"] > overflow_above:
                    request["overflow"] = True
                    if not self.compaction:
                        raise ContextTooLarge(f"the request of {request['tokens']} tokens overflows and compaction "
                                              "is off")
                    self._compact(steps, summaries, "overflow", overflow_above)
                    continue
                reply = replies.next()
                calls = [dict(c) for c in reply.get("calls") or ()]
                self.history.append({"role": "assistant", "text": str(reply.get("text", "")),
                                     **({"calls": calls} if calls else {})})
                if not calls:
                    break
                for call in calls:
                    self.history.append({"role": "tool", "call_id": str(call.get("id")),
                                         "text": tool_result(call.get("args") or {})})
            else:
                self._fail(steps, "loop-bound", f"no text answer after {replies.bound} model calls", typed=False)
        except ContextTooLarge as exc:
            self._fail(steps, ERROR, str(exc), typed=True)
        finally:
            self.pin = None
        return {"steps": steps, "history": copy.deepcopy(self.history)}

    def _fail(self, steps: list[dict], type_: str, message: str, typed: bool) -> None:
        """End the turn in an error step, and close it with an assistant message naming the error, so the next
        turn's user message alternates with it (the turn's own messages stay as they were)."""
        steps.append({"kind": "error", "type": type_, "message": message, "typed": typed})
        self.history.append({"role": "assistant", "text": f"[{type_}] {message}"})

    def _compact_op(self, args: dict) -> dict:
        self._session()
        steps: list[dict] = []
        try:
            if not self.compaction:
                raise ContextTooLarge("compaction is turned off")
            self._compact(steps, self._summaries(args, steps), "direct", None)
        except ContextTooLarge as exc:
            steps.append({"kind": "error", "type": ERROR, "message": str(exc), "typed": True})
        return {"steps": steps, "history": copy.deepcopy(self.history)}

    def _summaries(self, args: dict, steps: list[dict]) -> Summaries:
        self.window = args.get("summarizer_window")
        if self.window is None:
            self.window = self.settings["trigger_tokens"]
        return Summaries(args.get("summaries"), steps, args.get("summarizer_window"),
                         raise_fail=SummarizerFailed, raise_overflow=SummarizerFailed)

    # -- compaction --------------------------------------------------------------------------------------------
    def _compact(self, steps: list[dict], summaries: Summaries, cause: str, limit: int | None) -> None:
        before = copy.deepcopy(self.history)
        cut = self._cut(before, limit)
        if cut <= 0:
            raise ContextTooLarge("nothing can be compacted")
        removed, kept = before[:cut], before[cut:]
        output = ""
        for chunk in self._chunks(removed, before):
            prompt = self._prompt(chunk, output)
            if not self._fits_window(prompt):
                raise ContextTooLarge(f"the summarizer input of {_prompt_tokens(prompt)} tokens is above its "
                                      f"window of {self.window}")
            try:
                output = summaries.next(prompt)
            except SummarizerFailed as exc:
                raise ContextTooLarge(f"the summarizer failed: {exc}") from None
            if not output:
                raise ContextTooLarge("the summarizer answered nothing")
        pinned = self.pin if self.pin is not None and not any(
            m.get("role") == "user" and not m.get("summary") and m.get("text") == self.pin for m in kept) else None
        summary = {"role": "user", "text": self._summary_text(output, pinned, removed), "summary": True}
        after = [summary] + self._kept(copy.deepcopy(kept))
        count_before, count_after = neutral_tokens(before, self.system), neutral_tokens(after, self.system)
        self._commits(count_before, count_after, limit)
        steps.append({"kind": "compaction", "before": before, "after": copy.deepcopy(after), "cause": cause,
                      "count_before": count_before, "count_after": count_after})
        self.history = after
        self.compactions += 1

    def _clean_cuts(self, before: list[dict]) -> list[int]:
        """Indices the kept suffix may start at: an assistant message with no result of an earlier call after it,
        or the end (keep nothing)."""
        cuts = []
        for i in range(1, len(before) + 1):
            if i < len(before) and before[i].get("role") != "assistant":
                continue
            called = {c.get("id") for m in before[:i] for c in m.get("calls") or ()}
            if any(m.get("role") == "tool" and m.get("call_id") in called for m in before[i:]):
                continue
            cuts.append(i)
        return cuts

    def _overhead(self) -> int:
        return peer.message_tokens({"text": SUMMARY_PREFIX + (PINNED + self.pin if self.pin else "")}) \
            + SUMMARY_ALLOWANCE

    def _cut(self, before: list[dict], limit: int | None) -> int:
        """The first clean cut whose kept suffix is within ``keep_tokens`` and, with a summary, under ``limit``;
        else the last one. A direct compaction (no ``limit``) keeps at least the last answer, so the user message
        of the next turn follows an assistant message, not the summary."""
        cuts = self._clean_cuts(before)
        if limit is None:
            cuts = [i for i in cuts if i < len(before)]
        for i in cuts:
            kept = before[i:]
            if neutral_tokens(kept) > self.settings["keep_tokens"]:
                continue
            if limit is not None and neutral_tokens(kept, self.system) + self._overhead() > limit:
                continue
            return i
        return cuts[-1] if cuts else 0

    def _chunks(self, removed: list[dict], before: list[dict]) -> list[list[dict]]:
        """The removed messages in order, in at most :data:`MAX_CHUNKS` runs whose prompts fit the summarizer's
        window (each run's prompt carries the summary of the runs before it)."""
        chunks: list[list[dict]] = [[]]
        for m in removed:
            if chunks[-1] and not self._fits_window(self._prompt(chunks[-1] + [m], "x" * SUMMARY_ALLOWANCE * 4)):
                chunks.append([])
            chunks[-1].append(m)
        if len(chunks) > MAX_CHUNKS:
            raise ContextTooLarge(f"the removed messages need {len(chunks)} summarizer calls (at most {MAX_CHUNKS})")
        return chunks

    def _prompt(self, chunk: list[dict], so_far: str) -> str:
        lines = ["Summarize this conversation so that it can go on from the summary alone."]
        if so_far:
            lines.append(f"The summary so far: {so_far}")
        for m in chunk:
            calls = "".join(f" [call {c.get('id')} {c.get('name')} {c.get('args')}]" for c in m.get("calls") or ())
            lines.append(f"{m.get('role')}: {m.get('text') or ''}{calls}")
        return "\n".join(lines)

    def _fits_window(self, prompt: str) -> bool:
        return _prompt_tokens(prompt) <= self.window

    def _summary_text(self, output: str, pinned: str | None, removed: list[dict]) -> str:
        return SUMMARY_PREFIX + output + (PINNED + pinned if pinned else "")

    def _kept(self, kept: list[dict]) -> list[dict]:
        return kept

    def _system(self) -> str | None:
        return self.system

    def _wants_compaction(self) -> bool:
        return self.compaction and neutral_tokens(self.history, self.system) > self.settings["trigger_tokens"]

    def _commits(self, count_before: int, count_after: int, limit: int | None) -> None:
        """Refuse a compaction that does not shrink the history or does not bring it under ``limit``."""
        if count_after >= count_before:
            raise ContextTooLarge(f"a summary would not shrink the history ({count_before} -> {count_after})")
        if limit is not None and count_after > limit:
            raise ContextTooLarge(f"the compacted history of {count_after} tokens is still above {limit}")
