"""include-local-changes (docs/design.md §8): the user's staged, unstaged and untracked state becomes the job's
baseline, the user's repository is never written, and every race between snapshot and re-verification fails."""

from __future__ import annotations

import os
import tempfile
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from spotpatch_agent.errors import SpotPatchError
from spotpatch_agent.protocol.errors import ErrorCode
from spotpatch_agent.protocol.models import Limits
from spotpatch_agent.worktree import snapshot as snapshot_module
from spotpatch_agent.worktree.create import create_worktree
from spotpatch_agent.worktree.placement import Worktree
from spotpatch_agent.worktree.removal import remove_worktree
from spotpatch_agent.worktree.result import result_diff
from spotpatch_agent.worktree.snapshot import read_regular, take_snapshot
from tests.conftest import git
from tests.worktree._util import files, run, snapshot, worktree_list

pytestmark = pytest.mark.anyio

FILES: dict[str, str | bytes] = {
    "a.txt": "alpha\nbeta\ngamma\n",
    "src/app.js": "export const n = 1;\n",
    "old.txt": "to be deleted\n",
    "img.bin": bytes(range(256)),
    "docs/naïve file.md": "# title\n",
}


def user_state(root: Path) -> dict[str, object]:
    """Everything that must not change in the user's repository: files, index (bytes and mtime),
    ``git diff --cached``, status, HEAD, refs."""
    index = root / ".git" / "index"
    return {**snapshot(root), "index_mtime": index.stat().st_mtime_ns}


def worktree_files(wt: Worktree) -> dict[str, bytes | str]:
    found = files(wt.path)
    del found[".git"]  # the worktree's gitfile
    return found


@asynccontextmanager
async def consent_worktree(root: Path, **kwargs: object) -> AsyncIterator[Worktree]:
    """A worktree created with ``include_local_changes=True``; asserts it mirrors the user's files and
    that the user's repository is byte-for-byte unchanged (index included)."""
    before = user_state(root)
    wt = await create_worktree(root, "job-local", include_local_changes=True, **kwargs)  # type: ignore[arg-type]
    try:
        assert user_state(root) == before
        assert worktree_files(wt) == files(root)
        assert run(wt.path, "rev-parse", "HEAD^").strip() == wt.head_oid
        assert await result_diff(wt) == ("", [])  # the user's changes are baseline, not result
        assert run(wt.path, "status", "--porcelain", "--untracked-files=all") == ""
        yield wt
    finally:
        await remove_worktree(root, wt)
    assert user_state(root) == before


async def test_staged_change(repo_factory) -> None:
    root = repo_factory(FILES)
    (root / "a.txt").write_text("alpha\nSTAGED\ngamma\n")
    git(root, "add", "a.txt")
    (root / "staged-new.txt").write_text("new and staged\n")
    git(root, "add", "staged-new.txt")
    async with consent_worktree(root) as wt:
        assert (wt.path / "a.txt").read_text() == "alpha\nSTAGED\ngamma\n"
        assert (wt.path / "staged-new.txt").read_text() == "new and staged\n"


async def test_unstaged_change_over_a_staged_one(repo_factory) -> None:
    root = repo_factory(FILES)
    (root / "a.txt").write_text("alpha\nSTAGED\ngamma\n")
    git(root, "add", "a.txt")
    (root / "a.txt").write_text("alpha\nSTAGED\ngamma\nUNSTAGED\n")
    (root / "src/app.js").write_text("export const n = 2;\n")
    async with consent_worktree(root) as wt:
        assert (wt.path / "a.txt").read_text() == "alpha\nSTAGED\ngamma\nUNSTAGED\n"  # the working-tree version
        assert (wt.path / "src/app.js").read_text() == "export const n = 2;\n"


