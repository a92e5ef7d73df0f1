"""Negative controls of the compaction contract: the reference conversation runtime with one promise broken on
purpose each, registered as ``reference:<name>`` (imported through the registry's variant providers).

:data:`BREAKS` names the promise each variant breaks; a test runs each on a scenario where exactly that promise
catches it and the plain ``reference`` keeps every promise.
"""
from __future__ import annotations

from .peer import neutral_tokens
from .reference import ReferenceRuntime


class OrphanCut(ReferenceRuntime):
    """Cuts between the last call and its first result (the kept tail starts with an orphan result)."""

    def _cut(self, before, limit):
        results = [i for i, m in enumerate(before) if m.get("role") == "tool" and i > 0
                   and before[i - 1].get("role") == "assistant"]
        return results[-1] if results else super()._cut(before, limit)


class RewriteKept(ReferenceRuntime):
    """Shortens the first tool result it keeps (a kept message is no longer the message it keeps)."""

    def _kept(self, kept):
        for m in kept:
            if m.get("role") == "tool":
                m["text"] = m["text"][: len(m["text"]) // 2]
                break
        return kept


class DropPrompt(ReferenceRuntime):
    """Never pins the turn's request: once its message is summarized away the model no longer sees it."""

    def _summary_text(self, output, pinned, removed):
        return super()._summary_text(output, None, removed)


class DropSystem(ReferenceRuntime):
    """Forgets the system prompt after its first compaction."""

    def _system(self):
        return None if self.compactions else self.system


class BiggerSummary(ReferenceRuntime):
    """Pads its summary beyond what it replaces and commits it anyway."""

    def _summary_text(self, output, pinned, removed):
        padding = " ".join(m.get("text") or "" for m in removed)
        return super()._summary_text(output, pinned, removed) + "\n" + padding + padding

    def _commits(self, count_before, count_after, limit):
        pass


class KeepTooMuch(ReferenceRuntime):
    """Removes only the oldest exchange and commits even when the rest is still over its trigger."""

    def _cut(self, before, limit):
        cuts = [i for i in self._clean_cuts(before) if neutral_tokens(before[:i]) > self._overhead()]
        return cuts[0] if cuts else 0

    def _commits(self, count_before, count_after, limit):
        super()._commits(count_before, count_after, None)


class SkipRemoved(ReferenceRuntime):
    """Leaves the oldest removed message with a text out of the summarizer's input."""

    def _chunks(self, removed, before):
        first = next((i for i, m in enumerate(removed) if m.get("text")), None)
        return super()._chunks([m for i, m in enumerate(removed) if i != first], before)


class ConstantSummary(ReferenceRuntime):
    """Calls the summarizer, then writes a constant summary in place of its answer."""

    def _summary_text(self, output, pinned, removed):
        return super()._summary_text("(earlier messages were condensed)", pinned, removed)


class IgnoreWindow(ReferenceRuntime):
    """Sends the whole history to the summarizer, whatever its window (and gives up when it overflows)."""

    def _chunks(self, removed, before):
        return [before]

    def _fits_window(self, prompt):
        return True


class NestedSummary(ReferenceRuntime):
    """Wraps the previous summary, framing and all, inside the new one."""

    def _summary_text(self, output, pinned, removed):
        old = [m.get("text") for m in removed if m.get("summary")]
        return super()._summary_text(output, pinned, removed) + "".join("\n" + t for t in old)


class UserAfterSummary(ReferenceRuntime):
    """Keeps the tail from the turn's user message, so the summary (a user message) is followed by a user
    message."""

    def _cut(self, before, limit):
        at = max((i for i, m in enumerate(before) if m.get("role") == "user" and m.get("text") == self.pin),
                 default=0)
        return at or super()._cut(before, limit)


class CompactWhenDisabled(ReferenceRuntime):
    """Ignores ``compaction: false``: it echoes the setting but compacts at its trigger all the same."""

    @property
    def compaction(self):
        return self.settings is not None


class CompactEarly(ReferenceRuntime):
    """Compacts at half its trigger."""

    def _wants_compaction(self):
        return self.compaction and neutral_tokens(self.history, self.system) > self.settings["trigger_tokens"] // 2


VARIANTS: dict[str, tuple[str, type]] = {
    "orphan-cut": ("contract-no-orphan-created", OrphanCut),
    "rewrite-kept": ("contract-tail-verbatim", RewriteKept),
    "drop-prompt": ("contract-prompt-verbatim", DropPrompt),
    "drop-system": ("contract-system-kept", DropSystem),
    "bigger-summary": ("contract-progress", BiggerSummary),
    "keep-too-much": ("contract-fits-after", KeepTooMuch),
    "skip-removed": ("contract-summary-covers-removed", SkipRemoved),
    "constant-summary": ("contract-summarizer-used", ConstantSummary),
    "ignore-window": ("contract-summarizer-input-fits", IgnoreWindow),
    "nested-summary": ("contract-summary-not-nested", NestedSummary),
    "user-after-summary": ("contract-roles-valid", UserAfterSummary),
    "compact-when-disabled": ("contract-disabled-means-disabled", CompactWhenDisabled),
    "compact-early": ("contract-under-threshold-noop", CompactEarly),
}
BREAKS: dict[str, str] = {name: promise for name, (promise, _) in VARIANTS.items()}
"""Variant name -> the one promise it breaks."""


def _factory(name: str, cls: type):
    def make() -> ReferenceRuntime:
        runtime = cls()
        runtime.name = f"reference:{name}"
        return runtime
    return make


def _register() -> None:
    from ..registry import register_variant

    for name, (_, cls) in VARIANTS.items():
        register_variant(f"reference:{name}", _factory(name, cls))


_register()
