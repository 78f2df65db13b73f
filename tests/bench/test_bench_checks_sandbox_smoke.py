"""The check-sandbox benchmark (tests/bench/bench_checks_sandbox.py, issue 14) cannot rot: a tiny run prints
every row (targets not asserted: the machine is shared)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="bubblewrap is the Linux check sandbox")
def test_check_sandbox_benchmark_prints_every_row() -> None:
    out = subprocess.run([sys.executable, "-m", "tests.bench.bench_checks_sandbox", "--runs", "2"], cwd=REPO,
                         capture_output=True, text=True, timeout=300, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    for row in ("check start (/bin/true)", "check start (python -c pass)", "detection, first call (trial run)",
                "detection, cached (later checks)"):
        assert row in out.stdout, out.stdout
    assert "added" in out.stdout
