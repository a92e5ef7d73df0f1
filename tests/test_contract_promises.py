"""The compaction contract's promises (``docs/contract.md``): each catches the reference variant that breaks it, and
only that promise catches it; the plain reference keeps every promise on the same scenario; the provider role
rules and the edge readings of the promises, one by one."""
from __future__ import annotations

import pytest

from surfacecheck.contract.promises import PROMISES, judge
from surfacecheck.contract.record import record
from surfacecheck.contract.roles import PROVIDERS, problems
from surfacecheck.contract.session import Exchange, Session
from surfacecheck.core.catalogue import CATALOGUE
from surfacecheck.runtime.conversation.variants import BREAKS
from surfacecheck.runtime.registry import open_spec

SYSTEM = "You are terse."


def fetch(cid: str, size: int) -> dict:
    return {"calls": [{"id": cid, "name": "fetch", "args": {"size": size, "tag": cid}}]}


TURN_1 = ("turn", {"user": "Find the bug in module A.", "replies": [fetch("c1", 600), fetch("c2", 400),
                                                                    {"text": "found it"}]})
TURN_2 = ("turn", {"user": "Now fix it.", "replies": [fetch("c3", 800), {"text": "fixed"}]})
TURN_3 = ("turn", {"user": "Check it again.", "replies": [fetch("c4", 600), {"text": "ok"}]})
COMPACT = ("compact", {})


def _open(compaction: bool = True, **settings) -> dict:
    return {"settings": {"trigger_tokens": 2000, "keep_tokens": 150, "compaction": compaction, **settings},
            "system": SYSTEM}


# variant -> (open args, requests, provider, the trace step its first breach is at)
SCENARIOS = {
    "orphan-cut": (_open(), [TURN_1, TURN_2, COMPACT], "anthropic", 3),
    "rewrite-kept": (_open(keep_tokens=300), [TURN_1, TURN_2, COMPACT], "anthropic", 3),
    "drop-prompt": (_open(trigger_tokens=400), [TURN_1, TURN_2], "anthropic", 2),
    "drop-system": (_open(trigger_tokens=400), [TURN_1, TURN_2], "anthropic", 2),
    "bigger-summary": (_open(), [TURN_1, TURN_2, COMPACT], "anthropic", 3),
    "keep-too-much": (_open(trigger_tokens=350), [TURN_1, TURN_2], "anthropic", 2),
    "skip-removed": (_open(), [TURN_1, TURN_2, COMPACT], "anthropic", 3),
    "constant-summary": (_open(), [TURN_1, TURN_2, COMPACT], "anthropic", 3),
    "ignore-window": (_open(keep_tokens=250), [TURN_1, TURN_2, ("compact", {"summarizer_window": 400})],
                      "anthropic", 3),
    "nested-summary": (_open(), [TURN_1, TURN_2, COMPACT, TURN_3, COMPACT], "anthropic", 5),
    "user-after-summary": (_open(trigger_tokens=400), [TURN_1, TURN_2], "bedrock", 2),
    "compact-when-disabled": (_open(compaction=False, trigger_tokens=400), [TURN_1, TURN_2], "anthropic", 2),
    "compact-early": (_open(trigger_tokens=400), [TURN_1, TURN_2], "anthropic", 1),
}


def run(spec: str, variant: str) -> Session:
    open_args, requests, provider, _ = SCENARIOS[variant]
    runtime = open_spec(spec, 10)
    try:
        return record(runtime, open_args, requests, provider)
    finally:
        runtime.close()


def test_every_promise_has_a_variant_and_a_catalogue_entry():
    assert sorted(BREAKS.values()) == sorted(p.id for p in PROMISES)
    assert all(CATALOGUE[p.id].meaning == p.meaning and CATALOGUE[p.id].level == "conversation" for p in PROMISES)


@pytest.mark.parametrize("variant", sorted(BREAKS, key=lambda v: [p.id for p in PROMISES].index(BREAKS[v])))
def test_the_variant_is_caught_by_exactly_its_promise(variant):
    promise, step = BREAKS[variant], SCENARIOS[variant][3]
    assert judge(run("reference", variant)) == []
    breaches = judge(run(f"reference:{variant}", variant))
    assert breaches, f"reference:{variant} keeps every promise"
    assert {b.promise for b in breaches} == {promise}, [b.message for b in breaches]
    first = breaches[0]
    assert first.step == step
    assert first.expected is not None and first.observed is not None and first.message


