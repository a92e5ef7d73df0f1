"""Level ``log``: append dsh events and compare surface, generation, cuts, measure and projection
after every step (spec 1.3-1.4, 2, 3, 4, 5).

Rules append what a dsh agent loop writes (turns, steps, prompts, assistant messages with tool
calls, results citing their call, request headers, log-only events) and what the two metering
producers write (prune + rewrite, summary + checkpoint), priced exactly or not, adjacent or with
an intervening event; plus unpriced replacements and appends the session must refuse.
"""
from __future__ import annotations

from hypothesis import strategies as st
from hypothesis.stateful import Bundle, consumes, multiple, precondition, rule

from surfacecheck.model.estimate import estimate_header

from . import events as ev
from . import meter_logs
from .base import LockstepMachine


EARLY_SAMPLES = (None, "same", "inputTokens", "outputTokens", "cacheReadTokens", "cacheWriteTokens")
"""A tool round's streamed usage sample before its message's (spec 5.2: the message's replaces it for the step):
none, the same, or one bucket off (a sample equal but in one bucket is a different sample)."""

CITES = ("none", "the chunk", "the chunk", "none", "the chunk", "not a chunk")
"""What a tool round's message cites after a usage chunk; citing another event leaves the meter stuck (spec 4.2),
so for the rest of the example: the rarest."""


UNMATCHED = ("no step open", "another turn", "another step")
"""How a step event misses the open step (spec 4.2's check: none open, or its turn or its step differs)."""
UNMATCHED_AFTER = 24
"""Events an example holds before it may write an unmatched step event (which leaves the meter stuck)."""
REPLAY_AFTER = 16
"""Events an example holds before the meter is handed its log (a log of a few steps has answers and replaces)."""
LIVE_HEADERS = ("the logged header", "another header")
"""The headers the live session is measured under (spec 4.3: the anchor holds under the logged one only)."""


LISTED_TEXT = 160
"""The elements of a tool result's text given as a list: over the pruner thresholds the compaction level draws
(39-300 code points) about half the time, its kept strings outgrowing them now and then."""

