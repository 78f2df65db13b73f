"""repo_health (docs/design.md §8): clean, consent-required with counts, and every blocked reason."""

from __future__ import annotations

import hashlib
import os
import socket
import subprocess
from pathlib import Path

import pytest

from spotpatch_agent.errors import SpotPatchError
from spotpatch_agent.protocol.errors import ErrorCode
from spotpatch_agent.protocol.models import Limits
from spotpatch_agent.worktree.create import create_worktree
from spotpatch_agent.worktree.health import blocked_message, repo_health
from tests.conftest import git

pytestmark = pytest.mark.anyio

FILES = {"a.txt": "one\n", "src/b.js": "export const b = 1;\n"}


async def test_clean(repo_factory) -> None:
    root = repo_factory(FILES)
    health = await repo_health(root, Limits())
    assert health.state == "clean"
    assert health.reasons == []
    assert health.counts.model_dump() == {"staged": 0, "unstaged": 0, "untracked": 0, "conflicted": 0}


async def test_clean_through_a_symlinked_root(repo_factory, tmp_path: Path) -> None:
    root = repo_factory(FILES)
    link = tmp_path / "link"
    link.symlink_to(root)
    assert (await repo_health(link, Limits())).state == "clean"


async def test_dirty_counts(repo_factory) -> None:
    root = repo_factory(FILES)
    (root / "a.txt").write_text("staged\n")
    git(root, "add", "a.txt")
    (root / "a.txt").write_text("staged then edited\n")  # staged and unstaged
    (root / "src/b.js").write_text("export const b = 2;\n")  # unstaged
    (root / "new.txt").write_text("n\n")
    (root / "dir").mkdir()
    (root / "dir/deep.txt").write_text("d\n")
    health = await repo_health(root, Limits())
    assert health.state == "consent-required"
    assert health.reasons == []
    assert health.counts.model_dump() == {"staged": 1, "unstaged": 2, "untracked": 2, "conflicted": 0}


async def test_ignored_files_do_not_count(repo_factory) -> None:
    root = repo_factory({**FILES, ".gitignore": "node_modules/\n*.log\n"})
    (root / "node_modules/pkg").mkdir(parents=True)
    (root / "node_modules/pkg/index.js").write_text("x\n")
    (root / "debug.log").write_text("x\n")
    assert (await repo_health(root, Limits())).state == "clean"


async def test_not_a_repository(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    health = await repo_health(plain, Limits())
    assert (health.state, health.reasons) == ("blocked", ["not-a-git-repository"])
    missing = await repo_health(tmp_path / "missing", Limits())
    assert (missing.state, missing.reasons) == ("blocked", ["not-a-git-repository"])


async def test_subdirectory_is_not_top_level(repo_factory) -> None:
    root = repo_factory(FILES)
    health = await repo_health(root / "src", Limits())
    assert (health.state, health.reasons) == ("blocked", ["not-top-level"])


async def test_unborn_head(tmp_path: Path) -> None:
    root = tmp_path / "unborn"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    health = await repo_health(root, Limits())
    assert health.state == "blocked"
    assert health.reasons == ["head-unresolvable"]


def _diverge(root: Path) -> None:
    git(root, "checkout", "-q", "-b", "other")
    (root / "a.txt").write_text("other\n")
    git(root, "commit", "-qam", "other")
    git(root, "checkout", "-q", "main")
    (root / "a.txt").write_text("main\n")
    git(root, "commit", "-qam", "main")


async def test_merge_with_conflicts(repo_factory) -> None:
    root = repo_factory(FILES)
    _diverge(root)
    with pytest.raises(subprocess.CalledProcessError):
        git(root, "merge", "-q", "other")
    health = await repo_health(root, Limits())
    assert health.state == "blocked"
    assert "merge-in-progress" in health.reasons
    assert "conflicts" in health.reasons
    assert health.counts.conflicted == 1


async def test_merge_in_progress_without_conflicts(repo_factory) -> None:
    root = repo_factory(FILES)
    git(root, "checkout", "-q", "-b", "other")
    (root / "c.txt").write_text("c\n")
    git(root, "add", "c.txt")
    git(root, "commit", "-qm", "c")
    git(root, "checkout", "-q", "main")
    git(root, "merge", "-q", "--no-ff", "--no-commit", "other")
    health = await repo_health(root, Limits())
    assert health.state == "blocked"
    assert health.reasons == ["merge-in-progress"]


async def test_cherry_pick_with_conflict(repo_factory) -> None:
    root = repo_factory(FILES)
    _diverge(root)
    with pytest.raises(subprocess.CalledProcessError):
        git(root, "cherry-pick", "other")
    health = await repo_health(root, Limits())
    assert "cherry-pick-in-progress" in health.reasons and "conflicts" in health.reasons


async def test_rebase_with_conflict(repo_factory) -> None:
    root = repo_factory(FILES)
    _diverge(root)
    git(root, "checkout", "-q", "other")
    with pytest.raises(subprocess.CalledProcessError):
        git(root, "rebase", "-q", "main")
    health = await repo_health(root, Limits())
    assert "rebase-in-progress" in health.reasons and "conflicts" in health.reasons


@pytest.mark.parametrize(
    ("marker", "reason"),
    [
        ("MERGE_HEAD", "merge-in-progress"),
        ("rebase-merge/", "rebase-in-progress"),
        ("rebase-apply/", "rebase-in-progress"),
        ("CHERRY_PICK_HEAD", "cherry-pick-in-progress"),
        ("REVERT_HEAD", "revert-in-progress"),
        ("BISECT_LOG", "bisect-in-progress"),
        ("index.lock", "index-locked"),
    ],
)
async def test_operation_markers(repo_factory, marker: str, reason: str) -> None:
    root = repo_factory(FILES)
    target = root / ".git" / marker.rstrip("/")
    if marker.endswith("/"):
        target.mkdir()
    else:
        target.write_text(git(root, "rev-parse", "HEAD"))
    health = await repo_health(root, Limits())
    assert health.state == "blocked"
    assert health.reasons == [reason]


async def test_untracked_symlink(repo_factory) -> None:
    root = repo_factory(FILES)
    (root / "link.txt").symlink_to("a.txt")
    health = await repo_health(root, Limits())
    assert health.state == "blocked"
    assert health.reasons == ["untracked-symlink"]
    assert health.counts.untracked == 1


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="POSIX only")
async def test_untracked_fifo_blocks(repo_factory) -> None:
    # git status never lists FIFOs or sockets; a snapshot would miss them silently, so a walk finds them.
    root = repo_factory(FILES)
    os.mkfifo(root / "src" / "pipe")
    health = await repo_health(root, Limits())
    assert (health.state, health.reasons) == ("blocked", ["untracked-not-regular"])
    assert health.counts.untracked == 0  # git itself does not see it