# -- the providers' role rules ------------------------------------------------------------------------------------
U = {"role": "user", "text": "go"}
S = {"role": "user", "text": "Summary: before", "summary": True}
A = {"role": "assistant", "text": "ok"}


def A_CALLS(*ids: str) -> dict:
    return {"role": "assistant", "text": "", "calls": [{"id": i, "name": "fetch", "args": {}} for i in ids]}


def T(cid: str, **extra) -> dict:
    return {"role": "tool", "call_id": cid, "text": f"{cid} result", **extra}


ROLE_CASES = {  # provider -> (a valid request, an invalid one, what the invalid one breaks)
    "anthropic": ([U, A_CALLS("c1"), T("c1"), A, U, U], [A, U], "first message must be a user message"),
    "bedrock": ([S, A_CALLS("c1", "c2"), T("c1", packed=1), T("c2", packed=1)],
                [U, A_CALLS("c1", "c2"), T("c1", packed=1), T("c2", packed=2)], "two user turns in a row"),
    "openai": ([A, U, A_CALLS("c1"), T("c1")], [U, T("c9")], "does not answer a call"),
    "gemini": ([U, A_CALLS("c1"), T("c1"), A_CALLS("c2"), T("c2")], [U, A, A_CALLS("c1"), T("c1")],
               "call turn must come right after a user"),
}


@pytest.mark.parametrize("provider", sorted(ROLE_CASES))
def test_each_provider_accepts_a_valid_request_and_names_what_an_invalid_one_breaks(provider):
    valid, invalid, breaks = ROLE_CASES[provider]
    assert problems(valid, PROVIDERS[provider]) == []
    found = problems(invalid, PROVIDERS[provider])
    assert found and any(breaks in what for _, what in found), found


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
def test_no_provider_takes_unanswered_calls_or_a_result_away_from_its_call(provider):
    rules = PROVIDERS[provider]
    assert any("unanswered" in w for _, w in problems([U, A_CALLS("c1")], rules))
    assert any("unanswered" in w for _, w in problems([U, A_CALLS("c1", "c2"), T("c1"), A], rules))
    assert any("does not answer" in w for _, w in problems([U, A_CALLS("c1"), U, T("c1")], rules))
    assert problems([{"role": "system", "text": "s"}, U, A_CALLS("c1"), T("c1")], rules) == []


def test_a_summary_followed_by_a_user_message_is_two_user_turns_on_bedrock_only():
    request = [S, U, A]
    assert problems(request, PROVIDERS["anthropic"]) == []  # the Messages API merges consecutive user turns
    assert [w for _, w in problems(request, PROVIDERS["bedrock"])] == [
        "bedrock: two user turns in a row (roles must alternate)"]
    # without a packed key consecutive tool messages are one user turn
    assert problems([U, A_CALLS("c1", "c2"), T("c1"), T("c2")], PROVIDERS["bedrock"]) == []


# -- edge readings --------------------------------------------------------------------------------------------------
def session(*answers: dict, op: str = "compact", trigger: dict | None = None, system: str | None = None,
            initial: tuple = (), settings: dict | None = None) -> Session:
    found = Session(runtime="hand", settings=settings or {"compaction": True},
                    trigger=trigger or {"kind": "tokens", "value": 100, "counter": "neutral"}, system=system,
                    initial=initial)
    for number, answer in enumerate(answers, start=1):
        found = found.then(Exchange(number, op, {}, answer))
    return found


def compaction(before, after, cause="direct", **counts) -> dict:
    return {"kind": "compaction", "before": before, "after": after, "cause": cause, **counts}


def summarizer(prompt: str, output: str | None = "sum", outcome: str = "text", tokens: int = 10) -> dict:
    return {"kind": "summarizer", "prompt": prompt, "tokens": tokens, "outcome": outcome, "output": output}


def request(messages, overflow=False, system=None) -> dict:
    return {"kind": "request", "system": system, "messages": messages, "overflow": overflow, "tokens": None}


def only(found: Session, promise: str) -> list:
    return judge(found, only=[promise])


