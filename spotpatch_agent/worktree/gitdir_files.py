"""Files SpotPatch keeps under a repository's git directory — ``<git-dir>/spotpatch/…``: the write lock, the
audit ledger (``audit/``), the crash journal (``journal/``), its quarantine (``quarantine/``), saved reviews
(``reviews/``) — opened without ever following a symlink (issue 25; docs/security.md §2 "Files under the
git directory").

The git directory itself is opened as it is (a repository may live behind a symlinked folder); from there
each component is opened relative to its parent with ``O_DIRECTORY|O_NOFOLLOW`` (made ``0700`` when asked
to create it), and files relative to their folder with ``O_NOFOLLOW``. A component that is a symlink or not
a directory raises :class:`UnsafeGitDirEntry`, whose message names it relative to the git directory and
says how to fix it; ``doctor`` reports the same (:func:`unsafe_entries`). Where directories cannot be
opened (Windows: :data:`~spotpatch_agent.worktree.dirfd.DIR_FD` false) each component is checked with
``lstat`` and the folder is used by path.

Use :func:`folder` for every file SpotPatch writes or reads under the git directory::

    with folder(common_dir, ("spotpatch", "audit"), create=True) as where:
        fd = where.open("job_….jsonl", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from spotpatch_agent.worktree.dirfd import DIR_FD, ROOT_FLAGS, open_subdir, write_fully

__all__ = ["SPOTPATCH_DIR", "SUBDIRS", "Folder", "UnsafeGitDirEntry", "folder", "read_small", "split_git_path",
           "unsafe_entries", "write_replacing"]

#: SpotPatch's directory under a git directory.
SPOTPATCH_DIR = "spotpatch"
#: The directories SpotPatch keeps in it (``doctor`` checks each).
SUBDIRS = ("audit", "journal", "quarantine", "reviews")
#: The files SpotPatch keeps directly in it.
FILES = ("write.lock",)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


class UnsafeGitDirEntry(OSError):
    """A path component under the git directory is a symlink or not a directory (or a file SpotPatch
    opens there is a symlink): it is never followed. ``shown`` is the component relative to the git
    directory (``spotpatch/audit``); the message says how to fix it."""

    def __init__(self, shown: str, *, file: bool = False) -> None:
        what = "a symlink" if file else "a symlink or not a directory"
        again = "its file" if file else "it again as a directory"
        super().__init__(errno.ELOOP, f"<git dir>/{shown} is {what}; SpotPatch never follows one there: "
                                      f"remove it (SpotPatch makes {again})")
        self.shown = shown


class Folder:
    """An opened folder under the git directory: files are named relative to it, never through a symlink.
    ``fd`` is its descriptor (None where directories cannot be opened; then ``path`` is used)."""

    def __init__(self, path: Path, fd: int | None, shown: str) -> None:
        self.path = path
        self.fd = fd
        self.shown = shown

    def open(self, name: str, flags: int, mode: int = 0o600) -> int:
        """``os.open`` of ``name`` in this folder with ``O_NOFOLLOW|O_CLOEXEC`` added. A symlink raises
        :class:`UnsafeGitDirEntry`; other errors are the OS's."""
        flags |= _NOFOLLOW | _CLOEXEC
        try:
            if self.fd is not None:
                return os.open(name, flags, mode, dir_fd=self.fd)
            _refuse_link(self.path / name, f"{self.shown}/{name}", missing_ok=True)  # a file: only no link
            return os.open(self.path / name, flags, mode)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.EMLINK) and not isinstance(exc, UnsafeGitDirEntry):
                raise UnsafeGitDirEntry(f"{self.shown}/{name}", file=True) from None
            raise

    def names(self) -> list[str]:
        """The names in this folder (sorted)."""
        return sorted(os.listdir(self.fd if self.fd is not None else self.path))

    def lstat(self, name: str) -> os.stat_result:
        if self.fd is not None:
            return os.stat(name, dir_fd=self.fd, follow_symlinks=False)
        return os.lstat(self.path / name)

    def unlink(self, name: str) -> None:
        if self.fd is not None:
            os.unlink(name, dir_fd=self.fd)
        else:
            os.unlink(self.path / name)

    def rename(self, name: str, to: Folder, new_name: str) -> None:
        """Rename ``name`` here to ``new_name`` in ``to`` (both opened folders: no symlink on either path)."""
        if self.fd is not None and to.fd is not None:
            os.replace(name, new_name, src_dir_fd=self.fd, dst_dir_fd=to.fd)
        else:
            os.replace(self.path / name, to.path / new_name)

    def fsync(self) -> None:
        """Make the folder's entries durable (nothing where directories cannot be opened)."""
        if self.fd is not None:
            os.fsync(self.fd)


