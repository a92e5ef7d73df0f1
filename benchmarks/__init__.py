"""Benchmarks (pytest-benchmark) of replay and projection on the corpus and scenario logs."""