@pytest.mark.skipif(not hasattr(socket, "AF_UNIX"), reason="POSIX only")
async def test_untracked_socket_blocks(repo_factory, tmp_path: Path, monkeypatch) -> None:
    root = repo_factory(FILES)
    monkeypatch.chdir(root)  # a short relative socket path (sun_path is at most ~100 bytes)
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind("dev.sock")
        health = await repo_health(root, Limits())
    assert (health.state, health.reasons) == ("blocked", ["untracked-not-regular"])


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="POSIX only")
async def test_ignored_fifos_do_not_block(repo_factory) -> None:
    root = repo_factory({**FILES, ".gitignore": "*.sock\ncache/\n"})
    os.mkfifo(root / "server.sock")  # ignored by a file pattern: found by the walk, dropped by check-ignore
    (root / "cache").mkdir()
    os.mkfifo(root / "cache" / "pipe")  # inside an ignored directory: never walked
    health = await repo_health(root, Limits())
    assert (health.state, health.reasons) == ("clean", [])


async def test_untracked_nested_repository_is_not_regular(repo_factory) -> None:
    root = repo_factory(FILES)
    nested = root / "vendor" / "lib"
    nested.mkdir(parents=True)
    git(nested, "init", "-q")
    health = await repo_health(root, Limits())
    assert (health.state, health.reasons) == ("blocked", ["untracked-not-regular"])


async def test_local_changes_over_file_limit(repo_factory) -> None:
    root = repo_factory(FILES)
    for name in ("x1", "x2", "x3"):
        (root / name).write_text("x\n")
    limits = Limits(local_snapshot_max_files=2)
    health = await repo_health(root, limits)
    assert (health.state, health.reasons) == ("blocked", ["local-changes-over-limit"])
    assert (await repo_health(root, Limits(local_snapshot_max_files=3))).state == "consent-required"


async def test_local_changes_over_byte_limit(repo_factory) -> None:
    root = repo_factory(FILES)
    (root / "a.txt").write_text("y" * 40)
    health = await repo_health(root, Limits(local_snapshot_max_bytes=39))
    assert (health.state, health.reasons) == ("blocked", ["local-changes-over-limit"])
    assert (await repo_health(root, Limits(local_snapshot_max_bytes=40))).state == "consent-required"


async def test_health_never_writes(repo_factory) -> None:
    root = repo_factory(FILES)
    # Same content, new mtime: a plain `git status` would want to refresh (rewrite) the index.
    stamp = (root / "a.txt").stat().st_mtime + 10
    os.utime(root / "a.txt", (stamp, stamp))
    (root / "untracked.txt").write_text("u\n")
    before = _tree_digest(root / ".git")
    await repo_health(root, Limits())
    assert _tree_digest(root / ".git") == before


