"""Promise monitors of pressure measurement, progress, pairing and cost (spec §15 G1, G2b, G5, G9, G13).

Like ``properties/promises.py`` these state what the design PROMISES, stronger than what dsh does;
where dsh breaks one, the model breaks it too and the violation is a FINDING (``properties/findings.json``).
Monitors that hold on dsh (the slack bound, O(1) pressure updates; pairing by id on every log the agent
loop writes) have a negative control in ``tests/test_promises_measure.py``.

The price of a request (spec 4.1, 4.3, 13 step 8): ``estimateHeader(latest logged header)`` plus the
heuristic price of every surface node the request carries, i.e. the surface after the step's entered
batch (``buildRequest`` sends ``deriveMessages()`` of the surface under the logged header). Monitors
read the header from the appended ``request/header`` events and the node prices from ``measure``.
"""
from __future__ import annotations

from surfacecheck.properties.invariants import _concurrent_replace, replacements
from surfacecheck.properties.monitors import register, registered_in
from surfacecheck.properties.promises import SHRINK_FLOOR, _ok  # the shrink floor (spec 8.2, §15 G7); a result that is no refusal
from surfacecheck.core.trace import Step, Violation

from surfacecheck.model.estimate import ROLE_OVERHEAD, canonical_header, estimate_content, estimate_header
from surfacecheck.model.meter import assemble_blocks, usage_tokens  # spec 4.2: P = input + cacheRead + cacheWrite + output

RUNTIME_OPS = frozenset({"prune", "compact", "pre_step", "request_error", "manual_compact"})
PRUNING_OPS = frozenset({"prune", "pre_step", "request_error"})
DECIDED = frozenset({"noop", "pruned", "compacted"})
"""``pre_step`` kinds where the pressure listener reached its threshold decision (spec 9.2 steps 8-11)."""


def _event(step: Step) -> dict:
    event = step.args.get("event") if step.op == "append" else None
    return event if isinstance(event, dict) else {}


def _data(event: dict) -> dict:
    return event.get("data") if isinstance(event.get("data"), dict) else {}


def _measure(query) -> tuple[int, list[int]] | None:
    m = query("measure", {})
    if _ok(m) and isinstance(m.get("total"), int) and isinstance(m.get("prices"), list):
        return m["total"], list(m["prices"])
    return None


def _nodes(query) -> list[int] | None:
    s = query("surface", {})
    return list(s["nodes"]) if _ok(s) and isinstance(s.get("nodes"), list) else None


class _Envelope:
    """The latest logged header's price (spec 4.1 ``estimateHeader``) and whether a route is logged (spec 4.4)."""

    def __init__(self) -> None:
        self.header_price, self.routed = 0, False

    def track(self, step: Step, result: dict) -> None:
        if step.op == "reset":
            self.header_price, self.routed = 0, False
        event = _event(step)
        if event.get("type") == "request/header" and _ok(result):
            header = _data(event).get("header")
            try:
                self.header_price = estimate_header(canonical_header(header))
            except Exception:  # noqa: BLE001 - a header dsh cannot read: the runtime refuses it elsewhere
                return
            self.routed = True


class _Routed:
    """Base of a monitor judging one op of a routed session: ``observe`` tracks the envelope and hands
    ``check(number, step, result, query, (total, prices))`` only a successful ``judged`` op once a header is
    logged and the surface is measured."""

    name: str
    judged: str  # the op this monitor judges

    def __init__(self) -> None:
        self.envelope = _Envelope()

    def observe(self, number: int, step: Step, result: dict, query) -> Violation | None:
        self.envelope.track(step, result)
        if step.op != self.judged or not _ok(result) or not self.envelope.routed:
            return None
        measured = _measure(query)
        return None if measured is None else self.check(number, step, result, query, measured)


def _entered(step: Step, result: dict) -> int:
    """How many surface nodes ``pre_step`` entered after `step/start` (claimed batch + snapshot, spec 13 step 7)."""
    claimed = step.args.get("claimed")
    snapshot = result.get("snapshot")
    return (len(claimed) if isinstance(claimed, list) else 0) + (
        1 if isinstance(snapshot, int) and not isinstance(snapshot, bool) else 0)


# -- pairing ------------------------------------------------------------------------------------
def _ids(event: dict) -> tuple[tuple[str, ...], str | None]:
    """(tool-call ids, answered call id) of a surface event's message (spec 2.3, 3)."""
    message = _data(event).get("message") if isinstance(_data(event).get("message"), dict) else {}
    content = message.get("content") if isinstance(message.get("content"), list) else []
    if event.get("type") == "assistant/message":
        return tuple(str(b.get("id")) for b in content if isinstance(b, dict) and b.get("type") == "tool-call"), None
    if event.get("type") == "tool/result":
        for block in content:
            if isinstance(block, dict) and block.get("type") == "tool-result":
                return (), str(block.get("toolCallId"))
        source = message.get("source") if isinstance(message.get("source"), dict) else {}
        return (), (str(source["callId"]) if "callId" in source else None)
    return (), None


