"""The incremental token meter (`TokenMeter._foldEvent` + `measure`, spec 4.2-4.3), production style.

The per-node price table is a doubly linked list keyed by seq (``seq -> [prev, next, price]``):
an append is O(1), a replace walks only its span (O(span)), and ``surface_tokens`` is kept as a
running sum. Header, open step and anchor are plain fields. Each event is folded transactionally:
all fallible work first, then the mutation; a failing event leaves the meter *stuck* and every
later event fails again with the same error (spec 4.2 "a failing event remains unread").

``ops`` counts price-table cells touched (the benchmark's cost model).
Override points (``bugs.py``): :meth:`_replace_span`, :meth:`_anchor_for`, :meth:`_step_start`.
"""
from __future__ import annotations

from typing import Any

from surfacecheck.model.errors import TokenMeterError
from surfacecheck.model.estimate import ROLE_OVERHEAD, canonical_header, estimate_content, estimate_header, header_equals

from .assembler import assemble
from .events import APPEND, price_event, price_message, surface_op

__all__ = ["IncrementalMeter", "price_message"]


def usage_tokens(usage: dict) -> int:
    """`P` = input + cacheRead + cacheWrite + output (reasoning not added, spec 4.2)."""
    return (usage.get("inputTokens", 0) + usage.get("cacheReadTokens", 0)
            + usage.get("cacheWriteTokens", 0) + usage.get("outputTokens", 0))


