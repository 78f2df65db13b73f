"""Pre- and post-images of the user's working-tree files: reading them, and the temp files a write leaves
(docs/design.md §8).

Used by Apply/Revert (:mod:`~spotpatch_agent.worktree.changes`) and crash recovery
(:mod:`~spotpatch_agent.worktree.journal`). No symlink is ever followed: a symlink or non-directory on a
path makes it :data:`NOT_REGULAR` (read) or an ``OSError`` (write). Writing one image is
:mod:`~spotpatch_agent.worktree.image_write`'s; the directory-descriptor layer is
:mod:`~spotpatch_agent.worktree.dirfd`'s.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import secrets
import stat
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from spotpatch_agent.worktree.dirfd import (
    DIR_FD,
    DIR_FLAGS,
    NONBLOCK,
    READ_FLAGS,
    ROOT_FLAGS,
    close_all,
    move_no_replace,
    open_parents,
    prune_empty_dirs,
    swap,
    unlink_at,
    unlink_quietly,
)

__all__ = [
    "ABSENT",
    "NOT_REGULAR",
    "TMP_NAME",
    "Image",
    "file_hash",
    "image_at",
    "lstat_path",
    "missing_parents",
    "new_file_mode",
    "new_tmp_name",
    "part_name",
    "path_parts",
    "prune_empty_parents",
    "put_back",
    "read_image",
    "read_tmp",
    "remove_tmp",
    "safe_path",
    "same_image",
    "set_mode",
]


#: Stands for "present but not a regular file" (symlink, directory, …): never equals a digest.
NOT_REGULAR = "!not-a-regular-file"


#: The temp file names :func:`new_tmp_name` makes.
TMP_NAME = re.compile(r"^\.spotpatch-[0-9a-f]{16}\.tmp$")


def _read_umask() -> int:
    try:  # Linux: read it without changing it (os.umask is process-wide, racing other threads)
        with open("/proc/self/status", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_UMASK = _read_umask()


@dataclass(frozen=True)
class Image:
    """One state of a path: ``data`` (bytes) and ``mode`` (permission bits), or absent (both ``None``).

    ``sha256`` is computed once, on first use, from the bytes already in memory (an image is hashed by
    the guard, the journal and the write loop alike)."""

    data: bytes | None
    mode: int | None = None

    @cached_property
    def sha256(self) -> str | None:
        return None if self.data is None else hashlib.sha256(self.data).hexdigest()


ABSENT = Image(None)


def new_file_mode(executable: bool = False) -> int:
    """Permission bits git gives a new file: ``0o666`` (``0o777`` if executable) minus the umask."""
    return (0o777 if executable else 0o666) & ~_UMASK


def safe_path(rel: str) -> bool:
    """Whether ``rel`` is a plain relative POSIX path inside a working tree (no ``..``, ``.git``, drive…)."""
    if not rel or rel[0] == "/" or "\\" in rel or "\0" in rel:
        return False
    parts = rel.split("/")
    return ":" not in parts[0] and all(part not in ("", ".", "..") and not _is_git_dir_name(part) for part in parts)


def _is_git_dir_name(part: str) -> bool:
    """``.git`` in any case, also as NTFS/HFS aliases git itself refuses (``.git.``, ``.git ``, ``git~1``)."""
    folded = part.casefold()
    return folded.rstrip(". ") == ".git" or folded == "git~1"


def path_parts(rel: str) -> list[str]:
    """``PurePosixPath(rel).parts`` of a relative path (empty and ``.`` components dropped)."""
    return [part for part in rel.split("/") if part not in ("", ".")]


def lstat_path(root: Path, rel: str) -> os.stat_result | None | str:
    """``lstat`` of ``root/rel`` following no symlink on the way; ``None`` if absent, else :data:`NOT_REGULAR`."""
    return lstat_walk(root, rel)[1]


def lstat_walk(root: Path, rel: str) -> tuple[str, os.stat_result | None | str]:
    """``(root/rel as a string, lstat_path(root, rel))``: one ``lstat`` per component, no symlink followed."""
    current = os.fspath(root)
    sep = os.sep
    parts = path_parts(rel)
    st: os.stat_result | None = None
    last = len(parts) - 1
    for index, part in enumerate(parts):
        current = current + part if current.endswith(sep) else current + sep + part
        try:
            st = os.lstat(current)
        except FileNotFoundError:
            return current, None
        except OSError:
            return current, NOT_REGULAR
        mode = st.st_mode
        if stat.S_ISLNK(mode) or (index == last and not stat.S_ISREG(mode)):
            return current, NOT_REGULAR
        if index != last and not stat.S_ISDIR(mode):
            return current, NOT_REGULAR
    return current, st


def read_image(root: Path, rel: str) -> Image | str:
    """The current :class:`Image` of ``root/rel`` (absent → :data:`ABSENT`), or :data:`NOT_REGULAR`.

    No symlink is followed anywhere on the path; a directory, FIFO, … is :data:`NOT_REGULAR` (and never
    opened). POSIX: the parent directories are opened one by one from ``root`` with ``O_NOFOLLOW`` and
    the file is stat'ed and opened relative to its directory's descriptor, so a parent swapped for a
    symlink after a check can never redirect the read. The file is read once, through one descriptor
    whose ``fstat`` must still be the regular file the ``lstat`` saw."""
    if not DIR_FD:
        return _read_image_by_path(root, rel)
    parts = path_parts(rel)
    if not parts:
        return NOT_REGULAR
    try:
        fds = open_parents(root, parts, create=False)
    except FileNotFoundError:
        return ABSENT
    except OSError:
        return NOT_REGULAR
    if fds is None:
        return ABSENT
    try:
        return image_at(fds[-1], parts[-1])
    finally:
        close_all(fds)


def _read_image_by_path(root: Path, rel: str) -> Image | str:
    """:func:`read_image` where descriptors cannot name directories (Windows): ``lstat`` per component."""
    path, st = lstat_walk(root, rel)
    if st is None or isinstance(st, str):
        return ABSENT if st is None else NOT_REGULAR
    try:
        fd = os.open(path, READ_FLAGS)
    except FileNotFoundError:
        return ABSENT
    except OSError:
        return NOT_REGULAR
    return read_fd(fd, st)


def read_fd(fd: int, st: os.stat_result) -> Image | str:
    """Read the whole regular file ``fd`` (closed here), which must still be the file ``st`` describes."""
    try:
        opened = os.fstat(fd)
        if not stat.S_ISREG(opened.st_mode) or (opened.st_dev, opened.st_ino) != (st.st_dev, st.st_ino):
            return NOT_REGULAR  # replaced between the lstat and the open
        chunks = []
        want = max(opened.st_size, 0) + 1  # the whole file in one read; a short read of a regular file is EOF
        while True:
            chunk = os.read(fd, want)
            if chunk:
                chunks.append(chunk)
            if len(chunk) < want:
                break
            want = 1 << 20
    except OSError:
        return NOT_REGULAR
    finally:
        os.close(fd)
    return Image(chunks[0] if len(chunks) == 1 else b"".join(chunks), stat.S_IMODE(opened.st_mode))


def file_hash(root: Path, rel: str) -> str | None:
    """SHA-256 hex of ``root/rel``'s bytes; ``None`` if absent; :data:`NOT_REGULAR` otherwise.

    No symlink is followed anywhere on the path: a symlinked parent or file, a directory, a FIFO, …
    all give :data:`NOT_REGULAR`, which equals no recorded hash (so it always conflicts).
    """
    image = read_image(root, rel)
    return image if isinstance(image, str) else image.sha256


def image_at(directory: int, name: str) -> Image | str:
    """The :class:`Image` of ``name`` in ``directory`` (never following a symlink), or :data:`NOT_REGULAR`."""
    try:
        st = os.stat(name, dir_fd=directory, follow_symlinks=False)
    except FileNotFoundError:
        return ABSENT
    except OSError:
        return NOT_REGULAR
    if not stat.S_ISREG(st.st_mode):
        return NOT_REGULAR
    try:
        fd = os.open(name, READ_FLAGS | NONBLOCK, dir_fd=directory)
    except FileNotFoundError:
        return ABSENT
    except OSError:
        return NOT_REGULAR
    return read_fd(fd, st)


def same_image(found: Image | str, expected: Image) -> bool:
    """Whether ``found`` (a :func:`read_image` result) is ``expected``: the same bytes (SHA-256) and, when both
    are known, the same permission bits — a ``chmod`` (e.g. of the executable bit git tracks) is a change
    of the user's as much as a save is."""
    if isinstance(found, str) or found.sha256 != expected.sha256:
        return False
    return found.mode is None or expected.mode is None or stat.S_IMODE(found.mode) == stat.S_IMODE(expected.mode)


