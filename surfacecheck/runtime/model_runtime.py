"""The reference model behind the runtime protocol (``--runtime model``; ``docs/protocol.md``).

State is the immutable :class:`model.session.Session` plus the folds a live dsh session keeps
beside it: the token meter's replay state (spec 4.2, :func:`model.meter.fold_meter`), the O(1)
shadow-price projection (spec 5.1, :func:`model.projection.fold_claim`), the tool-pairing cache
(spec 3, :func:`model.pairing.refresh_cuts`) and the retained runtime-context snapshot (spec 12,
:func:`model.runtime_context.fold_retained`). Each fold is advanced over every committed event.
A fold that throws stays stuck at the event before (spec 4.2: "a failing event remains unread and
fails again on every read"): ``measure`` then answers the refusal, ``projection`` a null total.

Log-level ops live here; the compaction and policy levels are in :mod:`.model_levels`.
"""
from __future__ import annotations

import copy
from typing import Any, Callable

from surfacecheck.model.errors import ModelError
from surfacecheck.model.event import Event
from surfacecheck.model.meter import MeterState, measure_state
from surfacecheck.model.pairing import Cuts, refresh_reads
from surfacecheck.model.projection import (ContextBreakdown, ContextPressure, SurfaceProjection, TokenUsage,
                                          fold_breakdown, fold_pressure, schema_refuses)
from surfacecheck.model.runtime_context import NEVER, fold_retained
from surfacecheck.model.seams import active
from surfacecheck.model.session import Session, append

from ..core.protocol import PROTOCOL, ProtocolError, announced_ops, dispatch
from .storage import storage_ops
from .meter_log import handed_log, request_header
from .codec import breakdown_requested, cut_probe, event_kwargs, events_from, pressure_requested, refusal, usage_requested


