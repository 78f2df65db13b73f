"""Benchmarks are run with ``python -m tests.bench``, never collected by pytest (see README.md)."""

collect_ignore_glob = ["bench_*.py", "echo_server.py", "__main__.py"]
