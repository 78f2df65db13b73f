"""``python -m tests.bench``: run the benchmarks and print the table (see README.md)."""

from tests.bench.bench_rpc import main

raise SystemExit(main())
