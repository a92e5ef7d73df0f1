"""The model's seams: the functions others swap, read from an explicit environment.

The explorer memoises pure helpers, the negative-control variants seed one bug each, the proofs run
the model's loops on symbolic values and the quirk tests remove one rule. Each of them is a named
:class:`Seams` value (the real functions with some replaced), active while :func:`using` is; the
model's call sites read the function from :func:`active` instead of from a module global, so nothing
patches a module attribute. (:class:`surfacecheck.model.policy.Environment` is another thing: the
runtime policy, summarizer and faults an op runs with.)

The active value lives in a :class:`contextvars.ContextVar` (one per thread and task). :data:`REAL`,
the default, holds the real functions, each looked up on its first use: the model's modules import
this one, so it imports none of them.
"""
from __future__ import annotations

import dataclasses
import importlib
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Callable

_REAL = {
    # pricing (spec 4.1-4.4)
    "js_length": ("jsvalue", "js_length"),
    "js_stringify": ("jsvalue", "js_stringify"),
    "header_equals": ("estimate", "header_equals"),
    "node_price": ("meter", "node_price"),
    "fold_meter": ("meter", "fold_meter"),
    "replay_meter": ("meter", "replay_meter"),
    "measure": ("meter", "measure"),
    # pairing and range selection (spec 3, 7)
    "walk_run": ("walk", "run"),
    "event_delta": ("pairing", "event_delta"),
    "pairing_fold": ("pairing", "PAIRING_FOLD"),
    "fold_cuts": ("pairing", "fold_cuts"),
    "refresh_cuts": ("pairing", "refresh_cuts"),
    "retention_walk": ("region", "RETENTION_WALK"),
    "balance_walk": ("region", "BALANCE_WALK"),
    "retention_index": ("region", "retention_index"),
    "select_compactable_range": ("region", "select_compactable_range"),
    "validate_surface_region": ("region", "validate_surface_region"),
    "inspect_entry_state": ("region", "inspect_entry_state"),
    "assert_no_active_compaction": ("region", "assert_no_active_compaction"),
    # the transaction and the listeners (spec 6, 8-11)
    "frame_summary": ("summarizer", "frame_summary"),
    "checkpoint_price": ("estimate", "estimate_message"),  # the shrink rule's price of the framed checkpoint
    "compact_surface_region": ("transaction", "compact_surface_region"),
    "prune_session": ("pruner", "prune_session"),
    "routed_target": ("policy", "routed_target"),
    "compact_if_needed": ("policy", "compact_if_needed"),
    "overflow_compaction": ("policy", "_overflow"),
    "on_request_error": ("policy", "on_request_error"),
    "command_result": ("manual", "command_result"),
    "commit": ("session", "commit"),
    # projections (spec 5, 12)
    "fold_claim": ("projection", "fold_claim"),
    "fold_usage": ("projection", "fold_usage"),
    "project": ("runtime_context", "project"),
    "restore_retained": ("runtime_context", "restore_retained"),
}


def real(name: str) -> Any:
    """The model's own function behind seam ``name``."""
    module, attribute = _REAL[name]
    return getattr(importlib.import_module(f"surfacecheck.model.{module}"), attribute)


def _real_field(name: str):
    return field(default_factory=lambda: real(name))


@dataclass(frozen=True)
class Seams:
    """The swappable functions of the model; ``Seams()`` is the real ones (fields in ``_REAL``'s order)."""

    js_length: Callable = _real_field("js_length")
    js_stringify: Callable = _real_field("js_stringify")
    header_equals: Callable = _real_field("header_equals")
    node_price: Callable = _real_field("node_price")
    fold_meter: Callable = _real_field("fold_meter")
    replay_meter: Callable = _real_field("replay_meter")
    measure: Callable = _real_field("measure")
    walk_run: Callable = _real_field("walk_run")
    event_delta: Callable = _real_field("event_delta")
    pairing_fold: Any = _real_field("pairing_fold")
    fold_cuts: Callable = _real_field("fold_cuts")
    refresh_cuts: Callable = _real_field("refresh_cuts")
    retention_walk: Any = _real_field("retention_walk")
    balance_walk: Any = _real_field("balance_walk")
    retention_index: Callable = _real_field("retention_index")
    select_compactable_range: Callable = _real_field("select_compactable_range")
    validate_surface_region: Callable = _real_field("validate_surface_region")
    inspect_entry_state: Callable = _real_field("inspect_entry_state")
    assert_no_active_compaction: Callable = _real_field("assert_no_active_compaction")
    frame_summary: Callable = _real_field("frame_summary")
    checkpoint_price: Callable = _real_field("checkpoint_price")
    compact_surface_region: Callable = _real_field("compact_surface_region")
    prune_session: Callable = _real_field("prune_session")
    routed_target: Callable = _real_field("routed_target")
    compact_if_needed: Callable = _real_field("compact_if_needed")
    overflow_compaction: Callable = _real_field("overflow_compaction")
    on_request_error: Callable = _real_field("on_request_error")
    command_result: Callable = _real_field("command_result")
    commit: Callable = _real_field("commit")
    fold_claim: Callable = _real_field("fold_claim")
    fold_usage: Callable = _real_field("fold_usage")
    project: Callable = _real_field("project")
    restore_retained: Callable = _real_field("restore_retained")

    def __getattr__(self, name: str) -> Any:
        """Only :data:`REAL` has unset fields: each is the real function, fetched and kept on first use."""
        if name not in _REAL:
            raise AttributeError(name)
        value = real(name)
        object.__setattr__(self, name, value)
        return value

    def replace(self, **changes) -> "Seams":
        """These seams with some functions replaced (a new value; this one is unchanged)."""
        return dataclasses.replace(self, **changes)

    def wrapped(self, **makers: Callable) -> "Seams":
        """These seams with each named function replaced by ``make(the function here)``."""
        return self.replace(**{name: make(getattr(self, name)) for name, make in makers.items()})


REAL: Seams = object.__new__(Seams)
"""The real functions (the default): built without ``__init__``, so each field is looked up on first use."""

_ACTIVE: ContextVar[Seams] = ContextVar("surfacecheck.model.seams", default=REAL)

active: Callable[[], Seams] = _ACTIVE.get
"""The seams in force (a C call: the model's hot loops read it on every use)."""


class using:
    """``with using(seams):`` the model runs with ``seams``; the previous ones are back on exit (re-entrant)."""

    __slots__ = ("seams", "_tokens")

    def __init__(self, seams: Seams) -> None:
        self.seams, self._tokens = seams, []

    def __enter__(self) -> Seams:
        self._tokens.append(_ACTIVE.set(self.seams))
        return self.seams

    def __exit__(self, *exc) -> None:
        _ACTIVE.reset(self._tokens.pop())
