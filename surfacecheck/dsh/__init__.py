"""The ``dsh`` stage of ``surfacecheck check``: the lockstep and the findings witnesses on dsh's own code."""