def read_tmp(root: Path, rel: str, tmp_name: str) -> Image | str:
    """The :class:`Image` held by the temp file ``tmp_name`` beside ``root/rel`` (:data:`ABSENT` when there
    is none, :data:`NOT_REGULAR` when it is not a regular file or not one of our temp names)."""
    if not TMP_NAME.match(tmp_name):
        return NOT_REGULAR
    parts = path_parts(rel)
    if not parts:
        return NOT_REGULAR
    return read_image(root, "/".join([*parts[:-1], tmp_name]))


def prune_empty_parents(root: Path, rel: str, limit: int | None = None) -> None:
    """Remove the empty parent directories of ``root/rel`` bottom-up, starting from the deepest one that
    exists (a kill may have removed the lower ones already); never ``root``, no symlink followed, stops at
    the first that is not empty. ``limit``: only among the lowest ``limit`` parents (those a write made;
    ``None``: all). Never raises."""
    parents = path_parts(rel)[:-1]
    keep = 0 if limit is None else max(len(parents) - limit, 0)  # parents[:keep]: never removed
    if len(parents) <= keep:
        return
    if not DIR_FD:
        deepest, stop = Path(root, *parents), Path(root, *parents[:keep])
        while deepest != stop and not deepest.is_dir():
            deepest = deepest.parent
        prune_empty_dirs(stop, deepest)
        return
    try:
        fds = [os.open(root, ROOT_FLAGS)]
    except OSError:
        return
    try:
        for part in parents:
            try:
                fds.append(os.open(part, DIR_FLAGS, dir_fd=fds[-1]))
            except OSError:
                break
        for index in range(len(fds) - 2, keep - 1, -1):  # parents[index] is opened as fds[index + 1]
            try:
                os.rmdir(parents[index], dir_fd=fds[index])
            except OSError:
                return
    finally:
        close_all(fds)


