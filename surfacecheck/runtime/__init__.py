"""Runtimes under test: the reference model, the embedded runtime, and external ``cmd:`` processes.

All three answer the same JSON requests (``docs/protocol.md``), through :class:`.api.Runtime`.
"""
