"""``surfacecheck matrix``: the compaction contract on every runtime, one table (runtimes x promises)."""
