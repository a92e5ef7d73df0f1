"""``surfacecheck audit`` (see ``cli.py``)."""
