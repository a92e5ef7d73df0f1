"""Did the conversation stay on its script? Failures the runtime logged that the script never asked for.

A script asks for exactly two kinds of failure: an ``overflow`` reply (the adapter's
``CONTEXT_WINDOW_EXCEEDED``, spec 10.1) and a summary outcome (``failure`` closes the bracket with the
server's :data:`~.server.SUMMARY_FAILURE`; ``too-big``, ``empty`` and ``truncated`` with the runtime's own
reasons, spec 8.2 step 10 and 8.5). The runtime may also close a bracket for reasons it decides itself (the
surface changed during summarization, spec 8.2 step 12; a cancelled ``/compact``, step 11) — those are
decisions the model judges. Any other failure — a malformed or cut-short stream, a dropped connection, a
server error on a step — means the scripted server or the transport failed: the runtime then ran a
conversation the script did not write, so agreement with the model proves nothing about the paths the
script aims at, and the run is inconclusive, never a pass.
"""
from __future__ import annotations

from typing import Any, Iterable

from surfacecheck.coverage.situations import OVERFLOW, parts, step_failure

from .server import SUMMARY_FAILURE

BRACKET_REASONS = (SUMMARY_FAILURE,
                   "summary is not smaller than the shadowed content",  # too-big: the shrink rule, spec 8.2 step 10
                   "summarization produced no text summary content",  # empty, spec 8.5
                   "summarization truncated at the token cap",  # truncated, spec 8.5
                   "compaction: ",  # SurfaceChangedError family, spec 8.2 step 12: the runtime's own decision
                   "This operation was aborted", "AbortError", "cancel")  # a cancelled /compact, spec 8.2 step 11


def unscripted_failures(events: Iterable[Any]) -> list[str]:
    """Each logged failure the script did not ask for, as ``"seq N: what"`` (empty: the run stayed on script)."""
    found = []
    for event in events:
        kind, seq, data, _op, _sources = parts(event)
        if kind == "assistant/chunk":
            failure = step_failure(data)
            if failure is not None and failure.get("code") != OVERFLOW:
                found.append(f"seq {seq}: a model step failed with {failure.get('code') or 'no code'} "
                             f"({str(failure.get('message', ''))[:120]})")
        elif kind == "compaction/end" and data.get("error"):
            error = str(data["error"])
            if not any(reason in error for reason in BRACKET_REASONS):
                found.append(f"seq {seq}: a compaction bracket failed with {error[:120]!r}")
    return found
