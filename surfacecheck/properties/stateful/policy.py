"""Level ``policy``: the pressure listener at pre-step, overflow recovery, ``/compact`` and crash +
reload, under a generated runtime policy and context window (spec 9, 10.2, 11, 1.5).

Each example configures a policy (the corpus ``policies/*.json`` shape) with a small window so
pressure is reached within a few prompts, routes the session with a ``request/header``, then
interleaves the log machine's events with the listeners. Every step opens with ``pre_step {context,
step}``: the runtime itself projects the runtime-context candidate before the pressure listener and
enters `step/start` and the snapshot (spec 12, 13 steps 4-7), so ``runtime-context-reemitted`` judges
the runtime's writes, not the driver's.
"""
from __future__ import annotations

from hypothesis import strategies as st
from hypothesis.stateful import initialize, precondition, rule


from surfacecheck.model.event import ABSENT
from surfacecheck.model.summarizer import ScriptedSummarizer
from surfacecheck.runtime.dsh_vocabulary import vocabulary

from . import events as ev
from .boundaries import Boundaries
from .inputs import PRUNER_KEY, forms_of_type, values_of_form
from .log import LogMachine

override = st.fixed_dictionaries({"provider": st.just(ev.PROVIDER), "model": st.sampled_from(ev.MODELS)}, optional={
    "thresholdRatio": st.sampled_from((0.5, 0.9)), "retainTokens": st.integers(0, 100),
    "maxTokens": st.sampled_from((256, 1024)), "maxOverflowRetries": st.integers(0, 2),
    "compactionRetries": st.integers(0, 2), "summarizationProvider": st.just("sum"),
    "summarizationModel": st.just("sum-model")}).filter(
    lambda o: ("summarizationProvider" in o) == ("summarizationModel" in o))
"""A per-model policy (spec 9.1 `modelPolicies`): its fields win for that exact route, retention as a form."""

policies = st.builds(
    lambda ratio, retain, retries, overflow, prune, auto, models: {
        "thresholdRatio": ratio, **({} if retain is None else {"retainTokens": retain}),
        "compactionRetries": retries, "maxOverflowRetries": overflow, "maxTokens": 512, "auto": auto,
        **({"toolResultPruner": {"thresholdChars": 200, "headChars": 60, "tailChars": 40}} if prune else {}),
        **({"modelPolicies": models} if models else {})},
    st.sampled_from((0.5, 0.8, 0.99)), st.one_of(st.none(), st.integers(0, 150)), st.integers(0, 2),
    st.integers(0, 2), st.booleans(), ev.weighted(st.just(True), st.just(False), 6),
    ev.weighted(st.just([]), st.lists(override, max_size=2, unique_by=lambda o: o["model"]), 2))


# Probed configurations (spec 9.1 `resolveConfig`, spec 6 the pruner's `resolveConfig`): every field dsh validates,
# with values on both sides of each rule (ratios in (0, 1], non-negative and positive integers, the mutually
# exclusive retention, the summarization pair, model policies: shape, keys, duplicates, their own retention) and
# a few of the wrong type. Most are refused; the refusal (rule and dsh's message) is compared with the model's.
# Invalid policies are drawn on purpose: with valid ones only, `surfacecheck mutate`'s mutants that loosen or
# drop any of dsh's config checks survive the whole gate.
_RATIOS = (0.16, 0.5, 0.8, 0.99, 1, 0, -0.25, 1.5, "0.8", None, True)
_COUNTS = (0, 1, 3, 50, 512, -1, 2.5, "2", None)
_TEXTS = ("", "prov", "mod", 7, None)
_model_policies = st.fixed_dictionaries(
    {"provider": st.sampled_from((ev.PROVIDER, ev.PROVIDER, "", 7)), "model": st.sampled_from((*ev.MODELS, ""))},
    optional={"thresholdRatio": st.sampled_from(_RATIOS), "retainRatio": st.sampled_from(_RATIOS),
              "retainTokens": st.sampled_from(_COUNTS), "maxTokens": st.sampled_from(_COUNTS),
              "summarizationProvider": st.sampled_from(_TEXTS), "summarizationModel": st.sampled_from(_TEXTS),
              "auto": st.just(True)})
