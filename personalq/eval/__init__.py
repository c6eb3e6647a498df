"""Benchmarks and the metrics they share: judge alignment, FD-EffNet, and CLIP score when configured.

Each benchmark lives in its own module and is reached through `personalq bench ...`; nothing here is
imported at start-up, so the metrics' heavy dependencies load only when a benchmark runs.
"""
