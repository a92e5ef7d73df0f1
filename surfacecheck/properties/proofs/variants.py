"""Deliberately wrong model variants for the negative controls (``BASE:VARIANT`` runtimes).

A negative control's counterexample trace is replayed through the variant it refutes, e.g.
``model:prove-cut-one-toward-tail``: the reference model with one rule broken the way the control
breaks it. The same trace through plain ``model`` holds, which shows the violation is the variant's.
"""
from __future__ import annotations

from typing import Callable

VARIANTS: dict[str, str] = {}
"""variant spec -> the rule it breaks (filled by :func:`install`)."""


def _select_range_with(fn: Callable) -> Callable:
    """A model runtime whose ``select_range`` runs ``fn(session, measurement, retain)`` (spec 7)."""
    def factory():
        from surfacecheck.model.meter import measure_state
        from surfacecheck.runtime.model_runtime import ModelRuntime

        runtime = ModelRuntime()

        def select_range(args: dict) -> dict:
            span = fn(runtime.session, measure_state(runtime.meter), int(args["retain_tokens"]))
            return {"range": None if span is None else {"start": span.start, "end": span.end}}

        runtime._ops["select_range"] = select_range
        runtime.name = "model-variant"
        return runtime
    return factory


def _cuts_refreshed_by(fn: Callable) -> Callable:
    """A model runtime whose cut cache is refreshed by ``fn(cached, session)`` (spec 3)."""
    def factory():
        from surfacecheck.runtime.model_runtime import ModelRuntime

        runtime = ModelRuntime()

        def current_cuts():
            runtime.cuts = fn(runtime.cuts, runtime.session)
            return runtime.cuts

        runtime.current_cuts = current_cuts
        runtime.name = "model-variant"
        return runtime
    return factory


def _ops_under(patches: Callable, ops: tuple[str, ...]) -> Callable:
    """A model runtime whose ``ops`` run inside ``patches()`` (a context manager patching the model)."""
    def factory():
        from surfacecheck.runtime.model_runtime import ModelRuntime

        runtime = ModelRuntime()
        for op in ops:
            inner = runtime._ops[op]

            def handler(args, inner=inner):
                with patches():
                    return inner(args)

            runtime._ops[op] = handler
        runtime.name = "model-variant"
        return runtime
    return factory


def install() -> None:
    """Register every proof variant with :func:`surfacecheck.runtime.select.register_variant`."""
    from surfacecheck.runtime.select import register_variant

    from . import cut_legality, generation_progress, incremental_pairing, smallest_span
    from .symexec import standing_in

    for name, description, fn in cut_legality.CONTROLS:
        spec = f"model:prove-{name}"
        register_variant(spec, _select_range_with(fn))
        VARIANTS[spec] = description
    spec = "model:prove-cache-ignores-generation"
    register_variant(spec, _cuts_refreshed_by(incremental_pairing.refresh_ignoring_generation))
    VARIANTS[spec] = "the cut cache ignores the generation (extends or reuses after a replace)"
    spec = "model:prove-frame-without-closing-tag"
    register_variant(spec, _ops_under(lambda: standing_in(frame_summary=smallest_span.wrong_frame),
                                      ("compact", "pre_step", "request_error", "manual_compact")))
    VARIANTS[spec] = "the checkpoint frame loses its closing tag (5 tokens cheaper)"
    spec = "model:prove-retry-without-progress"
    register_variant(spec, _ops_under(lambda: standing_in(on_request_error=generation_progress.retry_without_progress),
                                      ("request_error",)))
    VARIANTS[spec] = "the overflow listener retries without generation progress (uncounted)"
