"""From an abstract path to a concrete, replayable trace of protocol requests (shared trace format).

:class:`Concretiser` plays the agent of spec 13 against a runtime (``model`` or
``model:<variant>``): each world action becomes the protocol requests dsh's loop would make —
``append`` of real dsh-shaped events (turn brackets, user prompts, provider chunks, assistant
messages, tool calls and results), ``pre_step {context, step, claimed}`` (the runtime writes
`step/start`, the claimed prompt and its runtime-context snapshot last, spec 12/13 D9),
``request_error``, ``manual_compact``, ``prune``, ``reload`` with their ``summaries`` scripts —
and records each request as a :class:`~surfacecheck.core.trace.Step`. After every action it computes
α of the runtime's state, so a caller can check that the concrete run simulates the abstract path.
"""
from __future__ import annotations

from surfacecheck.runtime.select import open_runtime
from surfacecheck.core.trace import Step, Trace, Violation

from surfacecheck.model.runtime_context import NEVER, RetainedSnapshot, fold_retained, restore_retained

from . import concrete as C
from .oracle import Settings
from .variants import CORRECT, Variant


class Concretiser:
    """Drives one runtime through world actions, recording the protocol steps. α reads the model
    runtime's session and overflow state, so the runtime is ``ModelRuntime`` or a variant of it."""

    def __init__(self, settings: Settings, variant: Variant = CORRECT, runtime=None):
        self.settings, self.variant = settings, variant
        spec = "model" if variant is CORRECT else f"model:{variant.name}"
        self.runtime = runtime or open_runtime(spec)
        self.runtime_name = spec
        self.steps: list[Step] = []
        self.results: list[dict] = []
        self.turn = self.step = 0
        self.phase, self.pend, self.ctx, self.routed = "I", "", "", False
        self.calls: list[str] = []
        self.retained, self.folded = NEVER, 0
        self.note = ""
        self._do("reset", {}, "a new empty session")
        self._do("configure", {"policy": settings.policy_json, "context_window": settings.context_window},
                 f"policy: window {settings.context_window}, threshold {settings.threshold}, pruner {C.PRUNER}")

    # -- plumbing -----------------------------------------------------------------------------
    @property
    def session(self):
        return self.runtime.session

    def _do(self, op: str, args: dict, label: str) -> dict:
        if self.note:
            label, self.note = f"[{self.note}] {label}", ""
        result = self.runtime.call(op, args)
        self.steps.append(Step(op, args, label))
        self.results.append(result)
        if op == "reload":
            self.retained = restore_retained(self.session)
        else:
            for event in self.session.log[self.folded:]:
                self.retained = fold_retained(self.retained, event)
        self.folded = len(self.session.log)
        return result

    def _append(self, type_: str, data: dict, label: str, *, surface: bool = False, sources=None) -> int:
        event = {"type": type_, "data": data, "time": 1_800_000_000_000 + 1000 * self.session.next_seq}
        if surface:
            event["surfaceOp"] = "append"
        if sources is not None:
            event["sourceEventSeqs"] = list(sources)
        result = self._do("append", {"event": event}, label)
        if "error" in result:
            raise RuntimeError(f"append of {type_} refused: {result['error']}")
        return result["seq"]

    def _scripts(self, outcome: str, count: int) -> list[dict]:
        return [C.summary_script(outcome, f"note-{self.session.next_seq}-{i}") for i in range(count)]

    def _route(self) -> None:
        if not self.routed:
            self._append("request/header", {"header": C.HEADER, "reason": "initial"}, "request/header (initial)")
            self._append("request/context", {"provider": C.PROVIDER, "model": C.MODEL,
                                             "contextWindow": self.settings.context_window}, "request/context")
            self.routed = True

    def _end_turn(self, reason: dict) -> None:
        self._append("step/end", {"turn": self.turn, "step": self.step}, "step/end")
        self._append("turn/end", {"turn": self.turn, "reason": reason}, f"turn/end ({reason['kind']})")
        self._append("agent/status", {"status": "idle"}, "agent/status idle")
        self.phase = "I"

    # -- actions ------------------------------------------------------------------------------
    def act(self, action: str) -> None:
        name, _, arg = action.partition(":")
        getattr(self, "_" + name)(arg)

    def _ctx(self, arg: str) -> None:
        self.ctx = "" if arg == "-" else arg
        self.note = f"runtime context is now {self.ctx or 'none'}"

    def _prompt(self, code: str) -> None:
        self.turn, self.step, self.pend, self.phase = self.turn + 1, 0, code, "P"
        self._append("turn/start", {"turn": self.turn}, f"turn/start {self.turn} (prompt {code} queued)")

    def _step(self, outcome: str) -> None:
        """Spec 13 steps 4-7 as one ``pre_step {context, step, claimed}``: the RUNTIME projects the
        runtime-context candidate before its pressure listener, then writes `step/start`, the claimed prompt
        and the snapshot (if any) last of the entered batch (D9, dsh order)."""
        self.step += 1
        args = {"context": C.sections(self.ctx), "step": {"turn": self.turn, "step": self.step},
                "summaries": self._scripts(outcome, self.settings.compaction_retries + 1)}
        claimed = f", claims prompt {self.pend}" if self.pend else ""
        if self.pend:
            args["claimed"] = [C.user_message(self.pend, f"user-turn-{self.turn}")]
        result = self._do("pre_step", args, f"pre-step {self.turn}/{self.step}: runtime context "
                          f"{self.ctx or 'none'}, pressure check (summary outcome {outcome}), step/start{claimed}")
        if "error" in result:
            raise RuntimeError(f"pre_step refused: {result['error']}")
        self.pend, self.phase = "", "S"

    def _reply(self, code: str) -> None:
        self._route()
        ids = [f"call-{self.turn}-{self.step}-{k + 1}" for k in range(0 if code == "A" else int(code[1]))]
        blocks = C.reply_blocks(code, ids)
        seqs = [self._append("assistant/chunk", chunk, f"chunk {chunk['chunk']['type']}")
                for chunk in C.chunks(self.turn, self.step, blocks)]
        seq = self.session.next_seq
        self._append("assistant/message", C.assistant_data(self.turn, self.step, blocks, f"assistant-{seq}"),
                     f"assistant/message {code}", surface=True, sources=seqs)
        if code == "A":
            self._end_turn({"kind": "completed"})
        else:
            self.calls, self.phase = ids, "T"

    def _result(self, code: str) -> None:
        call_id = self.calls.pop(0)
        call = self._append("tool/call", {"turn": self.turn, "step": self.step, "callId": call_id, "name": "bash",
                                          "arguments": C.CALL_ARGS}, f"tool/call {call_id}")
        seq = self.session.next_seq
        self._append("tool/result", C.result_data(self.turn, self.step, code, call_id, f"tool-result-{seq}"),
                     f"tool/result {code} for {call_id}", surface=True, sources=[call])
        if not self.calls:
            self._append("step/end", {"turn": self.turn, "step": self.step}, "step/end")
            self.phase = "P"

    def _overflow(self, outcome: str) -> None:
        self._route()
        self._append("assistant/chunk", C.overflow_chunk(self.turn, self.step), "provider finish: context overflow")
        result = self._do("request_error", {"code": C.OVERFLOW_CODE, "summaries": self._scripts(outcome, 1)},
                          f"agent/request-error (summary outcome {outcome})")
        if result.get("kind") != "retry":
            self._end_turn({"kind": "error", "error": {"message": "request too large for model context",
                                                       "code": C.OVERFLOW_CODE}})

    def _manual(self, outcome: str) -> None:
        self._do("manual_compact", {"summaries": self._scripts(outcome, 1)}, f"/compact (summary outcome {outcome})")

    def _prune(self, _arg: str) -> None:
        self._do("prune", {"pruner": dict(C.PRUNER)}, "tool-result pruner pass")

    def _reload(self, _arg: str) -> None:
        self._do("reload", {}, "crash and reload (session/end-seed)")

    # -- α of the concrete state --------------------------------------------------------------
    def abstract(self) -> tuple:
        """α: (phase, pend, surface codes, retained index, ctx, retries, seen, routed) of the runtime now."""
        session = self.session
        surf = tuple(C.classify(session.log[seq]) for seq in session.nodes)
        if isinstance(self.retained, RetainedSnapshot):
            ret = session.nodes.index(self.retained.seq) if self.retained.seq in session.nodes else -3
        else:
            ret = -2 if self.retained is NEVER else -1
        overflow = self.runtime.level_state.overflow
        pend = len(self.calls) if self.phase == "T" else self.pend
        return (self.phase, pend, surf, ret, self.ctx, overflow.retries, overflow.seen_overflow, self.routed)


def concretise(actions: list[str], settings: Settings, variant: Variant = CORRECT, runtime=None):
    """Run ``actions``; returns the concretiser (steps, results) and α after each action."""
    driver = Concretiser(settings, variant, runtime)
    states = []
    for action in actions:
        driver.act(action)
        states.append(driver.abstract())
    return driver, states


def make_trace(driver: Concretiser, prop: str, message: str, *, notes: dict, command: str | None = None,
               expected=None, observed=None) -> Trace:
    """The shared-format trace (source explore, level policy) ending in the violation."""
    violation = Violation(prop, message, len(driver.steps), expected, observed)
    return Trace(source="explore", level="policy", property=prop, steps=tuple(driver.steps), violation=violation,
                 runtime=driver.runtime_name, seed=None, command=command, notes=notes)
