"""Command line of ``surfacecheck verify`` (placeholder until the capability lands)."""
from __future__ import annotations

import sys

def _not_yet(args) -> int:
    sys.stderr.write(f"surfacecheck {args.command}: error: not available yet\n")
    return 2


def register(commands) -> None:
    """Add this capability's subcommands to the ``surfacecheck`` parser."""
    p = commands.add_parser('verify', help='drive a runtime in lockstep with the model under Hypothesis stateful testing', description='drive a runtime in lockstep with the model under Hypothesis stateful testing')
    p.set_defaults(func=_not_yet)
    p = commands.add_parser('replay', help='replay a counterexample trace against a runtime; exit 1 while it still fails', description='replay a counterexample trace against a runtime; exit 1 while it still fails')
    p.set_defaults(func=_not_yet)
