"""Minimal witnesses for the runtime-context, persistence, observability and projection-liveness
promises (``properties/promises_context.py``; spec §15 G2-overflow, G3, G10, G15, G17, G18).

Each builder tells the story its §15 gap tells, in protocol ops only; :func:`~.witness.minimal`
cuts it by step deletion and ``python -m surfacecheck.findings.witness properties/findings`` writes it.
"""
from __future__ import annotations

from surfacecheck.core.trace import Trace


def Story():
    """:class:`~.witness.Story`, imported late: ``witness`` imports this module to merge its BUILDERS."""
    from .witness import Story as story

    return story()

SANDBOX = [{"name": "sandbox", "text": "sandbox: read-only"}]


def g3_resume_diverges() -> Trace:
    """§15 G3: S1(X), S2(Y), compactRegion(S2, S2); a resumed agent keeps S1 and sends no X, a live one re-emits X."""
    changed = [{"name": "sandbox", "text": "sandbox: workspace-write " + "w" * 600}]
    s = Story().configure(100_000).header().user("u-1", "x" * 40)
    s.op("pre_step", {"context": SANDBOX}, "pre-step: runtime context X entered as snapshot S1")
    s.user("u-2", "y" * 40)
    s.op("pre_step", {"context": changed}, "pre-step: runtime context changes to Y, snapshot S2 entered")
    s.user("u-3", "z" * 40).turn()
    s.op("compact", {"start": 4, "end": 4, "summaries": [{"outcome": "text", "text": "context was Y"}]},
         "compactRegion(S2, S2): an explicit range shadows the newest snapshot (live retained := none)")
    s.op("reload", {}, "crash and reopen: the constructor scan restores S1 (the newest still visible)")
    s.op("pre_step", {"context": SANDBOX}, "pre-step with X again: the resumed agent enters nothing; live would "
                                           "re-emit X after the checkpoint that paraphrases Y")
    return s.trace("G3-resume-restores-older-snapshot", "promise-context-resume-equals-live", "policy")


def g2_overflow_retries() -> Trace:
    """§15 G2, pressure then overflow, dsh's default budget: the pre-step's pressure compaction shadows the
    snapshot (request 1 of the step lacks it, the documented window); the request overflows and the same-step
    retry (spec 10.3: no re-projection) goes out without it too: two requests in a row."""
    s = Story().configure(400).header().user("u-1", "x" * 600).turn()
    s.op("pre_step", {"context": SANDBOX, "step": {"turn": 1, "step": 1}}, "pre-step 1/1: snapshot S entered")
    s.user("u-2", "y" * 260).user("u-3", "z" * 20)
    s.append({"type": "step/end", "data": {"turn": 1, "step": 1}}, "step/end 1/1")
    s.op("pre_step", {"context": SANDBOX, "step": {"turn": 1, "step": 2},
                      "summaries": [{"outcome": "text", "text": "k" * 120}]},
         "pre-step 1/2: no candidate (S unchanged), then pressure compacts the span holding S: request 1 lacks it")
    s.op("request_error", {"code": "CONTEXT_WINDOW_EXCEEDED", "summaries": [{"outcome": "text", "text": "ok"}]},
         "overflow: retain-0 re-summarizes the checkpoint, retry authorized; the retry lacks it too")
    return s.trace("G2-overflow-retries-widen-context-window", "promise-runtime-context-one-request", "policy")


def g18_live_log_does_not_reload() -> Trace:
    """§15 G18: a live `user/message` without an id is accepted; the seed check refuses the reloaded log."""
    s = Story()
    data = {"role": "user", "content": [{"type": "text", "text": "hello"}], "source": {"kind": "user"}}
    s.append({"type": "user/message", "data": data, "surfaceOp": "append"}, "user/message with no id: accepted live")
    s.op("reload", {}, "crash and reopen: the seed check refuses 'lacks an identified message'")
    return s.trace("G18-live-log-fails-reload", "promise-log-reloads", "policy")


def g15_warn_once_collision() -> Trace:
    """§15 G15: 'no context capacity' is warned for prov/mod; the later retainTokens error on that key is not."""
    s = Story().configure(None).header()
    s.op("pre_step", {}, "pre-step: no context capacity for prov/mod: warned, key prov/mod remembered")
    s.configure(400, retainTokens=300)
    s.op("pre_step", {}, "pre-step: retainTokens (300) >= threshold 200 for prov/mod: silently skipped")
    return s.trace("G15-warn-once-key-collision", "promise-config-errors-reported", "policy")


def g10_summary_usage_unbilled() -> Trace:
    """§15 G10: a compaction's summarizer call reports usage 20/4; `tokenUsage` stays unchanged."""
    s = Story().user("u-1", "x" * 800).user("u-2", "y" * 80).turn()
    s.op("compact", {"start": 0, "end": 0, "summaries": [{"outcome": "text", "text": "ok", "usage": [20, 4]}]},
         "compactRegion(u-1): the summary call's usage 20/4 is recorded on compaction/summary only")
    return s.trace("G10-compaction-usage-unbilled", "promise-compaction-usage-accounted", "compaction")


def g17_dangling_prune_claim() -> Trace:
    """§15 G17: the pruner's replacement is vetoed, its claim stays armed; the next replace (another range) throws."""
    pruner = {"thresholdChars": 100, "headChars": 10, "tailChars": 10}
    s = Story().user("u-1", "x" * 80).tool_round(1, 1, "call-1", "r" * 400)
    s.op("prune", {"pruner": pruner, "faults": {"fail_appends": ["prune-replace"]}},
         "pruneSession: compaction/prune arms the claim, the tool/result replacement is vetoed")
    data = {"id": "ck-1", "role": "user", "content": [{"type": "text", "text": "note"}],
            "source": {"kind": "plugin", "plugin": "fixture"}}
    s.append({"type": "user/message", "data": data, "surfaceOp": {"op": "replace", "start": 0, "end": 0},
              "sourceEventSeqs": [0]}, "a plugin replaces u-1: the armed claim covers another range, the fold throws")
    return s.trace("G17-dangling-prune-claim", "promise-projection-keeps-accepting", "log")


BUILDERS = {"G3-resume-restores-older-snapshot": g3_resume_diverges,
            "G2-overflow-retries-widen-context-window": g2_overflow_retries,
            "G18-live-log-fails-reload": g18_live_log_does_not_reload,
            "G15-warn-once-key-collision": g15_warn_once_collision,
            "G10-compaction-usage-unbilled": g10_summary_usage_unbilled,
            "G17-dangling-prune-claim": g17_dangling_prune_claim}
