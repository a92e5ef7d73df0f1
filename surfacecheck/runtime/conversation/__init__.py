"""The conversation level (``docs/conversation-protocol.md``): agent runtimes other than dsh as protocol peers.

``peer.py`` is the standard-library half every adapter shares (the JSON-lines loop, the neutral size, the scripted
model and summarizer); ``<runtime>_peer.py`` runs inside that runtime's own environment as a script.
"""
