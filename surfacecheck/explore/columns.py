"""The explored graph as columns: what the search across workers (:mod:`.distributed`) keeps instead of tuples.

Its states arrive as arrays (a surface number and the rest of the packed core with the bound counters,
:mod:`.packed`, plus log length, turn and generation) and its edges as arrays (source, target, an action
number and an edge-record number into two small tables). Writing millions of tuples from them in the
coordinator costs more CPU than merging the levels, on the cores the workers need, and holds the interpreter
lock the cluster's client needs to receive the workers' answers. So they stay columns: :class:`States` and
:class:`Edges` read as the lists of :class:`.bfs.Exploration` (a state or an edge is made when it is read),
and the checks that read every state or edge take the arrays themselves (:mod:`.arrays`).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .layout import CONTEXTS, RET_RADIX, S_CTX, S_RET, S_ROUTED, fields_of


@dataclass(frozen=True)
class Columns:
    """Per state: ``gsid`` (surface number into ``surfaces``), ``rest`` (the packed core's fields but the
    surface), ``events``/``calls``/``comps`` (bound counters), ``seq``/``turn``/``gen``; per edge: ``src``,
    ``dst``, ``action`` and ``record`` (numbers into ``actions`` and ``records``)."""

    surfaces: list
    gsid: np.ndarray
    rest: np.ndarray
    events: np.ndarray
    calls: np.ndarray
    comps: np.ndarray
    seq: np.ndarray
    turn: np.ndarray
    gen: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    action: np.ndarray
    record: np.ndarray
    actions: list
    records: list

    def field(self, stride: int, radix: int) -> np.ndarray:
        """One packed field of every state, as its index (:mod:`.layout`)."""
        return (self.rest // stride) % radix

    @property
    def routed(self) -> np.ndarray:
        return self.field(S_ROUTED, 2).astype(bool)

    @property
    def ret(self) -> np.ndarray:
        return self.field(S_RET, RET_RADIX) - 2

    @property
    def ctx(self) -> np.ndarray:
        """The runtime context's index in :data:`.layout.CONTEXTS`."""
        return self.field(S_CTX, len(CONTEXTS))


def state(c: Columns, index: int) -> tuple:
    """State ``index`` as the search in one process holds it (:data:`.world.PHASE` ... ``GEN``)."""
    f = fields_of(int(c.rest[index]))
    return (f[0], f[1], c.surfaces[int(c.gsid[index])], f[2], f[3], f[4], f[5], f[6], int(c.events[index]),
            int(c.calls[index]), int(c.comps[index]), int(c.seq[index]), int(c.turn[index]), int(c.gen[index]))


class _Rows(Sequence):
    """A read-only list over the columns, each row made when read (:meth:`row`)."""

    def __init__(self, columns: Columns):
        self.columns = columns

    def row(self, index: int):
        raise NotImplementedError

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self.row(i) for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(index)
        return self.row(index)


class States(_Rows):
    """The states as tuples."""

    def __len__(self) -> int:
        return self.columns.gsid.size

    def row(self, index: int) -> tuple:
        return state(self.columns, index)


class Edges(_Rows):
    """The edges as ``(src, dst, action, edge record)``."""

    def __len__(self) -> int:
        return self.columns.src.size

    def row(self, index: int) -> tuple:
        c = self.columns
        return int(c.src[index]), int(c.dst[index]), c.actions[c.action[index]], c.records[c.record[index]]

    def __iter__(self):
        c = self.columns
        return zip(c.src.tolist(), c.dst.tolist(), map(c.actions.__getitem__, c.action.tolist()),
                   map(c.records.__getitem__, c.record.tolist()))
