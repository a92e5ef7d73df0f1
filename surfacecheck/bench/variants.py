"""The five ways to keep the surface price current that the benchmark compares (seed §16; spec 4.2, 5.1).

(a) ``projection`` — the embedded runtime's O(1) shadow-price projection (running total + one claim);
(b) ``incremental`` — the embedded runtime's incremental meter (per-node prices in a mutable table);
(c) ``copy-on-append`` — a per-node fold over an immutable tuple, copied on every surface event
    (the reference model's `foldSurfaceTokens` style): O(surface) elements copied per append;
(d) ``recount`` — re-price every surface message after every surface event: O(surface) nodes touched;
(e) ``bare-pricing`` — `estimateMessage` of the one appended message: the floor no projection can beat;
and ``model-projection`` — the reference model's own claim fold, for ``--runtime model``.

Every variant has ``observe(event)``, ``total`` and ``ops`` (the cost model: state cells and nodes
touched plus list elements copied). (c) and (d) are *bulk-loaded* at a size (``load(nodes)``), since
folding a 10^6-node prefix through them would itself cost O(n^2).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from surfacecheck.model.event import Event
from surfacecheck.model.projection import SurfaceProjection, fold_projection
from surfacecheck.runtime.embedded.events import derive_message, price_message, surface_op
from surfacecheck.runtime.embedded.meter import IncrementalMeter
from surfacecheck.runtime.embedded.projection import ShadowPriceProjection


class CopyOnAppendFold:
    """(c) `foldSurfaceTokens` over an immutable ``((seq, price), ...)``: every surface event builds a new tuple."""

    def __init__(self, nodes: tuple = ()):
        self.nodes: tuple[tuple[int, int], ...] = nodes
        self.surface_tokens = sum(price for _, price in nodes)
        self.ops = 0

    @classmethod
    def load(cls, surface: list[tuple[int, int, Any]]) -> "CopyOnAppendFold":
        return cls(tuple((seq, price) for seq, price, _ in surface))

    @property
    def total(self) -> int:
        return self.surface_tokens

    def observe(self, event: dict) -> None:
        op = surface_op(event)
        if op is None:
            return
        tokens = price_message(derive_message(event))
        self.ops += 1  # the priced node
        if op == "append":
            self.nodes = self.nodes + ((event["seq"], tokens),)
            self.ops += len(self.nodes)  # elements copied
            self.surface_tokens += tokens
            return
        seqs = [seq for seq, _ in self.nodes]  # locate by seq, as the model's fold does
        start, end = seqs.index(op[0]), seqs.index(op[1])
        removed = sum(price for _, price in self.nodes[start:end + 1])
        self.nodes = self.nodes[:start] + ((event["seq"], tokens),) + self.nodes[end + 1:]
        self.ops += len(seqs) + len(self.nodes)
        self.surface_tokens += tokens - removed


class FullRecount:
    """(d) Keep the surface's messages and re-price all of them after every surface event (`measure()` recount)."""

    def __init__(self, seqs: list[int] | None = None, messages: list | None = None):
        self.seqs: list[int] = seqs or []
        self.messages: list = messages or []
        self.surface_tokens = sum(price_message(m) for m in self.messages)
        self.ops = 0

    @classmethod
    def load(cls, surface: list[tuple[int, int, Any]]) -> "FullRecount":
        recount = cls.__new__(cls)
        recount.seqs = [seq for seq, _, _ in surface]
        recount.messages = [message for _, _, message in surface]
        recount.surface_tokens = sum(price for _, price, _ in surface)
        recount.ops = 0
        return recount

    @property
    def total(self) -> int:
        return self.surface_tokens

    def observe(self, event: dict) -> None:
        op = surface_op(event)
        if op is None:
            return
        message = derive_message(event)
        if op == "append":
            self.seqs.append(event["seq"])
            self.messages.append(message)
        else:
            start = self.seqs.index(op[0])
            end = self.seqs.index(op[1], start)
            self.seqs[start:end + 1] = [event["seq"]]
            self.messages[start:end + 1] = [message]
        self.surface_tokens = sum(price_message(m) for m in self.messages)
        self.ops += len(self.messages)  # every node re-priced


class BarePricing:
    """(e) The floor: `estimateMessage` of the appended message alone (derived outside the timed call)."""

    def __init__(self) -> None:
        self.ops = 0
        self.last = 0

    @property
    def total(self) -> None:
        return None

    @staticmethod
    def prepare(event: dict) -> Any:
        """Untimed: derive the message, so the timed call is the pricing alone."""
        return derive_message(event) if surface_op(event) is not None else None

    def observe(self, message: Any) -> None:
        if message is not None:
            self.last = price_message(message)
            self.ops += 1


class ModelProjection:
    """The reference model's claim fold (`model.projection.fold_projection`, spec 5.1) over immutable state:
    each event replaces a two-cell state (total, claim). Events are decoded to model values outside the
    timed call (``prepare``)."""

    def __init__(self) -> None:
        self.state = SurfaceProjection()
        self.ops = 0

    @property
    def total(self) -> int:
        return self.state.total

    @staticmethod
    def prepare(event: dict) -> Event:
        return Event.from_json(event)

    def observe(self, event: Event) -> None:
        self.state = fold_projection(self.state, event)
        self.ops += 2  # the two cells of the new state


@dataclass(frozen=True)
class Variant:
    """One benchmarked variant: ``make()`` a fresh state, or ``load(surface)`` one at a size (bulk)."""

    name: str
    label: str
    make: Callable[[], Any]
    load: Callable[[list], Any] | None = None  # bulk-load from the workload's surface (c, d)
    expected: str = "constant"  # the cost model's expectation: constant | linear
    stateless: bool = False  # nothing to build: skips the untimed prefix fold

    @property
    def bulk(self) -> bool:
        return self.load is not None


VARIANTS: dict[str, Variant] = {v.name: v for v in (
    Variant("projection", "(a) O(1) shadow-price projection", ShadowPriceProjection),
    Variant("incremental", "(b) incremental meter (per-node table)", IncrementalMeter),
    Variant("copy-on-append", "(c) copy-on-append per-node fold", CopyOnAppendFold, CopyOnAppendFold.load, "linear"),
    Variant("recount", "(d) full recount", FullRecount, FullRecount.load, "linear"),
    Variant("bare-pricing", "(e) bare pricing of one message", BarePricing, stateless=True),
    Variant("model-projection", "reference model's claim fold (spec 5.1)", ModelProjection),
)}
EMBEDDED = ("projection", "incremental", "copy-on-append", "recount", "bare-pricing")
"""What ``surfacecheck bench`` compares for the embedded runtime: five variants."""
MODEL = ("model-projection", "copy-on-append", "recount", "bare-pricing")
"""For ``--runtime model``: the reference model's projection against the same baselines."""
GATED, FLOOR = "projection", "bare-pricing"


def lookup(names: list[str] | None = None) -> list[Variant]:
    """The named variants (all when ``None``); ``KeyError`` names the unknown one."""
    if names is None:
        return list(VARIANTS.values())
    return [VARIANTS[name] for name in names]
