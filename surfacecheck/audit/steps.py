"""Request attempts inside a step: overflow retries (spec 10.1-10.2) and the runtime-context window (spec 12).

A request attempt starts at the first `assistant/chunk` of a step or after a terminal `finish`
chunk; an attempt that ends in `finish {kind:'error', failure.code:'CONTEXT_WINDOW_EXCEEDED'}` is
an overflow. The next attempt in the same step is a retry: compaction-basic authorizes it only
after a generation advance (progress is the proof) and at most `maxOverflowRetries` times between
resets (an `assistant/message`; `agent/status idle` is not logged, so a new turn also resets —
spec 10.2, a conservative reading).
"""
from __future__ import annotations

from dataclasses import dataclass

from surfacecheck.model.event import Event
from surfacecheck.model.runtime_context import NEVER, NONE, RetainedSnapshot, fold_retained, is_owned_snapshot, text_of

from .brackets import field
from .findings import AuditIssue, finding

OVERFLOW_CODE = "CONTEXT_WINDOW_EXCEEDED"


@dataclass(frozen=True)
class Overflow:
    seq: int
    generation: int
    turn: object
    step: object


def overflow_failure(event: Event) -> bool:
    chunk = field(event.data, "chunk")
    reason = field(chunk, "reason")
    return (field(chunk, "type") == "finish" and field(reason, "kind") == "error"
            and field(field(reason, "failure"), "code") == OVERFLOW_CODE)


class Attempts:
    """Open step, open request attempt, the pending overflow failure and the retry count."""

    def __init__(self) -> None:
        self.step: tuple | None = None
        self.attempt_open = False
        self.pending: Overflow | None = None
        self.retries = 0

    def on_event(self, event: Event, generation: int, max_retries) -> tuple[list[AuditIssue], bool]:
        """Findings, and whether this event starts a request attempt."""
        data = event.data
        if event.type in ("step/start", "step/end", "turn/end", "turn/start"):
            self.attempt_open = False
            self.pending = None
            self.step = (field(data, "turn"), field(data, "step")) if event.type == "step/start" else None
            if event.type == "turn/start":
                self.retries = 0  # agent idle between runs is not logged (spec 10.2 reset on idle)
            return [], False
        if event.type == "assistant/message":
            self.retries = 0  # spec 10.2: an assistant/message after an overflow resets the count
            self.attempt_open = False
            return [], False
        if event.type != "assistant/chunk":
            return [], False
        found: list[AuditIssue] = []
        starts = not self.attempt_open
        if starts:
            self.attempt_open = True
            found.extend(self._retry(event, generation, max_retries))  # max_retries: () -> int | None
        if field(field(data, "chunk"), "type") == "finish":
            self.attempt_open = False
            if overflow_failure(event):
                self.pending = Overflow(event.seq, generation, field(data, "turn"), field(data, "step"))
        return found, starts

    def _retry(self, event: Event, generation: int, max_retries) -> list[AuditIssue]:
        failure, self.pending = self.pending, None
        if failure is None or (field(event.data, "turn"), field(event.data, "step")) != (failure.turn, failure.step):
            return []
        found = []
        max_retries = max_retries()
        if generation <= failure.generation:
            found.append(finding("retry-without-progress", event.seq, f"request retried after the context-overflow "
                                 f"failure at seq {failure.seq} with no surface replacement in between: expected "
                                 f"generation > {failure.generation}, observed {generation}"))
        if max_retries is not None and self.retries >= max_retries:
            found.append(finding("overflow-retries-exceeded", event.seq, f"overflow retry {self.retries + 1} after "
                                 f"the failure at seq {failure.seq}: expected at most maxOverflowRetries = "
                                 f"{max_retries} retries before an assistant/message resets the count, observed "
                                 f"{self.retries + 1}"))
        self.retries += 1
        return found


class RuntimeContext:
    """The retained runtime-context snapshot (spec 12): live fold, and the restore scan at end-seed."""

    def __init__(self) -> None:
        self.retained = NEVER
        self.owned_on_surface: dict[int, object] = {}
        self.ever_owned = False
        self.shadowed_by: tuple[int, int] | None = None  # (snapshot seq, replacement seq)

    def on_event(self, event: Event, is_node: bool, shadowed: tuple[int, ...]) -> None:
        before = self.retained
        try:
            self.retained = fold_retained(self.retained, event)
        except Exception:  # noqa: BLE001 - dsh contains its listener's throw (spec 1.3 step 8)
            pass
        if isinstance(before, RetainedSnapshot) and self.retained is NONE:
            self.shadowed_by = (before.seq, event.seq)
        for seq in shadowed:
            self.owned_on_surface.pop(seq, None)
        if is_node and is_owned_snapshot(event):
            self.ever_owned = True
            try:
                self.owned_on_surface[event.seq] = text_of(event.data)
            except Exception:  # noqa: BLE001
                self.owned_on_surface[event.seq] = None
        if event.type == "session/end-seed":  # a resumed agent restores by scanning (spec 12 "Constructor")
            if self.owned_on_surface:
                seq = max(self.owned_on_surface)
                self.retained = RetainedSnapshot(seq, self.owned_on_surface[seq])
            else:
                self.retained = NONE if self.ever_owned else NEVER

    def gap(self, event: Event) -> list[AuditIssue]:
        """Spec 12 one-request window (§15 G2): a request while the retained snapshot is shadowed."""
        if self.retained is not NONE:
            return []
        where = (f" (snapshot seq {self.shadowed_by[0]} shadowed by the replacement at seq {self.shadowed_by[1]})"
                 if self.shadowed_by else "")
        return [finding("runtime-context-gap", event.seq, "request sent: expected a retained runtime-context "
                        f"snapshot on the surface, observed none{where}; this request carries no verbatim runtime "
                        "context and the next pre-step re-emits it (spec 12 one-request window, §15 G2)")]