config_probes = st.fixed_dictionaries({}, optional={
    "thresholdRatio": st.sampled_from(_RATIOS), "retainRatio": st.sampled_from(_RATIOS),
    "retainTokens": st.sampled_from(_COUNTS), "maxTokens": st.sampled_from(_COUNTS),
    "compactionRetries": st.sampled_from(_COUNTS), "maxOverflowRetries": st.sampled_from(_COUNTS),
    "summarizationProvider": st.sampled_from(_TEXTS), "summarizationModel": st.sampled_from(_TEXTS),
    "auto": st.sampled_from((True, False, "yes", None)), "threshold": st.just(0.8),
    "modelPolicies": st.one_of(st.sampled_from(("all", None, [[]])), st.lists(_model_policies, max_size=3)),
    "toolResultPruner": st.fixed_dictionaries({}, optional={
        "thresholdChars": st.sampled_from((200, 60, 1, 0, -5, 2.5, None)),
        "headChars": st.sampled_from((60, 0, 150, -1, "6", None)),
        "tailChars": st.sampled_from((40, 0, 150, 1.5, None)), "marker": st.just("...")}),
})

VALID_MODEL_POLICY = {"provider": ev.PROVIDER, "model": ev.MODELS[0]}
VALID_PRUNER = {"thresholdChars": 200, "headChars": 60, "tailChars": 40}
PROBES_PER_CALL = 56
UNKNOWN_KEY = "surfacecheckUnknown"
"""A key no config schema of dsh's declares: each config object's key check refuses it."""
FIELD_FORMS = tuple((schema, path, form) for schema, fields in vocabulary().config.items()
                    for path, field in fields.items() for form in forms_of_type(field)) + tuple(
    (schema, f"{prefix}{UNKNOWN_KEY}", "an unknown key")
    for schema, fields in vocabulary().config.items()
    for prefix in ("", *(f"{path}." for path, field in fields.items() if field["type"] == "object")))
"""Every form of every field of dsh's config schemas (compaction-basic's, the pruner's: its vocabulary), and a key
none of them declares on each of their objects."""


def _values(schema: str, path: str, form: str) -> tuple:
    """The values of one form of one field (``ABSENT``: the field left out)."""
    field = vocabulary().config[schema].get(path, {"type": "number"})
    if form == "absent":
        return (ABSENT,)
    if form == "an unknown key":
        return (1,)
    if path == "modelPolicies" and form == "non-empty":  # one route twice, refused as a duplicate; valid lists
        return ([VALID_MODEL_POLICY, VALID_MODEL_POLICY],)  # come from `policies`
    if form in ("empty", "an object") and field["type"] in ("array", "object"):
        return ([] if field["type"] == "array" else dict(VALID_MODEL_POLICY)),
    return values_of_form(field, form)


def _probed(schema: str, path: str, value, base: dict) -> dict:
    """``base`` with one field set to ``value`` (removed when ABSENT); a field of a model policy or of the
    pruner's config is set on a valid one."""
    def put(target: dict, name: str) -> dict:
        out = dict(target)
        out.pop(name, None)
        return out if value is ABSENT else {**out, name: value}
    if schema == "tool-result-pruner":
        return {**base, PRUNER_KEY: put(base.get(PRUNER_KEY) or VALID_PRUNER, path)}
    if path == "modelPolicies[]":
        return {**base, "modelPolicies": [value]}
    if path.startswith("modelPolicies[]."):
        return {**base, "modelPolicies": [put(VALID_MODEL_POLICY, path.split(".", 1)[1])]}
    return put(base, path)


FALLBACK = {"provider": ScriptedSummarizer.provider, "model": ScriptedSummarizer.model}

