"""Property-based checks (Hypothesis) of the reference model's invariants."""
