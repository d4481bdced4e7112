"""Benchmarks: `python -m ssmts.bench NAME` (see ssmts.bench.__main__ for the registry)."""
