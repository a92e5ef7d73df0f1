"""JSON <-> model values for the runtime protocol (``docs/protocol.md``).

Requests carry dsh event JSON (spec 1.1 envelope minus ``seq``, which the runtime assigns, spec
1.3 step 5), summary scripts (:class:`model.summarizer.SummaryScript`) and policies (corpus
``policies/*.json``, :meth:`model.config.RuntimePolicy.from_json`). Results carry model errors as
spec refusals ``{"error": {"type", "rule", "seq", "message"}}``. A request whose *shape* is wrong
raises :class:`~surfacecheck.core.protocol.ProtocolError` (a protocol error, not a spec refusal).
"""
from __future__ import annotations

from typing import Any

from surfacecheck.model.errors import ModelError
from surfacecheck.model.event import ABSENT

from ..core.protocol import ProtocolError

EVENT_KEYS = frozenset({"type", "data", "time", "surfaceOp", "sourceEventSeqs"})


def refusal(error: ModelError) -> dict[str, Any]:
    """A spec-level refusal as a result: the model error's class, rule id, seq and dsh message."""
    return {"error": {"type": type(error).__name__, "rule": error.rule, "seq": error.seq, "message": error.message}}


def require(args: Any, key: str, kind: type | tuple[type, ...], *, optional: bool = False, default: Any = None) -> Any:
    """``args[key]`` checked against ``kind`` (``bool`` is never an ``int`` here); ProtocolError otherwise."""
    if not isinstance(args, dict):
        raise ProtocolError("bad-args", "args must be a JSON object")
    if key not in args or (optional and args[key] is None):
        if optional:
            return default
        raise ProtocolError("bad-args", f"missing argument {key!r}")
    value = args[key]
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if isinstance(value, bool) and bool not in kinds:
        raise ProtocolError("bad-args", f"argument {key!r} must be {' or '.join(k.__name__ for k in kinds)}")
    if not isinstance(value, kinds):
        raise ProtocolError("bad-args", f"argument {key!r} must be {' or '.join(k.__name__ for k in kinds)}")
    return value


def event_kwargs(event: Any) -> dict[str, Any]:
    """An ``append`` request's ``event`` as keyword arguments of :func:`model.session.append`.

    Missing ``data`` / ``surfaceOp`` / ``sourceEventSeqs`` become ``ABSENT`` (the key was not
    there), so the session itself refuses what dsh refuses (spec 1.3 step 1: undefined data)."""
    if not isinstance(event, dict):
        raise ProtocolError("bad-args", "argument 'event' must be a JSON object")
    if not EVENT_KEYS.issuperset(event):
        extra = sorted(set(event) - EVENT_KEYS)
        raise ProtocolError("bad-args", f"event has unknown keys {extra} (allowed: {sorted(EVENT_KEYS)}; seq is assigned)")
    if not isinstance(event.get("type"), str):
        raise ProtocolError("bad-args", "event.type must be a string")
    time = event.get("time")
    if time is not None and (isinstance(time, bool) or not isinstance(time, int)):
        raise ProtocolError("bad-args", "event.time must be an integer")
    return {
        "type_": event["type"],
        "data": event.get("data", ABSENT),
        "surface_op": event.get("surfaceOp", ABSENT),
        "source_event_seqs": event.get("sourceEventSeqs", ABSENT),
        "time": time,
    }


