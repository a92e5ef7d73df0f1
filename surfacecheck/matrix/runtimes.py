"""Which runtimes the matrix asks the contract, in the table's order: dsh's own code and the model first, the
framework adapters next, the reference conversation runtime (the control) last."""
from __future__ import annotations

from surfacecheck.runtime import registry

EVENT_LOG = ("dsh", "embedded")
"""Runtimes of dsh's event-log protocol, asked the contract through the conversation bridge."""
CONTROL = "reference"


def contract_runtimes() -> list[str]:
    """Every runtime the contract can be asked of, in the table's order."""
    frameworks = [r for r in registry.conversation_runtimes() if r != CONTROL]
    return [r for r in EVENT_LOG if registry.serves_conversation(r)] + frameworks + [CONTROL]


def problem(spec: str) -> str | None:
    """Why the matrix cannot ask ``spec`` the contract (a message for exit 2), or None."""
    why = registry.problem(spec)
    if why:
        return why
    if not registry.serves_conversation(spec):
        return (f"runtime {spec!r} does not serve the conversation level (docs/conversation-protocol.md); the matrix "
                f"asks: {', '.join(contract_runtimes())}")
    return None
