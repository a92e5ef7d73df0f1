"""Report writers for ``surfacecheck check`` (JSON report, JUnit XML)."""
