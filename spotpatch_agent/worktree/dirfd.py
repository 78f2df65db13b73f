"""Directory descriptors and no-replace renames: the POSIX layer under the file images
(:mod:`~spotpatch_agent.worktree.images`, :mod:`~spotpatch_agent.worktree.image_write`).

Parents are opened one by one with ``O_NOFOLLOW`` (a symlink swapped in on a path is never followed) and
files named relative to them; ``renameat2`` (Linux) exchanges a temp file with the target atomically or
renames without replacing, with hard-link fallbacks elsewhere. :data:`DIR_FD` is False where directories
cannot be opened (Windows): the callers take their path-based fallbacks then.
"""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = [
    "DIR_FD",
    "DIR_FLAGS",
    "EXCHANGE",
    "NONBLOCK",
    "NOREPLACE",
    "READ_FLAGS",
    "ROOT_FLAGS",
    "TMP_FLAGS",
    "close_all",
    "move_no_replace",
    "open_parents",
    "prune_empty_dirs",
    "prune_empty_dirs_at",
    "rename2",
    "replace_via_temp",
    "swap",
    "unlink_at",
    "unlink_quietly",
    "write_fully",
]


#: Open flags of :func:`read_image` (POSIX: never follow a symlink put in place after the ``lstat``).
READ_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)


def move_no_replace(src: str, dst: str, directory: int, *, unlink_src: bool = True) -> bool:
    """Rename ``src`` to ``dst`` (both relative to ``directory``) unless ``dst`` exists (``FileExistsError``):
    ``renameat2(RENAME_NOREPLACE)``, else a hard link and an unlink of ``src`` (for a moment both names;
    ``unlink_src=False`` leaves ``src`` for the caller to unlink after its step boundary), else — no hard
    links on this file system — a look and a rename. ``src`` is always a name of ours (a temp name), never
    the user's: an unlink of ``src`` can only drop our own second name. False when ``src`` is absent.
    Raises ``OSError``."""
    done = rename2(src, dst, directory, NOREPLACE)
    if done is not None:
        return done
    try:
        os.link(src, dst, src_dir_fd=directory, dst_dir_fd=directory, follow_symlinks=False)
    except FileNotFoundError:
        return False
    except FileExistsError:
        raise
    except (OSError, NotImplementedError) as exc:  # NotImplementedError: no linkat without following here
        if isinstance(exc, OSError) and exc.errno not in (
            errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK, errno.ENOSYS
        ):
            raise
        try:
            os.stat(dst, dir_fd=directory, follow_symlinks=False)
        except FileNotFoundError:
            os.rename(src, dst, src_dir_fd=directory, dst_dir_fd=directory)
            return True
        raise FileExistsError(errno.EEXIST, "exists") from None
    if unlink_src:
        unlink_at(src, directory)
    return True


#: Whether this platform can open directories and name files relative to them (every POSIX system
#: Python supports); else the path-based fallbacks run (Windows).
DIR_FD = (
    os.name == "posix"
    and hasattr(os, "O_DIRECTORY")
    and hasattr(os, "O_NOFOLLOW")
    and {os.open, os.stat, os.mkdir, os.rename, os.unlink, os.rmdir} <= os.supports_dir_fd
    and os.stat in os.supports_follow_symlinks
)


_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


NONBLOCK = getattr(os, "O_NONBLOCK", 0)  # a FIFO swapped in after the stat never blocks the open


ROOT_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _CLOEXEC


DIR_FLAGS = ROOT_FLAGS | getattr(os, "O_NOFOLLOW", 0)


TMP_FLAGS = (os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | _CLOEXEC
              | getattr(os, "O_BINARY", 0))


def open_parents(root: Path, parts: list[str], *, create: bool) -> list[int] | None:
    """Descriptors of ``root`` and of each parent directory of ``parts[-1]``, in order, each opened
    relative to the one before with ``O_DIRECTORY|O_NOFOLLOW``. ``None`` when one is missing (and
    ``create`` is false); with ``create`` a missing one is made (``mkdir(dir_fd=)``). Raises
    ``NotADirectoryError`` for a symlink or non-directory on the way, ``OSError`` otherwise."""
    fds = [os.open(root, ROOT_FLAGS)]
    try:
        for index, part in enumerate(parts[:-1]):
            fd = open_subdir(fds[-1], part, create, parts[: index + 1])
            if fd is None:
                close_all(fds)
                return None
            fds.append(fd)
    except BaseException:
        close_all(fds)
        raise
    return fds


