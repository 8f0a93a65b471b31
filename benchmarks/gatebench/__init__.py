"""The gate benchmark: labeled cases generated from the shared QA files by mutation families, and
the per-synthesizer gates scored on them (``benchmarks/gates.py``; method in docs/gates.md)."""
