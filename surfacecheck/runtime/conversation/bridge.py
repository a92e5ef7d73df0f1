"""Which runtimes the compaction contract reaches through the event-log bridge (:mod:`.eventlog`), and how to open
any runtime at the conversation level.

A runtime whose registry entry serves dsh's ``policy`` level and not the ``conversation`` one (``dsh``,
``dsh:DIR``, ``embedded``, ``model`` and their variants) is wrapped in :class:`.eventlog.EventLogConversation`; a
conversation-level runtime opens as it is. ``check`` does not use this: its contract stage applies only to
runtimes that serve the conversation level themselves (``stages.not_applicable``), so ``check --runtime dsh``
keeps its budget; the contract runs on dsh through ``surfacecheck contract --runtime dsh``.
"""
from __future__ import annotations

from surfacecheck.core.protocol import CONVERSATION, Runtime

from .. import registry

POLICY = "policy"


def through_event_log(spec: str) -> bool:
    """Does ``spec`` name a runtime the contract drives through the event-log bridge?"""
    found = registry.entry(spec) or registry.entry(registry.base(spec))
    return found is not None and POLICY in found.levels and CONVERSATION not in found.levels


def open_conversation(spec: str, timeout: float) -> Runtime:
    """A fresh runtime for ``spec`` serving the conversation level (bridged when :func:`through_event_log`)."""
    runtime = registry.open_spec(spec, timeout)
    if not through_event_log(spec):
        return runtime
    from .eventlog import EventLogConversation

    return EventLogConversation(runtime, spec)


def bridged_runtimes() -> list[str]:
    """The named runtimes the contract reaches through the bridge (``embedded``, ``model``, ``dsh``)."""
    return [e.name for e in registry.ENTRIES if e.prefix is None and through_event_log(e.name)]