# -- summary scripts, faults, results (spec 8, 9-11) ----------------------------------------------
def summary_script(obj: Any):
    """A summary script JSON as :class:`model.summarizer.SummaryScript`; outcome ``concurrent`` is ``text``
    with the ``concurrent`` appends (another producer writing while the summary runs, spec 8.2 step 12)."""
    from surfacecheck.model.summarizer import OUTCOMES, SummaryScript

    if not isinstance(obj, dict):
        raise ProtocolError("bad-args", "a summary script must be a JSON object")
    extra = sorted(set(obj) - {"outcome", "text", "ratio", "concurrent", "usage"})
    if extra:
        raise ProtocolError("bad-args", f"summary script has unknown keys {extra}")
    outcome = obj.get("outcome", "text")
    if outcome == "concurrent":
        outcome = "text"
    if outcome not in OUTCOMES:
        raise ProtocolError("bad-args", f"unknown summary outcome {outcome!r}")
    text = obj.get("text")
    if text is not None and not isinstance(text, str):
        raise ProtocolError("bad-args", "summary script text must be a string")
    ratio = obj.get("ratio", 0.25)
    if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or ratio < 0:
        raise ProtocolError("bad-args", "summary script ratio must be a non-negative number")
    concurrent = []
    for item in obj.get("concurrent") or []:
        if not isinstance(item, list) or len(item) not in (3, 4) or not isinstance(item[0], str):
            raise ProtocolError("bad-args", "concurrent entries are [type, data, surfaceOp, sourceEventSeqs?]")
        concurrent.append(tuple(item))
    usage = obj.get("usage")
    if usage is not None:
        if not (isinstance(usage, list) and len(usage) == 2 and all(isinstance(n, int) for n in usage)):
            raise ProtocolError("bad-args", "summary script usage must be [inputTokens, outputTokens]")
        usage = tuple(usage)
    return SummaryScript(outcome=outcome, text=text, ratio=float(ratio), concurrent=tuple(concurrent), usage=usage)


def summary_scripts(args: dict, key: str = "summaries") -> tuple | None:
    """The op's optional ``summaries`` list (``summary`` accepted for a single script), or None."""
    if key in args and args[key] is not None:
        if not isinstance(args[key], list):
            raise ProtocolError("bad-args", f"argument {key!r} must be a list of summary scripts")
        return tuple(summary_script(item) for item in args[key])
    if "summary" in args and args["summary"] is not None:
        return (summary_script(args["summary"]),)
    return None


CANCELLING = ("cancel", "agent-cancel", "late-cancel")
"""The summary outcomes that cancel through a signal."""


def signal_passed(args: dict) -> bool:
    """``compact``'s optional ``signal`` (default true); false: the caller passes no AbortSignal (dsh's `signal`
    parameter is optional, spec 8.1), so nothing can cancel the compaction: an aborted caller, a cancelling summary
    or a cancellation during the flush with it is refused as bad-args."""
    passed = require(args, "signal", bool, optional=True, default=True)
    faults = args.get("faults")
    if not passed and (args.get("aborted") or any(s.outcome in CANCELLING for s in summary_scripts(args) or ())
                       or (isinstance(faults, dict) and faults.get("cancel_during_flush"))):
        raise ProtocolError("bad-args", "signal: false takes no aborted caller, no cancelling summary and no "
                                        "cancellation during the flush")
    return passed


FAULT_APPENDS = ("compaction/summary", "checkpoint", "compaction/end", "error-close", "prune-replace")


def fault_fields(args: dict) -> tuple[frozenset, bool, bool] | None:
    """Optional ``faults {fail_appends: [...], flush_fails, cancel_during_flush}`` (spec 8.3, 11.2) as plain
    values (fail_appends, flush_fails, cancel_during_flush), or ``None`` when absent; each runtime builds its own."""
    obj = args.get("faults")
    if obj is None:
        return None
    if not isinstance(obj, dict) or set(obj) - {"fail_appends", "flush_fails", "cancel_during_flush"}:
        raise ProtocolError("bad-args", "faults is {fail_appends?: [...], flush_fails?: bool, cancel_during_flush?: bool}")
    fail = obj.get("fail_appends") or []
    if not isinstance(fail, list) or any(item not in FAULT_APPENDS for item in fail):
        raise ProtocolError("bad-args", f"faults.fail_appends entries must be among {list(FAULT_APPENDS)}")
    return frozenset(fail), bool(obj.get("flush_fails", False)), bool(obj.get("cancel_during_flush", False))


def faults(args: dict):
    """The model's :class:`~model.transaction.Faults` for a request's optional ``faults``."""
    from surfacecheck.model.transaction import NO_FAULTS, Faults

    fields = fault_fields(args)
    return NO_FAULTS if fields is None else Faults(*fields)


