"""Break attempts on issue 25's worktree scan (worktree/scan.py).

A directory the scan cannot list was skipped, but host git still reads in it.

worktree/scan.py skipped any directory below the root it could not list ("git, running as the same user,
cannot list it either"). Two ways a check makes that false:

- **a path past PATH_MAX from /, not from the worktree**: the scan lists ``<absolute root>/<rel>``, git lists
  ``<rel>`` from the worktree root. A check nests directories until the absolute path is over 4,095 bytes while
  the relative one is not, and leaves a FIFO ``.gitignore`` there: the scan saw nothing, and the fingerprint's
  ``git status -uall`` blocked on the FIFO until its timeout (the LOW stall issue 25 fixed, back again); a
  ``.git`` there was just as invisible. As root too.
- **a directory with search but no read permission** (``chmod 311``; a normal user, not root): the scan
  cannot list it, but git opens ``<dir>/.gitattributes`` by name for a tracked file below it.

Now a directory without read permission is made listable (``chmod u+rwx``: the worktree is the engine's),
and one that still cannot be listed is itself a hazard, removed through directory descriptors (no path is
joined, so PATH_MAX does not stop it) before host git reads the tree — never skipped.

And a name that is ``.git`` on HFS+ (``.g\u200cit``) or NTFS (``.git.``, ``GIT~1``) was not one to the scan.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from spotpatch_agent.worktree.scan import UNLISTED, after_check, left_behind, remove_hazards, scan_worktree
from tests.conftest import make_repo

CAP = 1 << 20
SEGMENT = "a" * 200


def long_tree(root: Path, segments: int = 20) -> str:
    """``segments`` directories of 200 characters below ``root`` (fd-relative, as a check can), a FIFO
    ``.gitignore`` at the bottom; returns the bottom's relative path (4,019 bytes: git can open it)."""
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(segments):
            os.mkdir(SEGMENT, dir_fd=fd)
            child = os.open(SEGMENT, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = child
        os.mkfifo(".gitignore", dir_fd=fd)
    finally:
        os.close(fd)
    return "/".join([SEGMENT] * segments)


@pytest.fixture
def deep_root(tmp_path: Path) -> Path:
    """A repository whose absolute path is long enough (over 95 bytes) that the tree below passes PATH_MAX."""
    root = tmp_path / ("r" * 100) / "work"
    root.mkdir(parents=True)
    make_repo(root, {"src/App.tsx": "export {}\n"})
    return root


def test_the_scan_names_a_directory_past_path_max_that_git_can_still_read(deep_root: Path) -> None:
    rel = long_tree(deep_root)
    assert len(os.fsencode(deep_root)) + 1 + len(rel) > 4095 > len(rel) + len("/.gitignore")
    hazards = scan_worktree(deep_root, max_file_bytes=CAP).hazards
    assert hazards, "a directory the scan cannot list was skipped"
    assert all(len(h.path) < 4096 and not h.path.startswith("/") for h in hazards)


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_after_a_check_such_a_tree_is_removed_before_git_blocks_on_it(deep_root: Path,
                                                                          anyio_backend: str) -> None:
    before = scan_worktree(deep_root, max_file_bytes=CAP)
    long_tree(deep_root)
    found = await after_check(deep_root, max_file_bytes=CAP, before=before)
    assert found and all(UNLISTED in h.reason and not h.large for h in found)
    assert "SpotPatch removed" in left_behind("c1", found) and str(deep_root) not in left_behind("c1", found)
    assert scan_worktree(deep_root, max_file_bytes=CAP).hazards == ()
    done = subprocess.run(["git", "status", "--porcelain=v2", "-uall", "--ignore-submodules=all"], cwd=deep_root,
                          capture_output=True, timeout=10, check=True)
    assert done.returncode == 0
    assert (deep_root / "src" / "App.tsx").read_text() == "export {}\n"


NOBODY = 65534


def scan_as(uid: int, root: Path) -> list[str]:
    """The hazards' paths of a scan run in a forked child as ``uid`` (no root permission override)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: drop root, scan, report, exit without running pytest's clean-up
        code = 1
        try:
            os.close(read)
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            found = [h.path for h in scan_worktree(root, max_file_bytes=CAP).hazards]
            os.write(write, "\n".join(found).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        out = pipe.read().decode()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    return [line for line in out.split("\n") if line]


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0 or not sys.platform.startswith("linux"),
                    reason="runs the scan as another user (nobody) to lose root's permission override")
def test_a_directory_without_read_permission_is_listed_anyway(tmp_path: Path) -> None:
    """As a normal user: ``chmod 311 src`` (search, no read) hid ``src/.gitattributes`` (a FIFO) from the scan,
    while git opens it by name for ``src/App.tsx``."""
    base = Path(os.path.realpath("/tmp")) / f"spotpatch-b25-{os.getpid()}-{tmp_path.name}"
    base.mkdir(mode=0o755)
    try:
        root = base / "work"
        (root / "src").mkdir(parents=True)
        (root / "src" / "App.tsx").write_text("export {}\n")
        os.mkfifo(root / "src" / ".gitattributes")
        for path in (root, root / "src", root / "src" / "App.tsx", root / "src" / ".gitattributes"):
            os.chown(path, NOBODY, NOBODY)
        os.chmod(root / "src", 0o311)
        assert "src/.gitattributes" in scan_as(NOBODY, root)
    finally:
        subprocess.run(["rm", "-rf", "--", str(base)], check=False)


def test_git_status_reads_the_planted_gitignore_there(deep_root: Path) -> None:
    """Why it matters: host git lists the directory by its relative path and blocks on the FIFO."""
    long_tree(deep_root)
    with pytest.raises(subprocess.TimeoutExpired):
        subprocess.run(["git", "status", "--porcelain=v2", "-uall", "--ignore-submodules=all"], cwd=deep_root,
                       capture_output=True, timeout=3, check=False)


def test_a_hazard_inside_a_directory_made_unreadable_is_removed(tmp_path: Path) -> None:
    """Removal opens every directory on the way from the root without following a symlink; a ``chmod 000``
    one (a normal user's check) is made its owner's again."""
    (tmp_path / "a" / "b").mkdir(parents=True)
    os.mkfifo(tmp_path / "a" / "b" / ".gitignore")
    hazards = scan_worktree(tmp_path, max_file_bytes=CAP).hazards
    os.chmod(tmp_path / "a", 0)
    try:
        remove_hazards(tmp_path, hazards)
    finally:
        os.chmod(tmp_path / "a", 0o755)
    assert not os.path.lexists(tmp_path / "a" / "b" / ".gitignore")


def test_removal_refuses_a_hazard_whose_directory_became_a_symlink(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    os.mkfifo(tmp_path / "a" / ".gitignore")
    hazards = scan_worktree(tmp_path, max_file_bytes=CAP).hazards
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    outside.mkdir()
    os.mkfifo(outside / ".gitignore")
    (tmp_path / "a" / ".gitignore").unlink()
    (tmp_path / "a").rmdir()
    (tmp_path / "a").symlink_to(outside)
    with pytest.raises(OSError, match="moved"):
        remove_hazards(tmp_path, hazards)
    assert os.path.lexists(outside / ".gitignore")


@pytest.mark.parametrize("name", [".g\u200cit", ".GI\ufeffT", ".git.", ".git ", "GIT~1", ".g\u206ait"])
def test_a_name_git_reads_as_dot_git_elsewhere_is_a_hazard(tmp_path: Path, name: str) -> None:
    """HFS+ ignores some code points in names (git's ``is_hfs_dotgit``), NTFS trailing dots and spaces and
    answers to the 8.3 name ``GIT~1`` (``is_ntfs_dotgit``): on those file systems each of these *is* the
    ``.git`` the scan looks for. The scan compared the casefolded name with ``.git`` only."""
    (tmp_path / "pkg" / name).mkdir(parents=True)
    (tmp_path / name).mkdir()
    found = sorted(h.path for h in scan_worktree(tmp_path, max_file_bytes=CAP).hazards)
    assert found == sorted([name, f"pkg/{name}"])