def missing_parents(root: Path, rel: str) -> int:
    """How many parent directories of ``root/rel`` do not exist (those a write of it would make): the
    ``prune`` limit of removing it again (:func:`replace_image`). A symlink or file on the way counts as
    existing (nothing would be made, nothing is ever removed through it)."""
    parents = path_parts(rel)[:-1]
    for depth in range(1, len(parents) + 1):
        if not _exists(root, parents[:depth]):
            return len(parents) - depth + 1
    return 0


def _exists(root: Path, parts: list[str]) -> bool:
    try:
        os.lstat(os.path.join(root, *parts))
    except FileNotFoundError:
        return False
    except OSError:
        return True
    return True


def put_back(root: Path, rel: str, tmp_name: str) -> bool:
    """Move what the temp file ``tmp_name`` holds back to ``root/rel`` (crash recovery, when it holds bytes
    that are neither journalled image: a save a killed write had swapped out): exchanged with the path
    when it exists, else renamed to it without replacing. Afterwards the temp name holds what the path
    held (or nothing). False when it could not be done (nothing changed). Never follows a symlink."""
    parts = path_parts(rel)
    if not parts or not TMP_NAME.match(tmp_name) or not DIR_FD:
        return False
    try:
        fds = open_parents(root, parts, create=False)
    except OSError:
        return False
    if fds is None:
        return False
    try:
        directory, name = fds[-1], parts[-1]
        try:
            if swap(tmp_name, name, directory):
                return True
            return move_no_replace(tmp_name, name, directory)
        except OSError:
            return False
    finally:
        close_all(fds)


def set_mode(root: Path, rel: str, mode: int) -> None:
    """``chmod`` the regular file ``root/rel`` without following a symlink anywhere on the path (POSIX:
    ``fchmod`` of a descriptor opened ``O_NOFOLLOW`` relative to its directory's descriptor). Raises
    ``OSError`` (also when it is not a regular file)."""
    if not DIR_FD:
        if not isinstance(lstat_path(root, rel), os.stat_result):
            raise OSError(errno.EINVAL, "not a regular file")
        os.chmod(os.path.join(root, rel), mode)
        return
    parts = path_parts(rel)
    fds = open_parents(root, parts, create=False)
    if fds is None:
        raise FileNotFoundError(errno.ENOENT, "no such file")
    try:
        fd = os.open(parts[-1], READ_FLAGS | NONBLOCK, dir_fd=fds[-1])
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise OSError(errno.EINVAL, "not a regular file")
            os.fchmod(fd, mode)
        finally:
            os.close(fd)
    finally:
        close_all(fds)


def remove_tmp(root: Path, rel: str, tmp_name: str, *, part: bool = False) -> bool:
    """Remove the temp file ``tmp_name`` (with ``part``: its :func:`part_name`) beside ``root/rel`` if it is
    a regular file reached without crossing a symlink (POSIX: ``unlink`` relative to the directory's
    ``O_NOFOLLOW`` descriptor). True when a file was removed. Never raises."""
    if not TMP_NAME.match(tmp_name):
        return False
    if part:
        tmp_name = part_name(tmp_name)
    parts = path_parts(rel)
    if not parts:
        return False
    if not DIR_FD:
        tmp_rel = "/".join([*parts[:-1], tmp_name])
        if not isinstance(lstat_path(root, tmp_rel), os.stat_result):
            return False
        unlink_quietly(os.path.join(root, *parts[:-1], tmp_name))
        return True
    try:
        fds = open_parents(root, parts, create=False)
    except OSError:
        return False
    if fds is None:
        return False
    try:
        try:
            st = os.stat(tmp_name, dir_fd=fds[-1], follow_symlinks=False)
        except OSError:
            return False
        if not stat.S_ISREG(st.st_mode):
            return False
        unlink_at(tmp_name, fds[-1])
        return True
    finally:
        close_all(fds)


def part_name(tmp_name: str) -> str:
    """The name a temp file is written under before it becomes ``tmp_name`` (``.spotpatch-<hex>.part``):
    only this name can hold a write cut short, and nothing is ever exchanged or moved into it."""
    return tmp_name.removesuffix(".tmp") + ".part"


def new_tmp_name() -> str:
    """A fresh same-directory temp file name (recorded in the journal, so recovery can remove it)."""
    return f".spotpatch-{secrets.token_hex(8)}.tmp"