def compaction_result(result) -> dict | None:
    """`CompactionResult` (spec 8.2 step 14) as JSON (camelCase as dsh names it)."""
    if result is None:
        return None
    return {"compactionId": result.compaction_id, "sourceCommandId": result.source_command_id,
            "startSeq": result.start_seq, "summarySeq": result.summary_seq, "endSeq": result.end_seq,
            "start": result.start, "end": result.end, "shadowedSeqs": list(result.shadowed_seqs),
            "shadowedTokenCount": result.shadowed_token_count}


def failure(error) -> dict | None:
    """A failure inside an outcome (events may have been written): like a refusal's error body."""
    if error is None:
        return None
    return refusal(error)["error"]


def compact_now_json(result: dict | None, error: BaseException | None) -> dict:
    """What `compactNow` settled with (spec 11.2): its `CompactionResult` (JSON) or null, the error it threw as a
    failure, and that error's `cause` (a `ManualCompactionError` wraps the failure it reports)."""
    cause = getattr(error, "cause", None)
    return {"result": result, "failure": failure(error) if isinstance(error, ModelError) else None,
            "cause": failure(cause) if isinstance(cause, ModelError) else None}


def context_sections(args: dict) -> list[dict] | None:
    """``pre_step``'s optional ``context``: the runtime-context sections ``[{name, text}]`` active for this
    step (spec 12, 13 step 4), or None when the driver does not ask the runtime to project runtime context."""
    sections = args.get("context")
    if sections is None:
        return None
    if not isinstance(sections, list) or not all(
            isinstance(s, dict) and set(s) == {"name", "text"} and isinstance(s["name"], str)
            and isinstance(s["text"], str) for s in sections):
        raise ProtocolError("bad-args", "context is a list of runtime-context sections {name: string, text: string}")
    return [{"name": s["name"], "text": s["text"]} for s in sections]


def step_marker(args: dict) -> dict | None:
    """``pre_step``'s optional ``step {turn, step}``: the runtime opens the step itself (`step/start`, spec 13
    step 7) after the pressure listener, before entering the runtime-context candidate (D9)."""
    marker = args.get("step")
    if marker is None:
        return None
    if not isinstance(marker, dict) or set(marker) != {"turn", "step"} or not all(
            isinstance(marker[k], int) and not isinstance(marker[k], bool) for k in ("turn", "step")):
        raise ProtocolError("bad-args", "step is {turn: integer, step: integer}")
    return {"turn": marker["turn"], "step": marker["step"]}


def claimed_messages(args: dict) -> list[dict] | None:
    """``pre_step``'s optional ``claimed``: the inbox batch claimed for this step (spec 13 step 4), each a
    `user/message` event's ``data``, entered after `step/start` and before the snapshot (D9). Checked
    here so a bad batch is a protocol error that writes nothing (spec 1.3 step 1 lossless JSON)."""
    from copy import deepcopy

    from surfacecheck.model.session import is_lossless_json

    claimed = args.get("claimed")
    if claimed is None:
        return None
    if not isinstance(claimed, list) or not all(isinstance(m, dict) and is_lossless_json(m) for m in claimed):
        raise ProtocolError("bad-args", "claimed is a list of user/message data objects (lossless JSON)")
    return deepcopy(claimed)


def _flag(args: dict, name: str) -> bool:
    value = args.get(name, False)
    if not isinstance(value, bool):
        raise ProtocolError("bad-args", f"{name} is a boolean")
    return value


def usage_requested(args: dict) -> bool:
    """``projection``'s optional ``usage: true``: also answer the cumulative `tokenUsage` (spec 5.2), a
    read-only figure a promise monitor reads (§15 G10); absent or false keeps the plain projection result."""
    return _flag(args, "usage")


def command_raw_input(args_text: str) -> str:
    """What dsh's command executor records as ``command/run.args`` for ``manual_compact {args}`` (spec 11.1): the
    command line is ``/compact`` + the text, a space between unless the text is empty or starts with whitespace,
    and the executor's raw input is everything after the command name, the separator included."""
    if not args_text or args_text[0] in " \t\n\r":
        return args_text
    return " " + args_text


def events_from(args: dict) -> int:
    """``events``'s ``from``: the first seq to answer (default 0)."""
    start = args.get("from", 0)
    if isinstance(start, bool) or not isinstance(start, int) or start < 0:
        raise ProtocolError("bad-args", "from is a non-negative integer")
    return start


