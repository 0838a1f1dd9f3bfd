"""Benchmarks: ``python -m bench`` (the suite behind docs/PERFORMANCE.md, see :mod:`bench.suite`) and the
per-function benchmarks ``bench_degeneracy.py`` / ``bench_readiness.py``."""
