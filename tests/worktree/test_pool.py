"""The warm worktree pool (worktree/pool.py, issue 6): a reused worktree is indistinguishable from a fresh one,
is never handed out twice, falls back to a cold ``git worktree add`` when anything is off, leaks nothing on
cancellation, and stays within the orphan sweep's rules."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest

from spotpatch_agent.worktree.create import create_worktree
from spotpatch_agent.worktree.marker import MARKER_NAME
from spotpatch_agent.worktree.placement import Worktree
from spotpatch_agent.worktree.pool import WorktreePool, pool_mode
from spotpatch_agent.worktree.removal import empty_trash_in, remove_worktree
from spotpatch_agent.worktree.result import result_diff
from spotpatch_agent.worktree.sidecar import process_start
from spotpatch_agent.worktree.sweep import sweep_orphans
from tests.conftest import git
from tests.worktree._util import files, run, snapshot, temp_base, worktree_list

pytestmark = pytest.mark.anyio

FILES = {
    ".gitignore": "dist/\n*.log\nnode_modules/\n",
    "a.txt": "alpha\nbeta\n",
    "src/app.js": "export const n = 1;\n",
    "src/lib/util.js": "export const u = 2;\n",
    "docs/readme.md": "# docs\n",
    "bin/tool.sh": "#!/bin/sh\necho tool\n",
}


@asynccontextmanager
async def open_pool(root: Path, **kwargs) -> AsyncIterator[WorktreePool]:
    """A pool (mode ``on`` unless given) whose background work runs in a task group; closed at the end."""
    kwargs.setdefault("mode", "on")
    async with anyio.create_task_group() as tg:
        pool = WorktreePool(root, task_group=tg, **kwargs)
        try:
            yield pool
        finally:
            with anyio.CancelScope(shield=True):
                await pool.aclose()


async def settled(pool: WorktreePool) -> None:
    """Wait until no warm or recycle is in flight (observable state, bounded)."""
    with anyio.fail_after(30):
        while pool._busy:  # the one piece of private state a test must wait on
            await anyio.sleep(0.01)


def tree(path: Path) -> dict[str, object]:
    """Every entry of a worktree (content or type) and whether it is executable; not its ``.git`` file."""
    entries = files(path)
    del entries[".git"]
    return {rel: (value, os.access(path / rel, os.X_OK)) for rel, value in entries.items()}


def only_main_worktree(root: Path) -> bool:
    return ([p.resolve() for p in worktree_list(root)] == [root.resolve()]
            and not list((root / ".git").glob("worktrees/*")))


def temp_base_empty() -> bool:
    """Nothing left in the temp base but what the next start deletes: worktrees moved aside (``trash-*``,
    issue 17: removal at shutdown or on a discard is one rename; the files are deleted in the background)."""
    if temp_base().exists():
        assert all(p.name.startswith("trash-") for p in temp_base().iterdir()), list(temp_base().iterdir())
        empty_trash_in([temp_base()])
    return not temp_base().exists() or list(temp_base().iterdir()) == []


def dirty_the_job(wt: Worktree) -> None:
    """What a job and its checks may leave: modified, deleted, added (staged), untracked, ignored, nested,
    empty-directory and mode changes."""
    (wt.path / "a.txt").write_text("ALPHA\n")
    (wt.path / "src" / "lib" / "util.js").unlink()
    (wt.path / "src" / "new.js").write_text("export const added = 1;\n")
    (wt.path / "dist").mkdir()
    (wt.path / "dist" / "bundle.js").write_text("ignored build output\n")
    (wt.path / "debug.log").write_text("ignored log\n")
    (wt.path / "deep" / "er" / "still").mkdir(parents=True)
    (wt.path / "deep" / "er" / "file.txt").write_text("untracked\n")
    (wt.path / "empty-dir").mkdir()
    (wt.path / "docs" / "readme.md").chmod(0o755)


async def job_with_pool(root: Path, pool: WorktreePool, job_id: str) -> Worktree:
    wt = await create_worktree(root, job_id, pool=pool)
    dirty_the_job(wt)
    await result_diff(wt)  # stages the agent's change in the worktree's index, as a finished job does
    nested = wt.path / "vendor" / "nested"  # and a check that cloned something, after the diff was taken
    nested.mkdir(parents=True)
    git(nested, "init", "-q")
    (nested / "x.txt").write_text("nested\n")
    return wt


async def test_reuse_gives_a_tree_identical_to_a_fresh_checkout(repo_factory) -> None:
    root = repo_factory(FILES)
    before = snapshot(root)
    async with open_pool(root) as pool:
        await pool.warm()
        [warm_path] = pool.idle_paths
        first = await job_with_pool(root, pool, "job-1")
        assert first.path == warm_path and pool.hits == 1
        await pool.release(first)
        await settled(pool)
        assert pool.idle_paths == [first.path]
        reused = await create_worktree(root, "job-2", pool=pool)
        fresh = await create_worktree(root, "job-fresh")
        try:
            assert reused.path == first.path and pool.hits == 2 and pool.discards == 0
            assert tree(reused.path) == tree(fresh.path)
            for wt in (reused, fresh):
                assert run(wt.path, "status", "--porcelain", "--ignored", "--untracked-files=all") == ""
                assert run(wt.path, "rev-parse", "HEAD^").strip() == wt.head_oid
                with pytest.raises(subprocess.CalledProcessError):
                    run(wt.path, "symbolic-ref", "-q", "HEAD")  # detached
            assert run(reused.path, "log", "--format=%s", "-1") == "spotpatch baseline job-2\n"
            # The first job's baseline is reachable from nothing: not a HEAD, not a reflog.
            reachable = run(root, "rev-list", "--all", "--reflog")
            assert first.baseline_oid not in reachable
            assert first.baseline_oid not in run(reused.path, "reflog", "--format=%H")
            marker = json.loads((reused.admin_dir / MARKER_NAME).read_text())  # type: ignore[operator]
            assert marker["jobId"] == "job-2" and marker["pid"] == os.getpid()
        finally:
            await remove_worktree(root, reused)
            await remove_worktree(root, fresh)
    assert snapshot(root) == before  # the user's files, index, HEAD and refs never changed
    assert only_main_worktree(root) and temp_base_empty()


async def test_an_untouched_warm_worktree_is_handed_out_without_a_reset(repo_factory, monkeypatch) -> None:
    """Issue 17: a warm worktree proven untouched since it was made a clean checkout of HEAD (fresh from
    ``worktree add``, or recycled) is handed out without ``checkout --force`` / ``clean`` and without a
    second ``update-index --refresh`` for the baseline; the job's tree and baseline are the same as a fresh
    checkout's, byte for byte."""
    from spotpatch_agent.worktree import create as create_module
    from spotpatch_agent.worktree import pool as pool_module

    root = repo_factory(FILES)
    commands: list[list[str]] = []
    real = pool_module.run_git

    async def recorded(args, **kwargs):  # type: ignore[no-untyped-def]
        commands.append([a for a in args if not a.startswith(("--git-dir=", "--work-tree="))])
        return await real(args, **kwargs)

    monkeypatch.setattr(pool_module, "run_git", recorded)
    baseline_commands: list[list[str]] = []
    real_iso = create_module.run_git

    async def recorded_iso(args, **kwargs):  # type: ignore[no-untyped-def]
        baseline_commands.append(list(args))
        return await real_iso(args, **kwargs)

    monkeypatch.setattr(create_module, "run_git", recorded_iso)
    async with open_pool(root) as pool:
        for job_id in ("job-1", "job-2"):  # fresh from warm(), then recycled after job-1
            if job_id == "job-1":
                await pool.warm()
            commands.clear()
            baseline_commands.clear()
            wt = await create_worktree(root, job_id, pool=pool)
            fresh = await create_worktree(root, "job-fresh")
            try:
                assert pool.untouched == (1 if job_id == "job-1" else 2) and pool.discards == 0
                assert not any(c[:1] in (["checkout"], ["clean"]) for c in commands)
                assert [c for c in baseline_commands if c[:1] == ["update-index"]] == [["update-index", "--refresh"]]
                assert tree(wt.path) == tree(fresh.path)
                assert run(wt.path, "status", "--porcelain", "--ignored", "--untracked-files=all") == ""
                assert run(wt.path, "rev-parse", "HEAD^{tree}") == run(root, "rev-parse", "HEAD^{tree}")
                assert run(wt.path, "rev-parse", "HEAD^").strip() == wt.head_oid
                assert run(wt.path, "reflog", "--format=%H").split() == [wt.baseline_oid]
            finally:
                await remove_worktree(root, fresh)
            dirty_the_job(wt)
            await pool.release(wt)
            await settled(pool)
    assert only_main_worktree(root)