def cut_probe(args: dict) -> list[int] | None:
    """``cuts``'s optional ``seqs``: the seqs whose leading and trailing cuts to ask
    (`toolPairingBalancedBefore/After`, spec 3), on the surface or not; None: every cut of the surface."""
    seqs = args.get("seqs")
    if seqs is None:
        return None
    if not isinstance(seqs, list) or any(isinstance(s, bool) or not isinstance(s, int) for s in seqs):
        raise ProtocolError("bad-args", "seqs is a list of integers")
    return list(seqs)


def breakdown_requested(args: dict) -> bool:
    """``projection``'s optional ``breakdown: true``: also answer the `contextBreakdown` composition (spec 5.2,
    D4: system and tools priced from the last `request/header`, messages the claim-fold running total)."""
    return _flag(args, "breakdown")


def pressure_requested(args: dict) -> bool:
    """``projection``'s optional ``pressure: true``: also answer the `contextPressure` occupancy (spec 5.2: the
    newest usage sample's prompt-side tokens, the newest `request/context` window, and the sample re-projected by
    the claim-fold total since it was taken)."""
    return _flag(args, "pressure")


def snapshot_id(seq: int) -> str:
    """The id of a runtime-context snapshot entered at ``seq`` (dsh mints a UUID; the protocol fixes this one)."""
    return f"runtime-context-{seq}"


def agent_options(args: dict) -> tuple[str | None, str | None] | None:
    """``configure``'s optional ``agent {provider?, model?}``: the agent's AgentOptions from now on (a key left out is
    unset; an empty string is kept, spec 8.5 tells them apart from complete pairs); None when not given."""
    agent = require(args, "agent", dict, optional=True)
    if agent is None:
        return None
    if set(agent) - {"provider", "model"} or not all(isinstance(v, str) for v in agent.values()):
        raise ProtocolError("bad-args", "agent is {provider?: string, model?: string}")
    return agent.get("provider"), agent.get("model")


SUMMARIZE_HOOKS = ("llm", "bare", "raw")
"""What the engine's `summarize()` returns (spec 8.5: "`summarize()` is the sole subclass customization hook"):
``llm`` dsh's own (`summarizeWithLlm`: the summary, its raw output, route, cap, usage, `llmStreamCall: true`);
``bare`` a subclass returning the summary, provider and model only; ``raw`` those and the raw output."""


def summarize_hook(args: dict) -> str | None:
    """``configure``'s optional ``summarize``: which :data:`SUMMARIZE_HOOKS` the engine has from now on; None when
    not given (the engine keeps the one it has)."""
    hook = require(args, "summarize", str, optional=True)
    if hook is not None and hook not in SUMMARIZE_HOOKS:
        raise ProtocolError("bad-args", f"summarize is one of {list(SUMMARIZE_HOOKS)}")
    return hook


def configure_args(args: dict) -> tuple[Any, dict | None, tuple]:
    """``configure {policy, context_window?, route?, summaries?}`` → (RuntimePolicy, capacity, queue).

    A policy the model refuses raises its ``ModelError`` (the caller answers a refusal). With a
    ``route``, the context window is that route's capacity (spec 4.4 routed target)."""
    from dataclasses import replace as dc_replace

    from surfacecheck.model.config import RuntimePolicy

    policy = RuntimePolicy.from_json(require(args, "policy", dict, optional=True, default={}))
    if "context_window" in args:
        window = args["context_window"]
        if window is not None and (isinstance(window, bool) or not isinstance(window, int)):
            raise ProtocolError("bad-args", "context_window must be an integer or null")
        policy = dc_replace(policy, context_window=window)
    route = require(args, "route", dict, optional=True)
    capacity = None
    if route is not None:
        if not isinstance(route.get("provider"), str) or not isinstance(route.get("model"), str):
            raise ProtocolError("bad-args", "route is {provider, model}")
        capacity = {(route["provider"], route["model"]): policy.context_window}
        policy = dc_replace(policy, context_window=None)
    return policy, capacity, summary_scripts(args) or ()
