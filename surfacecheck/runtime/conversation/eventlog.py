"""The conversation level over dsh's event-log protocol: dsh (its npm code) and the embedded model, driven as the
agent loop drives them, judged by the compaction contract (``docs/conversation-protocol.md`` § dsh and the model
through the event-log protocol).

:class:`EventLogConversation` is an in-process conversation-level runtime wrapping a runtime that serves the
``policy`` level (``docs/protocol.md``). It writes exactly the events dsh's agent loop writes around a model call
(spec 13; the model's loop, :func:`surfacecheck.model.agent.run_turn`) and lets the runtime's own listeners do all
the compacting: the pressure listener in ``pre_step`` (spec 9.2-9.3), the overflow listener in ``request_error``
(spec 10.2), ``/compact`` in ``manual_compact`` (spec 11). Requests are read back from the runtime's own surface
(``surface`` + ``events``, spec 2.3). The bridge decides nothing dsh decides.
"""
from __future__ import annotations

from typing import Any

from surfacecheck.core.protocol import CONVERSATION, PROTOCOL, ProtocolError, Runtime, dispatch
from surfacecheck.model.event import Event
from surfacecheck.model.session import Session as LogView

from . import eventlog_shapes as shapes
from . import peer
from .eventlog_steps import Feed, StepReader
from .eventlog_shapes import BridgeError
from .peer import BadArgs, Replies, neutral_tokens, tool_result

VERSION = "1"
READS = frozenset({"events", "surface", "measure", "cuts", "projection", "select_range"})
"""Ops that only read the log (``docs/protocol.md``); every other op may write."""