def _wrote_tracked_same_size_and_mtime(path: Path) -> None:
    target = path / "a.txt"
    st = target.stat()
    target.write_text("ALPHA\nbeta\n")  # same length
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))


def _staged_only(path: Path) -> None:
    (path / "a.txt").write_text("staged\n")
    git(path, "add", "a.txt")
    git(path, "checkout-index", "--force", "--", "a.txt")  # the file is back; only the index differs
    (path / "a.txt").write_bytes(run(path, "show", "HEAD:a.txt").encode())


def _wrote_with_ctime_untrusted(path: Path) -> None:
    """The user's configuration trusts no ctime and checks minimal stat data; the write keeps size and mtime
    and is not racily clean (the file's mtime is older than the index), so only the ctime could tell."""
    git(path, "config", "core.trustctime", "false")
    git(path, "config", "core.checkStat", "minimal")
    target = path / "a.txt"
    older = target.stat().st_mtime_ns - 5_000_000_000
    os.utime(target, ns=(older, older))
    git(path, "update-index", "--refresh")  # the index records the older mtime (and is newer than the file)
    recorded = int(target.stat().st_ctime)
    deadline = time.monotonic() + 5  # git compares whole seconds: the write must come in a later second
    while int(time.time()) <= recorded and time.monotonic() < deadline:
        time.sleep(0.05)
    target.write_text("ALPHA\nbeta\n")  # same length
    os.utime(target, ns=(older, older))


def _directory_swapped_for_symlink(path: Path) -> None:
    """``src`` moved out (same inodes, same stat data for its files) and a symlink to it put in its place."""
    away = path.parent.parent / "away"
    os.rename(path / "src", away)
    os.symlink(away, path / "src")


