"""Command line of ``surfacecheck bench`` (placeholder until the capability lands)."""
from __future__ import annotations

import sys

def _not_yet(args) -> int:
    sys.stderr.write(f"surfacecheck {args.command}: error: not available yet\n")
    return 2


def register(commands) -> None:
    """Add this capability's subcommands to the ``surfacecheck`` parser."""
    p = commands.add_parser('bench', help='measure the per-append cost of pressure updates and confirm it is O(1)', description='measure the per-append cost of pressure updates and confirm it is O(1)')
    p.set_defaults(func=_not_yet)
