"""Breaker regressions (issue 6): ways the engine's own git calls could write the user's repository."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from spotpatch_agent.worktree import dirfd
from spotpatch_agent.worktree.create import create_worktree
from spotpatch_agent.worktree.image_write import write_image
from spotpatch_agent.worktree.images import (
    ABSENT,
    NOT_REGULAR,
    Image,
    file_hash,
    new_tmp_name,
    read_image,
    remove_tmp,
    set_mode,
)
from spotpatch_agent.worktree.journal import (
    PathWrite,
    WritePlan,
    encode_plan,
    journal_dir,
)
from spotpatch_agent.worktree.placement import Worktree, make_job_dir
from spotpatch_agent.worktree.recovery import recover_pending
from spotpatch_agent.worktree.removal import remove_worktree
from spotpatch_agent.worktree.sweep import sweep_orphans
from tests.conftest import git
from tests.worktree._util import files, run, worktree_list

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


# ---------------------------------------------------------------- security review: writes outside the project,
# a journal that stopped the engine starting, a worktree killed before its ownership marker



def _swap_parent_after_first_look(monkeypatch: pytest.MonkeyPatch, root: Path, outside: Path) -> list[bool]:
    """Right after the code under test first looks at ``root/src`` (``lstat`` of the path, or an ``open``
    of ``src`` relative to a directory descriptor), replace ``src`` by a symlink to ``outside``."""
    swapped: list[bool] = []
    real_lstat, real_open = os.lstat, os.open

    def swap() -> None:
        if not swapped:
            swapped.append(True)
            os.rename(root / "src", root / "src.real")
            os.symlink(outside, root / "src")

    def lstat(path, *args, **kwargs):  # type: ignore[no-untyped-def]
        result = real_lstat(path, *args, **kwargs)
        if os.fspath(path) == os.fspath(root / "src"):
            swap()
        return result

    def open_(path, flags, mode=0o777, *, dir_fd=None):  # type: ignore[no-untyped-def]
        fd = real_open(path, flags, mode, dir_fd=dir_fd)
        if os.fspath(path) == os.fspath(root / "src") or (dir_fd is not None and os.fspath(path) == "src"):
            swap()
        return fd

    monkeypatch.setattr(os, "lstat", lstat)
    monkeypatch.setattr(os, "open", open_)
    return swapped


@pytest.mark.parametrize("operation", ["write", "new-dir-write", "delete", "read"])
def test_apply_io_never_follows_a_parent_swapped_for_a_symlink_after_its_check(
    repo_factory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, operation: str
) -> None:
    root = repo_factory({"src/a.txt": "mine\n", "src/sub/b.txt": "b\n"})
    outside = tmp_path / "outside"
    (outside / "sub").mkdir(parents=True)
    (outside / "a.txt").write_bytes(b"secret\n")
    before = {p.relative_to(outside).as_posix(): p.read_bytes() for p in outside.rglob("*") if p.is_file()}
    rel = {"write": "src/a.txt", "new-dir-write": "src/new/c.txt", "delete": "src/a.txt",
           "read": "src/a.txt"}[operation]
    swapped = _swap_parent_after_first_look(monkeypatch, root, outside)
    result: object = None
    try:
        if operation == "read":
            result = read_image(root, rel)
        else:
            write_image(root, rel, ABSENT if operation == "delete" else Image(b"pwned\n", 0o644), new_tmp_name())
    except OSError:
        pass
    monkeypatch.undo()
    assert swapped, "the race was not triggered"
    after = {p.relative_to(outside).as_posix(): p.read_bytes() for p in outside.rglob("*") if p.is_file()}
    assert after == before, "written or deleted through a parent swapped for a symlink"
    assert sorted(p.name for p in outside.iterdir()) == ["a.txt", "sub"]
    if operation == "read":
        assert result == NOT_REGULAR or (isinstance(result, Image) and result.data == b"mine\n")


def test_apply_io_refuses_a_pre_planted_symlinked_parent(repo_factory, tmp_path: Path) -> None:
    root = repo_factory({"a.txt": "a\n"})
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "a.txt").write_bytes(b"secret\n")
    tmp = new_tmp_name()
    (outside / tmp).write_bytes(b"not ours\n")
    os.chmod(outside / "a.txt", 0o644)
    (root / "src").symlink_to(outside, target_is_directory=True)
    (root / "deep").mkdir()
    (root / "deep" / "link").symlink_to(outside, target_is_directory=True)
    for rel in ("src/a.txt", "deep/link/a.txt", "src/new/x.txt"):
        assert read_image(root, rel) == NOT_REGULAR or (rel.endswith("x.txt") and read_image(root, rel) is ABSENT)
        assert file_hash(root, rel) in (NOT_REGULAR, None)
        for image in (Image(b"pwned\n", 0o644), ABSENT):
            with pytest.raises(OSError):
                write_image(root, rel, image, new_tmp_name())
        remove_tmp(root, rel, tmp)
    with pytest.raises(OSError):
        set_mode(root, "src/a.txt", 0o777)
    assert sorted(p.name for p in outside.iterdir()) == sorted(["a.txt", tmp])
    assert (outside / "a.txt").read_bytes() == b"secret\n" and (outside / tmp).read_bytes() == b"not ours\n"
    assert (outside / "a.txt").stat().st_mode & 0o777 == 0o644


def test_apply_io_uses_directory_descriptors_on_posix() -> None:
    if os.name == "posix":
        assert dirfd.DIR_FD


def _quarantined(root: Path) -> list[Path]:
    folder = journal_dir(root / ".git").parent / "quarantine"
    return sorted(folder.iterdir()) if folder.is_dir() else []


@pytest.mark.parametrize("raw", [
    b"null\n", b"[]\n", b'"s"\n', b"42\n", b"true\n", b"{}\n", b'{"format": "spot', b"", b"\xff\xfe\n",
    b"[" * 100_000 + b"\n",
    b'{"format":"spotpatch-journal","version":1,"jobId":"job_1","operation":"apply","head":"x","entries":null}\n',
    b'{"format":"spotpatch-journal","version":1,"jobId":"job_1","operation":"apply","head":"'
    + b"a" * 40 + b'","entries":[null]}\n',
    b'{"format":"spotpatch-journal","version":1,"jobId":"job_1","operation":"apply","head":"'
    + b"a" * 40 + b'","entries":[{"path":"a.txt","tmp":".spotpatch-0123456789abcdef.tmp","pre":[],"post":null}]}\n',
    b'{"format":"other","version":1}\n',
], ids=["null", "list", "string", "number", "true", "empty-object", "truncated", "empty", "not-utf8", "deep",
        "entries-null", "entry-null", "image-list", "foreign"])
async def test_a_malformed_journal_is_quarantined_and_reported_and_recovery_still_runs(
        repo_factory, raw: bytes) -> None:
    root = repo_factory({"a.txt": "a\n"})
    jdir = journal_dir(root / ".git")
    jdir.mkdir(parents=True)
    (jdir / "job_1.journal").write_bytes(raw)
    left = files(root)
    [report] = await recover_pending(root)  # never raises: the engine starts
    assert (report.job_id, report.outcome, report.paths) == ("job_1", "needs-attention", [])
    assert files(root) == left
    assert list(jdir.iterdir()) == []
    [kept] = _quarantined(root)
    assert kept.name.startswith("job_1.journal.") and kept.read_bytes() == raw  # never deleted, never applied


async def test_engine_configure_survives_a_journal_that_is_not_an_object(repo_factory) -> None:
    from spotpatch_agent.engine.service import EngineService
    from spotpatch_agent.protocol.models import TrustedConfig

    root = repo_factory({"a.txt": "a\n"})
    jdir = journal_dir(root / ".git")
    jdir.mkdir(parents=True)
    (jdir / "job_1.journal").write_bytes(b"null\n")
    service = EngineService(send_event=lambda _event: None)
    try:
        recovered = await service.configure(root, TrustedConfig())
    finally:
        await service.stop_all()
    assert [(r.job_id, r.outcome) for r in recovered] == [("job_1", "needs-attention")]


@pytest.mark.parametrize("kind", ["absolute", "dotdot", "dotgit", "dotgit-case", "dotgit-dot"])
async def test_a_journal_naming_a_path_outside_the_tree_is_never_acted_on(repo_factory, tmp_path: Path,
                                                                            kind: str) -> None:
    root = repo_factory({"a.txt": "a\n"})
    head = git(root, "rev-parse", "HEAD").strip()
    victim = {"absolute": tmp_path / "abs-victim.txt", "dotdot": root.parent / "dotdot-victim.txt",
              "dotgit": root / ".git" / "description", "dotgit-case": root / ".git" / "description",
              "dotgit-dot": root / ".git" / "description"}[kind]
    if not victim.exists():
        victim.write_bytes(b"the victim\n")
    rel = {"absolute": str(victim), "dotdot": "../dotdot-victim.txt", "dotgit": ".git/description",
           "dotgit-case": ".GIT/description", "dotgit-dot": ".git./description"}[kind]
    current = victim.read_bytes()
    # An Apply journal whose post-images are what is on disk now: a naive recovery would "roll back" both paths.
    plan = WritePlan("job_1", "apply", head, [
        PathWrite("a.txt", Image(b"OLD a\n", 0o644), Image(b"a\n", 0o644), new_tmp_name()),
        PathWrite(rel, Image(b"[core]\n\tfsmonitor = evil\n", 0o644), Image(current, 0o644), new_tmp_name()),
    ])
    jdir = journal_dir(root / ".git")
    jdir.mkdir(parents=True)
    (jdir / "job_1.journal").write_bytes(encode_plan(plan))
    [report] = await recover_pending(root)
    assert report.outcome == "needs-attention" and report.paths == []
    assert victim.read_bytes() == current and (root / "a.txt").read_bytes() == b"a\n"
    assert len(_quarantined(root)) == 1 and list(jdir.iterdir()) == []


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def _plant_sidecar(job_dir: Path, pid: int) -> Path:
    sidecar = job_dir.parent / (job_dir.name + ".owner")
    sidecar.unlink(missing_ok=True)
    sidecar.write_text(json.dumps({"owner": "spotpatch", "pid": pid, "createdAt": 0}))
    return sidecar


@pytest.mark.parametrize("placement", ["node_modules", "temp"])
async def test_sweep_removes_a_worktree_killed_between_add_and_marker_but_never_the_users(
    repo_factory, tmp_path: Path, placement: str
) -> None:
    root = repo_factory({".gitignore": "node_modules/\n", "a.txt": "a\n"})
    if placement == "node_modules":
        (root / "node_modules").mkdir()
    dead = _dead_pid()
    # Our crash window: the job directory and its sidecar exist, `git worktree add` ran, no admin marker yet.
    job_dir = await make_job_dir(root)
    assert job_dir.parent == (root / "node_modules" / ".spotpatch" if placement == "node_modules"
                              else Path(tempfile.gettempdir()) / "spotpatch-worktrees")
    sidecar = _plant_sidecar(job_dir, dead)
    git(root, "worktree", "add", "-q", "--detach", str(job_dir), "HEAD")
    # The user's worktrees outside our base dirs, even named like ours with a dead-owner sidecar beside them.
    users_dir = tmp_path / "users"
    users_dir.mkdir()
    users = users_dir / job_dir.name
    git(root, "worktree", "add", "-q", "--detach", str(users), "HEAD")
    users_sidecar = _plant_sidecar(users, dead)
    plain = tmp_path / "plain-users-wt"
    git(root, "worktree", "add", "-q", "--detach", str(plain), "HEAD")
    # A live owner's (this process's) unmarked worktree, e.g. one being created right now: never swept.
    live = await make_job_dir(root)
    git(root, "worktree", "add", "-q", "--detach", str(live), "HEAD")

    assert await sweep_orphans(root) == 1
    listed = [p.resolve() for p in worktree_list(root)]
    assert job_dir.resolve() not in listed and not job_dir.exists() and not sidecar.exists()
    assert users.resolve() in listed and (users / "a.txt").is_file() and users_sidecar.is_file()
    assert plain.resolve() in listed and (plain / "a.txt").is_file()
    assert live.resolve() in listed and (live / "a.txt").is_file()
    await remove_worktree(root, await _as_worktree(root, live))
    assert not live.exists() and not (live.parent / (live.name + ".owner")).exists()


async def _as_worktree(root: Path, path: Path) -> Worktree:
    return Worktree(path=path, head_oid="", baseline_oid="", job_id="x")


async def test_sweep_removes_the_empty_job_dir_and_sidecar_of_a_kill_before_worktree_add(repo_factory) -> None:
    root = repo_factory({"a.txt": "a\n"})
    job_dir = await make_job_dir(root)
    sidecar = _plant_sidecar(job_dir, _dead_pid())
    await sweep_orphans(root)
    assert not job_dir.exists() and not sidecar.exists()