def open_subdir(parent: int, name: str, create: bool, shown: list[str], mode: int = 0o777) -> int | None:
    """``name`` opened as a directory relative to ``parent``, never following a symlink; ``None`` when
    missing and not ``create`` (else made with ``mode`` first, then opened the same way)."""
    try:
        try:
            return os.open(name, DIR_FLAGS, dir_fd=parent)
        except FileNotFoundError:
            if not create:
                return None
        try:
            os.mkdir(name, mode, dir_fd=parent)
        except FileExistsError:
            pass  # made meanwhile: opened (never followed) just below
        return os.open(name, DIR_FLAGS, dir_fd=parent)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):  # a symlink (EMLINK: BSD) or a file
            raise NotADirectoryError(errno.ENOTDIR, f"not a directory: {'/'.join(shown)}") from None
        raise


def close_all(fds: list[int]) -> None:
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


def unlink_at(name: str, directory: int) -> None:
    try:
        os.unlink(name, dir_fd=directory)
    except OSError:
        pass


def prune_empty_dirs_at(fds: list[int], parts: list[str], limit: int | None = None) -> None:
    """Remove the now empty parent directories of ``parts[-1]`` bottom-up (``rmdir`` relative to each
    one's parent descriptor, which never follows a symlink), at most ``limit`` (``None``: no limit);
    stops at the first that is not empty."""
    lowest = 0 if limit is None else max(len(parts) - 1 - limit, 0)
    for index in range(len(parts) - 2, lowest - 1, -1):
        try:
            os.rmdir(parts[index], dir_fd=fds[index])
        except OSError:
            return


_renameat2: Any = None  # None: not looked up yet; False: unavailable


EXCHANGE, NOREPLACE = 2, 1  # renameat2 flags


def swap(tmp: str, target: str, directory: int) -> bool | None:
    """Exchange ``tmp`` and ``target`` atomically (Linux ``renameat2(RENAME_EXCHANGE)``), both named
    relative to the directory descriptor ``directory``. False when one is absent, ``None`` when this
    system or file system cannot exchange. Raises ``OSError``."""
    return rename2(tmp, target, directory, EXCHANGE)


def rename2(src: str, dst: str, directory: int, flags: int) -> bool | None:
    """``renameat2(directory, src, directory, dst, flags)``: True done, False ``src``/``dst`` absent
    (``ENOENT``), ``None`` unsupported here. Raises ``OSError`` (``FileExistsError`` for ``RENAME_NOREPLACE``)."""
    global _renameat2
    if _renameat2 is None:
        _renameat2 = _load_renameat2()
    if _renameat2 is False:
        return None
    import ctypes

    if _renameat2(directory, os.fsencode(src), directory, os.fsencode(dst), flags) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV):
        return None  # this kernel or file system cannot: the caller falls back
    if err == errno.ENOENT:
        return False
    raise OSError(err, os.strerror(err))


def _load_renameat2() -> Any:
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        func = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):  # glibc < 2.28, or no libc symbol table
        return False
    func.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    func.restype = ctypes.c_int
    return func


def prune_empty_dirs(root: Path, directory: Path) -> None:
    while directory != root:
        try:
            os.rmdir(directory)
        except OSError:
            return
        directory = directory.parent


def write_fully(fd: int, data: bytes) -> None:
    """``os.write`` until every byte of ``data`` is written."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def replace_via_temp(tmp: Path | str, target: Path | str, flags: int, write: Callable[[int], None]) -> None:
    """Path-based atomic replace: create ``tmp`` (``os.open(tmp, flags, 0o600)``), ``write(fd)``, close it
    and rename it over ``target``; on any failure ``tmp`` is removed and the error propagates."""
    fd = os.open(tmp, flags, 0o600)
    try:
        try:
            write(fd)
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except BaseException:
        unlink_quietly(tmp)
        raise


def unlink_quietly(path: Path | str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