async def test_untracked_files(repo_factory) -> None:
    root = repo_factory(FILES)
    (root / "notes.txt").write_text("local notes\n")
    (root / "new" / "deep").mkdir(parents=True)
    (root / "new" / "deep" / "x.ts").write_text("export {};\n")
    (root / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (root / "run.sh").chmod(0o755)
    async with consent_worktree(root) as wt:
        assert (wt.path / "new/deep/x.ts").read_text() == "export {};\n"
        assert os.access(wt.path / "run.sh", os.X_OK)
        assert run(wt.path, "ls-files", "-s", "run.sh").startswith("100755 ")


async def test_deletions(repo_factory) -> None:
    root = repo_factory(FILES)
    (root / "old.txt").unlink()  # unstaged deletion
    git(root, "rm", "-q", "src/app.js")  # staged deletion
    git(root, "rm", "-q", "--cached", "a.txt")  # deleted from the index only: stays as an untracked file
    async with consent_worktree(root) as wt:
        assert not (wt.path / "old.txt").exists()
        assert not (wt.path / "src/app.js").exists()
        assert (wt.path / "a.txt").read_text() == FILES["a.txt"]


async def test_binary_files(repo_factory) -> None:
    root = repo_factory(FILES)
    (root / "img.bin").write_bytes(bytes(reversed(range(256))) * 3)
    (root / "new.bin").write_bytes(b"\x00\xff\x00 untracked binary \r\n\x1b")
    async with consent_worktree(root) as wt:
        assert (wt.path / "img.bin").read_bytes() == bytes(reversed(range(256))) * 3
        assert (wt.path / "new.bin").read_bytes() == b"\x00\xff\x00 untracked binary \r\n\x1b"


async def test_non_ascii_and_space_names(repo_factory) -> None:
    root = repo_factory(FILES)
    (root / "docs/naïve file.md").write_text("# changed title\n")
    (root / "docs/日本語 メモ.txt").write_text("untracked\n")
    (root / "dir with space").mkdir()
    (root / "dir with space" / "file 'quoted\".txt").write_text("q\n")
    async with consent_worktree(root) as wt:
        assert (wt.path / "docs/naïve file.md").read_text() == "# changed title\n"
        assert (wt.path / "docs/日本語 メモ.txt").read_text() == "untracked\n"
        assert (wt.path / "dir with space" / "file 'quoted\".txt").read_text() == "q\n"


async def test_result_diff_holds_only_the_agent_increment(repo_factory) -> None:
    root = repo_factory(FILES)
    (root / "a.txt").write_text("alpha\nLOCAL\ngamma\n")
    git(root, "add", "a.txt")
    (root / "src/app.js").write_text("export const n = 2; // local\n")
    (root / "notes.txt").write_text("local notes\n")
    async with consent_worktree(root) as wt:
        (wt.path / "a.txt").write_text("alpha\nLOCAL\ngamma\nAGENT\n")
        (wt.path / "agent.txt").write_text("agent\n")
        diff, stats = await result_diff(wt)
        assert {s.path: (s.status, s.added, s.removed) for s in stats} == {
            "a.txt": ("modified", 1, 0),
            "agent.txt": ("added", 1, 0),
        }
        assert " LOCAL\n" in diff and "+AGENT\n" in diff  # the local line is context, not change
        assert "-beta" not in diff and "+LOCAL" not in diff
        assert "app.js" not in diff and "notes.txt" not in diff


async def test_stat_only_changes_never_rewrite_the_users_index(repo_factory) -> None:
    # `git diff HEAD` (porcelain) would refresh and rewrite the index here even with GIT_OPTIONAL_LOCKS=0.
    root = repo_factory(FILES)
    stamp = (root / "a.txt").stat().st_mtime + 100
    os.utime(root / "a.txt", (stamp, stamp))
    (root / "notes.txt").write_text("n\n")
    async with consent_worktree(root):
        pass


async def test_without_consent_a_dirty_tree_needs_consent(repo_factory) -> None:
    root = repo_factory(FILES)
    (root / "notes.txt").write_text("n\n")
    before = user_state(root)
    with pytest.raises(SpotPatchError) as info:
        await create_worktree(root, "job-1")
    assert info.value.code is ErrorCode.CONSENT_REQUIRED
    assert "localChangesConsent" in info.value.message
    assert user_state(root) == before and len(worktree_list(root)) == 1


async def test_consent_on_a_clean_tree_is_plain_isolation(repo_factory) -> None:
    root = repo_factory(FILES)
    async with consent_worktree(root):
        pass


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="POSIX only")
async def test_blocked_reasons_are_not_overridden_by_consent(repo_factory) -> None:
    root = repo_factory(FILES)
    (root / "notes.txt").write_text("n\n")
    os.mkfifo(root / "pipe")
    with pytest.raises(SpotPatchError) as info:
        await create_worktree(root, "job-1", include_local_changes=True)
    assert info.value.code is ErrorCode.REPO_BLOCKED and "untracked-not-regular" in info.value.message
    assert len(worktree_list(root)) == 1


# ---------------------------------------------------------------- snapshot limits and links


async def test_snapshot_refuses_over_the_byte_limit(repo_factory) -> None:
    root = repo_factory(FILES)
    head = run(root, "rev-parse", "HEAD").strip()
    (root / "big.txt").write_text("x" * 100)
    with pytest.raises(SpotPatchError) as info:
        await take_snapshot(root, head, Limits(local_snapshot_max_bytes=99))
    assert info.value.code is ErrorCode.REPO_BLOCKED and "local-changes-over-limit" in info.value.message
    assert (await take_snapshot(root, head, Limits(local_snapshot_max_bytes=100))).untracked == ("big.txt",)


