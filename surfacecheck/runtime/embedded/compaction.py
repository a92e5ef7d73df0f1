"""Range selection, region validation and the tool-result pruner over the live structures (spec 6, 7, 8.1).

Selection reads the meter's price table and the pairing cache (spec 7); region validation reads
the surface index map and the cut balances (spec 8.1 step 2); the pruner walks the surface's
tool results and appends each `compaction/prune` + single-node replace pair (spec 6). Shared with
the model: the pure pruning of one content list (``model.prune_content``), per spec 6 a value helper.

Override points (``bugs.py``): :meth:`Compactor.retention_index`, :meth:`Compactor.balanced_keep`,
:meth:`Compactor.validate_region`, :meth:`Compactor.prune_shadow_price`.
"""
from __future__ import annotations

from dataclasses import dataclass

from surfacecheck.model.errors import CompactionError, ModelError
from surfacecheck.model.estimate import canonical_header
from surfacecheck.model.prune_content import PruneGuardError, measure_content, prune_content

from .events import derive_message, price_message


class AppendRefused(ModelError):
    """An injected append failure (a vetoing invariant, a full disk; spec 8.3)."""

    rule = "append-refused"


AppendRefused.__name__ = "_AppendRefused"  # the refusal `type` the model reports for the same fault


@dataclass(frozen=True)
class Faults:
    """Injected failures of the outside world (protocol ``faults``; spec 8.3, 11.2)."""

    fail_appends: frozenset = frozenset()
    flush_fails: bool = False
    cancel_during_flush: bool = False


NO_FAULTS = Faults()


@dataclass(frozen=True)
class Selection:
    """A validated span: edges, positions and the shadowed seqs."""

    start: int
    end: int
    start_index: int
    end_index: int
    shadowed: tuple[int, ...]


class Compactor:
    """Compaction-level operations over one :class:`~.runtime.EmbeddedRuntime`'s live state."""

    def __init__(self, runtime) -> None:
        self.rt = runtime

    # -- measurement --------------------------------------------------------------------------------
    def priced_nodes(self) -> list[tuple[int, int]]:
        """`measure().nodes` as (seq, tokens); raises the meter's stuck error (spec 4.2)."""
        self.rt.raise_meter_error()
        meter = self.rt.meter
        return list(zip(meter.seqs, meter.prices))

    def total(self) -> int:
        self.rt.raise_meter_error()
        return self.rt.meter.measure()["total"]

    # -- spec 7 -------------------------------------------------------------------------------------
    def select_range(self, retain_tokens: int) -> tuple[int, int] | None:
        """`selectCompactableRange(session, measure(), retain)`: head-anchored, balanced, keeps the tail."""
        priced = self.priced_nodes()
        if not priced:
            return None
        nodes = self.rt.session.surface.nodes
        if [seq for seq, _ in priced] != nodes:
            raise CompactionError("compaction: token-meter surface does not match the current session surface")
        keep = self.retention_index([tokens for _, tokens in priced], retain_tokens)
        if keep == 0:
            return None
        keep = self.balanced_keep(keep, self.rt.current_cuts())
        if keep == 0:
            return None
        return nodes[0], nodes[keep - 1]

    @staticmethod
    def retention_index(prices: list[int], retain_tokens: int) -> int:
        """Spec 7 step 3: walk from the tail until the budget is reached; the last node is always kept."""
        accumulated, keep = 0, len(prices)
        for index in range(len(prices) - 1, -1, -1):
            accumulated += prices[index]
            keep = index
            if accumulated >= retain_tokens:
                break
        return keep

    @staticmethod
    def balanced_keep(keep: int, balanced: list[bool]) -> int:
        """Spec 7 step 4: move the cut head-ward to the nearest balanced cut."""
        while keep > 0 and not balanced[keep]:
            keep -= 1
        return keep

    # -- spec 8.1 step 2 ---------------------------------------------------------------------------
    def validate_region(self, start: int, end: int) -> Selection:
        """`validateSurfaceRegion`: both edges on the surface, ordered, and balanced cuts at both."""
        surface = self.rt.session.surface
        start_index, end_index = surface.index.get(start, -1), surface.index.get(end, -1)
        if start_index == -1:
            raise CompactionError(f"compactRegion: start seq {start} not found in surface")
        if end_index == -1:
            raise CompactionError(f"compactRegion: end seq {end} not found in surface")
        if start_index > end_index:
            raise CompactionError(f"compactRegion: start seq {start} (position {start_index}) is after end seq {end} "
                                  f"(position {end_index}) on the surface")
        balanced = self.rt.current_cuts()
        if not balanced[start_index]:
            raise CompactionError(f"compactRegion: start seq {start} is not a balanced boundary (would split a "
                                  "step's tool-call/result pair)")
        if not balanced[end_index + 1]:
            raise CompactionError(f"compactRegion: end seq {end} is not a balanced boundary (would split a step, "
                                  "or the step is still open)")
        return Selection(start, end, start_index, end_index, tuple(surface.nodes[start_index:end_index + 1]))

    # -- spec 6 -------------------------------------------------------------------------------------
    def prune(self, config, faults: Faults = NO_FAULTS) -> tuple[list[dict], ModelError | None]:
        """`pruneSession`: for each big tool result (snapshot of the surface), prune price then replace."""
        session = self.rt.session
        pruned: list[dict] = []
        candidates = [seq for seq in session.surface.nodes if session.log[seq]["type"] == "tool/result"]
        for seq in candidates:
            original = session.log[seq]
            message = original["data"]["message"]
            block = message["content"][0]
            try:  # pruneContent's guards throw out of the pass (spec 6 step 4); what landed before stays
                new_content = prune_content(block["content"], config)
            except PruneGuardError as error:
                return pruned, error
            if new_content is None:
                continue
            try:
                session.append("compaction/prune", {"shadowedRange": {"start": seq, "end": seq}, "shadowedSeqs": [seq],
                                                    "shadowedTokenCount": self.prune_shadow_price(message)})
                if "prune-replace" in faults.fail_appends:
                    raise AppendRefused("tool/result replacement refused (injected fault: prune-replace)")
                data = {**original["data"], "message": {**message, "content": [{**block, "content": new_content}]}}
                replacement = session.append("tool/result", data, {"op": "replace", "start": seq, "end": seq}, [seq])
            except ModelError as error:
                return pruned, error
            pruned.append({"originalSeq": seq, "replacementSeq": replacement["seq"],
                           "callId": message["source"].get("callId", ""),
                           "charsBefore": measure_content(block["content"]), "charsAfter": measure_content(new_content)})
        return pruned, None

    @staticmethod
    def prune_shadow_price(message: dict) -> int:
        """The shadow price a prune arms: the original result's price (spec 5.1 "claims are exact")."""
        return price_message(message)

    # -- summarization input (spec 8.2 step 7) ------------------------------------------------------
    def summarization_input(self, shadowed: tuple[int, ...]):
        from surfacecheck.model.summarizer import SummarizationInput

        header = self.rt.tracker.header or {}
        if isinstance(header, dict):  # `session.requestHeader()` is canonical: an empty system or tool list is absent
            header = canonical_header(header)
        messages = tuple(m for m in (derive_message(self.rt.session.log[seq]) for seq in shadowed) if m is not None)
        tools = header.get("tools")
        return SummarizationInput(header.get("system"), tuple(tools) if tools is not None else None, messages)
