"""The scale benchmark (tests/bench/bench_scale.py, issue 17) cannot rot: it runs tiny through the real engine and
prints every row of the issue's table with its same-run baseline and ratio (goals not asserted: on a 60-file
repository there is nothing to scale)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_scale_bench_runs_tiny_and_prints_every_row(tmp_path: Path) -> None:
    out = subprocess.run(  # noqa: PLW1510 - the exit code is asserted
        [sys.executable, "-m", "tests.bench.bench_scale", "--sizes", "60", "--sessions", "2", "--later-jobs", "1",
         "--cold-runs", "1"],
        cwd=REPO, env={**os.environ, "SPOTPATCH_BENCH": "", "TMPDIR": str(tmp_path)}, capture_output=True, text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    for metric in ("list_files '**' vs git ls-files", "search_text vs git grep -F -n", "one replace_text",
                   "one apply_patch",
                   "spawn -> initialize result", "first job after initialize, first start",
                   "first job after initialize, restart", "later job start (warm pool)",
                   "engine shutdown -> process gone", "engine peak RSS", "idle RSS after jobs"):
        [line] = [line for line in lines if line.startswith(metric + " [60]")]
        assert "not measured" in line or ("x " in line and " ms" in line or " MiB" in line), line
    for metric, baseline in (("spawn -> initialize result", "near-empty repo"),
                             ("first job after initialize, first start", "git worktree add --detach"),
                             ("later job start (warm pool)", "git worktree add --detach"),
                             ("idle RSS after jobs", "idle RSS before them")):
        [line] = [line for line in lines if line.startswith(metric + " [60]")]
        assert baseline in line and "x " in line, line
    [cold] = [line for line in lines if line.startswith("cold start -> initialize [empty repo]")]
    assert "import pydantic, httpx, anyio, pylsp_jsonrpc" in cold and "x " in cold
    assert "goal(s) missed" in out.stdout
    assert [p.name for p in tmp_path.iterdir()] == []  # the generated repositories and every worktree were removed
