"""Breaker regressions (issue 6): ways the engine's own git calls could write the user's repository."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from spotpatch_agent.worktree.isolation import create_worktree, remove_worktree
from tests.conftest import git
from tests.worktree._util import run

pytestmark = pytest.mark.anyio


async def test_baseline_commit_never_triggers_auto_gc_in_the_users_repository(repo_factory, tmp_path: Path) -> None:
    """`git commit` in a linked worktree runs `gc --auto` on the shared repository: it packs the user's refs,
    expires reflogs and prunes the user's stale worktree registrations. Our baseline commit must not."""
    root = repo_factory({"a.txt": "a\n"})
    git(root, "worktree", "add", "-q", "--detach", str(tmp_path / "users-stale"))
    shutil.rmtree(tmp_path / "users-stale")  # the user's stale registration: only the user prunes it
    for key, value in (("gc.auto", "1"), ("gc.autoDetach", "false"), ("gc.worktreePruneExpire", "now"),
                       ("maintenance.auto", "true")):
        git(root, "config", key, value)
    blobs = tmp_path / "blobs"  # plenty of loose objects (any busy repository): the next auto-gc check fires
    blobs.mkdir()
    for i in range(600):
        (blobs / str(i)).write_text(f"loose {i}\n")
    subprocess.run(["git", "hash-object", "-w", "--stdin-paths"], cwd=root, check=True, capture_output=True,
                   input="\n".join(str(blobs / str(i)) for i in range(600)).encode())
    refs_before = run(root, "for-each-ref")
    wt = await create_worktree(root, "job-gc")
    try:
        assert (root / ".git" / "worktrees" / "users-stale").is_dir(), "the user's stale worktree was pruned"
        assert not (root / ".git" / "packed-refs").exists(), "the user's refs were packed"
        assert run(root, "for-each-ref") == refs_before
    finally:
        await remove_worktree(root, wt)
