"""The random-kill run (tests/bench/bench_crash_kills.py, issue 12) cannot rot: 10 seeded kills of the
journalled write, every invariant checked by the run itself (exit 1 on a violation)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_random_kill_run_holds_every_invariant_on_a_few_kills(tmp_path: Path) -> None:
    out = subprocess.run(  # noqa: PLW1510 - the exit code is asserted
        [sys.executable, "-m", "tests.bench.bench_crash_kills", "--kills", "10", "--seed", "3", "--files", "5"],
        cwd=REPO, capture_output=True, text=True, timeout=300, env={**os.environ, "TMPDIR": str(tmp_path)},
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "seed 3: 10 kills of a write landed" in out.stdout and "every invariant held" in out.stdout
