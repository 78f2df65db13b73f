"""The worktree benchmark (tests/bench/bench_worktree.py, issue 6) cannot rot: it runs tiny through the real
engine, with the pool forced on, and prints every figure with its baseline and ratio (targets not asserted:
on a 100-file repository a cold ``git worktree add`` is as cheap as the warm path)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from spotpatch_agent.worktree.removal import TRASH_PREFIX, empty_trash_in

REPO = Path(__file__).resolve().parents[2]


def test_worktree_bench_runs_tiny_and_prints_every_ratio(tmp_path: Path) -> None:
    out = subprocess.run(  # noqa: PLW1510 - the exit code is asserted
        [sys.executable, "-m", "tests.bench.bench_worktree", "--files", "100", "--mb", "0.5", "--sessions", "1",
         "--warm-jobs", "1", "--fn-runs", "1", "--gap", "0", "--review", "0", "--pool", "on"],
        cwd=REPO, env={**os.environ, "SPOTPATCH_BENCH": "", "TMPDIR": str(tmp_path)}, capture_output=True, text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    for metric, baseline in (("job start, cold (1st job)", "(git worktree add)"),
                             ("job start, warm (later jobs)", "(git worktree add)"),
                             ("job clean-up (diff -> awaiting-review)", "(git worktree remove)"),
                             ("job/apply (engine RPC)", "(git apply)"), ("job/revert (engine RPC)", "(git apply -R)"),
                             ("apply_change (in-process)", "(git apply)"),
                             ("revert_change (in-process)", "(git apply -R)")):
        [line] = [line for line in out.stdout.splitlines() if line.startswith(metric)]
        assert baseline in line and "x " in line, line
    assert "where the in-process time goes" in out.stdout and "git apply" in out.stdout
    # The engine's shutdown moves its warm worktree aside (``trash-*``, issue 17); the next start deletes it.
    trash = tmp_path / "spotpatch-worktrees"
    if trash.exists():
        assert all(p.name.startswith(TRASH_PREFIX) for p in trash.iterdir()), list(trash.iterdir())
        empty_trash_in([trash])
    assert list(tmp_path.iterdir()) == []  # the generated repositories and every worktree were removed
