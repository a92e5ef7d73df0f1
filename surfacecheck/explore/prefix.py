"""A fold over a log resumed from the longest prefix already folded (spec 4.2 meter, 5.1 projection).

An event object sits at one position of one log prefix: it is created by appending to that
prefix, and a seed re-commits the same events in the same order. So the fold state after an
event object is a function of the object and its position, and logs that share a prefix (γ's
logs all do, :mod:`.oracle`) share its folding. ``table`` keeps ``id(event) -> (event, position
after it, state)``; the event is kept with its entry, so an id is never mistaken for another's.
"""
from __future__ import annotations


def resume(log, table: dict, initial, fold, keep: int | None = None):
    """``fold`` over ``log`` from ``initial``, starting after the longest prefix found in ``table``;
    the states after the first ``keep`` events (all by default) are recorded for the next call."""
    start, state = len(log), None
    while start > 0:
        hit = table.get(id(log[start - 1]))
        if hit is not None and hit[0] is log[start - 1] and hit[1] == start:
            state = hit[2]
            break
        start -= 1
    if state is None:
        state = initial()
    limit = len(log) if keep is None else keep
    for index in range(start, len(log)):
        state = fold(state, log[index])
        if index < limit:
            table[id(log[index])] = (log[index], index + 1, state)
    return state