def unpaired(nodes: list[int], ids: dict) -> tuple[set[str], set[str]]:
    """By call id, in surface order: (calls with no later result, results with no earlier call)."""
    pending: dict[str, int] = {}
    orphans: set[str] = set()
    for seq in nodes:
        calls, answer = ids.get(seq, ((), None))
        for call in calls:
            pending[call] = pending.get(call, 0) + 1
        if answer is not None:
            if pending.get(answer, 0) > 0:
                pending[answer] -= 1
            else:
                orphans.add(answer)
    return {c for c, n in pending.items() if n > 0}, orphans


@register("promise-pairing-by-id", engine="findings")
class PairingById:
    """Ids come from the appended events; a node the runtime wrote is a checkpoint (no ids, spec 8.2 step 13)
    unless it took the place of exactly one tool result in a pruning op (same message, spec 6 step 2)."""

    def __init__(self, appended: bool = False) -> None:
        self.ids: dict[int, tuple] = {}
        self.nodes: list[int] = []
        self.appended = appended  # also judge appended replacements (a log's own compactions: corpus scans)

    def observe(self, number: int, step: Step, result: dict, query) -> Violation | None:
        if step.op == "reset":
            self.ids, self.nodes = {}, []
        event = _event(step)
        if event and _ok(result) and isinstance(result.get("seq"), int):
            self.ids[result["seq"]] = _ids(event)
        before, after = self.nodes, _nodes(query)
        if after is None:
            return None
        self.nodes = after
        marker = event.get("surfaceOp") if _ok(result) else None
        replaced = self.appended and isinstance(marker, dict) and marker.get("op") == "replace"
        if step.op not in RUNTIME_OPS and not replaced:
            return None  # judged: the runtime's own compactions (and, for a log, its appended replacements)
        self._inherit(step, before, after)
        if _concurrent_replace(step.args):
            return None  # another producer's replacement raced the summary: not this compaction's (spec 8.2 D8)
        was_calls, was_orphans = unpaired(before, self.ids)
        calls, orphans = unpaired(after, self.ids)
        new_calls, new_orphans = sorted(calls - was_calls), sorted(orphans - was_orphans)
        if new_calls or new_orphans:
            return Violation(self.name, f"{step.op} left call(s) {new_calls} unanswered and result(s) {new_orphans} "
                                        f"orphaned on the surface (by call id)", number,
                             {"unanswered": sorted(was_calls), "orphans": sorted(was_orphans)},
                             {"unanswered": sorted(calls), "orphans": sorted(orphans)})
        return None

    def _inherit(self, step: Step, before: list[int], after: list[int]) -> None:

        if step.op not in PRUNING_OPS:
            return
        for i1, i2, j1, j2 in replacements(before, after):  # pruned results keep their places (nodes entered
            for k in range(min(i2 - i1, j2 - j1)):          # after them may join the same edit)
                old = self.ids.get(before[i1 + k], ((), None))
                if old[1] is not None and after[j1 + k] not in self.ids:
                    self.ids[after[j1 + k]] = old


# -- projection -----------------------------------------------------------------------------------
@register("promise-projection-nonnegative", engine="findings")
class ProjectionNonnegative:
    def observe(self, number: int, step: Step, result: dict, query) -> Violation | None:
        projection = query("projection", {})
        total = projection.get("total") if isinstance(projection, dict) else None
        if isinstance(total, int) and not isinstance(total, bool) and total < 0:
            return Violation(self.name, f"after {step.op}: the projected message figure is {total} tokens; the "
                                        f"unit's nonnegative() schema rejects it", number, ">= 0", total)
        return None


# -- pressure measurement ---------------------------------------------------------------------------
@register("promise-measure-conservative", engine="findings")
class MeasureConservative(_Routed):
    judged = "pre_step"

    def check(self, number: int, step: Step, result: dict, query, measured: tuple[int, list[int]]) -> Violation | None:
        if result.get("kind") not in DECIDED:
            return None
        total, prices = measured
        k = _entered(step, result)
        batch = sum(prices[len(prices) - k:]) if k else 0
        seen, price = total - batch, self.envelope.header_price + sum(prices)
        if "measured" in result:  # the runtime says what its listener decided on (docs/protocol.md)
            if not isinstance(result["measured"], int):
                return None
            seen = result["measured"]
        if seen < price:
            return Violation(self.name, f"pre_step decided on {seen} tokens, but the request it lets out prices at "
                                        f"{price}: the {k} entered message(s) ({batch} tokens) were invisible",
                             number, f">= {price}", seen)
        return None