async def test_snapshot_refuses_over_the_file_limit(repo_factory) -> None:
    root = repo_factory(FILES)
    head = run(root, "rev-parse", "HEAD").strip()
    for name in ("x1", "x2", "x3"):
        (root / name).write_text("x\n")
    with pytest.raises(SpotPatchError) as info:
        await take_snapshot(root, head, Limits(local_snapshot_max_files=2))
    assert "local-changes-over-limit" in info.value.message


def test_reads_never_follow_symlinks(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "f.txt").write_text("secret\n")
    (tmp_path / "link.txt").symlink_to(tmp_path / "real" / "f.txt")
    (tmp_path / "linkdir").symlink_to(tmp_path / "real", target_is_directory=True)
    assert read_regular(tmp_path, "real/f.txt", 100) == (b"secret\n", False)
    assert read_regular(tmp_path, "missing.txt", 100) is None
    for rel in ("link.txt", "linkdir/f.txt"):
        with pytest.raises(SpotPatchError) as info:
            read_regular(tmp_path, rel, 100)
        assert info.value.code is ErrorCode.REPO_BLOCKED and str(tmp_path) not in info.value.message
    if hasattr(os, "mkfifo"):
        os.mkfifo(tmp_path / "pipe")
        with pytest.raises(SpotPatchError):
            read_regular(tmp_path, "pipe", 100)  # opened non-blocking: never hangs


# ---------------------------------------------------------------- races (snapshot.BEFORE_VERIFY seam)


async def _assert_race(root: Path, monkeypatch: pytest.MonkeyPatch, change: Callable[[], object], what: str) -> None:
    """Create with consent while ``change`` runs between install and re-verification; must fail cleanly."""
    hook_ran: list[bool] = []

    async def hook() -> None:
        change()
        hook_ran.append(True)

    monkeypatch.setattr(snapshot_module, "BEFORE_VERIFY", hook)
    with pytest.raises(SpotPatchError) as info:
        await create_worktree(root, "job-race", include_local_changes=True)
    assert hook_ran == [True]
    err = info.value
    assert err.code is ErrorCode.REPO_BLOCKED and err.retryable
    assert err.message == f"the working tree changed while the job was starting ({what}); try again"
    assert len(worktree_list(root)) == 1
    base = Path(tempfile.gettempdir()) / "spotpatch-worktrees"
    assert not base.exists() or list(base.iterdir()) == []


def _dirty(root: Path) -> None:
    (root / "a.txt").write_text("alpha\nLOCAL\ngamma\n")
    (root / "notes.txt").write_text("local notes\n")


async def test_race_head_moved(repo_factory, monkeypatch) -> None:
    root = repo_factory(FILES)
    _dirty(root)
    # Only unstaged and untracked changes: the empty commit moves HEAD without changing the diff.
    await _assert_race(
        root, monkeypatch, lambda: git(root, "commit", "-q", "--allow-empty", "-m", "moved"), "HEAD moved"
    )


async def test_race_diff_changed(repo_factory, monkeypatch) -> None:
    root = repo_factory(FILES)
    _dirty(root)
    await _assert_race(
        root, monkeypatch, lambda: (root / "src/app.js").write_text("edited meanwhile\n"),
        "the staged or unstaged changes differ",
    )


async def test_race_untracked_path_set_changed(repo_factory, monkeypatch) -> None:
    root = repo_factory(FILES)
    _dirty(root)
    await _assert_race(
        root, monkeypatch, lambda: (root / "late.txt").write_text("new\n"), "untracked files were added or removed"
    )


async def test_race_digest_changed(repo_factory, monkeypatch) -> None:
    # Same path set, same diff (untracked content is not in it): only the digest tells.
    root = repo_factory(FILES)
    _dirty(root)
    await _assert_race(
        root, monkeypatch, lambda: (root / "notes.txt").write_text("LOCAL NOTES\n"), "notes.txt changed"
    )


async def test_unreproducible_change_is_not_a_race(repo_factory) -> None:
    # A clean filter that strips trailing blanks: git stores (and the diff carries) other bytes than the
    # user's file holds, so the worktree can never match, however often the user retries.
    root = repo_factory({**FILES, ".gitattributes": "*.txt filter=strip\n"})
    git(root, "config", "filter.strip.clean", "sed -e 's/ *$//'")
    (root / "a.txt").write_text("alpha\nlocal   \n")
    with pytest.raises(SpotPatchError) as info:
        await create_worktree(root, "job-1", include_local_changes=True)
    assert info.value.code is ErrorCode.REPO_BLOCKED and not info.value.retryable
    assert info.value.message.startswith("the local change to a.txt could not be reproduced byte for byte")
    assert len(worktree_list(root)) == 1