class IncrementalMeter:
    """Spec 4.2 replay state kept incrementally; :meth:`measure` is spec 4.3."""

    def __init__(self) -> None:
        self.consumed = 0
        self.header: dict | None = None
        self.surface_tokens = 0
        self.step: tuple[Any, Any, int] | None = None  # (turn, step, surface tokens at step/start)
        self.anchor: tuple[dict | None, int, str, int] | None = None  # (header, surface, baseline kind, tokens)
        self._links: dict[int, list] = {}  # seq -> [prev, next, price]
        self._head: int | None = None
        self._tail: int | None = None
        self._chunks: dict[int, dict] = {}  # assistant/chunk seq -> data (sources for provider pricing)
        self.ops = 0
        self.error: TokenMeterError | None = None
        self._matched: tuple | None = None  # (anchor, header, optionalHeaderEquals of the two), see _anchor_matches

    # -- reading ------------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._links)

    @property
    def seqs(self) -> list[int]:
        out, seq = [], self._head
        while seq is not None:
            out.append(seq)
            seq = self._links[seq][1]
        return out

    @property
    def prices(self) -> list[int]:
        """Per surface node prices, in surface order."""
        out, seq = [], self._head
        while seq is not None:
            link = self._links[seq]
            out.append(link[2])
            seq = link[1]
        return out

    def price_of(self, seq: int) -> int | None:
        link = self._links.get(seq)
        return None if link is None else link[2]

    @property
    def total(self) -> int:
        """`measure().totalTokens` with the logged header (spec 4.3)."""
        return self.measure()["total"]

    def measure(self, request_header: dict | None = None) -> dict:
        """`measure(session, requestHeader?)` (spec 4.3); raises the stuck error if an event failed."""
        if self.error is not None:
            raise self.error
        header = self.header if request_header is None else canonical_header(request_header)
        anchor = self.anchor
        if anchor is not None and self._anchor_matches(anchor, header):
            kind, tokens, delta = anchor[2], anchor[3], self.surface_tokens - anchor[1]
        elif header is None and self.surface_tokens == 0:
            kind, tokens, delta = "none", 0, 0
        else:
            kind, tokens, delta = "estimated", estimate_header(header) + self.surface_tokens, 0
        return {"total": max(0, tokens + delta), "baseline": {"kind": kind, "tokens": tokens},
                "surface_delta": delta, "surface_tokens": self.surface_tokens, "log_revision": self.consumed}

    def _anchor_matches(self, anchor: tuple, header: dict | None) -> bool:
        """`optionalHeaderEquals(anchor.header, header)`, kept for the anchor and header it was worked out for
        (both immutable once folded; a step's measures and the next ones ask it again until either changes)."""
        last = self._matched
        if last is not None and last[0] is anchor and last[1] is header:
            return last[2]
        answer = _optional_header_equals(anchor[0], header)
        self._matched = (anchor, header, answer)
        return answer

    # -- folding ------------------------------------------------------------------------------------
    def observe(self, event: dict) -> None:
        """`_foldEvent` (spec 4.2): validate everything, then mutate."""
        if self.error is not None:
            raise self.error
        try:
            self._fold(event)
        except TokenMeterError as exc:
            if exc.seq is None:
                exc.seq = event.get("seq")
            self.error = exc
            raise
        except (KeyError, TypeError, IndexError, AttributeError) as exc:  # a shape dsh cannot read: stuck too
            self.error = exc
            raise

    def _fold(self, event: dict) -> None:
        kind, seq = event.get("type"), event.get("seq")
        data = event.get("data") if isinstance(event.get("data"), dict) else {}
        header, step = self.header, self.step
        if kind == "request/header":
            header = canonical_header(data.get("header"))
        elif kind == "step/start":
            if self.step is not None:
                raise TokenMeterError(f"token meter: step/start at seq {seq} arrived before turn {self.step[0]}/step "
                                      f"{self.step[1]} ended", seq=seq)
            step = self._step_start(data)
        elif kind == "step/end":
            if self.step is None or self.step[0] != data.get("turn") or self.step[1] != data.get("step"):
                raise TokenMeterError(f"token meter: step/end at seq {seq} has no matching step/start event", seq=seq)
            step = None

        op = surface_op(event)
        tokens, span = 0, None
        if op is not None:
            tokens = price_event(event)
            if op != APPEND:
                span = self._locate(seq, op)

        anchor = self.anchor
        if kind == "assistant/message":
            if self.step is None or self.step[0] != data.get("turn") or self.step[1] != data.get("step"):
                raise TokenMeterError(
                    f"token meter: assistant/message at seq {seq} has no matching step/start event", seq=seq)
            anchor = self._anchor_for(event, data, header, tokens)

        # -- commit (nothing below raises) --
        self.header, self.step, self.anchor = header, step, anchor
        if kind == "assistant/chunk":
            self._chunks[seq] = data
        if op == APPEND:
            self._push(seq, tokens)
        elif op is not None:
            self._replace_span(seq, tokens, span)
        self.consumed += 1

    def _step_start(self, data: dict) -> tuple:
        """`stepStart = {turn, step, surfaceTokens}`: the surface *before* the step's messages."""
        return (data.get("turn"), data.get("step"), self.surface_tokens)

    def _anchor_for(self, event: dict, data: dict, header: dict | None, durable: int) -> tuple:
        """Spec 4.2 anchor: usage baseline when `P >= E`, else the estimate."""
        start_surface = self.step[2]
        if data.get("usage") is not None and header is not None:
            surface = start_surface + self._provider_tokens(event, data, durable)
            p = usage_tokens(data["usage"])
            e = estimate_header(header) + surface
            return (header, surface, "usage", p) if p >= e else (header, surface, "estimated", e)
        surface = start_surface + durable
        return (header, surface, "estimated", estimate_header(header) + surface)

    def _provider_tokens(self, event: dict, data: dict, durable: int) -> int:
        """`_estimateProviderAssistant`: price the cited chunks as the provider streamed them."""
        sources = event.get("sourceEventSeqs")
        if not isinstance(sources, list):
            return durable
        seq = event.get("seq")
        prefix = f"token meter: assistant/message at seq {seq}"
        seen: set[int] = set()
        chunks = []
        for source in sources:
            if source >= seq:
                raise TokenMeterError(f"{prefix} source seq {source} is not earlier", seq=seq)
            if source in seen:
                raise TokenMeterError(f"{prefix} repeats source seq {source}", seq=seq)
            seen.add(source)
            chunk = self._chunks.get(source)
            if chunk is None:
                raise TokenMeterError(f"{prefix} source seq {source} is not assistant/chunk", seq=seq)
            if chunk.get("turn") != data.get("turn") or chunk.get("step") != data.get("step"):
                raise TokenMeterError(f"{prefix} source seq {source} belongs to another step", seq=seq)
            chunks.append(chunk["chunk"])
        blocks = assemble(chunks)
        return 0 if not blocks else estimate_content(blocks) + ROLE_OVERHEAD

    # -- the price table ----------------------------------------------------------------------------
    def _locate(self, seq: int, op: tuple[int, int]) -> tuple[int, int, int]:
        """Validate a replace range by walking start..end: ``(start, end, removed price)`` (O(span))."""
        start, end = op
        links = self._links
        if start not in links or end not in links:
            raise TokenMeterError(f"token surface: replace at seq {seq} has invalid current range {start}-{end}", seq=seq)
        removed, cursor = 0, start
        while cursor is not None:
            link = links[cursor]
            removed += link[2]
            self.ops += 1
            if cursor == end:
                return start, end, removed
            cursor = link[1]
        raise TokenMeterError(f"token surface: replace at seq {seq} has invalid current range {start}-{end}", seq=seq)

    def _push(self, seq: int, tokens: int) -> None:
        self._links[seq] = [self._tail, None, tokens]
        if self._tail is None:
            self._head = seq
        else:
            self._links[self._tail][1] = seq
        self._tail = seq
        self.surface_tokens += tokens
        self.ops += 1

    def _replace_span(self, seq: int, tokens: int, span: tuple[int, int, int]) -> None:
        """Splice `[start..end]` for the replacement node: delta = tokens - removed (spec 4.2)."""
        start, end, removed = span
        links = self._links
        before, after = links[start][0], links[end][1]
        cursor = start
        while True:
            nxt = links.pop(cursor)[1]
            self.ops += 1
            if cursor == end:
                break
            cursor = nxt
        links[seq] = [before, after, tokens]
        if before is None:
            self._head = seq
        else:
            links[before][1] = seq
        if after is None:
            self._tail = seq
        else:
            links[after][0] = seq
        self.surface_tokens += tokens - removed


def _optional_header_equals(left: dict | None, right: dict | None) -> bool:
    """`optionalHeaderEquals` (spec 4.3); a header equals itself (a lossless JSON value has no NaN, spec 1.3)."""
    if left is None or right is None:
        return left is right
    return left is right or header_equals(left, right)
