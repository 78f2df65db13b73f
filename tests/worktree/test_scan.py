"""worktree/scan.py: what a check may not leave before host git reads a worktree again (issue 25).

The walk never follows a symlink and skips no directory; the root's own ``.git`` is the only one allowed;
large files count only when new or changed since the scan before the check; removal never follows a symlink.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from spotpatch_agent.worktree.scan import MAX_HAZARDS, remove_hazards, scan_worktree

CAP = 1000


def paths(root: Path, **kw: object) -> list[str]:
    return sorted(h.path for h in scan_worktree(root, max_file_bytes=CAP, **kw).hazards)  # type: ignore[arg-type]


def test_the_roots_own_git_is_allowed_as_a_file_or_a_directory(tmp_path: Path) -> None:
    (tmp_path / ".git").write_text("gitdir: /somewhere\n")
    assert paths(tmp_path) == []
    (tmp_path / ".git").unlink()
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "fifo").touch()  # never walked
    assert paths(tmp_path) == []


def test_a_git_anywhere_below_the_root_in_any_form_is_a_hazard(tmp_path: Path) -> None:
    (tmp_path / "a" / ".git").mkdir(parents=True)
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / ".git").write_text("gitdir: ../x\n")
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / ".GIT").mkdir()  # a repository to git on a case-insensitive file system
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / ".git").symlink_to(tmp_path / "a" / ".git")
    (tmp_path / "node_modules" / "pkg" / ".git").mkdir(parents=True)  # ignored directories are walked too
    assert paths(tmp_path) == ["a/.git", "b/.git", "c/.GIT", "d/.git", "node_modules/pkg/.git"]


def test_a_symlinked_root_git_is_a_hazard(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / ".git").symlink_to(tmp_path / "real")
    assert paths(tmp_path) == [".git"]


def test_special_files_are_hazards_and_symlinks_are_not_followed(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / ".gitattributes")
    (tmp_path / "src").mkdir()
    os.mkfifo(tmp_path / "src" / ".gitignore")
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    (outside / "repo" / ".git").mkdir(parents=True)
    (tmp_path / "link").symlink_to(outside)  # a symlink to a tree holding a .git: not followed
    scan = scan_worktree(tmp_path, max_file_bytes=CAP)
    assert sorted((h.path, h.reason.split(":")[0]) for h in scan.hazards) == [
        (".gitattributes", "a FIFO (named pipe)"), ("src/.gitignore", "a FIFO (named pipe)")]


def test_large_files_count_only_when_new_or_changed_since_the_scan_before(tmp_path: Path) -> None:
    (tmp_path / "asset.bin").write_bytes(b"x" * (CAP + 1))
    (tmp_path / "small.txt").write_bytes(b"x" * CAP)
    before = scan_worktree(tmp_path, max_file_bytes=CAP)
    assert before.hazards == () and [k[0] for k in before.large] == ["asset.bin"]
    assert paths(tmp_path, known_large=before.large) == []
    (tmp_path / "dump.bin").write_bytes(b"y" * (CAP + 1))
    time.sleep(0.01)
    (tmp_path / "asset.bin").write_bytes(b"z" * (CAP + 2))
    found = scan_worktree(tmp_path, max_file_bytes=CAP, known_large=before.large).hazards
    assert sorted(h.path for h in found) == ["asset.bin", "dump.bin"] and all(h.large for h in found)


def test_hazards_are_bounded(tmp_path: Path) -> None:
    for i in range(MAX_HAZARDS + 5):
        os.mkfifo(tmp_path / f"f{i}")
    assert len(paths(tmp_path)) == MAX_HAZARDS


def test_removal_deletes_without_following_symlinks(tmp_path: Path) -> None:
    root = tmp_path / "wt"
    (root / "a" / ".git" / "objects").mkdir(parents=True)
    (root / "a" / ".git" / "config").write_text("[filter \"x\"]\n")
    keep = tmp_path / "keep"
    keep.mkdir()
    (keep / "precious").write_text("mine\n")
    (root / "a" / ".git" / "objects" / "link").symlink_to(keep)
    os.mkfifo(root / "pipe")
    remove_hazards(root, scan_worktree(root, max_file_bytes=CAP).hazards)
    assert scan_worktree(root, max_file_bytes=CAP).hazards == ()
    assert (keep / "precious").read_text() == "mine\n" and (root / "a").is_dir()


def test_removal_refuses_a_path_whose_directory_became_a_symlink(tmp_path: Path) -> None:
    root = tmp_path / "wt"
    (root / "d" / ".git").mkdir(parents=True)
    hazards = scan_worktree(root, max_file_bytes=CAP).hazards
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / ".git").mkdir(parents=True)
    (root / "d" / ".git").rmdir()
    (root / "d").rmdir()
    (root / "d").symlink_to(elsewhere)
    with pytest.raises(OSError):
        remove_hazards(root, hazards)
    assert (elsewhere / ".git").is_dir()


def test_scan_cost_of_a_large_tree(tmp_path: Path) -> None:
    """Measured, not only bounded: 20,000 files in 400 directories (a mid-size app with a build output)."""
    for d in range(400):
        sub = tmp_path / f"d{d}"
        sub.mkdir()
        for f in range(50):
            (sub / f"f{f}.ts").write_bytes(b"x")
    started = time.perf_counter()
    assert scan_worktree(tmp_path, max_file_bytes=CAP).hazards == ()
    elapsed = time.perf_counter() - started
    print(f"scan of 20,000 files: {elapsed * 1000:.0f} ms")
    assert elapsed < 5
