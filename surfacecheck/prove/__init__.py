"""``surfacecheck prove`` (see ``cli.py``)."""