class LogMachine(LockstepMachine):
    level = "log"
    open_calls = Bundle("open_calls")

    def __init__(self) -> None:
        self.turn = 0
        self.step = 0
        self.turn_open = False
        self.step_open = False
        self.answered = False
        self.calls: dict[str, int] = {}  # call id -> tool/call seq
        super().__init__()

    # -- the agent loop's events (spec 1.2, 13) ------------------------------------------------------
    @rule(model=st.sampled_from(ev.MODELS), system=st.one_of(st.none(), ev.texts))
    def request_header(self, model, system):
        """The request envelope the next request is routed by, its tool schemas absent, empty or one (the state
        picks)."""
        tools = self.pick("header tools", (None, *ev.TOOLS))
        event = ev.header(model, system, "initial", tools)
        # now and then a route with an empty provider or model: a live append takes it (spec 1.3, §15 G18), and
        # `routedTarget` finds no target in it (spec 4.4)
        empty = self.pick("header route", (None,) * 9 + ("provider", "model"))
        if empty is not None:
            event["data"]["header"]["config"][empty] = ""
        config = event["data"]["header"]["config"]
        self.append(event, f"request/header {config['provider']}/{config['model']}"
                           + ("" if tools is None else f" with {len(tools)} tool(s)"))

    @precondition(lambda self: not self.step_open)
    @rule()
    def begin_step(self):
        """The next step; in a new turn when none is open, or at the policy level now and then over a turn left open
        (a turn a crash or a cancelled loop never closed: the compaction owner is the newest turn started)."""
        if not self.turn_open or (self.level == "policy" and self.pick("turn left open", (False,) * 7 + (True,))):
            self.turn += 1
            self.step = 0
            self.append({"type": "turn/start", "data": {"turn": self.turn}}, f"turn/start {self.turn}")
            self.turn_open = True
        self.step += 1
        self.open_step()
        self.step_open, self.answered = True, False

    def open_step(self) -> None:
        """Hook: the agent loop's pre-step and `step/start` (spec 13 steps 2-7); here just `step/start`."""
        self.append({"type": "step/start", "data": {"turn": self.turn, "step": self.step}},
                    f"step/start {self.turn}/{self.step}")

    @precondition(lambda self: self.step_open)
    @rule(close_turn=st.booleans())
    def end_step(self, close_turn):
        self.append({"type": "step/end", "data": {"turn": self.turn, "step": self.step}},
                    f"step/end {self.turn}/{self.step}")
        self.step_open = False
        if close_turn:
            self.append({"type": "turn/end", "data": {"turn": self.turn, "reason": {"kind": "completed"}}},
                        f"turn/end {self.turn}")
            self.turn_open = False

    @rule(text=ev.bodies)
    def user_message(self, text):
        self.append(ev.user_message(text, self.fresh("u")), "user/message: a prompt on the surface")

    @precondition(lambda self: self.step_open and not self.answered)
    @rule(target=open_calls, text=st.one_of(st.none(), ev.texts), calls=st.integers(0, 3),
          usage=st.one_of(st.none(), ev.usage_strategy))
    def assistant_message(self, text, calls, usage):
        ids = [self.fresh("call") for _ in range(calls)]
        self.append(ev.assistant_message(self.turn, self.step, self.fresh("a"), text, ids, usage),
                    f"assistant/message with {calls} tool call(s){' and usage' if usage else ''}")
        self.answered = True
        return multiple(*ids)

    @rule(text=ev.texts, reasoning=st.one_of(st.none(), ev.texts), streamed=st.one_of(st.none(), ev.usage_strategy),
          final=st.sampled_from(("same", "resampled", "none")), resample=ev.usage_strategy,
          cites=ev.weighted(st.sampled_from(("all", "all", "empty", "absent")),
                            st.sampled_from(("not-a-chunk", "another-step")), 5),
          finish=st.sampled_from(("stop", "stop", "max-tokens")), cut=st.booleans())
    def streamed_answer(self, text, reasoning, streamed, final, resample, cites, finish, cut):
        """The response streams as `assistant/chunk`s (blocks, a usage chunk, finish), then the `assistant/message`
        citing them: the meter prices the provider output from the cited chunks (spec 4.2: all of them, an explicit
        empty list for a known empty stream, none for a legacy message; a citation of another event or of another
        step's chunks leaves the meter stuck), the usage and pressure units take the chunk's sample first and the
        message's as a resample of the same step (spec 5.2: equal changes nothing). The durable message may keep
        less than streamed (``cut``): the anchor prices what the provider produced, not what was kept. A step of its
        own when the open one is answered or none is open."""
        if self.step_open and self.answered:
            self.end_step(False)
        if not self.step_open:
            self.begin_step()
        first = max(self.events, default=-1)
        seqs = []
        for body in ev.stream_chunks(text, reasoning, streamed, finish):
            seq = self.append(ev.chunk(self.turn, self.step, body), f"assistant/chunk {body['type']}")
            if seq is not None:
                seqs.append(seq)
        usage = {"same": streamed, "resampled": resample, "none": None}[final]
        kept = text[:len(text) // 2] if cut else text
        event = ev.assistant_message(self.turn, self.step, self.fresh("a"), kept, [], usage, reasoning=reasoning)
        earlier = getattr(self, "streamed", [])
        if cites == "not-a-chunk" and first >= 0:
            event["sourceEventSeqs"] = [first, *seqs]
        elif cites == "another-step" and earlier:
            event["sourceEventSeqs"] = earlier
        elif cites != "absent":
            event["sourceEventSeqs"] = [] if cites == "empty" else seqs
        self.append(event, f"assistant/message after the stream ({final} usage, {cites} cited"
                           f"{', cut short' if cut else ''})")
        self.streamed = seqs
        self.answered = True

    def model_meter(self):
        """The model meter's replay state (spec 4.2) when the model is the oracle and its meter is not stuck."""
        oracle = self.context.oracle
        meter = getattr(oracle, "meter", None)
        return None if meter is None or getattr(oracle, "meter_error", None) is not None else meter

    @precondition(lambda self: self.model_meter() is not None)
    @rule(text=ev.texts)
    def usage_on_the_anchor(self, text):
        """Spec 4.2 anchors the meter on the provider's usage only when it reaches the estimate (`P >= E`, E the
        header's price + the surface at step/start + the answer's price): a step whose answer's usage is priced
        one below, on, or one above E (a header first when none is logged). Random usage almost never lands
        there."""
        if self.model_meter().header is None:
            self.append(ev.header(), f"request/header {ev.PROVIDER}/{ev.MODELS[0]}")
        if self.step_open and self.answered:
            self.end_step(False)
        if not self.step_open:
            self.begin_step()
        meter = self.model_meter()
        if meter is None or meter.header is None or meter.step_start is None:
            return
        offset = self.next_offset("meter anchor")
        event = ev.assistant_message(self.turn, self.step, self.fresh("a"), text, [])
        estimated = estimate_header(meter.header) + meter.step_start.surface_tokens + ev.event_price(event)
        if estimated + offset < 0:
            return
        event["data"]["usage"] = {"inputTokens": estimated + offset, "outputTokens": 0}
        if self.append(event, f"assistant/message whose usage is the anchor's estimate {offset:+d}") is not None:
            self.landed(f"meter anchor {offset:+d}")
        self.answered = True

    @precondition(lambda self: self.level == "log" and self.model_meter() is not None
                  and len(self.events) >= UNMATCHED_AFTER)
    @rule(what=st.sampled_from(("step/end", "assistant/message")), which=st.sampled_from(UNMATCHED), text=ev.texts)
    def unmatched_step_event(self, what, which, text):
        """A step's close or its answer written under a step that is not the open one: the session takes it, the
        meter refuses to fold it (spec 4.2: "has no matching step/start event") and is stuck from there on. Late in
        an example (after :data:`UNMATCHED_AFTER` events), so the steps before it keep a live meter; at the log
        level only, whose subject the meter is (the levels above need a live meter for their listeners)."""
        if which == "no step open" and self.step_open:
            self.end_step(False)
        elif which != "no step open" and not self.step_open:
            self.begin_step()
        turn, step = self.turn + (which == "another turn"), self.step + (which == "another step")
        event = ({"type": "step/end", "data": {"turn": turn, "step": step}} if what == "step/end" else
                 ev.assistant_message(turn, step, self.fresh("a"), text, []))
        self.append(event, f"{what} {turn}/{step} with {which}: the meter finds no matching step/start")

    @precondition(lambda self: self.level == "log" and len(self.events) >= REPLAY_AFTER
                  and self.model_meter() is not None)
    @rule()
    def meter_replay(self):
        """The meter handed the session's log (spec 4.2-4.3, :mod:`.meter_logs`): as logged, under the logged or
        another header, or changed in one thing it reads that no append lets through, on which it must fail loud; or
        the live session measured under a header (`measure(session, requestHeader)`). The state picks which."""
        kind = self.pick("meter replay", LIVE_HEADERS + meter_logs.KINDS)
        if kind in LIVE_HEADERS:
            events = self.ask("events", {"from": 0}).get("events", [])
            header = meter_logs.logged_header(events) if kind == LIVE_HEADERS[0] else meter_logs.ANOTHER_HEADER
            self.do("measure", {"header": header}, f"measure the session with {kind}")
            return
        log, header, label = meter_logs.handed(self.ask("events", {"from": 0}).get("events", []), self.surface(), kind)
        self.do("meter_replay", {"events": log, **({} if header is None else {"header": header})},
                f"the meter handed {label}")

    @rule(window=st.sampled_from(ev.WINDOWS), model=st.sampled_from(ev.MODELS))
    def request_context(self, window, model):
        """The loop records the route and capacity of a request (spec 4.4): read only by `contextPressure`."""
        self.append(ev.request_context(window, model), f"request/context {model} window {window}")

    @rule(call=consumes(open_calls), text=ev.bodies)
    def tool_result(self, call, text):
        """A tool call and its result; now and then the result's text a list of short strings (a shape no append
        checks, §15 G18): the meter prices it by its elements, the pruner cuts it by them and joins what it keeps."""
        turn, step = self.turn, self.step
        text, shape = self.result_text(text)
        call_seq = self.append(ev.tool_call(turn, step, call), f"tool/call {call}")
        if call_seq is not None:
            self.append(ev.tool_result(turn, step, self.fresh("r"), call, text, call_seq),
                        f"tool/result for {call} citing tool/call {call_seq}{shape}")

    def result_text(self, text):
        """A tool result's text, now and then as a list of short strings cut from it (a shape no live append checks,
        §15 G18), long enough for the pruner to cut; and how the label says so."""
        chunk = self.pick("tool result text", (0, 0, 0, 2, 0, 0, 3)) if isinstance(text, str) and text else 0
        if not chunk:
            return text, ""
        pieces = [text[i:i + chunk] for i in range(0, len(text), chunk)]
        listed = (pieces * (1 + LISTED_TEXT // len(pieces)))[:LISTED_TEXT]
        return [{"type": "text", "text": listed}], f" (its text a list of {LISTED_TEXT} {chunk}-character strings)"

    @rule(results=st.lists(ev.bodies, min_size=1, max_size=3), text=st.one_of(st.none(), ev.texts),
          usage=st.one_of(st.none(), ev.usage_strategy))
    def tool_round(self, results, text, usage):
        """One whole step of the agent loop: step/start, an assistant tool-call message (with its text, sometimes
        its reasoning too; with usage, sometimes after a streamed usage sample, the same or another), every call and
        its result, step/end (spec 13)."""
        if self.step_open:
            self.end_step(False)
        self.begin_step()
        ids = [self.fresh("call") for _ in results]
        reasoning = text if text is not None and self.pick("reasoning", (False, True)) else None  # the state picks
        early = None if usage is None else self.pick("early usage sample", EARLY_SAMPLES)
        if early is not None:  # spec 5.2: a usage chunk's sample first, then the message's replaces it for the step
            sample = usage if early == "same" else {**usage, early: usage.get(early, 0) + 3}
            chunk_seq = self.append(ev.chunk(self.turn, self.step, {"type": "usage", "usage": sample}),
                                    f"assistant/chunk usage ({'the same' if early == 'same' else 'another ' + early} "
                                    f"as the message's)")
        message = ev.assistant_message(self.turn, self.step, self.fresh("a"), text, ids, usage, reasoning=reasoning)
        cites = "none" if early is None else self.pick("usage chunk cited", CITES)
        if cites != "none" and chunk_seq is not None:  # spec 4.2: the provider output is priced from cited chunks only
            message["sourceEventSeqs"] = [chunk_seq] if cites == "the chunk" else [chunk_seq - 1]
        self.append(message, f"assistant/message with {len(ids)} tool call(s){' and its reasoning' if reasoning else ''}"
                             f"{'' if cites == 'none' else ', citing ' + cites}")
        self.answered = True
        for call, body in zip(ids, results):
            call_seq = self.append(ev.tool_call(self.turn, self.step, call), f"tool/call {call}")
            if call_seq is not None:
                body, shape = self.result_text(body)
                self.append(ev.tool_result(self.turn, self.step, self.fresh("r"), call, body, call_seq),
                            f"tool/result for {call} citing tool/call {call_seq}{shape}")
        self.end_step(False)

    @rule(which=st.one_of(st.sampled_from(ev.LOG_ONLY), st.just(None)))
    def log_only(self, which):
        """A log-only event: one the compaction path reads (agent status, request context, inbox splices) or, when
        ``which`` is None, three of other plugins' (consecutive in :data:`events.OTHER_TYPES` from a start the state
        picks). The envelope's ``ignorable`` marker exists on stored events only (spec 1.1): ``Session.append`` has
        no such option, so it is not drawn here."""
        if which is not None:
            kind, data = which
            self.append({"type": kind, "data": data}, f"{kind}: log-only, expires any armed claim")
            return
        for kind in self.run_from("other event types", ev.OTHER_TYPES, 3):
            self.append({"type": kind, "data": {"note": kind}}, f"{kind}: another plugin's event, log-only")

    # -- the metering producers (spec 5.1, 6, 8.2) --------------------------------------------------
    @rule(pick=st.integers(0, 50), error=st.sampled_from((0, 0, 0, 1, -2)), interloper=st.booleans(),
          text=ev.texts)
    def prune_pair(self, pick, error, interloper, text):
        nodes, prices = self.surface(), self.prices()
        known = [i for i, seq in enumerate(nodes) if self.events.get(seq, {}).get("type") == "tool/result"]
        if not known or prices is None:
            return
        index = known[pick % len(known)]
        seq = nodes[index]
        price = prices[index] + error
        self.append(ev.metering("compaction/prune", seq, seq, [seq], price),
                    f"compaction/prune: shadow price {price} armed for {seq}-{seq}"
                    f"{'' if error == 0 else ' (mispriced)'}")
        if interloper:
            self.append({"type": "agent/status", "data": {"status": "busy"}}, "an intervening log-only event")
        self.append(ev.rewritten_result(self.events[seq], text, seq), f"tool/result rewrite of {seq}")

    @rule(a=st.integers(0, 50), b=st.integers(0, 50), priced=st.booleans(), bracket=st.booleans(),
          summary=ev.texts, claim_shift=st.sampled_from((0, 0, 0, 1)))
    def summary_pair(self, a, b, priced, bracket, summary, claim_shift):
        nodes, prices = self.surface(), self.prices()
        if not nodes:
            return
        i, j = sorted((a % len(nodes), b % len(nodes)))
        start, end, shadowed = nodes[i], nodes[j], nodes[i:j + 1]
        cid = self.fresh("c")
        if bracket:
            self.append({"type": "compaction/start", "data": {"compactionId": cid, "turn": None}}, "compaction/start")
        cites = list(shadowed)
        if priced and prices is not None:
            tokens = sum(prices[i:j + 1])
            claimed = nodes[min(j + claim_shift, len(nodes) - 1)]
            seq = self.append(ev.metering("compaction/summary", start, claimed, shadowed, tokens, cid),
                              f"compaction/summary: shadow price {tokens} for {start}-{claimed}")
            cites = ([seq] if seq is not None else []) + cites
        checkpoint = self.append(ev.checkpoint(self.fresh("u"), summary, start, end, cites, cid),
                                 f"checkpoint replaces positions {i}..{j}")
        if checkpoint is not None:
            self.probe_cuts(checkpoint, start)
        if bracket:
            self.append({"type": "compaction/end", "data": {"compactionId": cid, "turn": None}}, "compaction/end")

    def probe_cuts(self, node: int, shadowed: int) -> None:
        """`toolPairingBalancedBefore/After` asked of single seqs (spec 3): a node on the surface, or that node and a
        seq the replace just shadowed, which is no longer on the surface ("not found")."""
        if self.pick("cut probe", ("on the surface", "shadowed")) == "shadowed":
            self.do("cuts", {"seqs": [node, shadowed]}, f"the cuts around {node}, then around shadowed {shadowed}: "
                                                        "not found")
        else:
            self.do("cuts", {"seqs": [node]}, f"the cuts before and after {node}")

    # -- appends the session refuses (spec 1.3-1.4) --------------------------------------------------
    @rule(kind=st.sampled_from(("missing-start", "op-on-log-only", "no-marker", "future-cite")))
    def refused_append(self, kind):
        nxt = max(self.events, default=-1) + 1000
        if kind == "missing-start":
            event = ev.checkpoint(self.fresh("u"), "x", nxt, nxt, [], "x")
            del event["sourceEventSeqs"]
        elif kind == "op-on-log-only":
            event = {"type": "agent/status", "data": {"status": "busy"}, "surfaceOp": "append"}
        elif kind == "future-cite":
            event = {**ev.user_message("x", self.fresh("u")), "sourceEventSeqs": [nxt]}
        else:
            event = {"type": "user/message", "data": {"id": self.fresh("u"), "role": "user", "content": [],
                                                      "source": {"kind": "user"}}}
        self.append(event, f"an append the session must refuse ({kind})")

    @precondition(lambda self: self.surface_size >= 2)
    @rule(kind=st.sampled_from(("reversed", "uncited-shadow", "duplicate-cite", "rewrite-meta")), pick=st.integers(0, 50))
    def refused_replace(self, kind, pick):
        """Replacements dsh refuses: reversed span, uncited shadowed node, duplicate citation, a tool/result
        rewrite that changes more than content (spec 1.4 steps 3-5)."""
        nodes = self.surface()
        i = pick % (len(nodes) - 1)
        results = [s for s in nodes if self.events.get(s, {}).get("type") == "tool/result"]
        if kind == "reversed":
            event = ev.checkpoint(self.fresh("u"), "x", nodes[i + 1], nodes[i], list(nodes), "x")
        elif kind == "uncited-shadow":
            event = ev.checkpoint(self.fresh("u"), "x", nodes[i], nodes[i + 1], [nodes[i]], "x")
        elif kind == "rewrite-meta" and results:
            seq = results[pick % len(results)]
            event = ev.rewritten_result(self.events[seq], "x", seq)
            event["data"] = {**event["data"], "step": event["data"]["step"] + 1}
        else:
            event = {**ev.user_message("x", self.fresh("u")), "sourceEventSeqs": [nodes[i], nodes[i]]}
        self.append(event, f"a replacement the session must refuse ({kind})")

    @precondition(lambda self: self.surface_size >= 2)
    @rule(pick=st.integers(0, 50), text=ev.texts)
    def misclaimed_replace(self, pick, text):
        """A shadow price armed for one span, then a replace of another, its end or its start elsewhere: the claim
        fold must throw (spec 5.1: both ends must match)."""
        nodes, prices = self.surface(), self.prices()
        if prices is None:
            return
        i = pick % (len(nodes) - 1)
        self.append(ev.metering("compaction/summary", nodes[i], nodes[i + 1], nodes[i:i + 2],
                                sum(prices[i:i + 2]), "m"), f"compaction/summary priced for {nodes[i]}-{nodes[i + 1]}")
        seq = nodes[i] if self.pick("the misclaimed end", ("end", "start")) == "end" else nodes[i + 1]
        self.append({**ev.user_message(text, self.fresh("u")), "surfaceOp": {"op": "replace", "start": seq,
                                                                            "end": seq},
                     "sourceEventSeqs": [seq]}, f"but a replace of {seq}-{seq} follows")

    @rule(a=st.integers(0, 50), b=st.integers(0, 50), text=ev.texts)
    def unpriced_replace(self, a, b, text):
        nodes = self.surface()
        if not nodes:
            return
        i, j = sorted((a % len(nodes), b % len(nodes)))
        self.append({**ev.user_message(text, self.fresh("u")), "surfaceOp": {"op": "replace", "start": nodes[i],
                                                                            "end": nodes[j]},
                     "sourceEventSeqs": nodes[i:j + 1]}, f"unpriced replace of positions {i}..{j} (neutral)")
