"""Deleting a directory tree a process left, at any depth, never following a symlink.

``shutil.rmtree`` (Python 3.11, 3.12) recurses once per directory level: a check that nests 1,500 directories
(a loop of ``mkdir d; cd d``, nothing more) made it raise ``RecursionError`` — not an ``OSError`` — out of the
scan that removes a ``.git`` it left, out of the private temp dir's clean-up and out of a worktree's removal,
so the job failed with an internal error and the tree stayed on disk (issue 25 break attempt).
:func:`remove_tree` tries ``shutil.rmtree`` first (fast, the usual case) and, when the tree is too deep for
it, finishes with an iterative walk over directory descriptors (:func:`_remove_deep`): at most two
descriptors open whatever the depth, each directory opened ``O_NOFOLLOW`` relative to its parent, each
return to a parent checked against the parent's device and inode, a directory the process made unreadable
or unwritable (``chmod 000``) made its owner's again before it is emptied.
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Callable
from typing import Any

__all__ = ["DIR_FLAGS", "remove_tree", "remove_tree_at"]

#: Opening a directory never through a symlink.
DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def remove_tree(path: str | os.PathLike[str], *, onerror: Callable[..., Any] | None = None) -> None:
    """Delete the directory ``path`` with everything in it, never following a symlink, at any depth.

    ``onerror``: as ``shutil.rmtree``'s, for the usual (shallow) case. Raises ``OSError`` when the deep walk
    fails (an entry cannot be removed, a directory moved while it was walked); the caller checks whether
    ``path`` is gone, as after ``shutil.rmtree`` with an ``onerror`` that swallows errors."""
    try:
        shutil.rmtree(path, onerror=onerror)
    except RecursionError:
        if not hasattr(os, "O_DIRECTORY") or os.open not in os.supports_dir_fd:
            raise OSError("the directory tree is too deep to remove here") from None
        _remove_deep(os.fspath(path))


def remove_tree_at(dir_fd: int, name: str) -> None:
    """Delete the directory ``name`` in the open directory ``dir_fd`` with everything in it, never following a
    symlink, at any depth (the iterative walk only: no path is ever joined, so no PATH_MAX). Raises
    ``OSError`` when something cannot be removed."""
    _remove_deep(name, dir_fd=dir_fd)


def _ident(fd: int) -> tuple[int, int]:
    st = os.fstat(fd)
    return st.st_dev, st.st_ino


def _owned(fd: int) -> None:
    """Make the open directory ``fd`` listable and writable by its owner (a ``chmod 000`` left by a check)."""
    mode = os.fstat(fd).st_mode
    if mode & stat.S_IRWXU != stat.S_IRWXU:
        try:
            os.fchmod(fd, stat.S_IMODE(mode) | stat.S_IRWXU)
        except OSError:
            pass  # not ours: the listing or an unlink below says so


def _open_child(parent: int, name: str) -> int | None:
    """``name`` in ``parent`` opened as a directory without following a symlink; ``None`` when it is gone or
    no longer a directory (it is then unlinked, or left for the final rmdir to report)."""
    try:
        return os.open(name, DIR_FLAGS, dir_fd=parent)
    except PermissionError:
        os.chmod(name, stat.S_IRWXU, dir_fd=parent)  # listed as a directory (lstat) a moment ago
        return os.open(name, DIR_FLAGS, dir_fd=parent)
    except FileNotFoundError:
        return None
    except NotADirectoryError:  # replaced by a file or a symlink since the listing: removed as an entry
        os.unlink(name, dir_fd=parent)
        return None


def _empty_files(fd: int) -> list[str]:
    """Unlink every entry of the directory ``fd`` that is not a directory; return the subdirectories' names."""
    _owned(fd)
    subdirs: list[str] = []
    with os.scandir(fd) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                subdirs.append(entry.name)
            else:
                try:
                    os.unlink(entry.name, dir_fd=fd)
                except FileNotFoundError:
                    pass
    return subdirs


def _remove_deep(path: str, *, dir_fd: int | None = None) -> None:
    """Iterative removal of the directory ``path`` (relative to ``dir_fd`` when given; module docstring)."""
    try:
        fd = os.open(path, DIR_FLAGS, dir_fd=dir_fd)
    except PermissionError:
        os.chmod(path, stat.S_IRWXU, dir_fd=dir_fd)  # a directory made unreadable (chmod 000)
        fd = os.open(path, DIR_FLAGS, dir_fd=dir_fd)
    try:
        # One frame per directory on the way down: (its device and inode, its subdirectories left to remove).
        frames: list[tuple[tuple[int, int], list[str]]] = [(_ident(fd), _empty_files(fd))]
        names: list[str] = []
        while True:
            pending = frames[-1][1]
            if pending:
                name = pending.pop()
                child = _open_child(fd, name)
                if child is None:
                    continue
                os.close(fd)
                fd = child
                names.append(name)
                frames.append((_ident(fd), _empty_files(fd)))
                continue
            if len(frames) == 1:
                break
            parent = os.open("..", DIR_FLAGS, dir_fd=fd)
            if _ident(parent) != frames[-2][0]:
                os.close(parent)
                raise OSError("a directory moved while it was being removed")
            os.close(fd)
            fd = parent
            frames.pop()
            os.rmdir(names.pop(), dir_fd=fd)
    finally:
        os.close(fd)
    os.rmdir(path, dir_fd=dir_fd)