FAILURE_CLASSES = {
    "commit": ("text", {"fail_appends": ["checkpoint"]}),
    "persistence": ("text", {"flush_fails": True}),
    "cancelled": ("agent-cancel", None),
    "cancelled after the summary": ("late-cancel", None),
    "cancelled during the flush": ("text", {"cancel_during_flush": True}),
    "flush cancelled after a failure": ("failure", {"cancel_during_flush": True}),
    "close fails": ("text", {"fail_appends": ["compaction/end"]}),
    "error close fails": ("failure", {"fail_appends": ["error-close"]}),
    "error close fails, flush cancelled": ("failure", {"fail_appends": ["error-close"], "cancel_during_flush": True}),
}
"""`/compact`'s failure classes met through its summary's outcome and the outside world's faults (spec 8.3, 11.2):
the checkpoint's append or the flush failing, the agent's signal aborting the summary, the caller cancelling after
the summary came back or while the bracket is flushed, the close or the error close failing."""
UNCLOSED = ("close fails", "error close fails", "error close fails, flush cancelled")
"""The classes that leave their bracket open (the close itself failed)."""
"""The agent's own provider and model (AgentOptions), the summarizer's target when no request routed the session."""


AGENT_FORMS = (None, None, {}, {"provider": FALLBACK["provider"]}, {"model": FALLBACK["model"]},
               {"provider": "", "model": FALLBACK["model"]}, {"provider": FALLBACK["provider"], "model": ""})
"""The agent's AgentOptions an example configures (None: a new session's, complete): each field unset, empty or set.
An incomplete pair is no target (spec 8.5): `conversationTarget` falls back to the base config and an unrouted,
unconfigured summary has no route at all."""


def agent_form(window: int) -> dict | None:
    """The AgentOptions of an example, a function of its drawn window (no draw of its own, so the examples of a seed
    keep their steps)."""
    return AGENT_FORMS[window % len(AGENT_FORMS)]


SUMMARIZE_FORMS = ("llm", "bare", "llm", "raw", "llm", "llm", "llm")
"""What the engine's `summarize()` returns in an example (spec 8.5, the subclass hook): dsh's own most often."""


