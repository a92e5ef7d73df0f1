"""surfacecheck: checks context compaction against a reference model of the dsh session log."""

__version__ = "0.1.0"
