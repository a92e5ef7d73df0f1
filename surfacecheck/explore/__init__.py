"""``surfacecheck explore`` (see ``cli.py``)."""