WRITES = {
    "tracked": lambda p: (p / "src" / "app.js").write_text("export const n = 2;\n"),
    "same-stat-ctime-untrusted": _wrote_with_ctime_untrusted,
    "chmod-filemode-off": lambda p: (git(p, "config", "core.fileMode", "false")
                                     or (p / "docs" / "readme.md").chmod(0o755)),
    "directory-symlink": _directory_swapped_for_symlink,
    "tracked-same-stat": _wrote_tracked_same_size_and_mtime,
    "deleted": lambda p: (p / "src" / "lib" / "util.js").unlink(),
    "chmod": lambda p: (p / "docs" / "readme.md").chmod(0o755),
    "untracked": lambda p: (p / "src" / "new.js").write_text("x\n"),
    "ignored": lambda p: (p / "debug.log").write_text("ignored\n"),
    "ignored-dir": lambda p: (p / "dist").mkdir() or (p / "dist" / "b.js").write_text("b\n"),
    "empty-dir": lambda p: (p / "empty").mkdir(),
    "nested-repo": lambda p: (p / "vendor").mkdir() or git(p / "vendor", "init", "-q"),
    "staged": _staged_only,
    "type-change": lambda p: (p / "a.txt").unlink() or os.symlink("src/app.js", p / "a.txt"),
}


@pytest.mark.parametrize("write", sorted(WRITES))
async def test_a_warm_worktree_someone_wrote_into_is_reset(repo_factory, write) -> None:
    """Whatever was written into an idle warm worktree (tracked content — even with the size and mtime
    kept —, a delete, a mode, an untracked, ignored or nested entry, an empty directory, the index) is
    detected, and the job gets the full reset: a tree identical to a fresh checkout, baseline exactly HEAD."""
    root = repo_factory(FILES)
    async with open_pool(root) as pool:
        await pool.warm()
        [idle] = pool.idle_paths
        WRITES[write](idle)
        wt = await create_worktree(root, "job-1", pool=pool)
        fresh = await create_worktree(root, "job-fresh")
        try:
            assert wt.path == idle and pool.hits == 1 and pool.untouched == 0
            assert tree(wt.path) == tree(fresh.path)
            assert run(wt.path, "status", "--porcelain", "--ignored", "--untracked-files=all") == ""
            assert run(wt.path, "rev-parse", "HEAD^{tree}") == run(root, "rev-parse", "HEAD^{tree}")
            assert [line[:2] for line in run(wt.path, "ls-files", "-v").splitlines()] == ["H "] * 6  # no flag left
            assert run(wt.path, "ls-tree", "-r", "--name-only", "HEAD") == run(root, "ls-files")  # the baseline
        finally:
            await remove_worktree(root, wt)
            await remove_worktree(root, fresh)
    assert only_main_worktree(root)


#: What neither ``checkout --force`` nor ``clean -ffdxq`` clears: git never lists an entry named ``.git``, and
#: keeps an index entry's assume-unchanged / skip-worktree flag.
HIDDEN = {
    "nested-repo-in-tracked-dir": lambda p: git(p / "src", "init", "-q"),
    # An index flag makes update-index --refresh, git status and checkout look away from a written file
    # (and it survives checkout --force).
    "assume-unchanged": lambda p: git(p, "update-index", "--assume-unchanged", "a.txt")
    or (p / "a.txt").write_text("written\n"),
    "skip-worktree": lambda p: git(p, "update-index", "--skip-worktree", "a.txt") or (p / "a.txt").write_text("w\n"),
    "skip-worktree-deleted": lambda p: git(p, "update-index", "--skip-worktree", "a.txt") or (p / "a.txt").unlink(),
    "gitfile-in-tracked-dir": lambda p: (p / "src" / "lib" / ".git").write_text("gitdir: ../../../elsewhere\n"),
}


@pytest.mark.parametrize("write", sorted(HIDDEN))
@pytest.mark.parametrize("when", ["idle", "after-a-job"])
async def test_a_warm_worktree_holding_what_a_reset_cannot_clear_is_never_handed_out(repo_factory, write, when) -> None:
    """A ``.git`` in a tracked directory of the warm worktree, or a flagged index entry (left idle, or by a
    job's check before the recycle), would reach the next job through both the untouched proof and a reset:
    the worktree is discarded and the job starts cold, in a tree identical to a fresh checkout."""
    root = repo_factory(FILES)
    async with open_pool(root) as pool:
        if when == "idle":
            await pool.warm()
            [used] = pool.idle_paths
            HIDDEN[write](used)
        else:
            first = await create_worktree(root, "job-0", pool=pool)  # a miss: cold, kept at release
            used = first.path
            HIDDEN[write](used)
            await pool.release(first)
            await settled(pool)
        wt = await create_worktree(root, "job-1", pool=pool)
        fresh = await create_worktree(root, "job-fresh")
        try:
            assert wt.path != used and pool.untouched == 0 and pool.discards == 1
            assert tree(wt.path) == tree(fresh.path)
            assert not os.path.lexists(used)
        finally:
            await remove_worktree(root, wt)
            await remove_worktree(root, fresh)
    assert only_main_worktree(root) and temp_base_empty()