class ModelRuntime:
    """:class:`~surfacecheck.core.protocol.Runtime` over the reference model. Never mutates a model value."""

    name = "model"

    def __init__(self) -> None:
        self._ops: dict[str, Callable[[dict], dict]] = {
            "reset": self._reset, "append": self._append, "surface": self._surface, "events": self._events, "cuts": self._cuts,
            "measure": self._measure, "projection": self._projection, "meter_replay": self._meter_replay,
            **storage_ops(lambda: self.session.log),
        }
        self.levels: tuple[str, ...] = ("log",)
        self.level_state = None
        self.last_labels: tuple[str, ...] = ()  # the last compaction/policy op's steps, in spec words
        try:
            from . import model_levels
        except ImportError:  # pragma: no cover - the compaction/policy levels are optional here
            model_levels = None
        if model_levels is not None:
            self.levels = model_levels.install(self)
        self.reset_state(Session())

    # -- runtime interface ------------------------------------------------------------------
    def hello(self) -> dict[str, Any]:
        return {"protocol": PROTOCOL, "name": self.name, "levels": list(self.levels),
                "ops": announced_ops(self._ops, self.levels)}

    def call(self, op: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
        """Run one request. Spec refusals are results; malformed requests raise :class:`ProtocolError`."""
        self.last_labels = ()
        return dispatch(self._ops, op, args)

    def close(self) -> None:
        pass

    # -- state ------------------------------------------------------------------------------
    def reset_state(self, session: Session) -> None:
        """Start the folds afresh over ``session`` (a new session, or a reopened one after a crash)."""
        self.session = Session()
        self.meter = MeterState()
        self.meter_error: ModelError | None = None
        self.projection = SurfaceProjection()
        self.projection_error: ModelError | None = None
        self.usage: TokenUsage | None = TokenUsage()  # `tokenUsage` (spec 5.2); None once its fold threw
        self.breakdown: ContextBreakdown | None = ContextBreakdown()  # `contextBreakdown` (spec 5.2); as usage
        self.pressure: ContextPressure | None = ContextPressure()  # `contextPressure` (spec 5.2); as usage
        self.changed_at: dict[str, int | None] = dict.fromkeys(UNITS)  # the last seq each unit's state changed at
        self.cuts: Cuts | None = None
        self.cuts_seen: Cuts | None = None  # the `cuts` reader's own balance cache (dsh keeps one per session object)
        self._cuts_failure: tuple | None = None  # (surface, cuts, refresh, error) of the last refresh that threw
        self.retained = NEVER  # the runtime-context projection's state (spec 12), live rule per event
        self.adopt(session)

    def adopt(self, session: Session) -> None:
        """Make ``session`` current, folding the meter and the projection over its new events (spec 4.2, 5.1)."""
        start = len(self.session.log)
        self.session = session
        for event in session.log[start:]:
            self._fold(event)

    def _fold(self, event: Event) -> None:
        seams = active()
        if self.meter_error is None:
            try:
                self.meter = seams.fold_meter(self.meter, event, self.session.event_at)
            except _FOLD_ERRORS as exc:
                self.meter_error = _as_model_error(exc, event)
        if self.projection_error is None:
            try:
                step = seams.fold_claim(self.projection.claim, event)
                self.projection = SurfaceProjection(self.projection.total + step.delta, step.claim)
            except _FOLD_ERRORS as exc:
                self.projection_error = _as_model_error(exc, event)
        before = (self.usage, self.breakdown, self.pressure)
        if self.usage is not None:
            try:
                self.usage = seams.fold_usage(self.usage, event)
            except _FOLD_ERRORS:
                self.usage = None
        if self.breakdown is not None:
            try:
                self.breakdown = fold_breakdown(self.breakdown, event)
            except _FOLD_ERRORS:
                self.breakdown = None
        if self.pressure is not None:
            try:
                self.pressure = fold_pressure(self.pressure, event)
            except _FOLD_ERRORS:
                self.pressure = None
        # spec 5.2: a unit returns its state by reference when unchanged, so the registry's change feed names it
        # exactly when its value changed (a stuck unit changes no more)
        for unit, old, new in zip(UNITS, before, (self.usage, self.breakdown, self.pressure)):
            if old is not None and new is not None and new != old:
                self.changed_at[unit] = event.seq
        self.retained = fold_retained(self.retained, event)
        if self.level_state is not None:
            self.level_state.observe(event)

    def current_cuts(self) -> Cuts:
        """Spec 3 `balanceCache`: extend within a generation, rebuild after a replace. Raises ToolPairingError.
        A refresh that threw throws the same again while the surface, the cache and the fold are the very ones it
        threw on (the same nodes over the same append-only events): a corrupt surface is not refolded per query."""
        surface, failed, refresh_cuts = self.session.surface, self._cuts_failure, active().refresh_cuts
        if failed is not None and failed[0] is surface and failed[1] is self.cuts and failed[2] is refresh_cuts:
            raise copy.copy(failed[3])
        try:
            self.cuts = refresh_cuts(self.cuts, self.session)
        except _FOLD_ERRORS as exc:  # kept without its traceback, whose frames would hold the whole step
            self._cuts_failure = (surface, self.cuts, refresh_cuts, copy.copy(exc))
            raise
        return self.cuts

    # -- log level (spec 1.3, 2.1, 3, 4.3, 5.1) ---------------------------------------------
    def _reset(self, args: dict) -> dict:
        """A new empty session; the configuration and engine state are discarded too."""
        if self.level_state is not None:
            self.level_state = type(self.level_state)()
        self.reset_state(Session())
        return {"generation": 0}

    def _append(self, args: dict) -> dict:
        """`Session.append` (spec 1.3): the assigned seq and the generation after, or the refusal."""
        if "event" not in args:
            raise ProtocolError("bad-args", "missing argument 'event'")
        kwargs = event_kwargs(args["event"])
        type_ = kwargs.pop("type_")
        try:
            session, event = append(self.session, type_, **kwargs)
        except ModelError as exc:
            return refusal(exc)
        self.adopt(session)
        return {"seq": event.seq, "generation": session.generation}

    def _events(self, args: dict) -> dict:
        """The log from seq ``from`` on, each event as written (spec 1.1; read-only)."""
        start = events_from(args)
        return {"events": [event.to_json() for event in self.session.log[start:]]}

    def _surface(self, args: dict) -> dict:
        return {"nodes": list(self.session.nodes), "generation": self.session.generation}

    def _cuts(self, args: dict) -> dict:
        """The N+1 cuts (spec 3), or with ``seqs`` the cuts before and after those seqs. ``reads``: the log reads a
        reader's own cache makes to answer (dsh keeps one balance cache per session object), which the reader keeps
        apart from the runtime's own (:meth:`current_cuts`, whose balances are answered)."""
        probe = cut_probe(args)
        try:
            cuts = self.current_cuts()
            if probe is None and not cuts.nodes:
                return {"balanced": [True], "reads": 0}  # nothing asked of dsh: its cache is not touched
            reads = refresh_reads(self.cuts_seen, self.session)
            self.cuts_seen = active().refresh_cuts(self.cuts_seen, self.session)
            if probe is None:
                return {"balanced": list(cuts.balanced), "reads": reads}
            return {"before": [cuts.balanced_before(seq) for seq in probe],
                    "after": [cuts.balanced_after(seq) for seq in probe], "reads": reads}
        except ModelError as exc:
            return refusal(exc)
        except _FOLD_ERRORS as exc:  # an assistant/message whose content dsh cannot read (spec 3 eventDelta)
            return refusal(ModelError(f"tool-pairing balance: a surface node has a shape dsh cannot read: "
                                      f"{type(exc).__name__}: {exc}", rule="message-shape"))

    def _measure(self, args: dict) -> dict:
        """`TokenMeter.measure(session, requestHeader?)` (spec 4.3): total, per-node prices, surface tokens, baseline;
        ``header`` prices the request under that envelope in place of the latest logged one."""
        header = request_header(args)
        if self.meter_error is not None:
            return refusal(self.meter_error)
        return measured(self.meter, header)

    def _meter_replay(self, args: dict) -> dict:
        """`TokenMeter.measure({events}, requestHeader?)` over a handed log (spec 4.2-4.3): a fresh fold from seq 0,
        the event it cannot fold refused as the live meter refuses it ("fail loud"); the session is not read."""
        log = [Event.from_json(event) for event in handed_log(args)]
        header = request_header(args)
        state, fold = MeterState(), active().fold_meter
        event_at = lambda seq: log[seq] if 0 <= seq < len(log) else None  # noqa: E731 - `session.events[seq]`
        for event in log:
            try:
                state = fold(state, event, event_at)
            except _FOLD_ERRORS as exc:
                return refusal(_as_model_error(exc, event))
        return measured(state, header)

    def _projection(self, args: dict) -> dict:
        """The O(1) surface projection total (spec 5.1); null once its claim fold has thrown. With
        ``usage: true`` also the cumulative `tokenUsage`, with ``breakdown: true`` the `contextBreakdown`, with
        ``pressure: true`` the `contextPressure` view (spec 5.2; each null once its fold threw)."""
        with_usage, with_breakdown = usage_requested(args), breakdown_requested(args)
        if self.projection_error is not None:
            reply = {"total": None, **refusal(self.projection_error)}
        else:
            reply = {"total": self.projection.total}
        if with_usage:
            totals = None if self.usage is None else self.usage.totals
            reply["usage"] = None if totals is None else {
                "inputTokens": totals.uncached_input, "outputTokens": totals.output,
                "cacheReadTokens": totals.cache_read, "cacheWriteTokens": totals.cache_write}
        if with_breakdown:
            b = self.breakdown
            reply["breakdown"] = None if b is None else {
                "systemTokens": b.system_tokens, "toolsTokens": b.tools_tokens, "messageTokens": b.message_tokens}
        if pressure_requested(args):
            p = self.pressure
            reply["pressure"] = None if p is None else {key: value for key, value in (
                ("contextWindow", p.context_window), ("pressureTokens", p.pressure_tokens),
                ("projectedTokens", p.projected_tokens)) if value is not None}
        if with_usage or with_breakdown or pressure_requested(args):
            reply["changed"] = dict(self.changed_at)
        refused = [unit for unit, key in UNIT_KEYS if reply.get(key) is not None and schema_refuses(unit, reply[key])]
        if refused:
            reply["refused"] = refused
        return reply


def measured(state: MeterState, header: dict | None) -> dict:
    """`measure`'s answer over a folded meter (spec 4.3); an envelope dsh cannot compare or price is refused with
    rule ``message-shape`` and no seq (the fold read every event)."""
    try:
        m = measure_state(state, header)
    except _SHAPE_ERRORS as exc:
        return refusal(ModelError(f"the measurement has a shape dsh cannot read: {type(exc).__name__}: {exc}",
                                  rule="message-shape"))
    return {"total": m.total_tokens, "prices": [tokens for _, tokens in m.nodes],
            "surface_tokens": m.surface_tokens, "baseline": {"kind": m.baseline.kind, "tokens": m.baseline.tokens}}


UNIT_KEYS = (("tokenUsage", "usage"), ("contextBreakdown", "breakdown"), ("contextPressure", "pressure"))
"""Each projection unit and the reply key its value goes under."""
UNITS = tuple(unit for unit, _ in UNIT_KEYS)

_FOLD_ERRORS = (ModelError, KeyError, TypeError, IndexError, AttributeError)
_SHAPE_ERRORS = _FOLD_ERRORS[1:]


def _as_model_error(exc: Exception, event: Event) -> ModelError:
    """The fold's error with its seq; a JS TypeError reading a live-appended event whose message shape is
    wrong (live appends skip shape checks, spec 1.3 / §15 G18) becomes rule ``message-shape`` as in
    :func:`model.replay.replay`."""
    if isinstance(exc, ModelError):
        if exc.seq is None:
            exc.seq = event.seq
        return exc
    return ModelError(f"event at seq {event.seq} ({event.type}) has a shape dsh cannot read: {type(exc).__name__}: {exc}",
                      seq=event.seq, rule="message-shape")