def test_an_orphan_already_before_the_compaction_is_not_a_breach():
    orphan = T("c0")
    before = [orphan, U, A_CALLS("c1"), T("c1"), A]
    kept = [orphan, U, A_CALLS("c1"), T("c1"), A]  # nothing removed: the orphan stays as it was
    summary = {"role": "user", "text": "Summary: sum", "summary": True}
    found = session({"steps": [summarizer("go"), compaction(before, [summary] + kept[1:] + [])],
                     "history": [summary] + kept[1:]}, initial=tuple(before))
    assert only(found, "contract-no-orphan-created") == []
    cut = session({"steps": [summarizer("go"), compaction(before, [summary, T("c1"), A])],
                   "history": [summary, T("c1"), A]}, initial=tuple(before))
    [breach] = only(cut, "contract-no-orphan-created")
    assert breach.observed == ["result c1"] and breach.step == 1


def test_a_direct_compaction_is_not_judged_by_under_threshold_noop_nor_fits_after():
    before = [U, A]
    after = [{"role": "user", "text": "Summary: sum", "summary": True}]
    direct = session({"steps": [summarizer("go ok"), compaction(before, after, "direct")], "history": after})
    assert only(direct, "contract-under-threshold-noop") == [] and only(direct, "contract-fits-after") == []
    by_size = session({"steps": [summarizer("go ok"), compaction(before, after, "size")], "history": after})
    [breach] = only(by_size, "contract-under-threshold-noop")
    assert breach.expected == "over 100 (tokens)"
    no_trigger = Session("hand", {"compaction": True}, None, None).then(
        Exchange(1, "compact", {}, {"steps": [compaction(before, after, "size")], "history": after}))
    assert [b.message for b in only(no_trigger, "contract-under-threshold-noop")] == [
        "a size compaction in a session with no trigger"]


def test_a_failed_summarizer_is_not_judged_by_summarizer_used():
    after = [{"role": "user", "text": "Summary: (none)", "summary": True}]
    failed = session({"steps": [summarizer("go ok", None, "fail"), compaction([U, A], after)], "history": after})
    assert only(failed, "contract-summarizer-used") == []
    constant = session({"steps": [summarizer("go ok"), compaction([U, A], after)], "history": after})
    assert [b.observed for b in only(constant, "contract-summarizer-used")] == ["Summary: (none)"]


def test_an_overflow_retry_without_a_shrink_and_too_many_summarizer_calls_break_progress():
    retry = session({"steps": [request([U], overflow=True), request([U], overflow=True)], "history": [U]}, op="turn")
    assert [b.message for b in only(retry, "contract-progress")] == [
        "an overflowing request is retried without shrinking"]
    calls = session({"steps": [request([U])] + [summarizer("go", outcome="fail", output=None)] * 4
                     + [{"kind": "error", "type": "X", "message": "", "typed": True}], "history": [U]}, op="turn")
    assert [b.observed for b in only(calls, "contract-progress")] == [{"compactions": 0, "summarizer": 4}]


def test_a_typed_error_excuses_a_compaction_that_does_not_fit():
    big = [{"role": "user", "text": "x" * 800}]
    after = [{"role": "user", "text": "Summary: sum " + "y" * 600, "summary": True}]
    steps = [summarizer("x" * 800), compaction(big, after, "size"), request(after)]
    assert only(session({"steps": steps, "history": after}, op="turn"), "contract-fits-after")
    typed = steps[:2] + [{"kind": "error", "type": "ContextTooLarge", "message": "", "typed": True}]
    assert only(session({"steps": typed, "history": after}, op="turn"), "contract-fits-after") == []


def test_the_reference_ends_a_turn_it_cannot_fit_with_a_typed_error_and_never_retries_blindly():
    runtime = open_spec("reference", 10)
    found = record(runtime, {"settings": {"compaction": False}, "system": SYSTEM},
                   [("turn", {"user": "go", "replies": [fetch("c1", 2000)], "overflow_above": 300})])
    kinds = [(s["kind"], s.get("overflow"), s.get("typed")) for s in found.exchanges[0].answer["steps"]]
    assert kinds == [("request", False, None), ("request", True, None), ("error", None, True)]
    assert found.trigger is None and judge(found) == []
    runtime = open_spec("reference", 10)
    found = record(runtime, _open(trigger_tokens=2000),
                   [TURN_1, ("turn", {"user": "more", "replies": [fetch("c5", 1200)], "overflow_above": 450})])
    steps = found.exchanges[1].answer["steps"]
    assert [(s["kind"], s.get("cause") or s.get("overflow")) for s in steps][1:] == [
        ("request", True), ("summarizer", None), ("compaction", "overflow"), ("request", False)]
    assert judge(found) == []