async def test_reused_worktree_follows_a_moved_head(repo_factory) -> None:
    root = repo_factory(FILES)
    async with open_pool(root) as pool:
        first = await job_with_pool(root, pool, "job-1")  # a miss: created cold, kept at release
        await pool.release(first)
        await settled(pool)
        (root / "a.txt").write_text("moved\n")
        (root / "src" / "app.js").unlink()
        (root / "src" / "added.ts").write_text("export {};\n")
        git(root, "add", "-A")
        git(root, "commit", "-q", "-m", "move HEAD")
        new_head = run(root, "rev-parse", "HEAD").strip()
        assert new_head != first.head_oid
        reused = await create_worktree(root, "job-2", pool=pool)
        fresh = await create_worktree(root, "job-fresh")
        try:
            assert reused.path == first.path and pool.hits == 1 and pool.misses == 1
            assert reused.head_oid == new_head
            assert run(reused.path, "rev-parse", "HEAD^").strip() == new_head
            assert tree(reused.path) == tree(fresh.path)
            assert not (reused.path / "src" / "app.js").exists()
        finally:
            await remove_worktree(root, reused)
            await remove_worktree(root, fresh)
    assert only_main_worktree(root)


def _break_delete_dir(path: Path, admin: Path, root: Path) -> None:
    shutil.rmtree(path)


def _break_gitfile(path: Path, admin: Path, root: Path) -> None:
    (path / ".git").unlink()  # git run there would find the user's repository: must never happen


def _break_index(path: Path, admin: Path, root: Path) -> None:
    (admin / "index").write_bytes(b"DIRC garbage")


def _break_registration(path: Path, admin: Path, root: Path) -> None:
    shutil.rmtree(admin)


def _break_marker(path: Path, admin: Path, root: Path) -> None:
    (admin / MARKER_NAME).unlink()


def _break_symlink_to_root(path: Path, admin: Path, root: Path) -> None:
    shutil.rmtree(path)
    path.symlink_to(root, target_is_directory=True)


def _break_lock(path: Path, admin: Path, root: Path) -> None:
    (admin / "index.lock").write_bytes(b"")  # a git killed half-way


@pytest.mark.parametrize("breakage", [_break_delete_dir, _break_gitfile, _break_index, _break_registration,
                                      _break_marker, _break_symlink_to_root, _break_lock],
                         ids=lambda f: f.__name__[len("_break_"):])
async def test_a_broken_pooled_worktree_falls_back_cold(repo_factory, breakage) -> None:
    root = repo_factory(FILES)
    before = snapshot(root)
    async with open_pool(root) as pool:
        await pool.warm()
        [path] = pool.idle_paths
        [admin] = list((root / ".git" / "worktrees").iterdir())
        breakage(path, admin, root)
        wt = await create_worktree(root, "job-1", pool=pool)
        try:
            assert pool.hits == 0 and pool.discards == 1 and pool.idle_paths == []
            assert wt.path != path and (wt.path / "a.txt").read_text() == FILES["a.txt"]
            assert run(wt.path, "rev-parse", "HEAD^").strip() == wt.head_oid
            assert snapshot(root) == before
            assert not os.path.lexists(path)  # the broken one is gone (a symlink is unlinked, never followed)
        finally:
            await remove_worktree(root, wt)
    assert snapshot(root) == before
    assert only_main_worktree(root) and temp_base_empty()
    assert (root / "a.txt").read_text() == FILES["a.txt"]


async def test_a_pooled_worktree_is_never_handed_out_twice(repo_factory) -> None:
    root = repo_factory(FILES)
    head = run(root, "rev-parse", "HEAD").strip()
    async with open_pool(root) as pool:
        await pool.warm()
        got: list[Path | None] = []

        async def take() -> None:
            got.append(await pool.acquire(head))

        async with anyio.create_task_group() as tg:
            for _ in range(4):
                tg.start_soon(take)
        taken = [p for p in got if p is not None]
        assert len(got) == 4 and len(taken) == 1 and pool.hits == 1 and pool.misses == 3
        # Concurrent jobs: each gets its own worktree; the pool's goes to one of them.
        jobs: list[Worktree] = []

        async def job(n: int) -> None:
            jobs.append(await create_worktree(root, f"job-{n}", pool=pool))

        await pool.release(Worktree(taken[0], head, "", "x", admin_dir=_admin_of(root, taken[0])))
        async with anyio.create_task_group() as tg:
            for n in range(3):
                tg.start_soon(job, n)
        assert len({wt.path for wt in jobs}) == 3 and pool.hits == 2
        assert taken[0] in {wt.path for wt in jobs}
        for wt in jobs:
            await pool.release(wt)  # one is kept (capacity 1), the others are removed now
        await settled(pool)
        assert len(pool.idle_paths) == 1 and len(worktree_list(root)) == 2
    assert only_main_worktree(root) and temp_base_empty()


def _admin_of(root: Path, path: Path) -> Path:
    for admin in (root / ".git" / "worktrees").iterdir():
        if Path((admin / "gitdir").read_text().strip()).parent.resolve() == path.resolve():
            return admin
    raise AssertionError("no registration")


