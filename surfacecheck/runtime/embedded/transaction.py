"""The locked compaction transaction `compactSurfaceRegion` on the live session (spec 8.1-8.3).

Entry (validate span, lock, owner: nothing written on failure) -> `compaction/start` (the lock)
-> summary stage (measure, summarize, frame, shrink rule, stability) -> commit stage (the adjacent
`compaction/summary` + checkpoint replace) -> `compaction/end` -> flush (manual). Every failure
after the start makes exactly one close attempt. Shared with the model: the scripted summarizer
stand-in and the checkpoint frame (``model.summarizer``: the outside world and dsh's fixed text).

Override points (``bugs.py``): :meth:`Transaction.shrink_rule`, :meth:`Transaction.assert_stable`,
:meth:`Transaction.close_on_failure`, :meth:`Transaction.entry_checks`.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from surfacecheck.model.errors import (AbortError, CompactionError, ManualCompactionError, ModelError, SummarizerError,
                                       SurfaceChangedError)
from surfacecheck.model.summarizer import NO_TARGET, checkpoint_message, run_script
from surfacecheck.model.summary_request import record_request, stream_request

from .compaction import NO_FAULTS, AppendRefused, Faults, Selection
from .events import price_message



@dataclass
class TxOptions:
    """Automatic: numbered owner, whole-surface stability. Manual: owner null, selected-span, flush."""

    manual: bool = False
    source_command_id: str | None = None
    max_tokens: int = 8192
    summarization: tuple = ("", "")  # the configured pair of summarize()'s policy (spec 8.5)
    on_caller_abort: Callable[[], None] | None = None  # the `/compact` executor settling at the abort (D5)


@dataclass
class TxOutcome:
    result: dict | None = None
    error: ModelError | None = None
    aborted: bool = False
    agent_aborted: bool = False


class Transaction:
    """One run of `compactSurfaceRegion` against ``runtime`` (whose session it appends to)."""

    def __init__(self, runtime, scripts, faults: Faults = NO_FAULTS) -> None:
        self.rt, self.scripts, self.faults = runtime, scripts, faults
        self.compactor = runtime.compaction_class(runtime)

    def append(self, fault_key: str | None, type_: str, data, surface_op=None, sources=None) -> dict:
        if fault_key is not None and fault_key in self.faults.fail_appends:
            raise AppendRefused(f"append of {type_} refused (injected fault: {fault_key})")
        from surfacecheck.model.event import ABSENT

        return self.rt.session.append(type_, data, ABSENT if surface_op is None else surface_op,
                                      ABSENT if sources is None else sources)

    def entry_checks(self, start: int, end: int, manual: bool) -> Selection:
        """Spec 8.1 steps 2-5: region, lock, owner."""
        selection = self.compactor.validate_region(start, end)
        tracker = self.rt.tracker
        if tracker.lock_is_live():
            raise ManualCompactionError(
                "busy", "compaction: compaction already in progress; the session compaction lock is already active")
        if manual and tracker.open_turn is not None:
            raise ManualCompactionError("busy", "manual compaction: the session already has an open turn")
        if not manual and tracker.open_turn is None:
            raise CompactionError("compactRegion: no open turn — automatic compaction events must be enclosed in a turn")
        return selection

    def run(self, start: int, end: int, options: TxOptions, caller_aborted: bool = False) -> TxOutcome:
        manual = options.manual
        if manual and caller_aborted:
            return TxOutcome(error=AbortError(), aborted=True)
        try:
            selection = self.entry_checks(start, end, manual)
        except ModelError as error:
            return TxOutcome(error=error, aborted=caller_aborted)
        owner = None if manual else self.rt.tracker.open_turn
        compaction_id = f"compaction-{self.rt.session.next_seq}"
        lifecycle = {"compactionId": compaction_id}
        if options.source_command_id is not None:
            lifecycle["sourceCommandId"] = options.source_command_id
        lifecycle["turn"] = owner
        start_event = self.append(None, "compaction/start", dict(lifecycle))
        script = self.scripts.next()

        stage, closing, closed, failure, result, agent_aborted = "summary", False, False, None, None, False
        try:
            before = self.compactor.priced_nodes()
            selected = before[selection.start_index:selection.end_index + 1]
            if tuple(seq for seq, _ in selected) != selection.shadowed:
                raise SurfaceChangedError("compaction: selected surface changed before summarization began")
            shadowed_tokens = sum(tokens for _, tokens in selected)
            inp = self.compactor.summarization_input(selection.shadowed)
            route = self.summary_route(options.summarization)
            record_request(stream_request(inp.system, inp.tools, inp.messages, *route, options.max_tokens))
            self.concurrent_appends(script)
            if script.outcome in ("cancel", "agent-cancel"):
                caller_aborted, agent_aborted = True, script.outcome == "agent-cancel"
                if not agent_aborted and options.on_caller_abort is not None:
                    options.on_caller_abort()
                raise AbortError()
            if script.outcome == "late-cancel":
                caller_aborted = True
                if options.on_caller_abort is not None:
                    options.on_caller_abort()
            summarized = run_script(script, inp, *route, options.max_tokens)
            checkpoint = checkpoint_message(list(summarized.summary), compaction_id, options.source_command_id,
                                            f"checkpoint-{compaction_id}")
            self.shrink_rule(price_message(checkpoint), shadowed_tokens)
            if manual and caller_aborted:
                raise AbortError()
            self.assert_stable(manual, selection, before, selected)
            stage = "commit"
            summary_data = {key: value for key, value in lifecycle.items() if key != "turn"}
            hook = self.rt.engine.summarize_hook  # `callProvenance`: what summarize() returned of its call
            summary_data["summary"] = list(summarized.summary)
            if hook != "bare":
                summary_data["rawOutput"] = list(summarized.raw_output)
            if hook == "llm":
                summary_data["llmStreamCall"] = True
            summary_data.update({"shadowedRange": {"start": start, "end": end},
                                 "shadowedSeqs": list(selection.shadowed), "shadowedTokenCount": shadowed_tokens,
                                 "provider": summarized.provider, "model": summarized.model})
            if hook == "llm":
                summary_data["maxTokens"] = summarized.max_tokens
                if summarized.usage is not None:
                    summary_data["usage"] = summarized.usage
            summary_event = self.append("compaction/summary", "compaction/summary", summary_data)
            self.append("checkpoint", "user/message", checkpoint, {"op": "replace", "start": start, "end": end},
                        [start_event["seq"], summary_event["seq"], *selection.shadowed])
            closing = True
            end_event = self.append("compaction/end", "compaction/end", dict(lifecycle))
            closed = True
            result = {"compactionId": compaction_id, "sourceCommandId": options.source_command_id,
                      "startSeq": start_event["seq"], "summarySeq": summary_event["seq"], "endSeq": end_event["seq"],
                      "start": start, "end": end, "shadowedSeqs": list(selection.shadowed),
                      "shadowedTokenCount": shadowed_tokens}
        except ModelError as error:
            failure = (error, "commit" if closing else stage)
            if not closing:
                closing = True
                failure, closed = self.close_on_failure(failure, lifecycle)
        # -- spec 8.3: flush, cancellation precedence, classification --
        flush_failure = None
        if closed and manual:
            if self.faults.flush_fails:
                flush_failure = CompactionError("flush failed (injected fault)")  # a plain Error, as a store throws
            if self.faults.cancel_during_flush:
                caller_aborted = True
                if options.on_caller_abort is not None:
                    options.on_caller_abort()
        if manual and caller_aborted:
            return TxOutcome(error=AbortError(), aborted=True, agent_aborted=agent_aborted)
        if failure is not None:
            error, failed_stage = failure
            if manual:
                error = manual_failure(error, failed_stage)
            return TxOutcome(error=error, aborted=caller_aborted, agent_aborted=agent_aborted)
        if flush_failure is not None:
            return TxOutcome(error=ManualCompactionError("persistence", "manual compaction durability checkpoint failed",
                                                         cause=flush_failure), aborted=caller_aborted)
        return TxOutcome(result=result, aborted=caller_aborted)

    def summary_route(self, summarization: tuple) -> tuple:
        """`summarizeWithLlm`'s provider/model (spec 8.5): configured ?? the latest header's config ?? the agent's
        complete AgentOptions; else it throws before the stream starts."""
        if summarization[0]:
            return summarization
        header = self.rt.tracker.header
        config = header.get("config") if isinstance(header, dict) else None
        if isinstance(config, dict):
            return config.get("provider"), config.get("model")
        agent = self.rt.engine.agent_target()
        if agent is None:
            raise SummarizerError(NO_TARGET)
        return agent

    def concurrent_appends(self, script) -> None:
        """Spec 8.2 step 8: another producer appends while the summary runs (citing what it shadows)."""
        session = self.rt.session
        for type_, data, op, *sources in script.concurrent:
            cited = None
            if sources:
                cited = list(sources[0])
            elif isinstance(op, dict) and op.get("start") in session.surface.index and op.get("end") in session.surface.index:
                index = session.surface.index
                cited = list(session.surface.nodes[index[op["start"]]:index[op["end"]] + 1])
            self.append(None, type_, data, op, cited)

    @staticmethod
    def shrink_rule(framed: int, shadowed_tokens: int) -> None:
        """Spec 8.2 step 10: the framed checkpoint must be strictly cheaper than the span."""
        if framed >= shadowed_tokens:
            raise CompactionError(f"summary is not smaller than the shadowed content ({framed} estimated framed "
                                  f"tokens >= {shadowed_tokens})")

    def assert_stable(self, manual: bool, selection: Selection, before: list, selected: list) -> None:
        """Spec 8.2 step 12: whole-surface (automatic) or selected-span (manual) stability."""
        if not manual:
            if self.compactor.priced_nodes() != before:
                raise SurfaceChangedError("compaction: session surface changed during summarization")
            return
        try:
            current = self.compactor.validate_region(selection.start, selection.end)
        except ModelError as error:
            raise SurfaceChangedError("compaction: the selected span is no longer a valid replacement target") from error
        if current.shadowed != selection.shadowed:
            raise SurfaceChangedError("compaction: the selected span changed during summarization")
        if self.compactor.priced_nodes()[current.start_index:current.end_index + 1] != selected:
            raise SurfaceChangedError("compaction: the selected span was rewritten during summarization")

    def close_on_failure(self, failure: tuple, lifecycle: dict) -> tuple[tuple, bool]:
        """Spec 8.3: exactly one error close; if it is refused the start stays unmatched (a live lock)."""
        error = failure[0]
        try:
            self.append("error-close", "compaction/end", {**lifecycle, "error": error_chain(error)})
            return failure, True
        except ModelError as close_error:
            return (close_error, "commit"), False


def manual_failure(error: ModelError, stage: str) -> ManualCompactionError:
    """`throwManualFailure` (spec 8.3): commit stage -> commit; SurfaceChangedError -> changed; else summary."""
    if stage == "commit":
        return ManualCompactionError("commit", "manual compaction did not commit cleanly", cause=error)
    if isinstance(error, SurfaceChangedError):
        return ManualCompactionError("changed", "the compacted history changed during manual compaction", cause=error)
    return ManualCompactionError("summary", "manual compaction could not produce a smaller summary", cause=error)


def error_chain(error: BaseException) -> str:
    """`errorChain`: the message, then each distinct cause appended with ': '."""
    message = str(error) or type(error).__name__
    cause = error.__cause__ or getattr(error, "cause", None)
    if cause is None:
        return message
    rendered = error_chain(cause)
    return message if rendered == message else f"{message}: {rendered}"
