"""The layout of a packed core (:mod:`.packed`): each field of a core but its surface in a fixed radix,
the surface's number above them all. ``S_*`` is a field's stride: a move that changes a field by ``d``
adds ``d * S_field`` to the packed core."""
from __future__ import annotations

PHASES = ("I", "P", "S", "T")
PENDS = ("", "U", "V", 1, 2)
CONTEXTS = ("", "X", "Y")
RETRIES_RADIX = 16
RET_RADIX = 256  # retained index + 2 (-2 NEVER, -1 NONE): surfaces stay far shorter at any bound we run

_PHASE = {p: i for i, p in enumerate(PHASES)}
_PEND = {p: i for i, p in enumerate(PENDS)}
_CTX = {c: i for i, c in enumerate(CONTEXTS)}
S_PEND = 4
S_CTX = S_PEND * len(PENDS)
S_RETRIES = S_CTX * len(CONTEXTS)
S_SEEN = S_RETRIES * RETRIES_RADIX
S_ROUTED = S_SEEN * 2
S_RET = S_ROUTED * 2
S_SURF = S_RET * RET_RADIX


def fields_of(rest: int) -> tuple:
    """The fields of a packed core but its surface: (phase, pend, ret, ctx, retries, seen, routed)."""
    rest, phase = divmod(rest, S_PEND)
    rest, pend = divmod(rest, len(PENDS))
    rest, ctx = divmod(rest, len(CONTEXTS))
    rest, retries = divmod(rest, RETRIES_RADIX)
    rest, seen = divmod(rest, 2)
    ret, routed = divmod(rest, 2)
    return PHASES[phase], PENDS[pend], ret - 2, CONTEXTS[ctx], retries, bool(seen), bool(routed)
