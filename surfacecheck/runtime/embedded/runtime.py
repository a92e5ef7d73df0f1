"""`EmbeddedRuntime`: the protocol's log level over the embedded session and its incremental folds.

Every committed event is folded by the incremental meter (spec 4.2) and the O(1) shadow-price
projection (spec 5.1); the pairing cache (spec 3) refreshes on query. A fold that throws stays
stuck (spec 4.2 "a failing event remains unread"): ``measure`` then answers the refusal and
``projection`` a null total with it. Compaction and policy levels are in :mod:`.levels`.
"""
from __future__ import annotations

from typing import Any, Callable

from surfacecheck.model.errors import ModelError

from ...core.protocol import PROTOCOL, ProtocolError, announced_ops, dispatch
from ..storage import storage_ops
from ..meter_log import handed_log, request_header
from ..codec import breakdown_requested, cut_probe, event_kwargs, events_from, pressure_requested, refusal, usage_requested
from .compaction import Compactor
from .context import ContextRetention
from .meter import IncrementalMeter
from .pairing import PairingCache
from .policy import Engine
from .projection import ShadowPriceProjection
from .session import EmbeddedSession
from .tracker import LogTracker
from .transaction import Transaction
from .breakdown import Composition
from .occupancy import Occupancy
from .usage import UsageTotals

FOLD_ERRORS = (ModelError, KeyError, TypeError, IndexError, AttributeError)


def copy_json(value: Any) -> Any:
    """A copy of a logged event, so a caller cannot change the log (spec 1.1: events are immutable once written).
    A committed event is lossless JSON (spec 1.3 step 1), a tree of dicts, lists and scalars, so this walk copies
    it as ``deepcopy`` did, at a fraction of its cost (``events`` is asked after every lockstep step)."""
    kind = type(value)
    if kind is str or kind is int:
        return value
    if kind is dict or isinstance(value, dict):
        return {key: item if type(item) is str else copy_json(item) for key, item in value.items()}
    if kind is list or isinstance(value, list):
        return [copy_json(item) for item in value]
    return value


def as_model_error(exc: Exception, event: dict) -> ModelError:
    """A fold's error with its seq; a JS TypeError reading a badly shaped live event is rule ``message-shape``."""
    if isinstance(exc, ModelError):
        if exc.seq is None:
            exc.seq = event.get("seq")
        return exc
    return ModelError(f"event at seq {event.get('seq')} ({event.get('type')}) has a shape dsh cannot read: "
                      f"{type(exc).__name__}: {exc}", seq=event.get("seq"), rule="message-shape")


