"""Command line of ``surfacecheck prove`` (placeholder until the capability lands)."""
from __future__ import annotations

import sys

def _not_yet(args) -> int:
    sys.stderr.write(f"surfacecheck {args.command}: error: not available yet\n")
    return 2


def register(commands) -> None:
    """Add this capability's subcommands to the ``surfacecheck`` parser."""
    p = commands.add_parser('prove', help='prove cut legality, generation progress and projection equivalence with Z3', description='prove cut legality, generation progress and projection equivalence with Z3')
    p.set_defaults(func=_not_yet)