def _tree_digest(folder: Path) -> dict[str, str]:
    out = {}
    for dirpath, _dirs, names in os.walk(folder):
        for name in names:
            path = Path(dirpath) / name
            out[str(path.relative_to(folder))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


async def test_consent_required_counts_deletions_and_staged_new_files(repo_factory) -> None:
    root = repo_factory(FILES)
    (root / "staged-new.txt").write_text("n\n")
    git(root, "add", "staged-new.txt")
    (root / "src/b.js").unlink()
    git(root, "rm", "-q", "--cached", "a.txt")  # staged deletion, the file stays as untracked
    health = await repo_health(root, Limits())
    assert (health.state, health.reasons) == ("consent-required", [])
    assert health.counts.model_dump() == {"staged": 2, "unstaged": 1, "untracked": 1, "conflicted": 0}


async def test_head_pointing_at_a_missing_ref(repo_factory) -> None:
    root = repo_factory(FILES)
    git(root, "symbolic-ref", "HEAD", "refs/heads/does-not-exist")
    health = await repo_health(root, Limits())
    assert health.state == "blocked"
    assert health.reasons == ["head-unresolvable"]


async def test_head_naming_a_missing_object(repo_factory) -> None:
    root = repo_factory(FILES)
    (root / ".git" / "HEAD").write_text("0123456789abcdef0123456789abcdef01234567\n")  # detached, no such commit
    health = await repo_health(root, Limits())
    assert (health.state, health.reasons) == ("blocked", ["head-unresolvable"])


async def test_revert_with_conflict(repo_factory) -> None:
    root = repo_factory(FILES)
    (root / "a.txt").write_text("two\n")
    git(root, "commit", "-qam", "two")
    (root / "a.txt").write_text("three\n")
    git(root, "commit", "-qam", "three")
    with pytest.raises(subprocess.CalledProcessError):
        git(root, "revert", "--no-edit", "HEAD~1")
    health = await repo_health(root, Limits())
    assert "revert-in-progress" in health.reasons and "conflicts" in health.reasons


async def test_bisect_in_progress(repo_factory) -> None:
    root = repo_factory(FILES)
    (root / "a.txt").write_text("two\n")
    git(root, "commit", "-qam", "two")
    git(root, "bisect", "start", "HEAD", "HEAD~1")
    health = await repo_health(root, Limits())
    assert health.state == "blocked" and "bisect-in-progress" in health.reasons


async def test_index_lock_is_named_and_never_deleted(repo_factory) -> None:
    root = repo_factory(FILES)
    lock = root / ".git" / "index.lock"
    lock.write_bytes(b"held by another git process")
    health = await repo_health(root, Limits())
    assert (health.state, health.reasons) == ("blocked", ["index-locked"])
    message = blocked_message(health)
    assert message.startswith("index-locked (.git/index.lock): .git/index.lock exists: another git process")
    assert health.details[0].paths == [".git/index.lock"] and "remove it by hand" in health.details[0].fix
    assert str(root) not in message
    with pytest.raises(SpotPatchError) as info:
        await create_worktree(root, "job-1", include_local_changes=True)
    assert info.value.code is ErrorCode.REPO_BLOCKED
    assert ".git/index.lock" in info.value.message and str(root) not in info.value.message
    assert lock.read_bytes() == b"held by another git process"  # never deleted, never rewritten


async def test_staged_symlink_blocks(repo_factory) -> None:
    root = repo_factory(FILES)
    (root / "link").symlink_to("a.txt")
    git(root, "add", "link")
    health = await repo_health(root, Limits())
    assert (health.state, health.reasons) == ("blocked", ["local-symlink"])


async def test_file_replaced_by_symlink_blocks(repo_factory) -> None:
    root = repo_factory(FILES)
    (root / "a.txt").unlink()
    (root / "a.txt").symlink_to("/etc/hostname")
    health = await repo_health(root, Limits())
    assert (health.state, health.reasons) == ("blocked", ["local-symlink"])


async def test_changed_submodule_needs_consent(repo_factory, tmp_path: Path) -> None:
    sub = repo_factory({"s.txt": "s\n"}, name="sub-origin")
    root = repo_factory(FILES)
    git(root, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(sub), "sub")
    git(root, "commit", "-qm", "add sub")
    assert (await repo_health(root, Limits())).state == "clean"
    (root / "sub" / "s.txt").write_text("dirty submodule\n")
    health = await repo_health(root, Limits())
    assert (health.state, health.reasons) == ("consent-required", [])
    assert health.counts.unstaged == 1
