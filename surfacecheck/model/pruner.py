"""`pruneSession`: the model-free tool-result pruner as session transitions (seed §5; spec 6).

For each big tool result on the surface, in surface order: `compaction/prune` arms the shadow
price of the original, then a single-node `tool/result` replace with head + marker + tail lands
immediately after it. Each pair bumps the generation once. A refused replacement leaves the prune
event dangling (spec §15 G17).
"""
from __future__ import annotations

from dataclasses import dataclass

from .errors import ModelError
from .estimate import estimate_message
from .prune_content import PruneGuardError, PrunerConfig, measure_content, prune_content
from .session import Session, append
from .transaction import Faults, NO_FAULTS, Outcome, _AppendRefused


@dataclass(frozen=True)
class PrunedEntry:
    """`PrunedEntry {originalSeq, replacementSeq, callId, charsBefore, charsAfter}`."""

    original_seq: int
    replacement_seq: int
    call_id: str
    chars_before: int
    chars_after: int


@dataclass(frozen=True)
class PruneResult:
    pruned: tuple[PrunedEntry, ...]

    @property
    def chars_removed(self) -> int:
        return sum(entry.chars_before - entry.chars_after for entry in self.pruned)


def prune_session(session: Session, config: PrunerConfig, faults: Faults = NO_FAULTS) -> Outcome:
    """Spec 6 `pruneSession`: snapshot candidates, then prune + replace each that shrinks.

    A throw mid-pass keeps the earlier pairs (returned with the error)."""
    labels: list[str] = []
    pruned: list[PrunedEntry] = []
    candidates = [seq for seq in session.nodes if session.log[seq].type == "tool/result"]
    for seq in candidates:
        original = session.log[seq]
        message = original.data["message"]
        block = message["content"][0]
        try:
            # pruneContent's own guards throw out of the pass too (spec 6 step 4): what landed before stays
            new_content = prune_content(block["content"], config)
        except PruneGuardError as error:
            labels.append(f"prune of {seq} failed: {error.message}")
            return Outcome(session, value=PruneResult(tuple(pruned)), error=error, labels=tuple(labels))
        if new_content is None:
            continue
        try:
            session, prune_event = append(session, "compaction/prune", {
                "shadowedRange": {"start": seq, "end": seq}, "shadowedSeqs": [seq],
                "shadowedTokenCount": estimate_message(message)})
            labels.append(f"compaction/prune at seq {prune_event.seq}: shadow price {estimate_message(message)} "
                          f"armed for {seq}-{seq}")
            if "prune-replace" in faults.fail_appends:
                raise _AppendRefused("tool/result replacement refused (injected fault: prune-replace)")
            data = {**original.data, "message": {**message, "content": [{**block, "content": new_content}]}}
            session, replacement = append(session, "tool/result", data,
                                          surface_op={"op": "replace", "start": seq, "end": seq},
                                          source_event_seqs=[seq])
        except ModelError as error:
            labels.append(f"prune of {seq} failed: {error.message}")
            return Outcome(session, value=PruneResult(tuple(pruned)), error=error, labels=tuple(labels))
        before, after = measure_content(block["content"]), measure_content(new_content)
        labels.append(f"tool/result replace at seq {replacement.seq}: {before} -> {after} chars, "
                      f"generation {session.generation}")
        pruned.append(PrunedEntry(seq, replacement.seq, message["source"].get("callId", ""), before, after))
    return Outcome(session, value=PruneResult(tuple(pruned)), labels=tuple(labels))
