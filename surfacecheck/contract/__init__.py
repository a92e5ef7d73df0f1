"""The compaction contract (``docs/contract.md``): the design's promises stated once for any agent runtime, checked
on conversation-level runtimes (``docs/conversation-protocol.md``) with Hypothesis, findings per runtime."""