class _Anchor:
    """What the monitors know of the meter's anchor (spec 4.2): the open step's starting surface, and at the
    latest usage-bearing `assistant/message` the provider's ``P``, the request's price and the batch entered."""

    def __init__(self) -> None:
        self.envelope = _Envelope()
        self.prices: list[int] = []
        self.step_surface: int | None = None
        self.usage: int | None = None   # P of the latest assistant/message with usage
        self.excess = 0                 # P - the heuristic price of that request and its answer
        self.entered = 0                # surface growth between step/start and that request (spec 4.3, G9a)
        self.chunks: dict[int, dict] = {}  # seq -> the assistant/chunk body appended there

    def provider_output(self, event: dict, durable: int) -> int:
        """The price of what the provider produced for an `assistant/message` (spec 4.2): the chunks it cites,
        reassembled (an explicit empty list is a known empty stream: the dsh-token-meter README's "An explicit empty
        `sourceEventSeqs` list means a known empty provider stream"), or the durable message when it cites none."""
        cites = event.get("sourceEventSeqs")
        if not isinstance(cites, list):
            return durable
        blocks = assemble_blocks([self.chunks[seq] for seq in cites if seq in self.chunks])
        return estimate_content(blocks) + ROLE_OVERHEAD if blocks else 0

    def track(self, step: Step, result: dict, query) -> tuple[int, list[int]] | None:
        self.envelope.track(step, result)
        if step.op == "reset":
            self.prices, self.step_surface, self.usage, self.excess, self.entered = [], None, None, 0, 0
            self.chunks = {}
        before = sum(self.prices)
        measured = _measure(query)
        if measured is None:
            return None
        self.prices = measured[1]
        event = _event(step) if _ok(result) else {}
        if event.get("type") == "assistant/chunk" and isinstance(result.get("seq"), int):
            self.chunks[result["seq"]] = (_data(event) or {}).get("chunk")
        if event.get("type") == "step/start":
            self.step_surface = sum(self.prices)
        elif step.op == "pre_step" and _ok(result) and "step/start" in (result.get("appended") or []):
            k = _entered(step, result)
            self.step_surface = sum(self.prices) - (sum(self.prices[len(self.prices) - k:]) if k else 0)
        if event.get("type") == "assistant/message":
            usage = _data(event).get("usage")
            if isinstance(usage, dict) and self.envelope.routed and event.get("surfaceOp") == "append":
                answer = self.provider_output(event, self.prices[-1] if self.prices else 0)
                self.usage = usage_tokens(usage)
                self.excess = self.usage - (self.envelope.header_price + before + answer)
                self.entered = before - (self.step_surface if self.step_surface is not None else before)
            else:  # an estimated anchor replaces the usage one (spec 4.2)
                self.usage, self.excess, self.entered = None, 0, 0
        return measured


class _Anchored:
    """Base of a monitor comparing measure() with the request it describes: ``observe`` tracks the anchor and
    hands ``check(number, step, result, total, price)`` the measured total and the request's price (the logged
    header's plus the surface's)."""

    name: str

    def __init__(self) -> None:
        self.anchor = _Anchor()

    def observe(self, number: int, step: Step, result: dict, query) -> Violation | None:
        measured = self.anchor.track(step, result, query)
        if measured is None:
            return None
        total, prices = measured
        return self.check(number, step, result, total, self.anchor.envelope.header_price + sum(prices))


@register("promise-measure-tight", engine="findings")
class MeasureTight(_Anchored):
    def check(self, number: int, step: Step, result: dict, total: int, price: int) -> Violation | None:
        allowed = max(0, self.anchor.excess) if self.anchor.usage is not None else 0
        if total - price > allowed:
            return Violation(self.name, f"after {step.op}: measure() says {total} tokens for a request priced "
                                        f"{price}; {total - price - allowed} over it beyond the provider's own "
                                        f"excess ({allowed})", number, f"<= {price + allowed}", total)
        return None


@register("promise-measure-slack-bounded", engine="findings")
class MeasureSlackBounded(_Anchored):
    def __init__(self) -> None:
        super().__init__()
        self.largest = 0  # the largest slack seen (read by the tests to report the observed figure)

    def check(self, number: int, step: Step, result: dict, total: int, price: int) -> Violation | None:
        a = self.anchor
        bound = max(0, a.excess) + max(0, a.entered) if a.usage is not None else 0
        self.largest = max(self.largest, total - price)
        if not 0 <= total - price <= bound:
            return Violation(self.name, f"after {step.op}: measure() {total} vs request price {price}: slack "
                                        f"{total - price} outside [0, {bound}]", number, [price, price + bound], total)
        return None


