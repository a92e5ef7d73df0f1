"""Findings about dsh itself: design promises (``properties/promises.py``) that dsh's own behaviour
breaks (spec §15), a registry of the known ones (``properties/findings.json``) with minimal witness
traces, discovery of new ones (``search.py``), the ``findings`` stage and command."""