def test_an_unknown_setting_is_a_bad_args_error():
    from surfacecheck.core.protocol import ProtocolError

    with pytest.raises(ProtocolError, match="unknown setting 'window'"):
        open_spec("reference", 10).call("open", {"settings": {"window": 3}})


# -- the conversation schemas ---------------------------------------------------------------------------------------
def test_the_reference_answers_match_the_conversation_schemas():
    import jsonschema

    from surfacecheck.runtime.schemas import documents

    docs = documents()

    def check(name: str, value) -> None:
        jsonschema.Draft202012Validator(docs[f"conversation.{name}.json"]).validate(value)

    for doc in (d for n, d in docs.items() if n.startswith("conversation.")):
        jsonschema.Draft202012Validator.check_schema(doc)
    seen = set()
    for variant, (open_args, requests, _, _) in SCENARIOS.items():
        for spec in ("reference", f"reference:{variant}"):
            runtime = open_spec(spec, 10)
            check("hello.result", runtime.hello())
            check("open.args", open_args)
            check("open.result", runtime.call("open", open_args))
            for op, args in requests:
                check(f"{op}.args", args)
                answer = runtime.call(op, args)
                check(f"{op}.result", answer)
                seen |= {step["kind"] for step in answer["steps"]}
                for step in answer["steps"]:
                    check("step", step)
    assert seen == {"request", "compaction", "summarizer", "error"}
    with pytest.raises(jsonschema.ValidationError):
        check("message", {"role": "tool", "text": "no call id"})
    with pytest.raises(jsonschema.ValidationError):
        check("step", {"kind": "compaction", "before": [], "after": [], "cause": "because"})


# -- the reference keeps every promise on random scripts --------------------------------------------------------------
def random_script(rng) -> tuple[dict, list]:
    """A session script: settings, turns of fetches of random sizes, direct compactions, overflows, summarizer
    windows and failing, empty or long summaries."""
    def summaries():
        return [rng.choice([{"fail": "down"}, {"empty": True}, {"text": "s" * rng.randint(1, 400)}])]

    settings = {"trigger_tokens": rng.choice([300, 500, 800, 2000]), "keep_tokens": rng.choice([0, 100, 200, 400]),
                "compaction": rng.random() > 0.2}
    requests, n = [], 0
    for t in range(rng.randint(1, 6)):
        args: dict = {}
        if rng.random() < 0.25:
            op = "compact"
        else:
            op, replies = "turn", []
            for _ in range(rng.randint(0, 4)):
                n += 1
                replies.append({"calls": [{"id": f"c{n}-{j}", "name": "fetch",
                                           "args": {"size": rng.randint(0, 900), "tag": f"t{n}"}}
                                          for j in range(rng.randint(1, 2))]})
            args = {"user": f"request {t} " + "u" * rng.randint(0, 200), "replies": replies + [{"text": f"answer {t}"}]}
            if rng.random() < 0.3:
                args["overflow_above"] = rng.choice([200, 400, 700])
        if rng.random() < 0.25:
            args["summarizer_window"] = rng.choice([100, 300, 600])
        if rng.random() < 0.25:
            args["summaries"] = summaries()
        requests.append((op, args))
    return {"settings": settings, "system": rng.choice([None, SYSTEM])}, requests


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
def test_the_reference_keeps_every_promise_on_random_scripts(provider):
    import random

    compacted = 0
    for seed in range(60):
        open_args, requests = random_script(random.Random(seed))
        found = record(open_spec("reference", 10), open_args, requests, provider)
        assert judge(found) == [], (seed, [b.message for b in judge(found)])
        compacted += sum(s["kind"] == "compaction" for e in found.exchanges for s in e.answer["steps"])
    assert compacted > 30  # the scripts do reach compaction
