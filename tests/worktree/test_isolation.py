"""create_worktree / result_diff / remove_worktree / sweep_orphans (docs/design.md §8)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import anyio
import pytest

from spotpatch_agent.errors import SpotPatchError
from spotpatch_agent.protocol.errors import ErrorCode
from spotpatch_agent.protocol.models import Limits
from spotpatch_agent.worktree.create import create_worktree
from spotpatch_agent.worktree.health import repo_health
from spotpatch_agent.worktree.marker import MARKER_NAME
from spotpatch_agent.worktree.placement import Worktree
from spotpatch_agent.worktree.removal import remove_worktree
from spotpatch_agent.worktree.result import result_diff
from spotpatch_agent.worktree.sweep import sweep_orphans
from tests.conftest import git
from tests.worktree._util import run, snapshot, temp_base, worktree_list

pytestmark = pytest.mark.anyio

FILES = {
    "a.txt": "alpha\nbeta\ngamma\n",
    "src/app.js": "export const n = 1;\n",
    "old.txt": "to be deleted\n",
}


def _registered(root: Path, wt: Worktree) -> bool:
    return any(p.resolve() == wt.path.resolve() for p in worktree_list(root))


async def test_create_in_system_temp_without_node_modules(repo_factory) -> None:
    root = repo_factory(FILES)
    before = snapshot(root)
    wt = await create_worktree(root, "job-1")
    try:
        assert wt.path.parent == temp_base()
        assert wt.job_id == "job-1"
        assert wt.head_oid == run(root, "rev-parse", "HEAD").strip()
        assert run(wt.path, "rev-parse", "HEAD").strip() == wt.baseline_oid
        assert run(wt.path, "rev-parse", "HEAD^").strip() == wt.head_oid
        assert _registered(root, wt)
        assert (wt.path / "a.txt").read_text() == FILES["a.txt"]
        assert snapshot(root) == before  # user's files, index, HEAD, refs untouched
    finally:
        await remove_worktree(root, wt)


async def test_worktree_is_detached_and_creates_no_branch(repo_factory) -> None:
    root = repo_factory(FILES)
    refs = run(root, "for-each-ref", "--format=%(refname)")
    wt = await create_worktree(root, "job-1")
    try:
        with pytest.raises(subprocess.CalledProcessError):
            run(wt.path, "symbolic-ref", "-q", "HEAD")
        assert run(root, "for-each-ref", "--format=%(refname)") == refs
        assert "spotpatch baseline job-1" in run(wt.path, "log", "-1", "--format=%s")
    finally:
        await remove_worktree(root, wt)


async def test_marker_lives_in_private_git_dir(repo_factory) -> None:
    root = repo_factory(FILES)
    wt = await create_worktree(root, "job-7")
    try:
        admin = Path(run(wt.path, "rev-parse", "--path-format=absolute", "--git-dir").strip())
        assert wt.admin_dir is not None and admin.resolve() == wt.admin_dir.resolve()
        assert json.loads((admin / MARKER_NAME).read_text())["jobId"] == "job-7"
        assert not any(MARKER_NAME in p.name for p in wt.path.rglob("*"))
        assert run(wt.path, "status", "--porcelain") == ""
    finally:
        await remove_worktree(root, wt)


async def test_create_under_real_ignored_node_modules(repo_factory) -> None:
    root = repo_factory({**FILES, ".gitignore": "node_modules/\n"})
    (root / "node_modules" / "pkg").mkdir(parents=True)
    (root / "node_modules" / "pkg" / "index.js").write_text("module.exports = 1;\n")
    wt = await create_worktree(root, "job-1")
    try:
        assert wt.path.parent == root / "node_modules" / ".spotpatch"
        assert wt.path.stat().st_mode & 0o777 == 0o700
        # The user's status never shows the job's worktree.
        assert (await repo_health(root, Limits())).state == "clean"
    finally:
        await remove_worktree(root, wt)
    assert not wt.path.exists()
    assert not (root / "node_modules" / ".spotpatch").exists()
    assert (root / "node_modules" / "pkg" / "index.js").exists()


async def test_unignored_node_modules_is_not_used(repo_factory) -> None:
    root = repo_factory(FILES)
    (root / "node_modules").mkdir()
    wt = await create_worktree(root, "job-1")
    try:
        assert wt.path.parent == temp_base()
        assert list((root / "node_modules").iterdir()) == []
    finally:
        await remove_worktree(root, wt)


async def test_symlinked_node_modules_is_never_used(repo_factory, tmp_path: Path) -> None:
    root = repo_factory({**FILES, ".gitignore": "node_modules\n"})
    target = tmp_path / "shared_modules"
    target.mkdir()
    (root / "node_modules").symlink_to(target, target_is_directory=True)
    wt = await create_worktree(root, "job-1")
    try:
        assert wt.path.parent == temp_base()
        assert list(target.iterdir()) == []
    finally:
        await remove_worktree(root, wt)


async def test_result_diff_shows_exactly_the_agent_change(repo_factory) -> None:
    root = repo_factory(FILES)
    wt = await create_worktree(root, "job-1")
    try:
        empty_diff, empty_files = await result_diff(wt)
        assert (empty_diff, empty_files) == ("", [])
        (wt.path / "a.txt").write_text("alpha\nBETA\ngamma\ndelta\n")
        (wt.path / "src" / "new file é.ts").write_text("export {};\n")
        (wt.path / "old.txt").unlink()
        diff, stats = await result_diff(wt)
        assert {s.path: (s.status, s.added, s.removed) for s in stats} == {
            "a.txt": ("modified", 2, 1),
            "src/new file é.ts": ("added", 1, 0),
            "old.txt": ("deleted", 0, 1),
        }
        assert "diff --git a/a.txt b/a.txt" in diff
        assert "-beta\n+BETA\n" in diff and "+delta\n" in diff
        assert "diff --git a/src/new file é.ts b/src/new file é.ts" in diff
        assert "deleted file mode 100644" in diff
        assert "app.js" not in diff
        assert "index " in diff and len(diff.split("index ")[1].split("..")[0]) == 40  # --full-index
        assert str(wt.path) not in diff
        # The worktree's HEAD is still the baseline: staging never commits.
        assert run(wt.path, "rev-parse", "HEAD").strip() == wt.baseline_oid
    finally:
        await remove_worktree(root, wt)


async def test_result_diff_binary_file(repo_factory) -> None:
    root = repo_factory({**FILES, "img.bin": bytes(range(256))})
    wt = await create_worktree(root, "job-1")
    try:
        (wt.path / "img.bin").write_bytes(bytes(reversed(range(256))))
        diff, stats = await result_diff(wt)
        assert "GIT binary patch" in diff
        assert [(s.path, s.status, s.added, s.removed) for s in stats] == [("img.bin", "modified", 0, 0)]
    finally:
        await remove_worktree(root, wt)


async def test_dirty_repository_needs_consent_and_leaves_nothing(repo_factory) -> None:
    root = repo_factory(FILES)
    (root / "a.txt").write_text("local edit\n")
    before = snapshot(root)
    with pytest.raises(SpotPatchError) as info:
        await create_worktree(root, "job-1")
    assert info.value.code is ErrorCode.CONSENT_REQUIRED
    assert "1 unstaged" in info.value.message
    assert snapshot(root) == before
    assert len(worktree_list(root)) == 1
    assert not temp_base().exists() or list(temp_base().iterdir()) == []


async def test_blocked_repository_is_refused(repo_factory) -> None:
    root = repo_factory(FILES)
    (root / ".git" / "MERGE_HEAD").write_text(run(root, "rev-parse", "HEAD"))
    with pytest.raises(SpotPatchError) as info:
        await create_worktree(root, "job-1")
    assert info.value.code is ErrorCode.REPO_BLOCKED
    assert "merge-in-progress" in info.value.message
    assert len(worktree_list(root)) == 1


async def test_one_health_check_per_job_start(repo_factory, monkeypatch) -> None:
    """Issue 17: job/create's health answer is the job's one health check on a clean tree (no second
    ``git status`` + walk after ``worktree add``); without one, create_worktree reads it once; only a job
    that copies local changes in reads it again after the worktree is ready. A blocked answer is refused
    without touching git; the baseline is exactly HEAD."""
    from spotpatch_agent.worktree import create as create_module

    root = repo_factory(FILES)
    health = await repo_health(root, Limits())
    calls: list[Path] = []

    async def counted(path: Path, limits: Limits):  # type: ignore[no-untyped-def]
        calls.append(path)
        return await repo_health(path, limits)

    monkeypatch.setattr(create_module, "repo_health", counted)
    head = run(root, "rev-parse", "HEAD").strip()
    for given, expected in ((health, []), (None, [root])):
        calls.clear()
        wt = await create_worktree(root, "job-1", health=given)
        try:
            assert calls == expected
            assert run(wt.path, "rev-parse", "HEAD^{tree}") == run(root, "rev-parse", "HEAD^{tree}")
            assert run(wt.path, "rev-parse", "HEAD^") .strip() == head
        finally:
            await remove_worktree(root, wt)
    (root / "a.txt").write_text("alpha\nLOCAL\n")
    dirty = await repo_health(root, Limits())
    assert dirty.state == "consent-required"
    calls.clear()
    wt = await create_worktree(root, "job-1", health=dirty, include_local_changes=True)
    try:
        assert calls == [root]  # re-read for the snapshot of the local changes
        assert (wt.path / "a.txt").read_text() == "alpha\nLOCAL\n"
    finally:
        await remove_worktree(root, wt)
    calls.clear()
    with pytest.raises(SpotPatchError) as info:
        await create_worktree(root, "job-2", health=dirty)
    assert info.value.code is ErrorCode.CONSENT_REQUIRED and calls == []
    run(root, "checkout", "--", "a.txt")
    (root / ".git" / "MERGE_HEAD").write_text(run(root, "rev-parse", "HEAD"))
    blocked = await repo_health(root, Limits())
    calls.clear()
    with pytest.raises(SpotPatchError) as info:
        await create_worktree(root, "job-2", health=blocked)
    assert info.value.code is ErrorCode.REPO_BLOCKED and "merge-in-progress" in info.value.message
    assert calls == [] and len(worktree_list(root)) == 1


async def test_subdirectory_is_refused(repo_factory) -> None:
    root = repo_factory(FILES)
    with pytest.raises(SpotPatchError) as info:
        await create_worktree(root / "src", "job-1")
    assert info.value.code is ErrorCode.REPO_BLOCKED
    assert str(root) not in info.value.message


async def test_no_global_identity_hooks_or_signing_needed(repo_factory, tmp_path: Path, monkeypatch) -> None:
    root = repo_factory(FILES)
    for key in ("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL"):
        monkeypatch.delenv(key, raising=False)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    git(root, "config", "user.useConfigOnly", "true")
    git(root, "config", "commit.gpgsign", "true")
    hook_log = tmp_path / "hook-ran"
    for hook in ("post-checkout", "pre-commit", "post-commit"):
        path = root / ".git" / "hooks" / hook
        path.write_text(f"#!/bin/sh\necho {hook} >> '{hook_log}'\nexit 1\n")
        path.chmod(0o755)
    wt = await create_worktree(root, "job-1")
    try:
        assert run(wt.path, "log", "-1", "--format=%cn <%ce>", env={"GIT_CONFIG_GLOBAL": os.devnull}) == (
            "SpotPatch <spotpatch@localhost>\n"
        )
        assert not hook_log.exists()
    finally:
        await remove_worktree(root, wt)


async def test_remove_leaves_no_directory_and_no_registration(repo_factory) -> None:
    root = repo_factory(FILES)
    wt = await create_worktree(root, "job-1")
    (wt.path / "a.txt").write_text("dirty\n")
    (wt.path / "untracked.txt").write_text("u\n")
    assert wt.admin_dir is not None
    await remove_worktree(root, wt)
    assert not wt.path.exists()
    assert not wt.admin_dir.exists()
    assert [p.resolve() for p in worktree_list(root)] == [root.resolve()]
    await remove_worktree(root, wt)  # idempotent, never raises


async def test_remove_after_directory_vanished(repo_factory) -> None:
    root = repo_factory(FILES)
    wt = await create_worktree(root, "job-1")
    shutil.rmtree(wt.path)
    await remove_worktree(root, Worktree(wt.path, wt.head_oid, wt.baseline_oid, wt.job_id))
    assert len(worktree_list(root)) == 1


async def test_sweep_removes_only_marked_worktrees(repo_factory, tmp_path: Path) -> None:
    root = repo_factory(FILES)
    users = tmp_path / "users-worktree"
    git(root, "worktree", "add", "-q", "--detach", str(users))
    users_gone = tmp_path / "users-gone"
    git(root, "worktree", "add", "-q", "--detach", str(users_gone))
    shutil.rmtree(users_gone)  # a stale registration of the user's: must not be pruned by us
    ours = [await create_worktree(root, f"job-{i}") for i in range(3)]
    shutil.rmtree(ours[2].path)  # crashed run whose temp dir was already cleaned
    live = await create_worktree(root, "live")
    assert await sweep_orphans(root, live_job_ids={"live"}) == 3
    remaining = {p.resolve() for p in worktree_list(root)}
    assert remaining == {root.resolve(), users.resolve(), users_gone.resolve(), live.path.resolve()}
    assert all(not wt.path.exists() for wt in ours)
    assert users.exists()
    assert await sweep_orphans(root, live_job_ids={"live"}) == 0
    assert await sweep_orphans(root) == 1
    assert not live.path.exists()


async def test_sweep_outside_a_repository(tmp_path: Path) -> None:
    assert await sweep_orphans(tmp_path) == 0


async def test_cancelled_create_leaves_nothing_behind(repo_factory) -> None:
    root = repo_factory(FILES)
    for delay in (0, 0.002, 0.005, 0.01, 0.015, 0.02, 0.03, 0.04, 0.06, 0.08, 0.12, 0.16, 0.25):
        created: list[Worktree] = []
        with anyio.move_on_after(delay):
            created.append(await create_worktree(root, "job-c"))
        for wt in created:
            await remove_worktree(root, wt)
        assert len(worktree_list(root)) == 1, delay
        assert not list((root / ".git").glob("worktrees/*")), delay
        assert not temp_base().exists() or list(temp_base().iterdir()) == [], delay


async def test_remove_cleans_a_half_registered_worktree(repo_factory) -> None:
    # What a `git worktree add` killed before it wrote `gitdir` leaves behind.
    root = repo_factory(FILES)
    job_dir = temp_base() / "job-halfway"
    job_dir.mkdir(parents=True)
    admin = root / ".git" / "worktrees" / "job-halfway"
    admin.mkdir(parents=True)
    (admin / "locked").write_text("initializing")
    user_admin = root / ".git" / "worktrees" / "users-own"
    user_admin.mkdir()
    (user_admin / "locked").write_text("initializing")
    await remove_worktree(root, Worktree(job_dir, "", "", "job-x"))
    assert not job_dir.exists() and not admin.exists()
    assert user_admin.exists()