class EventLogConversation:
    """``open``/``turn``/``compact`` on ``inner`` (a runtime serving ``policy``), named ``spec``."""

    def __init__(self, inner: Runtime, spec: str):
        self.inner, self.name = inner, spec
        self.settings: dict | None = None
        self.system: str | None = None
        self.log: list[Event] = []
        self.turn_no = 0
        self.ids = 0
        self.next_seq = 0  # the seq the next append gets
        self.header_logged = False
        self.dirty = False  # an op wrote events not read back yet
        self.pending: list[tuple[str, dict]] = []  # appends queued, sent before the next other op
        self.auto = True
        self.opened: dict | None = None  # the session's open args
        self.journal: list[tuple[str, dict, frozenset]] = []  # its exchanges, with their overflowing calls
        self._handlers = {"open": self._open, "turn": lambda args: self._exchange("turn", args),
                          "compact": lambda args: self._exchange("compact", args)}

    # -- the protocol ------------------------------------------------------------------------------------------
    def hello(self) -> dict[str, Any]:
        inner = self.inner.hello() or {}
        return {"protocol": PROTOCOL, "name": self.name, "levels": [CONVERSATION], "ops": list(peer.OPS),
                "runtime": {"name": inner.get("name", self.name), "version": inner.get("version") or "", "bridge": VERSION,
                            "through": "event-log protocol"}}

    def call(self, op: str, args: dict[str, Any]) -> dict[str, Any]:
        try:
            return dispatch(self._handlers, op, args)
        except BadArgs as exc:
            raise ProtocolError("bad-args", str(exc)) from None
        except BridgeError as exc:
            raise ProtocolError("internal", str(exc)) from None

    def close(self) -> None:
        self.inner.close()

    # -- the wrapped runtime -----------------------------------------------------------------------------------
    def _op(self, op: str, args: dict | None = None) -> dict:
        """One op on the wrapped runtime, after the queued appends; an op that writes re-reads the log."""
        self._flush()
        try:
            result = self.inner.call(op, args or {})
        except ProtocolError as exc:
            if op == "configure":  # settings the runtime cannot even read
                raise BadArgs(f"{self.name} refused the settings: {exc.message}") from None
            raise BridgeError(f"{self.name} answered the bridge's {op} with {exc.type}: {exc.message}") from None
        if isinstance(result, dict) and "error" in result and op not in ("configure", "measure"):
            raise BridgeError(f"{self.name} refused the bridge's {op}: {result['error']}")
        if op == "reset":
            self.log, self.next_seq = [], 0
        elif op not in READS:
            self.dirty = True
        return result

    def _append(self, type_: str, data: Any, **extra) -> int:
        """Queue one ``append``; its seq is the log's length (spec 1.3 step 5), checked when the queue is sent."""
        event = {"type": type_, "data": data, **extra}
        self.pending.append(("append", {"event": event}))
        self.log.append(Event.from_json({**event, "seq": self.next_seq, "time": 0}))  # mirrored as sent
        self.next_seq += 1
        return self.next_seq - 1

    def _flush(self) -> None:
        """Send the queued appends, pipelined when the runtime takes a batch (``docs/protocol.md`` § Framing)."""
        if not self.pending:
            return
        batch, self.pending = self.pending, []
        many = getattr(self.inner, "call_many", None)
        answers = many(batch) if many is not None else [self.inner.call(op, args) for op, args in batch]
        first = self.next_seq - len(batch)
        for k, answer in enumerate(answers):
            if isinstance(answer, ProtocolError):
                raise BridgeError(f"{self.name} answered the bridge's append with {answer.type}: {answer.message}")
            if isinstance(answer, Exception):
                raise answer
            if "error" in answer or answer.get("seq") != first + k:
                raise BridgeError(f"{self.name} answered {answer} to the bridge's append of "
                                  f"{batch[k][1]['event']['type']} (expected seq {first + k})")

    def _sync(self) -> list[Event]:
        """The runtime's log, mirrored: the bridge's own appends as it sent them (their seqs checked when sent),
        what an op wrote read back with ``events``."""
        self._flush()
        if self.dirty:
            fresh = self._op("events", {"from": len(self.log)})["events"]
            self.log.extend(Event.from_json(e) for e in fresh)
            self.next_seq, self.dirty = len(self.log), False
        return self.log

    def _nodes(self) -> list[int]:
        return list(self._op("surface")["nodes"])

    def _measure(self) -> int | None:
        """``measure().totalTokens`` (spec 4.3): the count dsh's policy compares; None once the meter is stuck."""
        result = self._op("measure")
        return None if "error" in result else result["total"]

    def _id(self, prefix: str) -> str:
        self.ids += 1
        return f"{prefix}-{self.ids}"

    # -- open --------------------------------------------------------------------------------------------------
    def _open(self, args: dict) -> dict:
        settings = shapes.effective(args.get("settings") or {})
        system = args.get("system")
        if system is not None and not isinstance(system, str):
            raise BadArgs("system must be a string or null")
        history = peer.check_messages(args.get("history"))
        for i, m in enumerate(history):
            if m["role"] == "system":
                raise BadArgs(f"history[{i}]: dsh keeps the system prompt in the request header (spec 1.2 "
                              "request/header), not on the surface; use 'system'")
        self._op("reset")
        configured = self._op("configure", {"policy": shapes.policy_of(settings)})
        if "error" in configured:
            raise BadArgs(f"{self.name} refused the settings: {configured['error'].get('message')}")
        self.settings, self.system, self.auto = settings, system, bool(configured.get("auto"))
        self.turn_no, self.ids, self.header_logged = 0, 0, False
        if history:
            self._request_records()  # a session with a history has had requests: its header is logged
            self._history(history)
        self._sync()
        self.opened, self.journal = args, []
        return {"settings": dict(settings), "trigger": self._trigger()}

    def _exchange(self, op: str, args: dict) -> dict:
        """One ``turn`` or ``compact``. dsh's summarizer has no window, so a summarizer call whose input turns out
        to be above ``summarizer_window`` is made to overflow (a summarizer failure, spec 8.5) the way the scripted
        summarizer raises (``peer.Summaries``): the session is run again from ``open`` (dsh is deterministic under
        its scripts; this rebuilds its log and its in-memory overflow count alike) and the exchange re-run with that
        call overflowing, until no call is above the window."""
        self._session()
        overflows: frozenset = frozenset()
        while True:
            feed = Feed(args.get("summaries"), args.get("summarizer_window"), overflows)
            answer = self._turn(args, feed) if op == "turn" else self._compact(args, feed)
            over = feed.over_window()
            if over is None:
                self.journal.append((op, args, overflows))
                return answer
            overflows |= {over}
            journal, opened = self.journal, self.opened
            self._open(opened)
            for past_op, past_args, past_overflows in journal:
                feed = Feed(past_args.get("summaries"), past_args.get("summarizer_window"), past_overflows)
                self._turn(past_args, feed) if past_op == "turn" else self._compact(past_args, feed)
            self.journal = journal

    def _trigger(self) -> dict | None:
        """Spec 9.2 step 8: pressure compacts once ``measure().totalTokens`` reaches ``thresholdTokens``
        (``< threshold`` is a no-op, equality qualifies); off without the automatic listeners (``auto: false``)."""
        if not self.auto:
            return None
        return {"kind": "tokens", "value": shapes.threshold(self.settings), "counter": "runtime", "reaches": True}

    def _history(self, history: list[dict]) -> None:
        """The initial history as the turns dsh would have logged: a user message opens a turn (step 1); an
        assistant message after another one in a step opens the next step; each tool result is a ``tool/call``
        and its ``tool/result``. Every turn is closed and the agent left idle."""
        step, has_assistant, names = 0, False, {}
        for m in history:
            if m["role"] == "user":
                if step:
                    self._close(step, {"kind": "completed"}, idle=False)
                self._open_turn()
                step, has_assistant = 1, False
                self._append("step/start", {"turn": self.turn_no, "step": step})
                self._append("user/message", shapes.user_data(m.get("text", ""), self._id("user"),
                                                               bool(m.get("summary"))), surfaceOp="append")
                continue
            if not step:
                self._open_turn()
                step, has_assistant = 1, False
                self._append("step/start", {"turn": self.turn_no, "step": step})
            if m["role"] == "assistant":
                if has_assistant:
                    self._append("step/end", {"turn": self.turn_no, "step": step})
                    step += 1
                    self._append("step/start", {"turn": self.turn_no, "step": step})
                calls = list(m.get("calls") or ())
                names.update({c["id"]: c.get("name") or peer.TOOL for c in calls})
                self._append("assistant/message", shapes.assistant_data(
                    self.turn_no, step, shapes.assistant_blocks(m.get("text", ""), calls), self._id("assistant"),
                    None), surfaceOp="append")
                has_assistant = True
            else:
                self._tool_result(step, m["call_id"], names.get(m["call_id"], peer.TOOL), "{}", m.get("text", ""))
        if step:
            self._close(step, {"kind": "completed"})

    def _open_turn(self) -> None:
        self.turn_no += 1
        self._append("turn/start", {"turn": self.turn_no})

    def _close(self, step: int, reason: dict, idle: bool = True) -> None:
        """``step/end``, ``turn/end {reason}`` (spec 13 step 9); then the agent is idle, which clears dsh's
        overflow-retry count (spec 10.2, D3; a logged ``agent/status`` stands for the agent's status event)."""
        self._append("step/end", {"turn": self.turn_no, "step": step})
        self._append("turn/end", {"turn": self.turn_no, "reason": reason})
        if idle:
            self._append("agent/status", {"status": "idle"})

    def _tool_result(self, step: int, call_id: str, name: str, args: str, text: str) -> None:
        call_seq = self._append("tool/call", shapes.tool_call_data(self.turn_no, step, call_id, name, args))
        self._append("tool/result", shapes.tool_result_data(self.turn_no, step, call_id, text, self._id("result")),
                     surfaceOp="append", sourceEventSeqs=[call_seq])

    def _request_records(self) -> None:
        """``buildRequest`` (spec 13 step 8): ``request/header`` (``initial`` on a fresh log; the bridge's envelope
        never changes) and ``request/context`` with the route's window, once."""
        if self.header_logged:
            return
        self.header_logged = True
        self._append("request/header", {"header": shapes.header(self.system), "reason": "initial"})
        self._append("request/context", {"provider": shapes.PROVIDER, "model": shapes.MODEL,
                                         "contextWindow": self.settings["contextWindow"]})

    # -- turn --------------------------------------------------------------------------------------------------
    def _session(self) -> None:
        if self.settings is None:
            raise BadArgs("open a session first")

    def _turn(self, args: dict, feed: Feed) -> dict:
        user = args.get("user")
        if not isinstance(user, str):
            raise BadArgs("turn needs a string user")
        steps: list[dict] = []
        reader = StepReader(self, steps, feed)
        replies, overflow_above = Replies(args.get("replies")), args.get("overflow_above")
        prompt = shapes.user_data(user, self._id("user"))
        # spec 13 steps 1-2: the prompt is queued, the turn opens, the first pre-step claims it
        self._append("agent/inbox/spliced", {"target": "next-turn", "start": 0, "inserted": [prompt]})
        self._open_turn()
        self._append("agent/inbox/spliced", {"target": "next-turn", "start": 0, "removedCount": 1, "inserted": []})
        step, claimed, calls_made = 0, [prompt], 0
        while True:
            step += 1
            # spec 13 steps 5-7: the pressure listener (it cannot see the claimed batch), step/start, the batch
            reader.run("pre_step", {"step": {"turn": self.turn_no, "step": step}, "claimed": claimed}, "size")
            claimed = []
            while True:  # spec 10.1-10.3: a same-step retry re-builds the request only
                if calls_made >= replies.bound:
                    steps.append({"kind": "error", "type": "loop-bound", "typed": False,
                                  "message": f"no text answer after {replies.bound} model calls"})
                    self._close(step, {"kind": "aborted", "reason": "loop-bound"})
                    return self._answer(steps)
                calls_made += 1
                request = self._request()
                steps.append(request)
                size = neutral_tokens(request["messages"], self.system)
                if isinstance(overflow_above, int) and size > overflow_above:
                    request["overflow"] = True
                    if self._overflow(step, reader):
                        continue
                    steps.append({"kind": "error", "type": shapes.OVERFLOW_CODE, "typed": True,
                                  "message": "request too large for model context (scripted provider)"})
                    self._close(step, {"kind": "error", "error": {"message": "request too large for model context",
                                                                  "code": shapes.OVERFLOW_CODE}})
                    return self._answer(steps)
                reply = replies.next()
                calls = self._reply(step, reply, size)
                break
            if not calls:
                self._close(step, {"kind": "completed"})
                return self._answer(steps)
            self._append("step/end", {"turn": self.turn_no, "step": step})

    def _request(self) -> dict:
        """The request as dsh builds it (spec 13 step 8): header records, then ``deriveMessages()`` of the surface;
        ``tokens`` is ``measure().totalTokens`` as it stands for that request (spec 4.3)."""
        self._request_records()
        messages = shapes.messages_of(self._sync(), self._nodes())
        return {"kind": "request", "system": self.system, "messages": messages, "overflow": False,
                "tokens": self._measure()}

    def _overflow(self, step: int, reader: "StepReader") -> bool:
        """The provider's overflow finish (spec 10.1), then the ``agent/request-error`` listener (spec 10.2),
        registered only with ``auto: true`` (spec 9.3). True when it answers ``retry``."""
        self._append("assistant/chunk", {"turn": self.turn_no, "step": step, "chunk": {
            "type": "finish", "reason": {"kind": "error", "failure": {
                "message": "request too large for model context (scripted provider)", "code": shapes.OVERFLOW_CODE}}}})
        if not self.auto:
            return False
        return reader.run("request_error", {"code": shapes.OVERFLOW_CODE}, "overflow").get("kind") == "retry"

    def _reply(self, step: int, reply: dict, input_tokens: int) -> list[dict]:
        """The stream (``assistant/chunk``s: blocks, usage, finish), ``assistant/message`` citing them, then each
        call's ``tool/call`` and ``tool/result`` (spec 1.2, 13 step 8). Usage: the request's neutral size in, 8 out
        (``docs/conversation-protocol.md`` § Scripts)."""
        calls = [dict(c) for c in reply.get("calls") or ()]
        blocks = shapes.assistant_blocks(str(reply.get("text", "")), calls)
        usage = {"inputTokens": input_tokens, "outputTokens": 8}
        turn, seqs = self.turn_no, []
        for index, block in enumerate(blocks):
            kind = "text" if block["type"] == "text" else "tool-call"
            delta = {"type": "text-delta", "index": index, "text": block["text"]} if kind == "text" else \
                {"type": "tool-call-delta", "index": index, "id": block["id"], "name": block["name"],
                 "argumentsDelta": block["arguments"]}
            for chunk in ({"type": "block-start", "index": index, "blockType": kind}, delta):
                seqs.append(self._append("assistant/chunk", {"turn": turn, "step": step, "chunk": chunk}))
            seqs.append(self._append("assistant/chunk", {"turn": turn, "step": step, "chunk": {
                "type": "block-end", "index": index, "block": block}}))
        for chunk in ({"type": "usage", "usage": usage},
                      {"type": "finish", "reason": {"kind": "tool-calls" if calls else "stop"}}):
            seqs.append(self._append("assistant/chunk", {"turn": turn, "step": step, "chunk": chunk}))
        self._append("assistant/message", shapes.assistant_data(turn, step, blocks, self._id("assistant"), usage),
                     surfaceOp="append", sourceEventSeqs=seqs)
        for call in calls:
            self._tool_result(step, str(call.get("id")), str(call.get("name") or peer.TOOL),
                              shapes.arguments(call.get("args")), tool_result(call.get("args") or {}))
        return calls

    # -- compact -----------------------------------------------------------------------------------------------
    def _compact(self, args: dict, feed: Feed) -> dict:
        """``/compact`` (spec 11.1): ``compactNow`` with retain 0 on the idle agent."""
        steps: list[dict] = []
        reader = StepReader(self, steps, feed)
        result = reader.run("manual_compact", {"args": ""}, "direct")
        if result.get("kind") == "error":
            steps.append({"kind": "error", "type": f"ManualCompactionError:{result.get('code')}",
                          "message": result.get("text") or "", "typed": result.get("code") == "summary"})
        return self._answer(steps)

    def _answer(self, steps: list[dict]) -> dict:
        return {"steps": steps, "history": shapes.messages_of(self._sync(), self._nodes())}

    def log_view(self) -> LogView:
        """The runtime's log as a read-only model session (for the summarizer's input, spec 8.2 step 7)."""
        return LogView(log=tuple(self._sync()))