async def test_cancellation_while_warming_or_acquiring_leaves_nothing(repo_factory) -> None:
    root = repo_factory(FILES)
    head = run(root, "rev-parse", "HEAD").strip()
    for delay in (0, 0.002, 0.005, 0.01, 0.02, 0.04, 0.08, 0.16):
        async with open_pool(root) as pool:
            with anyio.move_on_after(delay):
                await pool.warm()
            with anyio.move_on_after(delay):
                path = await pool.acquire(head)
                if path is not None:  # the caller owns it now
                    await remove_worktree(root, Worktree(path, head, "", "x", admin_dir=_admin_of(root, path)))
        assert only_main_worktree(root), delay
        assert temp_base_empty(), delay


async def test_cancelled_background_recycle_leaves_nothing(repo_factory) -> None:
    root = repo_factory(FILES)
    for delay in (0, 0.005, 0.02, 0.08):
        async with anyio.create_task_group() as tg:
            pool = WorktreePool(root, task_group=tg, mode="on")
            wt = await create_worktree(root, "job-1", pool=pool)
            dirty_the_job(wt)
            await pool.release(wt)
            await anyio.sleep(delay)
            tg.cancel_scope.cancel()  # the engine stops: the recycle in flight is cancelled
        with anyio.CancelScope(shield=True):
            await pool.aclose()
        assert only_main_worktree(root), delay
        assert temp_base_empty(), delay


async def test_close_removes_idle_worktrees_and_later_releases(repo_factory) -> None:
    root = repo_factory(FILES)
    async with open_pool(root) as pool:
        wt = await create_worktree(root, "job-1", pool=pool)  # cold
        await pool.warm()
        [idle] = pool.idle_paths
        await pool.aclose()
        assert not idle.exists() and pool.idle_paths == []
        await pool.release(wt)  # closed: removed at once
        assert not wt.path.exists()
        assert await pool.acquire(wt.head_oid) is None
    assert only_main_worktree(root) and temp_base_empty()


async def test_off_and_auto_below_the_threshold_keep_nothing(repo_factory) -> None:
    root = repo_factory(FILES)
    for mode, min_files in (("off", 0), ("auto", 1000)):
        async with open_pool(root, mode=mode, min_files=min_files) as pool:
            await pool.warm()
            assert pool.idle_paths == []
            wt = await create_worktree(root, "job-1", pool=pool)
            await pool.release(wt)
            assert not wt.path.exists() and only_main_worktree(root)
    async with open_pool(root, mode="auto", min_files=len(FILES)) as pool:
        await pool.warm()
        assert len(pool.idle_paths) == 1
    assert [pool_mode(v) for v in ("1", "ON", "0", "off", None, "", "maybe")] == ["on", "on", "off", "off", "auto",
                                                                                    "auto", "auto"]


async def test_pooled_worktree_follows_node_modules_placement(repo_factory) -> None:
    root = repo_factory(FILES)
    async with open_pool(root) as pool:
        await pool.warm()
        [idle] = pool.idle_paths
        assert idle.parent == temp_base()
        (root / "node_modules" / "pkg").mkdir(parents=True)  # the user installed packages meanwhile
        wt = await create_worktree(root, "job-1", pool=pool)
        try:
            assert pool.discards == 1 and wt.path.parent == root / "node_modules" / ".spotpatch"
        finally:
            await pool.release(wt)
        await settled(pool)
        assert pool.idle_paths == [wt.path]  # kept, in the new placement
        again = await create_worktree(root, "job-2", pool=pool)
        try:
            assert again.path == wt.path and pool.hits == 1
        finally:
            await remove_worktree(root, again)
    assert only_main_worktree(root)


