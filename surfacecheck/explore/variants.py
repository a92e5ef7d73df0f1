"""Negative controls: model variants with one seeded bug each, and their ``model:<variant>`` runtimes.

A variant is a named set of the model's seams (:mod:`surfacecheck.model.seams`): it replaces named
functions with buggy ones (:meth:`Variant.seams`), active in the explorer's oracle and in the protocol
runtime alike, so a counterexample found by ``explore`` replays against ``model:<variant>`` (the bug)
and not against ``model`` (the fix). Each names the property it must break and the spec section of the
rule it breaks.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from surfacecheck.model.seams import REAL, Seams, using

CHANGE = tuple[str, Callable]  # (seam, make(the function there) -> replacement)


@dataclass(frozen=True)
class Variant:
    name: str
    breaks: str = ""
    section: str = ""
    description: str = ""
    changes: tuple = field(default_factory=tuple)

    def seams(self, base: Seams = REAL) -> Seams:
        """``base`` with this variant's functions in place (``base`` itself when it changes none)."""
        return base.wrapped(**dict(self.changes)) if self.changes else base


CORRECT = Variant("correct")


# -- the bugs ------------------------------------------------------------------------------------
def _retry_without_progress(original):
    """Spec 10.2 broken: retry after any overflow compaction, progress or not, without counting it."""
    from surfacecheck.model.policy import OverflowState

    def on_request_error(session, state, failure_code, env, signal_aborted=False):
        outcome, new_state, retry = original(session, state, failure_code, env, signal_aborted)
        if failure_code == "CONTEXT_WINDOW_EXCEEDED" and not signal_aborted and not retry:
            return outcome, OverflowState(state.retries, True), True
        return outcome, new_state, retry

    return on_request_error


def _never_reemit(original):
    """Spec 12 broken: a shadowed snapshot (retained null) is treated as still sent."""
    from surfacecheck.model.runtime_context import NONE

    def project(retained, current, sections, *, id="runtime-context-snapshot"):
        if retained is NONE:
            return None
        return original(retained, current, sections, id=id)

    return project


def _pressure_skipped(original):
    """Spec 9.3 broken: the pre-step listener returns without running `compactIfNeeded`."""
    from surfacecheck.model.policy import PRESSURE
    from surfacecheck.model.transaction import Outcome

    def compact_if_needed(session, mode, env, signal_aborted=False):
        if mode == PRESSURE:
            return Outcome(session, labels=("pressure listener skipped (variant)",))
        return original(session, mode, env, signal_aborted)

    return compact_if_needed


def _cut_one_tailward(original):
    """Spec 7 broken: the range's end moves one node toward the tail, ignoring tool pairing."""
    from surfacecheck.model.region import Range

    def select_compactable_range(session, measurement, retain_tokens):
        span = original(session, measurement, retain_tokens)
        if span is None:
            return None
        nodes = session.nodes
        index = nodes.index(span.end)
        return Range(span.start, nodes[index + 1]) if index + 1 < len(nodes) else span

    return select_compactable_range


def _no_balance_check(original):
    """Spec 8.1 step 2 broken: the entry check accepts any edge cut."""
    from surfacecheck.model.pairing import Cuts

    def validate_surface_region(session, start, end, cuts=None):
        nodes = session.nodes
        everywhere = Cuts(nodes, (True,) * (len(nodes) + 1), 0, session.generation)
        return original(session, start, end, everywhere)

    return validate_surface_region


def _free_summaries(original):
    """Spec 8.2 step 10 broken: the shrink rule prices the framed summary at zero."""
    return lambda message: 0


VARIANTS = {
    "retry-without-progress": Variant(
        "retry-without-progress", "explore-no-compaction-loop", "spec 10.2; seed §12",
        "the overflow listener retries even when the generation did not advance",
        (("on_request_error", _retry_without_progress),)),
    "never-reemit-runtime-context": Variant(
        "never-reemit-runtime-context", "explore-runtime-context-reemitted", "spec 12; seed §14",
        "a shadowed runtime-context snapshot is never re-emitted",
        (("project", _never_reemit),)),
    "pressure-skipped": Variant(
        "pressure-skipped", "pressure-bounded-response", "spec 9.2-9.3",
        "the pre-step pressure listener never compacts and records nothing",
        (("compact_if_needed", _pressure_skipped),)),
    "unbalanced-cut": Variant(
        "unbalanced-cut", "pairing-balanced-at-replacement-edges", "spec 3, 7, 8.1",
        "range selection and the entry check ignore tool pairing",
        (("select_compactable_range", _cut_one_tailward), ("validate_surface_region", _no_balance_check))),
    "no-shrink-rule": Variant(
        "no-shrink-rule", "summaries-smaller", "spec 8.2 step 10",
        "a checkpoint is committed even when it is not smaller than what it shadows",
        (("checkpoint_price", _free_summaries),)),
}


def variant(name: str) -> Variant:
    if name in ("correct", "model", ""):
        return CORRECT
    if name not in VARIANTS:
        raise KeyError(f"unknown variant {name!r}; known: {', '.join(sorted(VARIANTS))}")
    return VARIANTS[name]


def runtime_factory(v: Variant):
    """The ``model:<variant>`` runtime: a ``ModelRuntime`` whose every request runs with the variant's
    seams, or the variant's own runtime class when the bug lives in a runtime op (:data:`RUNTIMES`)."""
    if v.name in RUNTIMES:
        return RUNTIMES[v.name]()
    from surfacecheck.runtime.model_runtime import ModelRuntime

    class VariantRuntime(ModelRuntime):
        name = f"model:{v.name}"
        seams = v.seams()

        def call(self, op, args=None):
            with using(self.seams):
                return super().call(op, args)

    VariantRuntime.__name__ = f"ModelRuntime_{v.name.replace('-', '_')}"
    return VariantRuntime


def _never_reemit_runtime():
    """Spec 12 broken in the runtime's own ``pre_step {context}``: while the retained snapshot is shadowed
    (retained null, spec 12 live rule) no candidate is projected, so the snapshot never comes back."""
    from surfacecheck.model.runtime_context import NONE
    from surfacecheck.runtime.codec import context_sections
    from surfacecheck.runtime.model_runtime import ModelRuntime

    class NeverReemitRuntime(ModelRuntime):
        name = "model:never-reemit-runtime-context"

        def __init__(self) -> None:
            super().__init__()
            correct = self._ops["pre_step"]

            def pre_step(args: dict) -> dict:
                if self.retained is not NONE or context_sections(args) is None:
                    return correct(args)
                reply = correct({key: value for key, value in args.items() if key != "context"})
                if "error" not in reply:
                    reply["snapshot"] = None  # the shadowed snapshot is treated as still sent
                return reply

            self._ops["pre_step"] = pre_step

    return NeverReemitRuntime


RUNTIMES = {"never-reemit-runtime-context": _never_reemit_runtime}


def _register() -> None:
    from surfacecheck.runtime.select import register_variant

    for v in VARIANTS.values():
        register_variant(f"model:{v.name}", lambda v=v: runtime_factory(v)())


_register()
