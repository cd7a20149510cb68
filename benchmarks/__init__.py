"""Benchmarks of marionette_control (not tests: nothing here asserts a time).

``python -m benchmarks.run`` (or ``./run bench``) runs every registered group,
measures the peers (other implementations of the same computation, e.g. the
thesis's reference implementation trep) in the same run, and writes one JSON
document: the machine, the figures and the ratios ours / peer. Groups register
themselves with :func:`benchmarks.registry.benchmark_group`; see
``benchmarks/core.py`` for the pattern.
"""