async def test_sweep_removes_a_dead_engines_pooled_worktree_but_never_a_live_ones(repo_factory) -> None:
    root = repo_factory(FILES)
    dead = await anyio.open_process([sys.executable, "-c", "pass"])
    await dead.wait()
    live = await anyio.open_process([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        async with open_pool(root, capacity=2) as pool:
            await pool.warm()
            await pool.warm()  # capacity 2: two idle worktrees
            paths = pool.idle_paths
            assert len(paths) == 2
            for path, pid in zip(paths, (dead.pid, live.pid), strict=True):
                marker_file = _admin_of(root, path) / MARKER_NAME
                marker = json.loads(marker_file.read_text())
                assert marker["jobId"].startswith("pool-")
                # As if another engine made it (its marker names its own pid and start).
                marker_file.write_text(json.dumps({**marker, "pid": pid, "start": process_start(pid)}))
            assert await sweep_orphans(root) == 1
            assert not paths[0].exists() and paths[1].exists()
            # Not ours any more: the pool never hands it out, nor removes what a live engine owns.
            assert await pool.acquire(run(root, "rev-parse", "HEAD").strip()) is None
            assert pool.discards == 1 and paths[1].exists()
        assert paths[1].exists()
    finally:
        live.kill()
        await live.wait()
    assert await sweep_orphans(root) == 1  # its owner died: now the sweep removes it
    assert only_main_worktree(root) and temp_base_empty()


async def _park_as_dead_engine(root: Path) -> tuple[Path, dict[str, object]]:
    """A warm worktree parked by an engine's shutdown (``aclose(park=True)``) whose process is gone."""
    dead = await anyio.open_process([sys.executable, "-c", "pass"])
    await dead.wait()
    async with open_pool(root) as pool:
        await pool.warm()
        [path] = pool.idle_paths
        await pool.aclose(park=True)
    marker_file = _admin_of(root, path) / MARKER_NAME
    marker = json.loads(marker_file.read_text())
    assert marker["idle"] is True and marker["head"] == run(root, "rev-parse", "HEAD").strip()
    marker = {**marker, "pid": dead.pid, "start": process_start(dead.pid)}
    marker_file.write_text(json.dumps(marker))
    assert not (_admin_of(root, path) / "logs" / "HEAD").exists()
    return path, marker


async def test_a_parked_warm_worktree_is_adopted_by_the_next_engine(repo_factory, monkeypatch) -> None:
    """Issue 17: shutdown keeps the idle warm worktree registered with a parked marker; the next start's sweep
    keeps it, and the new pool adopts it (no ``worktree add``) once proven clean at the same HEAD; the job
    then gets it untouched, identical to a fresh checkout."""
    from spotpatch_agent.worktree import pool as pool_module

    root = repo_factory(FILES)
    before = snapshot(root)
    path, _marker = await _park_as_dead_engine(root)
    assert await sweep_orphans(root, keep_parked=True) == 0 and path.exists()
    commands: list[list[str]] = []
    real = pool_module.run_git

    async def recorded(args, **kwargs):  # type: ignore[no-untyped-def]
        commands.append([a for a in args if not a.startswith(("--git-dir=", "--work-tree="))])
        return await real(args, **kwargs)

    monkeypatch.setattr(pool_module, "run_git", recorded)
    async with open_pool(root) as pool:
        await pool.warm()
        assert pool.idle_paths == [path] and not any(c[:2] == ["worktree", "add"] for c in commands)
        marker = json.loads((_admin_of(root, path) / MARKER_NAME).read_text())
        assert marker["pid"] == os.getpid() and "idle" not in marker
        wt = await create_worktree(root, "job-1", pool=pool)
        fresh = await create_worktree(root, "job-fresh")
        try:
            assert wt.path == path and pool.untouched == 1
            assert tree(wt.path) == tree(fresh.path)
            assert run(wt.path, "rev-parse", "HEAD^{tree}") == run(root, "rev-parse", "HEAD^{tree}")
        finally:
            await remove_worktree(root, wt)
            await remove_worktree(root, fresh)
    assert snapshot(root) == before
    assert only_main_worktree(root) and temp_base_empty()


def _move_head(root: Path) -> None:
    (root / "a.txt").write_text("moved\n")
    git(root, "commit", "-q", "-am", "move HEAD")


@pytest.mark.parametrize("change", ["head-moved", "written-into", "pool-off"])
async def test_a_stale_or_dirty_parked_worktree_is_moved_aside(repo_factory, change) -> None:
    """A parked worktree is never used when HEAD moved, when anything was written into it, or when the new
    engine keeps no pool: it is moved aside (and the pool, when on, warms a fresh one)."""
    root = repo_factory(FILES)
    path, _marker = await _park_as_dead_engine(root)
    if change == "head-moved":
        _move_head(root)
    elif change == "written-into":
        (path / "src" / "new.js").write_text("left behind\n")
    assert await sweep_orphans(root, keep_parked=True) == 0
    async with open_pool(root, mode="off" if change == "pool-off" else "on") as pool:
        await pool.warm()
        if change != "written-into":  # HEAD moved, or no pool: moved aside at once
            assert not path.exists()
        assert len(pool.idle_paths) == (0 if change == "pool-off" else 1)
        if pool.idle_paths:
            wt = await create_worktree(root, "job-1", pool=pool)  # written into: the proof fails at hand-out
            try:
                assert wt.path != path and not path.exists()
                if change == "written-into":  # adopted, then refused at hand-out: the job started cold
                    assert pool.untouched == 0 and pool.misses == 1 and pool.discards == 1
                assert (wt.path / "a.txt").read_text() == (root / "a.txt").read_text()
                assert not (wt.path / "src" / "new.js").exists()
            finally:
                await remove_worktree(root, wt)
    assert only_main_worktree(root) and temp_base_empty()


async def test_only_a_parked_marker_survives_the_start_up_sweep(repo_factory) -> None:
    """The start-up sweep keeps only a parked worktree: a crashed job's worktree, and a pool worktree that was
    being warmed or recycled (no ``idle``), are removed as always; without ``keep_parked`` (every other
    sweep) the parked one goes too; ``drop_parked`` removes it for an engine that opens no pool."""
    from spotpatch_agent.worktree.pool import drop_parked

    root = repo_factory(FILES)
    path, marker = await _park_as_dead_engine(root)
    marker_file = _admin_of(root, path) / MARKER_NAME
    for name, record in (("crashed job", {**marker, "jobId": "job_0123456789abcdef"}),
                         ("recycle in flight", {k: v for k, v in marker.items() if k != "idle"}),
                         ("no head", {k: v for k, v in marker.items() if k != "head"})):
        marker_file.write_text(json.dumps(record))
        assert await sweep_orphans(root, keep_parked=True) == 1, name
        assert not path.exists()
        path, marker = await _park_as_dead_engine(root)
        marker_file = _admin_of(root, path) / MARKER_NAME
    assert await sweep_orphans(root) == 1 and not path.exists()
    path, marker = await _park_as_dead_engine(root)
    await drop_parked(root)
    assert not path.exists()
    assert only_main_worktree(root) and temp_base_empty()


async def test_a_live_engines_parked_worktree_is_left_alone(repo_factory) -> None:
    root = repo_factory(FILES)
    path, marker = await _park_as_dead_engine(root)
    live = await anyio.open_process([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        marker_file = _admin_of(root, path) / MARKER_NAME
        marker_file.write_text(json.dumps({**marker, "pid": live.pid, "start": process_start(live.pid)}))
        assert await sweep_orphans(root, keep_parked=True) == 0
        async with open_pool(root) as pool:
            await pool.warm()
            assert path.exists() and pool.idle_paths and pool.idle_paths != [path]
            assert json.loads(marker_file.read_text())["pid"] == live.pid
    finally:
        live.kill()
        await live.wait()
    assert await sweep_orphans(root) == 1
    assert only_main_worktree(root) and temp_base_empty()


def test_engine_reuses_its_pooled_worktree_across_jobs(tmp_path: Path, private_tempdir: Path) -> None:
    """Through the real ``spotpatch-agent serve`` with the pool forced on: the second job runs in the first
    job's (recycled) worktree, both give the demo diff; shutdown parks the pooled worktree (issue 17) and the
    next engine's first job runs in it too; a sweep without ``keep_parked`` removes it."""
    from spotpatch_agent.demo.runner import TOUCHED, make_demo_project
    from spotpatch_agent.demo.script import demo_turns
    from spotpatch_agent.provider.scripted import ScriptedProviderServer
    from tests.engine_client import EngineProcess
    from tests.support.serve import KEY_ENV, config_for, create_job, job_worktrees

    project = make_demo_project(tmp_path / "demo-app")
    with ScriptedProviderServer(demo_turns() + demo_turns()) as server:
        eng = EngineProcess(env={KEY_ENV: "sk-test", "SPOTPATCH_WORKTREE_POOL": "1", "TMPDIR": str(private_tempdir)})
        try:
            eng.initialize(project, config_for(server))
            used: list[list[Path]] = []
            diffs = []
            for _ in range(2):
                job_id = create_job(eng)
                final = eng.wait_status(job_id, {"awaiting-review", "failed", "cancelled"}, timeout=60)
                assert final["status"] == "awaiting-review", eng.events(job_id)
                diffs.append(eng.call("job/diff", {"jobId": job_id})["files"])
                used.append(job_worktrees(project))  # the job's worktree, kept by the pool
                eng.call("job/close", {"jobId": job_id})
            assert diffs[0] == diffs[1] and diffs[0][0]["path"] == TOUCHED
            assert len(used[0]) == 1 and used[0] == used[1]
            assert git(project, "status", "--porcelain") == ""
            assert eng.close() == 0
        finally:
            eng.stop()
        assert job_worktrees(project) == used[0]  # parked for the next start
        marker = json.loads((_admin_of(project, used[0][0]) / MARKER_NAME).read_text())
        assert marker["idle"] is True and marker["head"] == git(project, "rev-parse", "HEAD").strip()
        server.add_turns(*demo_turns())
        eng2 = EngineProcess(env={KEY_ENV: "sk-test", "SPOTPATCH_WORKTREE_POOL": "1", "TMPDIR": str(private_tempdir)})
        try:
            eng2.initialize(project, config_for(server))
            job_id = create_job(eng2)
            final = eng2.wait_status(job_id, {"awaiting-review", "failed", "cancelled"}, timeout=60)
            assert final["status"] == "awaiting-review", eng2.events(job_id)
            assert eng2.call("job/diff", {"jobId": job_id})["files"] == diffs[0]
            assert job_worktrees(project) == used[0]  # adopted: the same directory, no second checkout
            eng2.call("job/close", {"jobId": job_id})
            assert eng2.close() == 0
        finally:
            eng2.stop()
    assert anyio.run(sweep_orphans, project) == 1
    assert job_worktrees(project) == [] and not used[0][0].exists()
    assert eng.stdout_faults == [] and eng2.stdout_faults == []


@pytest.mark.parametrize("original", ["parked", "running a job"])
async def test_a_copied_repositorys_registration_never_touches_the_originals_worktree(repo_factory, original) -> None:
    """``cp -r`` of a project copies its ``.git/worktrees/<name>`` registration of the parked warm worktree, whose
    directory is the original's (its ``.git`` names the original's registration). The copy's start-up sweep and
    pool drop only the copy's registration: the original's worktree — parked, or adopted by its live engine
    and running a job — keeps every file, and no process in it is killed."""
    from spotpatch_agent.worktree.pool import drop_parked

    root = repo_factory(FILES)
    path, marker = await _park_as_dead_engine(root)
    copy = root.parent / "copy"
    shutil.copytree(root, copy, symlinks=True)
    live = await anyio.open_process([sys.executable, "-c", "import time; time.sleep(60)"], cwd=path)
    try:
        if original == "running a job":
            (_admin_of(root, path) / MARKER_NAME).write_text(json.dumps(
                {**marker, "pid": live.pid, "start": process_start(live.pid), "idle": False,
                 "jobId": "job_0123456789abcdef"}))
        before = files(path)
        assert await sweep_orphans(copy, keep_parked=True) == 1  # the copy's registration alone
        async with open_pool(copy) as pool:
            await pool.warm()
            assert pool.idle_paths and path not in pool.idle_paths
        await drop_parked(copy)
        assert files(path) == before and live.returncode is None
        assert [p.resolve() for p in worktree_list(root)] == [root.resolve(), path.resolve()]
    finally:
        live.kill()
        await live.wait()
    assert await sweep_orphans(root) == 1 and only_main_worktree(root)


async def test_a_parked_worktree_being_adopted_is_left_to_its_adopter_by_another_engines_sweep(repo_factory) -> None:
    """Two engines start on one project: while one's pool takes the parked marker over (renamed to a claim
    naming it, so for a moment there is no marker), the other's start-up sweep must not judge the worktree
    unmarked and remove it from under the adopter. A claim left by an adopter that died does not keep it."""
    root = repo_factory(FILES)
    path, marker = await _park_as_dead_engine(root)
    admin = _admin_of(root, path)
    dead = await anyio.open_process([sys.executable, "-c", "pass"])
    await dead.wait()
    sidecar = path.parent / (path.name + ".owner")  # its creator is gone too (the engine that parked it)
    sidecar.write_text(json.dumps({**json.loads(sidecar.read_text()), "pid": dead.pid,
                                   "start": process_start(dead.pid)}))
    adopter = await anyio.open_process([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        claim = admin / f"{MARKER_NAME}.claim-{adopter.pid}-0123456789ab"
        os.rename(admin / MARKER_NAME, claim)  # the adopter's _claim, between its rename and its own marker
        assert await sweep_orphans(root, keep_parked=True) == 0
        assert path.exists() and admin.exists()
    finally:
        adopter.kill()
        await adopter.wait()
    os.rename(claim, admin / f"{MARKER_NAME}.claim-{dead.pid}-0123456789ab")  # that adopter was killed
    assert await sweep_orphans(root, keep_parked=True) == 1
    assert only_main_worktree(root) and temp_base_empty()


async def test_a_prepared_hand_out_is_taken_by_the_job_or_given_back(repo_factory, monkeypatch) -> None:
    """Issue 17: job/create has the pool prove the warm worktree beside its health check (``prepare``); the job's
    ``acquire`` of the same HEAD takes that proof without running it again; a refused job/create gives it back
    (``unprepare``: idle again, proven afresh at the next hand-out); a preparation nobody took is given back by
    the next one; another HEAD gets nothing stale (the prepared worktree is given back and reset)."""
    from spotpatch_agent.worktree import pool as pool_module

    root = repo_factory(FILES)
    head = run(root, "rev-parse", "HEAD").strip()
    proofs: list[str] = []
    real = pool_module.run_git

    async def recorded(args, **kwargs):  # type: ignore[no-untyped-def]
        if "ls-files" in args and "--others" in args:
            proofs.append("proof")
        return await real(args, **kwargs)

    monkeypatch.setattr(pool_module, "run_git", recorded)
    async with open_pool(root) as pool:
        await pool.warm()
        [idle] = pool.idle_paths
        await pool.prepare(head)
        await pool.unprepare()  # job/create refused
        assert pool.idle_paths == [idle] and pool.hits == 0 and proofs == ["proof"]
        await pool.prepare(head)
        await pool.prepare(head)  # the first was never taken: given back, proven again
        wt = await create_worktree(root, "job-1", pool=pool)
        try:
            assert wt.path == idle and pool.hits == 1 and pool.untouched == 1 and proofs == ["proof"] * 3
            assert run(wt.path, "status", "--porcelain", "--ignored", "--untracked-files=all") == ""
        finally:
            await pool.release(wt)
        await settled(pool)
        await pool.prepare(head)
        (root / "a.txt").write_text("moved\n")
        git(root, "commit", "-q", "-am", "move HEAD")
        again = await create_worktree(root, "job-2", pool=pool)  # another HEAD: given back, then reset to it
        try:
            assert again.path == idle and pool.hits == 2
            assert (again.path / "a.txt").read_text() == "moved\n"
            assert run(again.path, "rev-parse", "HEAD^") == run(root, "rev-parse", "HEAD")
        finally:
            await remove_worktree(root, again)
    assert only_main_worktree(root) and temp_base_empty()


async def test_a_sparse_checkout_gets_no_pool(repo_factory) -> None:
    """A sparse checkout's worktrees hold skip-worktree entries, which the untouched proof refuses: the pool
    stays off (even forced on) instead of making a checkout no job could take; jobs start cold, sparse like
    the user's tree."""
    root = repo_factory(FILES)
    git(root, "config", "core.sparseCheckout", "true")
    (root / ".git" / "info").mkdir(exist_ok=True)
    (root / ".git" / "info" / "sparse-checkout").write_text("/*\n!/docs/\n")
    git(root, "read-tree", "-mu", "HEAD")
    async with open_pool(root) as pool:
        await pool.warm()
        assert pool.idle_paths == []
        wt = await create_worktree(root, "job-1", pool=pool)
        try:
            assert pool.misses == 1 and pool.discards == 0 and not (wt.path / "docs").exists()
            assert (wt.path / "a.txt").read_text() == "alpha\nbeta\n"
        finally:
            await remove_worktree(root, wt)
    assert only_main_worktree(root) and temp_base_empty()
