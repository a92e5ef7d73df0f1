"""The protocol's ``bench`` op, answered in-process (``docs/protocol.md``).

``surfacecheck.serve`` calls :func:`handle` so that a runtime times its own appends inside its own
process at each size: the pipe is not measured. For ``embedded`` (and its variants) the subject is
the embedded O(1) projection; for ``model`` the reference model's claim fold (spec 5.1). The bare
pricing of one message is timed alongside as the floor (``floor_ns_per_append``).
"""
from __future__ import annotations

from typing import Any

from surfacecheck.bench.harness import batch_for, run
from surfacecheck.bench.variants import FLOOR, VARIANTS
from surfacecheck.core.protocol import ProtocolError

MAX_SIZE = 10**7


def subject_for(runtime_name: str) -> str:
    """The variant timed for a runtime spelling: the model's claim fold for ``model``, else the embedded projection."""
    return "model-projection" if runtime_name.split(":", 1)[0] == "model" else "projection"


def parse_args(args: dict[str, Any]) -> tuple[list[int], int]:
    """``{"sizes": [int...], "appends"?: int}`` -> (sizes, batch events); ``ProtocolError('bad-args')`` otherwise."""
    sizes = args.get("sizes")
    if not isinstance(sizes, list) or not sizes:
        raise ProtocolError("bad-args", "bench: sizes must be a non-empty list of surface sizes")
    for size in sizes:
        if isinstance(size, bool) or not isinstance(size, int) or not 1 <= size <= MAX_SIZE:
            raise ProtocolError("bad-args", f"bench: size {size!r} is not an integer in 1..{MAX_SIZE}")
    appends = args.get("appends")
    if appends is not None and (isinstance(appends, bool) or not isinstance(appends, int) or appends < 1):
        raise ProtocolError("bad-args", f"bench: appends {appends!r} is not a positive integer")
    return sorted(set(sizes)), batch_for(appends)


def handle(runtime_name: str, args: dict[str, Any]) -> dict[str, Any]:
    """Time the runtime's projection per append at each size: ``{"ns_per_append": {"<size>": ns}, ...}``."""
    sizes, batch = parse_args(args)
    subject = subject_for(runtime_name)
    series = run([VARIANTS[subject], VARIANTS[FLOOR]], sizes, batch_events=batch)
    main, floor = series[subject], series[FLOOR]
    return {
        "ns_per_append": {str(p.size): p.median_ns for p in main.points},
        "floor_ns_per_append": {str(p.size): p.median_ns for p in floor.points},
        "ops_per_append": {str(p.size): p.ops for p in main.points},
        "appends": {str(p.size): p.appends for p in main.points},
        "variant": subject,
    }
