"""``surfacecheck mutate``: how strong the gate is, measured by mutation testing of the runtime under test with the
field's own tools (StrykerJS for dsh's packages, mutmut for the embedded Python runtime)."""
