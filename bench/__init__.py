"""Benchmarks: scripts that print ratios measured in one run (``make bench``)."""
