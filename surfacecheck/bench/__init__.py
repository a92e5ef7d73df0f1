"""``surfacecheck bench`` (see ``cli.py``)."""
