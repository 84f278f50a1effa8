"""Benchmarks shipped with the package (``ember bench-ops``); ``bench/`` holds the scripts."""
