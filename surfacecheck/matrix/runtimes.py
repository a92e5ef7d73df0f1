"""Which runtimes the matrix asks the contract, in the table's order: dsh's own code and the embedded runtime first
(through the event-log bridge), the framework adapters next, the reference conversation runtime (the control)
last."""
from __future__ import annotations

from surfacecheck.runtime import registry
from surfacecheck.runtime.conversation.bridge import through_event_log

EVENT_LOG = ("dsh", "embedded")
"""Runtimes of dsh's event-log protocol in the table (the model is the embedded runtime's reference: not repeated)."""
CONTROL = "reference"


def contract_runtimes() -> list[str]:
    """Every runtime the contract is asked of by default, in the table's order."""
    frameworks = [r for r in registry.conversation_runtimes() if r != CONTROL]
    return [r for r in EVENT_LOG if through_event_log(r)] + frameworks + [CONTROL]


def problem(spec: str) -> str | None:
    """Why the matrix cannot ask ``spec`` the contract (a message for exit 2), or None."""
    why = registry.problem(spec)
    if why:
        return why
    if not (registry.serves_conversation(spec) or through_event_log(spec)):
        return (f"runtime {spec!r} serves neither the conversation level (docs/conversation-protocol.md) nor dsh's "
                f"policy level; the matrix asks: {', '.join(contract_runtimes())}")
    return None
