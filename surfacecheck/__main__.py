"""``python -m surfacecheck`` runs the command-line interface."""
from .cli import entry

entry()
