"""The tool-pairing cache (`balanceCache`, spec 3): cut balances kept beside the surface.

State: ``generation``, ``balanced`` (N+1 cut flags, ``balanced[0]`` is the head), ``running``
(open tool calls after the last processed node) and ``processed`` (nodes folded). :meth:`refresh`
rebuilds from the empty state when the surface generation changed (or the cache saw more nodes than
the surface has), extends over unseen tail nodes when the surface grew within a generation, and
otherwise reuses the cache without reading any event; ``reads`` counts the log reads a refresh makes (the log
once, then each folded node's event). Extension is transactional: a count below
zero raises and leaves the cache as it was (so retries fail identically).

Override points (``bugs.py``): :meth:`_needs_rebuild`, :meth:`_rebuild_pairing_cache`,
:meth:`_extend`, :meth:`_cut_balanced`.
"""
from __future__ import annotations

from typing import Callable

from surfacecheck.model.errors import ModelError, ToolPairingError

from .events import pairing_delta


class PairingCache:
    """Incremental cut balances; ``ops`` counts nodes folded (cost model)."""

    def __init__(self) -> None:
        self.generation = -1
        self.balanced: list[bool] = [True]
        self.running = 0
        self.processed = 0
        self.ops = 0
        self.reads = 0

    def refresh(self, nodes: list[int], generation: int, event_at: Callable[[int], dict | None]) -> list[bool]:
        """Bring the cache up to the current surface; returns the N+1 cut balances."""
        if self._needs_rebuild(nodes, generation):
            self._rebuild_pairing_cache(nodes, generation, event_at)
        elif self.processed < len(nodes):
            self._extend(nodes, event_at)
        return self.balanced

    def _needs_rebuild(self, nodes: list[int], generation: int) -> bool:
        return self.generation != generation or self.processed > len(nodes)

    def _rebuild_pairing_cache(self, nodes: list[int], generation: int, event_at) -> None:
        """Fold the whole surface from the empty state (a replace moved every later cut)."""
        balanced, running = self._fold([True], 0, nodes, 0, event_at)
        self.generation, self.balanced, self.running, self.processed = generation, balanced, running, len(nodes)

    def _extend(self, nodes: list[int], event_at) -> None:
        """Fold only the unseen tail (the surface grew by appends within one generation)."""
        balanced, running = self._fold(self.balanced, self.running, nodes, self.processed, event_at)
        self.balanced, self.running, self.processed = balanced, running, len(nodes)

    def _fold(self, balanced: list[bool], running: int, nodes: list[int], start: int, event_at) -> tuple[list, int]:
        """Validate the tail first, then return the extended flags (the caller commits)."""
        added = []
        self.reads += 1
        for seq in nodes[start:]:
            self.reads += 1
            event = event_at(seq)
            if event is None or event.get("seq") != seq:
                raise ToolPairingError(f"tool-pairing balance: surface seq {seq} has no matching session event"
                                       " (corrupt surface)", seq=seq)
            try:
                running += pairing_delta(event)
            except (KeyError, TypeError, IndexError, AttributeError) as exc:  # a shape dsh cannot read
                raise ModelError(f"event at seq {seq} ({event.get('type')}) has a shape dsh cannot read: "
                                 f"{type(exc).__name__}: {exc}", seq=seq, rule="message-shape") from None
            self.ops += 1
            if running < 0:
                raise ToolPairingError(f"tool-pairing balance: tool/result at surface seq {seq} has no matching"
                                       " tool-call (corrupt surface)", seq=seq)
            added.append(self._cut_balanced(running))
        if balanced is self.balanced:
            balanced.extend(added)  # in place: the old prefix is still valid within a generation
            return balanced, running
        return balanced + added, running

    def index(self, nodes: list[int], seq: int) -> int:
        """The position of ``seq`` on the surface the cache was refreshed to (`cutBalance`)."""
        try:
            return nodes.index(seq)
        except ValueError:
            raise ToolPairingError(f"tool-pairing balance: surface seq {seq} not found", seq=seq) from None

    @staticmethod
    def _cut_balanced(running: int) -> bool:
        """A cut is balanced when no tool call is open before it."""
        return running == 0
