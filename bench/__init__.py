"""Benchmark harness: every figure is a ratio against a baseline measured in the same run.

Run it with `python -m bench.run` from the repository root (see bench/README.md).
"""
