"""``surfacecheck e2e dsh``: drive the real DeepSeek Harness runtime through scripted conversations.

H8a: :mod:`.server` (scripted model endpoint), :mod:`.runner` (``run_script``), :mod:`.config` (cordis
composition), :mod:`.driver` (the SDK child process), ``plugin/`` (manual /compact). Imports stay lazy so that
``import surfacecheck.e2e`` costs nothing when the runtime is not installed.
"""
