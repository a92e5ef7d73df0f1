"""Command line of ``surfacecheck audit`` (placeholder until the capability lands)."""
from __future__ import annotations

import sys

def _not_yet(args) -> int:
    sys.stderr.write(f"surfacecheck {args.command}: error: not available yet\n")
    return 2


def register(commands) -> None:
    """Add this capability's subcommands to the ``surfacecheck`` parser."""
    p = commands.add_parser('audit', help='check real session logs against the model and explain every finding', description='check real session logs against the model and explain every finding')
    p.set_defaults(func=_not_yet)