def split_git_path(directory: Path) -> tuple[Path, tuple[str, ...]]:
    """``(git dir, parts)`` of a folder under it: the part from the last ``spotpatch`` component on
    (``<git>/spotpatch/audit`` → ``(<git>, ("spotpatch", "audit"))``); a folder elsewhere (a test's own
    directory) → ``(its parent, (its name,))``."""
    parts = directory.parts
    for index in range(len(parts) - 1, 0, -1):
        if parts[index] == SPOTPATCH_DIR:
            return Path(*parts[:index]), tuple(parts[index:])
    return directory.parent, (directory.name,)


@contextmanager
def folder(git_dir: Path, parts: Sequence[str], *, create: bool) -> Iterator[Folder]:
    """The folder ``git_dir/parts…``, each component opened relative to the one before without following a
    symlink (made ``0700`` when missing and ``create``). Raises :class:`UnsafeGitDirEntry` for a symlink or
    non-directory on the way, ``FileNotFoundError`` when one is missing and not ``create``, ``OSError``
    otherwise. The descriptors are closed on exit."""
    shown = "/".join(parts)
    if not DIR_FD:
        path = git_dir
        for index, part in enumerate(parts):
            path = path / part
            if create:
                try:
                    path.mkdir(mode=0o700)
                except FileExistsError:
                    pass
            _refuse_link(path, "/".join(parts[: index + 1]), missing_ok=False)
        yield Folder(path, None, shown)
        return
    fds = [os.open(git_dir, ROOT_FLAGS)]
    try:
        for index, part in enumerate(parts):
            fds.append(_open_dir(fds[-1], part, create, "/".join(parts[: index + 1])))
        yield Folder(git_dir.joinpath(*parts), fds[-1], shown)
    finally:
        for fd in fds:
            os.close(fd)


def _open_dir(parent: int, name: str, create: bool, shown: str) -> int:
    """:func:`~spotpatch_agent.worktree.dirfd.open_subdir` (made 0700): a symlink or file raises
    :class:`UnsafeGitDirEntry`, a missing folder (not ``create``) ``FileNotFoundError``."""
    try:
        fd = open_subdir(parent, name, create, [shown], mode=0o700)
    except NotADirectoryError:
        raise UnsafeGitDirEntry(shown) from None
    if fd is None:
        raise FileNotFoundError(errno.ENOENT, f"<git dir>/{shown} does not exist")
    return fd


def _refuse_link(path: Path, shown: str, *, missing_ok: bool) -> None:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        if missing_ok:
            return
        raise
    if stat.S_ISLNK(st.st_mode) or (not missing_ok and not stat.S_ISDIR(st.st_mode)):
        raise UnsafeGitDirEntry(shown, file=missing_ok)


def unsafe_entries(git_dir: Path) -> list[str]:
    """The entries of ``git_dir/spotpatch`` SpotPatch would refuse, relative to ``git_dir``: ``spotpatch``
    itself, one of :data:`SUBDIRS` or :data:`FILES` when it is a symlink (or a directory that is not one),
    and any symlink directly inside the subdirectories. Empty when all is well or nothing is there yet."""
    base = git_dir / SPOTPATCH_DIR
    try:
        st = os.lstat(base)
    except OSError:
        return []
    if not stat.S_ISDIR(st.st_mode):
        return [SPOTPATCH_DIR]
    found: list[str] = []
    for name in (*SUBDIRS, *FILES):
        try:
            st = os.lstat(base / name)
        except OSError:
            continue
        if stat.S_ISLNK(st.st_mode) or (name in SUBDIRS and not stat.S_ISDIR(st.st_mode)):
            found.append(f"{SPOTPATCH_DIR}/{name}")
        elif name in SUBDIRS:
            try:
                entries = list(os.scandir(base / name))
            except OSError:
                continue
            found.extend(f"{SPOTPATCH_DIR}/{name}/{e.name}" for e in entries if e.is_symlink())
    return sorted(found)


def read_small(path: Path, limit: int = 64 * 1024) -> bytes:
    """At most ``limit`` bytes of the regular file ``path``, never through a symlink at its name nor a FIFO
    waited on (a worktree's ownership marker in git's ``worktrees/<id>/``). Raises ``OSError``."""
    fd = os.open(path, os.O_RDONLY | _NOFOLLOW | _CLOEXEC | getattr(os, "O_NONBLOCK", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        return os.read(fd, limit)
    finally:
        os.close(fd)


def write_replacing(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically: a temp file beside it (``<name>.tmp``, created ``0600`` with
    ``O_NOFOLLOW``: a symlink planted under that name is refused, never written through), then renamed over
    ``path`` (a rename replaces a link itself, never its target). Raises ``OSError``."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _NOFOLLOW | _CLOEXEC, 0o600)
    try:
        write_fully(fd, data)
    finally:
        os.close(fd)
    os.replace(tmp, path)