def summarize_form(window: int) -> str:
    """The summarize() hook of an example, a function of its drawn window (no draw of its own)."""
    return SUMMARIZE_FORMS[window // 7 % len(SUMMARIZE_FORMS)]


def with_target_overrides(policy: dict, window: int) -> tuple[dict, bool]:
    """``policy`` with per-model overrides whose figures tell the targets apart (spec 9.1 `conversationTarget`: the
    routed model, else the agent's own), and whether the example starts unrouted: a function of the drawn window
    (a quarter of examples start with no request/header: the listeners find no target, `/compact` summarizes for
    the agent's model)."""
    unrouted = window % 4 == 0
    routed_override = window % 3 == 1
    models = policy.get("modelPolicies") or []
    taken = {(m.get("provider"), m.get("model")) for m in models}
    extra = []
    if routed_override and (ev.PROVIDER, ev.MODELS[0]) not in taken:
        extra.append({"provider": ev.PROVIDER, "model": ev.MODELS[0], "maxTokens": 300})
    if unrouted and (FALLBACK["provider"], FALLBACK["model"]) not in taken:
        extra.append({**FALLBACK, "maxTokens": 700})
    return ({**policy, "modelPolicies": [*models, *extra]} if extra else policy), unrouted


class PolicyMachine(Boundaries, LogMachine):
    level = "policy"

    @initialize(policy=policies, window=st.integers(200, 1200), routed=st.booleans(), queue=st.booleans(),
                sections=ev.weighted(st.just(("sandbox: read-only",)), st.just(()), 3))
    def configure(self, policy, window, routed, queue, sections):
        self.sections = sections  # the runtime-context sections active from the first step (spec 12)
        self.window = window
        policy, unrouted = with_target_overrides(policy, window)
        self.policy = policy  # the policy in force (a refused reconfigure leaves it, spec 9.1)
        args = {"policy": policy, "context_window": window}
        agent = agent_form(window)
        if agent is not None:
            args["agent"] = agent
        if summarize_form(window) != "llm":
            args["summarize"] = summarize_form(window)
        if routed:
            args["route"] = {"provider": ev.PROVIDER, "model": ev.MODELS[0]}
        if queue:
            args["summaries"] = [{"outcome": "text", "ratio": 0.1}, {"outcome": "failure"}]
        self.do("configure", args, f"policy {policy}, context window {window}")
        if not unrouted:
            self.append(ev.header(ev.MODELS[0]), f"request/header {ev.PROVIDER}/{ev.MODELS[0]} routes the session")

    @rule(policy=st.one_of(config_probes, st.just(None)))
    def reconfigure(self, policy):
        """A new runtime policy, most often one dsh refuses (spec 9.1): a refused one leaves the last in force.
        ``None``: :meth:`probe_fields` instead."""
        if policy is None:
            return self.probe_fields()
        result = self.do("configure", {"policy": policy, "context_window": self.window},
                         f"configure a probed policy {policy}")
        if "error" not in result:
            self.policy = policy

    def probe_fields(self):
        """Fields of dsh's config schemas, one at a time on the policy in force, each in one of its forms: every
        check dsh's resolver makes is met alone (several wrong fields at once meet only the first check in the
        resolver's order). :data:`PROBES_PER_CALL` consecutive forms of :data:`FIELD_FORMS` from a start the state
        picks; then the policy in force before, back."""
        before = self.policy
        for schema, path, form in self.run_from("field forms", FIELD_FORMS, PROBES_PER_CALL):
            policy = _probed(schema, path, self.pick(f"{path} {form}", _values(schema, path, form)), self.policy)
            result = self.do("configure", {"policy": policy, "context_window": self.window},
                             f"configure {schema} {path}: {form} on the policy in force: {policy}")
            if "error" not in result:
                self.policy = policy
        if self.policy != before:  # the example goes on under the policy it was configured with
            self.do("configure", {"policy": before, "context_window": self.window}, f"the policy back: {before}")
            self.policy = before

    @rule(scripts=st.one_of(st.none(), st.lists(ev.summary_scripts, min_size=1, max_size=3)))
    def pre_step(self, scripts):
        """The pressure listener, now and then under a signal already aborted (a cancelled turn: it skips, spec 9.3)."""
        args = {} if scripts is None else {"summaries": scripts}
        if self.pick("a pre-step of a cancelled turn", (False, False, False, True)):
            args["aborted"] = True
        self.do("pre_step", args, "agent/pre-step: the pressure listener (compactIfNeeded 'pressure')"
                + (" under an aborted signal" if args.get("aborted") else ""))

    def open_step(self) -> None:
        """The pre-step the runtime runs itself (spec 13 steps 4-7): the runtime-context candidate is
        projected from the active sections before the pressure listener, then `step/start` and the
        candidate are entered (D9); the monitor judges what the runtime wrote (spec 12)."""
        sections = [{"name": text.split(":")[0], "text": text} for text in getattr(self, "sections", ())]
        result = self.do("pre_step", {"context": sections, "step": {"turn": self.turn, "step": self.step}},
                         f"agent/pre-step {self.turn}/{self.step}: runtime context, pressure, step/start")
        if "error" in result or "step/start" not in (result.get("appended") or []):
            super().open_step()  # a refused pre-step wrote nothing: the loop still opens its step

    @rule(sections=st.lists(st.sampled_from(("sandbox: read-only", "sandbox: workspace-write", "cwd: /repo",
                                             "network: off")), max_size=2, unique=True))
    def change_context(self, sections):
        """The active runtime-context sections change (sandbox policy, cwd): the next step re-snapshots."""
        self.sections = tuple(sections)

    @rule(overflow=ev.weighted(st.just(True), st.just(False), 5),
          scripts=st.one_of(st.none(), st.lists(ev.summary_scripts, min_size=1, max_size=2)), aborted=ev.rarely)
    def request_error(self, overflow, scripts, aborted):
        args: dict = {"code": ev.OVERFLOW_CODE if overflow else "RATE_LIMITED"}
        if scripts is not None:
            args["summaries"] = scripts
        if aborted:
            args["aborted"] = True
        self.do("request_error", args, f"agent/request-error {args['code']}")

    @rule(words=st.sampled_from(("", "", "  ", "now", "please keep the plan")), script=ev.summary_scripts,
          aborted=ev.rarely, concurrent=ev.weighted(st.none(), st.sampled_from(ev.CONCURRENT), 3),
          faults=ev.weighted(st.none(), ev.faults, 5))
    def manual_compact(self, words, script, aborted, concurrent, faults):
        """`/compact` (spec 11): sometimes another producer writes while its summary runs (the selected span must
        stay as it was: `changed`), sometimes the outside world fails an append or the flush (`commit`,
        `persistence`)."""
        args = {"args": words, "summary": ev.with_concurrent(script, concurrent, self.surface(), self.fresh)}
        if aborted:
            args["aborted"] = True
        if faults:
            args["faults"] = faults
        self.do("manual_compact", args, f"/compact {words}".strip()
                + (f" (concurrent {concurrent})" if concurrent else "") + (f" (faults {faults})" if faults else ""))

    def unrouted(self) -> bool:
        """No request/header is logged: no request routed the session yet (spec 4.4 `routedTarget`)."""
        return not any(event.get("type") == "request/header" for event in self.events.values())

    @precondition(lambda self: self.unrouted())
    @rule(texts=st.lists(ev.long_texts, min_size=2, max_size=3))
    def compact_before_any_route(self, texts):
        """`/compact` before any request routed the session (spec 8.5), under each form of the agent's AgentOptions
        in turn: the summary runs under the policy of the agent's complete pair, else of the base config, and is
        routed by the configured summarization pair, else the agent's pair; with neither, dsh throws before it
        streams (a `summary` failure). Then the agent's own options back."""
        self.leave_turn()
        for agent in (*AGENT_FORMS[2:], FALLBACK):
            self.do("configure", {"policy": self.policy, "context_window": self.window, "agent": agent},
                    f"the agent's options {agent}, the policy in force: {self.policy}")
            for text in texts:
                self.append(ev.user_message(text, self.fresh("u")), "user/message: a prompt on the surface")
            self.do("manual_compact", {"args": "", "summary": {"outcome": "text", "ratio": 0.1}},
                    f"/compact before any request/header, the agent's options {agent}")

    @precondition(lambda self: self.surface_size >= 2)
    @rule()
    def manual_failure_classes(self):
        """`/compact`'s failure classes (spec 11.2), each in turn while a compactable span is left: `changed`
        (another producer replaces a node of the selected span while the summary runs: the span must stay as
        selected, spec 8.2 step 12), `commit` (the checkpoint's append fails after the summary, spec 8.3),
        `persistence` (the durability flush fails after a clean commit, spec 11.2), `cancelled` (the agent's own
        signal aborts the summary), `busy` (the agent is not idle); the close's own failures (spec 8.3: the close
        append after a commit, or the error close after a failed summary, fails: `commit`) and a flush cancelled after
        a failure (the caller's cancellation outranks the failure, spec 11.2); then `busy` under a bracket a crash
        left open, until a reload (:meth:`crash_mid_compaction`)."""
        self.leave_turn()
        unclosed = self.pick("a close that fails", UNCLOSED)
        for kind in ("changed", "commit", "persistence", "cancelled", "busy", "cancelled after the summary",
                     "cancelled during the flush", "flush cancelled after a failure",
                     unclosed):  # the last leaves its bracket open: what follows meets the lock
            span = self.ask("select_range", {"retain_tokens": 0}).get("range")
            nodes = self.surface()
            if not span or span["start"] not in nodes or span["end"] not in nodes:
                break
            inside = nodes[nodes.index(span["start"]):nodes.index(span["end"]) + 1]
            prompts = [seq for seq in inside if (self.events.get(seq) or {}).get("type") == "user/message"]
            script: dict = {"outcome": "text", "ratio": 0.1}
            args: dict = {"args": "", "summary": script}
            if kind == "changed":
                target = (prompts or inside)[0]
                script["concurrent"] = [["user/message", ev.user_message("rewritten", self.fresh("u"))["data"],
                                         {"op": "replace", "start": target, "end": target}, [target]]]
            elif kind == "busy":  # the agent is not idle: waking queued work
                args["agent_idle"] = False
            else:  # `cancelled`: the agent's own signal aborts while the summary runs (ReactLoopAgent.cancel)
                script["outcome"], faults = FAILURE_CLASSES[kind]
                if faults:
                    args["faults"] = faults
            self.do("manual_compact", args, f"/compact meeting its `{kind}` failure class")
        self.crash_mid_compaction()

    def crash_mid_compaction(self):
        """A process that dies inside a compaction bracket leaves its `compaction/start` unmatched: the durable lock
        (spec 8.4) refuses `/compact` as busy until a reload's `session/end-seed` shows the marker belongs to an
        earlier lifecycle (`assertCompactionInactive`, spec 1.5); then `/compact` again."""
        self.leave_turn()
        self.crashed_bracket("compaction/start of a compaction the crash interrupts")
        script = {"outcome": "text", "ratio": 0.1}
        self.do("manual_compact", {"args": "", "summary": script}, "/compact while the bracket is open")
        self.do("pre_step", {"summaries": [script]}, "agent/pre-step while the bracket is open: the pressure "
                                                     "listener meets the lock")
        self.do("reload", {}, "crash and reopen from the log (session/end-seed)")
        if self.pick("a second crash inside a bracket", (False, True)):  # the newest marker now follows the end-seed
            self.crashed_bracket("compaction/start of a second compaction a crash interrupts, after the reload")
            self.do("manual_compact", {"args": "", "summary": script}, "/compact while the newer bracket is open")
            self.do("reload", {}, "crash and reopen from the log (session/end-seed)")
        self.do("manual_compact", {"args": "", "summary": script}, "/compact after the reload")

    def crashed_bracket(self, label: str) -> None:
        """The standalone `compaction/start` of a compaction a crash interrupts (its close never written)."""
        self.append({"type": "compaction/start", "data": {"compactionId": self.fresh("c"), "turn": None}}, label)

    @rule()
    def reload(self):
        self.do("reload", {}, "crash and reopen from the log (session/end-seed)")

    @rule()
    def idle(self):
        self.append({"type": "agent/status", "data": {"status": "idle"}}, "agent/status idle (overflow count reset)")

    @rule(texts=st.lists(ev.long_texts, min_size=2, max_size=4))
    def prompt_burst(self, texts):
        """Several long prompts: pressure builds and a compactable, balanced head appears (spec 7)."""
        for text in texts:
            self.append(ev.user_message(text, self.fresh("u")), "user/message: a long prompt")

    # The log machine's wild replacements (arbitrary spans, refused appends) would leave corrupt
    # surfaces that no dsh producer writes; the policy level keeps to what the agent loop writes.
    def unpriced_replace(self, *args):  # noqa: D102 - not a rule here
        raise NotImplementedError

    def summary_pair(self, *args):  # noqa: D102 - not a rule here
        raise NotImplementedError

    def refused_append(self, *args):  # noqa: D102 - not a rule here
        raise NotImplementedError

    def refused_replace(self, *args):  # noqa: D102 - not a rule here
        raise NotImplementedError

    def misclaimed_replace(self, *args):  # noqa: D102 - not a rule here
        raise NotImplementedError