class EmbeddedRuntime:
    """The independent incremental runtime (`--runtime embedded`). Subclass hooks: see the package docstring."""

    name = "embedded"
    meter_class = IncrementalMeter
    projection_class = ShadowPriceProjection
    pairing_class = PairingCache
    session_class = EmbeddedSession
    tracker_class = LogTracker
    engine_class = Engine
    compaction_class = Compactor
    transaction_class = Transaction
    context_class = ContextRetention

    def __init__(self) -> None:
        self._ops: dict[str, Callable[[dict], dict]] = {
            "reset": self._reset, "append": self._append, "surface": self._surface, "events": self._events, "cuts": self._cuts,
            "measure": self._measure, "projection": self._projection, "meter_replay": self._meter_replay,
            **storage_ops(lambda: self.session.log),  # pure functions of the log, shared with the model
        }
        from . import levels  # compaction + policy ops

        self.levels: tuple[str, ...] = levels.install(self)
        self.engine = self.engine_class(self)
        self.start_session(self.session_class())

    # -- runtime interface -------------------------------------------------------------------------
    def hello(self) -> dict[str, Any]:
        return {"protocol": PROTOCOL, "name": self.name, "levels": list(self.levels),
                "ops": announced_ops(self._ops, self.levels)}

    def call(self, op: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
        return dispatch(self._ops, op, args)

    def close(self) -> None:
        pass

    # -- state ---------------------------------------------------------------------------------------
    def start_session(self, session: EmbeddedSession, reopen_engine: bool = False) -> None:
        """Fresh folds over ``session`` (a new session, or one reopened from its log); listeners attached.
        ``reopen_engine``: a crash + reload keeps the configuration but starts the engine state afresh."""
        self.session = session
        self.meter = self.meter_class()
        self.projection = self.projection_class()
        self.pairing = self.pairing_class()
        self.reader = self.pairing_class()  # the `cuts` reader's own balance cache (dsh keeps one per session object)
        self.tracker = self.tracker_class()
        self.context = self.context_class()
        self.usage = UsageTotals()
        self.composition = Composition()
        self.occupancy = Occupancy()
        self.meter_error: ModelError | None = None
        self.projection_error: ModelError | None = None
        self.changed_at: dict[str, int | None] = dict.fromkeys(UNITS)  # the last seq each unit's state changed at
        if reopen_engine:
            self.engine.reopen()
        for event in session.log:
            self._observe(event)
        session.listeners.append(self._observe)

    def _unit_states(self) -> tuple:
        """Each projection unit's state as dsh keeps it (spec 5.2), None once stuck: `tokenUsage` its totals and last
        sample; `contextBreakdown` and `contextPressure` their own figures beside the claim fold's total and claim."""
        fold = None if self.projection_error is not None else (self.projection.running_total, self.projection.claim)
        usage = None if self.usage.error is not None else (tuple(self.usage.totals.values()), self.usage.last)
        parts = None if fold is None or self.composition.error is not None else (
            self.composition.system_tokens, self.composition.tools_tokens, fold)
        occupancy = self.occupancy
        pressure = None if fold is None or occupancy.error is not None else (
            occupancy.context_window, occupancy.pressure_tokens, occupancy.sampled_at, fold)
        return usage, parts, pressure

    def raise_meter_error(self) -> None:
        """`measure(session)` fails while the meter is stuck (spec 4.2)."""
        if self.meter_error is not None:
            raise self.meter_error

    def _observe(self, event: dict) -> None:
        """The `session/event` observer: advance the meter and the projection (each stuck on its first error)."""
        if self.meter_error is None:
            try:
                self.meter.observe(event)
            except FOLD_ERRORS as exc:
                self.meter_error = as_model_error(exc, event)
        before = self._unit_states()
        self.occupancy.observe(event, None if self.projection_error else self.projection.running_total)
        if self.projection_error is None:
            try:
                self.projection.observe(event)
            except FOLD_ERRORS as exc:
                self.projection_error = as_model_error(exc, event)
        self.tracker.observe(event)
        self.usage.observe(event)
        self.composition.observe(event)
        for unit, old, new in zip(UNITS, before, self._unit_states()):
            if old is not None and new is not None and new != old:
                self.changed_at[unit] = event["seq"]
        self.context.observe(event)
        self.engine.observe(event)

    def current_cuts(self) -> list[bool]:
        """Spec 3 `balanceCache` over the live surface; raises ToolPairingError on a corrupt surface."""
        surface = self.session.surface
        return self.pairing.refresh(surface.nodes, surface.generation, self.session.event_at)

    # -- log level (spec 1.3, 2.1, 3, 4.3, 5.1) --------------------------------------------------------
    def _reset(self, args: dict) -> dict:
        """A new empty session; the configuration and engine state are discarded too."""
        self.engine = self.engine_class(self)
        self.level_ops.reset()
        self.start_session(self.session_class())
        return {"generation": 0}

    def _append(self, args: dict) -> dict:
        if "event" not in args:
            raise ProtocolError("bad-args", "missing argument 'event'")
        kwargs = event_kwargs(args["event"])
        try:
            event = self.session.append(kwargs["type_"], kwargs["data"], kwargs["surface_op"],
                                        kwargs["source_event_seqs"], kwargs["time"])
        except ModelError as exc:
            return refusal(exc)
        return {"seq": event["seq"], "generation": self.session.generation}

    def _events(self, args: dict) -> dict:
        """The log from seq ``from`` on, each event as written (spec 1.1; read-only)."""
        start = events_from(args)
        return {"events": [copy_json(event) for event in self.session.log[start:]]}

    def _surface(self, args: dict) -> dict:
        return {"nodes": list(self.session.surface.nodes), "generation": self.session.generation}

    def _cuts(self, args: dict) -> dict:
        """The N+1 cuts (spec 3), or with ``seqs`` the cuts before and after those seqs, through the reader's own
        cache: ``reads`` is the log reads its refresh made."""
        probe = cut_probe(args)
        surface = self.session.surface
        if probe is None and not surface.nodes:
            return {"balanced": [True], "reads": 0}
        before = self.reader.reads
        try:
            balanced = list(self.reader.refresh(surface.nodes, surface.generation, self.session.event_at))
            reads = self.reader.reads - before
            if probe is None:
                return {"balanced": balanced, "reads": reads}
            where = [self.reader.index(surface.nodes, seq) for seq in probe]
            return {"before": [balanced[i] for i in where], "after": [balanced[i + 1] for i in where], "reads": reads}
        except ModelError as exc:
            return refusal(exc)

    def _measure(self, args: dict) -> dict:
        """`measure(session, requestHeader?)` (spec 4.3); ``header`` in place of the latest logged envelope."""
        header = request_header(args)
        if self.meter_error is not None:
            return refusal(self.meter_error)
        return measured(self.meter, header)

    def _meter_replay(self, args: dict) -> dict:
        """`measure({events}, requestHeader?)` over a handed log (spec 4.2-4.3): a meter of its own folds it from
        seq 0 and refuses the first event it cannot fold, as the live meter would; the session is not read."""
        log, header = handed_log(args), request_header(args)
        meter = self.meter_class()
        for event in log:
            try:
                meter.observe(event)
            except FOLD_ERRORS as exc:
                return refusal(as_model_error(exc, event))
        return measured(meter, header)

    def _projection(self, args: dict) -> dict:
        """The running total (spec 5.1); with ``usage: true`` also the `tokenUsage` buckets, with ``breakdown:
        true`` the `contextBreakdown` composition, with ``pressure: true`` the `contextPressure` occupancy
        (spec 5.2)."""
        with_usage, with_breakdown = usage_requested(args), breakdown_requested(args)
        if self.projection_error is not None:
            reply = {"total": None, **refusal(self.projection_error)}
        else:
            reply = {"total": self.projection.running_total}
        if with_usage:
            reply["usage"] = self.usage.report()
        if with_breakdown:
            reply["breakdown"] = self.composition.report(reply["total"])
        if pressure_requested(args):
            reply["pressure"] = self.occupancy.report(reply["total"])
        if with_usage or with_breakdown or pressure_requested(args):
            reply["changed"] = dict(self.changed_at)
        refused = [unit for unit, key, positive in SCHEMAS if isinstance(reply.get(key), dict) and any(
            not isinstance(v, int) or v < (1 if name in positive else 0) for name, v in reply[key].items())]
        if refused:  # the value a unit's schema refuses (dsh's snapshot() throws on it, spec 5.2)
            reply["refused"] = refused
        return reply


def measured(meter: IncrementalMeter, header: dict | None) -> dict:
    """`measure`'s answer over a meter that folded every event (spec 4.3); an envelope dsh cannot compare or price
    is refused with rule ``message-shape`` and no seq."""
    try:
        m = meter.measure(header)
    except (KeyError, TypeError, IndexError, AttributeError) as exc:
        return refusal(ModelError(f"the measurement has a shape dsh cannot read: {type(exc).__name__}: {exc}",
                                  rule="message-shape"))
    return {"total": m["total"], "prices": meter.prices, "surface_tokens": m["surface_tokens"],
            "baseline": m["baseline"]}


SCHEMAS = (("tokenUsage", "usage", ()), ("contextBreakdown", "breakdown", ()),
           ("contextPressure", "pressure", ("contextWindow",)))
"""Each projection unit, its reply key, the fields its schema wants positive (the others: non-negative integers)."""
UNITS = tuple(unit for unit, _, _ in SCHEMAS)

__all__ = ["EmbeddedRuntime"]