@register("promise-measure-covers-usage", engine="findings")
class MeasureCoversUsage(_Anchored):
    def check(self, number: int, step: Step, result: dict, total: int, price: int) -> Violation | None:
        event = _event(step)
        if event.get("type") != "assistant/message" or not _ok(result) \
                or not isinstance(_data(event).get("usage"), dict) or not self.anchor.envelope.routed:
            return None
        p = usage_tokens(_data(event)["usage"])
        if total < p:
            return Violation(self.name, f"the provider just reported {p} tokens for this request and its answer, "
                                        f"but measure() says {total} ({p - total} under)", number,
                             f">= {p}", total)
        return None


# -- progress --------------------------------------------------------------------------------------
@register("promise-prompt-verbatim", engine="findings")
class PromptVerbatim:
    """Pending prompts: user-sourced `user/message`s entered (appended or claimed at a pre-step) since the
    last `assistant/message`; a retried request (``request_error`` -> retry) must still carry them."""

    def __init__(self) -> None:
        self.pending: list[int] = []

    def observe(self, number: int, step: Step, result: dict, query) -> Violation | None:
        if step.op == "reset":
            self.pending = []
        if not _ok(result):
            return None
        event = _event(step)
        if event.get("type") == "assistant/message":
            self.pending = []
        elif event.get("type") == "user/message" and _user(_data(event)) and isinstance(result.get("seq"), int):
            self.pending.append(result["seq"])
        if step.op == "pre_step" and isinstance(step.args.get("claimed"), list):
            nodes = _nodes(query) or []
            k, claimed = _entered(step, result), step.args["claimed"]
            tail = nodes[len(nodes) - k:][:len(claimed)] if k else []
            self.pending += [seq for seq, data in zip(tail, claimed) if _user(data)]
        if step.op != "request_error" or result.get("kind") != "retry":
            return None
        nodes = set(_nodes(query) or [])
        lost = [seq for seq in self.pending if seq not in nodes]
        if lost:
            return Violation(self.name, f"the retried request no longer carries the just-entered prompt(s) {lost}: "
                                        f"overflow recovery summarized them before the model answered",
                             number, {"on the surface": lost}, sorted(nodes))
        return None


def _user(data: dict) -> bool:
    source = data.get("source") if isinstance(data.get("source"), dict) else {}
    return source.get("kind") == "user"


@register("promise-span-compactable", engine="findings")
class SpanCompactable(_Routed):
    judged = "request_error"

    def check(self, number: int, step: Step, result: dict, query, measured: tuple[int, list[int]]) -> Violation | None:
        if result.get("kind") == "retry" or "compaction/start" in (result.get("appended") or []):
            return None
        span = query("select_range", {"retain_tokens": 0})
        if not _ok(span) or span.get("range") is not None:
            return None
        surface = sum(measured[1])
        if surface > SHRINK_FLOOR:
            return Violation(self.name, f"the request overflowed; the surface holds {surface} tokens in "
                                        f"{len(measured[1])} node(s), yet no range is compactable (the retention "
                                        f"walk keeps the newest node, the cut keeps a tool unit whole)",
                             number, "a compactable range", None)
        return None


CONSTANT_SLACK = 1.5
"""How far the cells touched per append may vary across sizes and still count as constant (O(1))."""


# -- cost --------------------------------------------------------------------------------------------
@register("promise-pressure-update-constant", engine="findings")
class PressureUpdateConstant:
    def observe(self, number: int, step: Step, result: dict, query) -> Violation | None:
        ops = result.get("ops_per_append") if step.op == "bench" and isinstance(result, dict) else None
        if not isinstance(ops, dict) or len(ops) < 2:
            return None
        sizes = sorted(ops, key=int)
        low, high = ops[sizes[0]], ops[sizes[-1]]
        if low > 0 and high / low > CONSTANT_SLACK:
            return Violation(self.name, f"{result.get('variant', 'the runtime')} touches {low:g} cells per append at "
                                        f"{sizes[0]} nodes but {high:g} at {sizes[-1]}: not O(1)", number,
                             f"<= {CONSTANT_SLACK * low:g}", high)
        return None


PROMISES = registered_in(__name__)
"""Every promise monitor of this module, in registration order."""
HOLDING = ("promise-measure-slack-bounded", "promise-pressure-update-constant")
"""The ones no protocol trace of dsh breaks (no registry entry; each has a negative control in the tests).
``promise-pressure-update-constant`` holds for dsh's projection, but dsh's meter fold (``foldSurfaceTokens``)
breaks it in the cost model: ``surfacecheck findings`` reports it as ``measured`` (``COST_PATHS``). ``promise-pairing-by-id``
holds on every log dsh's own agent loop writes (explorer, Hypothesis, corpus) and breaks only on a log whose
results answer another step's call, which the count-based fold admits (finding S7-pairing-counts-not-ids)."""
