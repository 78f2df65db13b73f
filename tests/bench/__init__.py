"""Benchmarks of the stdio JSON-RPC engine (issue 3): run ``.venv/bin/python -m tests.bench``; see README.md.

Not part of the default ``pytest`` run (no ``test_*.py`` files here, and ``conftest.py`` ignores the
directory); ``tests/rpc/test_bench_smoke.py`` runs the entry point with tiny counts so it cannot rot.
"""
