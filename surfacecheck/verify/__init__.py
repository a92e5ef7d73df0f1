"""``surfacecheck verify`` (see ``cli.py``)."""
