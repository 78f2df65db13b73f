"""Pre- and post-images of the user's working-tree files, read and written one file atomically (docs/design.md §8).

Used by Apply/Revert (:mod:`~spotpatch_agent.worktree.changes`) and crash recovery
(:mod:`~spotpatch_agent.worktree.journal`). No symlink is ever followed: a symlink or non-directory on a
path makes it :data:`NOT_REGULAR` (read) or an ``OSError`` (write). A write (:func:`replace_image`)
replaces the file through a same-directory temp file, so the file is wholly old or wholly new at any
instant, and discards nothing it has not verified to be the expected old image: a save racing the write
is put back (:class:`Outcome`). Its steps (:data:`WRITE_STEPS`) are the boundaries the crash tests kill at.
"""

from __future__ import annotations

import enum
import errno
import hashlib
import os
import re
import secrets
import stat
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

__all__ = [
    "ABSENT",
    "NOT_REGULAR",
    "TMP_NAME",
    "WRITE_STEPS",
    "Image",
    "Outcome",
    "Step",
    "file_hash",
    "lstat_path",
    "missing_parents",
    "new_file_mode",
    "new_tmp_name",
    "part_name",
    "prune_empty_parents",
    "put_back",
    "read_image",
    "read_tmp",
    "remove_tmp",
    "replace_image",
    "replace_via_temp",
    "safe_path",
    "same_image",
    "set_mode",
    "unlink_quietly",
    "write_fully",
    "write_image",
    "write_kind",
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


def _parts(rel: str) -> list[str]:
    """``PurePosixPath(rel).parts`` of a relative path (empty and ``.`` components dropped)."""
    return [part for part in rel.split("/") if part not in ("", ".")]


def lstat_path(root: Path, rel: str) -> os.stat_result | None | str:
    """``lstat`` of ``root/rel`` following no symlink on the way; ``None`` if absent, else :data:`NOT_REGULAR`."""
    return _lstat_walk(root, rel)[1]


def _lstat_walk(root: Path, rel: str) -> tuple[str, os.stat_result | None | str]:
    """``(root/rel as a string, lstat_path(root, rel))``: one ``lstat`` per component, no symlink followed."""
    current = os.fspath(root)
    sep = os.sep
    parts = _parts(rel)
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


#: Open flags of :func:`read_image` (POSIX: never follow a symlink put in place after the ``lstat``).
_READ_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)


def read_image(root: Path, rel: str) -> Image | str:
    """The current :class:`Image` of ``root/rel`` (absent → :data:`ABSENT`), or :data:`NOT_REGULAR`.

    No symlink is followed anywhere on the path; a directory, FIFO, … is :data:`NOT_REGULAR` (and never
    opened). POSIX: the parent directories are opened one by one from ``root`` with ``O_NOFOLLOW`` and
    the file is stat'ed and opened relative to its directory's descriptor, so a parent swapped for a
    symlink after a check can never redirect the read. The file is read once, through one descriptor
    whose ``fstat`` must still be the regular file the ``lstat`` saw."""
    if not _DIR_FD:
        return _read_image_by_path(root, rel)
    parts = _parts(rel)
    if not parts:
        return NOT_REGULAR
    try:
        fds = _open_parents(root, parts, create=False)
    except FileNotFoundError:
        return ABSENT
    except OSError:
        return NOT_REGULAR
    if fds is None:
        return ABSENT
    try:
        return _image_at(fds[-1], parts[-1])
    finally:
        _close_all(fds)


def _read_image_by_path(root: Path, rel: str) -> Image | str:
    """:func:`read_image` where descriptors cannot name directories (Windows): ``lstat`` per component."""
    path, st = _lstat_walk(root, rel)
    if st is None or isinstance(st, str):
        return ABSENT if st is None else NOT_REGULAR
    try:
        fd = os.open(path, _READ_FLAGS)
    except FileNotFoundError:
        return ABSENT
    except OSError:
        return NOT_REGULAR
    return _read_fd(fd, st)


def _read_fd(fd: int, st: os.stat_result) -> Image | str:
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


def write_image(root: Path, rel: str, image: Image, tmp_name: str) -> None:
    """Make ``root/rel`` hold ``image`` whatever it holds now (a regular file or nothing): the current bytes
    are read first and the write is a :func:`replace_image` from them. For a path whose current bytes
    need no keeping (tests, fresh files). Raises ``OSError`` — also when the path is not a regular file or
    changed between the read and the write."""
    current = read_image(root, rel)
    if isinstance(current, str):
        raise OSError(errno.EINVAL, "not a regular file")
    if replace_image(root, rel, current, image, tmp_name) is not Outcome.WRITTEN:
        raise OSError(errno.EAGAIN, "the file changed while it was being written")


class Outcome(enum.Enum):
    """What :func:`replace_image` did (the caller must branch on it)."""

    #: The path holds the new image; what came out was verified to be the old image before it was discarded.
    WRITTEN = "written"
    #: The path did not hold the old image (a save raced the write): what it held is back at the path,
    #: nothing of the new image is left.
    CHANGED = "changed"
    #: As :attr:`CHANGED`, and a second version saved while the first was being put back is kept under
    #: the temp name (a user's bytes are never deleted).
    CHANGED_KEPT = "changed-kept"


#: Called after each step of :func:`replace_image` that changed the disk, with the step's name
#: (``written``, ``exchanged``, ``placed``, ``moved``, ``put-back``, ``unlinked``).
Step = Callable[[str], None]

#: The steps of one :func:`replace_image` that succeeds, by kind of write (docs/security.md §7; the fault-injection
#: tests kill the engine after each).
WRITE_STEPS = {
    "modify": ("written", "exchanged", "unlinked"),
    "create": ("written", "placed", "unlinked"),
    "delete": ("moved", "unlinked"),
}


def write_kind(old: Image, new: Image) -> str:
    """``modify``, ``create`` or ``delete``: which :data:`WRITE_STEPS` a write from ``old`` to ``new`` takes."""
    if new.data is None:
        return "delete"
    return "create" if old.data is None else "modify"


def _no_step(_name: str) -> None:
    return None


def replace_image(
    root: Path, rel: str, old: Image, new: Image, tmp_name: str, *, step: Step | None = None, prune: int | None = None
) -> Outcome:
    """Replace ``old`` by ``new`` at ``root/rel`` atomically, discarding nothing that was not ``old``.

    ``modify``: ``new`` is written to :func:`part_name` beside the path and renamed to the temp file
    ``tmp_name`` (so a write cut short is never under ``tmp_name``), then exchanged with the
    path (Linux ``renameat2(RENAME_EXCHANGE)``); the bytes that came out are read back and must be
    ``old`` before the temp name is unlinked — else they are exchanged back (:attr:`Outcome.CHANGED`).
    ``create``: the temp file is renamed to the path without replacing (``RENAME_NOREPLACE``, else a hard
    link): a file created meanwhile stays (``CHANGED``). ``delete``: the path is renamed to the temp name
    (never replacing), its bytes checked, then unlinked (empty parent directories removed, as ``git
    apply`` does) — or renamed back. So each file is wholly old or wholly new at any instant, and a save
    racing the write is never lost. "Old" is its bytes and, when recorded, its permission bits (a
    ``chmod`` meanwhile is the user's change). ``prune`` bounds the parent directories a delete removes
    when empty: ``None`` every one (a file the diff deletes, as ``git apply``), ``k`` only the lowest ``k``
    (those the write being undone had made: a user's own empty directory is never removed). Where there is
    no exchange (not Linux, or a file system without it) the path is re-checked and the temp file renamed
    over it: a save between the two is replaced.

    ``step(name)`` runs after each step that changed the disk (:data:`WRITE_STEPS`; ``put-back`` after an
    undone exchange). Missing parent directories are created; no symlink is followed (POSIX: every name is
    resolved relative to parent descriptors opened ``O_DIRECTORY|O_NOFOLLOW``). Raises ``OSError`` (the
    temp file is removed unless it may hold bytes that are not ours)."""
    step = step or _no_step
    if not _DIR_FD:
        return _replace_by_path(root, rel, old, new, tmp_name, step, prune)
    parts = _parts(rel)
    if not parts:
        raise IsADirectoryError("no file name")
    fds = _open_parents(root, parts, create=new.data is not None)
    if fds is None:  # a missing parent directory: the path is absent
        return Outcome.WRITTEN if old.data is None else Outcome.CHANGED
    try:
        directory, name = fds[-1], parts[-1]
        if new.data is None:
            return _delete_at(fds, parts, old, tmp_name, step, prune)
        _write_tmp_at(directory, tmp_name, new)
        step("written")
        if old.data is None:
            return _place_at(directory, name, tmp_name, step)
        return _exchange_at(directory, name, old, new, tmp_name, step)
    finally:
        _close_all(fds)


def _write_tmp_at(directory: int, tmp_name: str, image: Image) -> None:
    """Write ``image`` under :func:`part_name`, then rename it to ``tmp_name`` without replacing: after a
    kill a file under ``tmp_name`` is never a write cut short — it holds a whole image of ours, or what came
    out of an exchange or move (which recovery never deletes unless it is a journalled image). Not
    ``fdatasync``'d (2.5-4.5 ms a file measured here, against ~5 ms for a whole 20-file Apply): after a
    power loss the temp name may hold an unflushed image, which recovery keeps like a save
    (docs/architecture.md)."""
    part = part_name(tmp_name)
    fd = os.open(part, _TMP_FLAGS, 0o600, dir_fd=directory)
    try:
        try:
            _write_all(fd, image)
        finally:
            os.close(fd)
        if not _move_no_replace(part, tmp_name, directory):
            raise FileNotFoundError(errno.ENOENT, "the temp file vanished")
    except BaseException:
        _unlink_at(part, directory)
        raise


def _exchange_at(directory: int, name: str, old: Image, new: Image, tmp_name: str, step: Step) -> Outcome:
    try:
        swapped = _swap(tmp_name, name, directory)
        if swapped is None:  # no exchange here: re-check, then rename over (the documented window)
            if not same_image(_image_at(directory, name), old):
                _unlink_at(tmp_name, directory)
                return Outcome.CHANGED
            os.rename(tmp_name, name, src_dir_fd=directory, dst_dir_fd=directory)
            step("exchanged")
            step("unlinked")
            return Outcome.WRITTEN
    except BaseException:
        _unlink_at(tmp_name, directory)
        raise
    if not swapped:  # the path is gone (deleted meanwhile): nothing to keep
        _unlink_at(tmp_name, directory)
        return Outcome.CHANGED
    step("exchanged")
    if same_image(_image_at(directory, tmp_name), old):
        _unlink_at(tmp_name, directory)  # verified: the old bytes (also in the journal)
        step("unlinked")
        return Outcome.WRITTEN
    # Not the bytes we replaced: a save raced us. Put them back; the temp name then holds ours again.
    if not _swap(tmp_name, name, directory):
        raise OSError(errno.EIO, "a file changed while it was written and could not be put back")
    step("put-back")
    if _image_sha(_image_at(directory, tmp_name)) == new.sha256:
        _unlink_at(tmp_name, directory)
        return Outcome.CHANGED
    return Outcome.CHANGED_KEPT  # saved again into our file meanwhile: both versions stay


def _place_at(directory: int, name: str, tmp_name: str, step: Step) -> Outcome:
    try:
        if not _move_no_replace(tmp_name, name, directory, unlink_src=False):
            raise FileNotFoundError(errno.ENOENT, "the temp file vanished")
    except FileExistsError:  # created meanwhile: the user's file stays
        _unlink_at(tmp_name, directory)
        return Outcome.CHANGED
    except BaseException:
        _unlink_at(tmp_name, directory)
        raise
    step("placed")
    _unlink_at(tmp_name, directory)  # after a hard link: the file's second name
    step("unlinked")
    return Outcome.WRITTEN


def _delete_at(fds: list[int], parts: list[str], old: Image, tmp_name: str, step: Step, prune: int | None) -> Outcome:
    directory, name = fds[-1], parts[-1]
    if not _take_aside(name, tmp_name, directory):
        return Outcome.CHANGED if old.data is not None else Outcome.WRITTEN  # already absent
    step("moved")
    if same_image(_image_at(directory, tmp_name), old):
        _unlink_at(tmp_name, directory)
        _prune_empty_dirs_at(fds, parts, prune)
        step("unlinked")
        return Outcome.WRITTEN
    try:
        _move_no_replace(tmp_name, name, directory)
    except FileExistsError:  # re-created meanwhile: both versions stay
        return Outcome.CHANGED_KEPT
    step("put-back")
    return Outcome.CHANGED


def _take_aside(name: str, tmp_name: str, directory: int) -> bool:
    """Move the user's file ``name`` to this write's own fresh temp name (a delete), in one atomic step
    whatever the system: ``renameat2(RENAME_NOREPLACE)``, else a look that ``tmp_name`` is free and a
    plain rename. Never a hard link and an unlink of ``name``: a save renamed over ``name`` between the two
    would be unlinked unseen (breaker 12 F3); a rename takes whatever ``name`` holds at that instant into
    the temp name, where the caller checks it. False when ``name`` is absent. Raises ``OSError``."""
    done = _rename2(name, tmp_name, directory, _NOREPLACE)
    if done is not None:
        return done
    try:
        os.stat(tmp_name, dir_fd=directory, follow_symlinks=False)
    except FileNotFoundError:
        pass
    else:
        raise FileExistsError(errno.EEXIST, "the temp name exists")
    try:
        os.rename(name, tmp_name, src_dir_fd=directory, dst_dir_fd=directory)
    except FileNotFoundError:
        return False
    return True


def _move_no_replace(src: str, dst: str, directory: int, *, unlink_src: bool = True) -> bool:
    """Rename ``src`` to ``dst`` (both relative to ``directory``) unless ``dst`` exists (``FileExistsError``):
    ``renameat2(RENAME_NOREPLACE)``, else a hard link and an unlink of ``src`` (for a moment both names;
    ``unlink_src=False`` leaves ``src`` for the caller to unlink after its step boundary), else — no hard
    links on this file system — a look and a rename. ``src`` is always a name of ours (a temp name), never
    the user's: an unlink of ``src`` can only drop our own second name. False when ``src`` is absent.
    Raises ``OSError``."""
    done = _rename2(src, dst, directory, _NOREPLACE)
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
        _unlink_at(src, directory)
    return True


def _image_at(directory: int, name: str) -> Image | str:
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
        fd = os.open(name, _READ_FLAGS | _NONBLOCK, dir_fd=directory)
    except FileNotFoundError:
        return ABSENT
    except OSError:
        return NOT_REGULAR
    return _read_fd(fd, st)


def same_image(found: Image | str, expected: Image) -> bool:
    """Whether ``found`` (a :func:`read_image` result) is ``expected``: the same bytes (SHA-256) and, when both
    are known, the same permission bits — a ``chmod`` (e.g. of the executable bit git tracks) is a change
    of the user's as much as a save is."""
    if isinstance(found, str) or found.sha256 != expected.sha256:
        return False
    return found.mode is None or expected.mode is None or stat.S_IMODE(found.mode) == stat.S_IMODE(expected.mode)


def _image_sha(image: Image | str) -> str | None:
    return image if isinstance(image, str) else image.sha256


def _replace_by_path(
    root: Path, rel: str, old: Image, new: Image, tmp_name: str, step: Step, prune: int | None = None
) -> Outcome:
    """:func:`replace_image` where descriptors cannot name directories (Windows): re-hash, then the
    path-based write (a save between the two is replaced: no exchange exists there)."""
    if not same_image(read_image(root, rel), old):
        return Outcome.CHANGED
    _write_image_by_path(root, rel, new, tmp_name, prune)
    for name in WRITE_STEPS[write_kind(old, new)]:
        step(name)
    return Outcome.WRITTEN


def read_tmp(root: Path, rel: str, tmp_name: str) -> Image | str:
    """The :class:`Image` held by the temp file ``tmp_name`` beside ``root/rel`` (:data:`ABSENT` when there
    is none, :data:`NOT_REGULAR` when it is not a regular file or not one of our temp names)."""
    if not TMP_NAME.match(tmp_name):
        return NOT_REGULAR
    parts = _parts(rel)
    if not parts:
        return NOT_REGULAR
    return read_image(root, "/".join([*parts[:-1], tmp_name]))


def prune_empty_parents(root: Path, rel: str, limit: int | None = None) -> None:
    """Remove the empty parent directories of ``root/rel`` bottom-up, starting from the deepest one that
    exists (a kill may have removed the lower ones already); never ``root``, no symlink followed, stops at
    the first that is not empty. ``limit``: only among the lowest ``limit`` parents (those a write made;
    ``None``: all). Never raises."""
    parents = _parts(rel)[:-1]
    keep = 0 if limit is None else max(len(parents) - limit, 0)  # parents[:keep]: never removed
    if len(parents) <= keep:
        return
    if not _DIR_FD:
        deepest, stop = Path(root, *parents), Path(root, *parents[:keep])
        while deepest != stop and not deepest.is_dir():
            deepest = deepest.parent
        _prune_empty_dirs(stop, deepest)
        return
    try:
        fds = [os.open(root, _ROOT_FLAGS)]
    except OSError:
        return
    try:
        for part in parents:
            try:
                fds.append(os.open(part, _DIR_FLAGS, dir_fd=fds[-1]))
            except OSError:
                break
        for index in range(len(fds) - 2, keep - 1, -1):  # parents[index] is opened as fds[index + 1]
            try:
                os.rmdir(parents[index], dir_fd=fds[index])
            except OSError:
                return
    finally:
        _close_all(fds)


def missing_parents(root: Path, rel: str) -> int:
    """How many parent directories of ``root/rel`` do not exist (those a write of it would make): the
    ``prune`` limit of removing it again (:func:`replace_image`). A symlink or file on the way counts as
    existing (nothing would be made, nothing is ever removed through it)."""
    parents = _parts(rel)[:-1]
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
    parts = _parts(rel)
    if not parts or not TMP_NAME.match(tmp_name) or not _DIR_FD:
        return False
    try:
        fds = _open_parents(root, parts, create=False)
    except OSError:
        return False
    if fds is None:
        return False
    try:
        directory, name = fds[-1], parts[-1]
        try:
            if _swap(tmp_name, name, directory):
                return True
            return _move_no_replace(tmp_name, name, directory)
        except OSError:
            return False
    finally:
        _close_all(fds)


def _write_all(fd: int, image: Image) -> None:
    assert image.data is not None
    write_fully(fd, image.data)
    if hasattr(os, "fchmod"):  # Windows: no permission bits to keep (docs/design.md §17)
        os.fchmod(fd, image.mode if image.mode is not None else new_file_mode())


def _write_image_by_path(root: Path, rel: str, image: Image, tmp_name: str, prune: int | None = None) -> None:
    """:func:`write_image` where descriptors cannot name directories (Windows): ``lstat`` per parent."""
    parts = _parts(rel)
    parent = os.fspath(root)
    for part in parts[:-1]:
        parent = os.path.join(parent, part)
        try:
            st = os.lstat(parent)
        except FileNotFoundError:
            if image.data is None:
                return  # nothing to delete below a missing directory
            os.mkdir(parent)
            continue
        if not stat.S_ISDIR(st.st_mode):  # a symlink or a file: never write through it
            raise NotADirectoryError(f"not a directory: {'/'.join(parts[:-1])}")
    target = os.path.join(parent, parts[-1])
    if image.data is None:
        try:
            os.unlink(target)
        except FileNotFoundError:
            pass
        prune_empty_parents(root, rel, prune)
        return
    replace_via_temp(os.path.join(parent, part_name(tmp_name)), target, _TMP_FLAGS, lambda fd: _write_all(fd, image))


def set_mode(root: Path, rel: str, mode: int) -> None:
    """``chmod`` the regular file ``root/rel`` without following a symlink anywhere on the path (POSIX:
    ``fchmod`` of a descriptor opened ``O_NOFOLLOW`` relative to its directory's descriptor). Raises
    ``OSError`` (also when it is not a regular file)."""
    if not _DIR_FD:
        if not isinstance(lstat_path(root, rel), os.stat_result):
            raise OSError(errno.EINVAL, "not a regular file")
        os.chmod(os.path.join(root, rel), mode)
        return
    parts = _parts(rel)
    fds = _open_parents(root, parts, create=False)
    if fds is None:
        raise FileNotFoundError(errno.ENOENT, "no such file")
    try:
        fd = os.open(parts[-1], _READ_FLAGS | _NONBLOCK, dir_fd=fds[-1])
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise OSError(errno.EINVAL, "not a regular file")
            os.fchmod(fd, mode)
        finally:
            os.close(fd)
    finally:
        _close_all(fds)


def remove_tmp(root: Path, rel: str, tmp_name: str, *, part: bool = False) -> bool:
    """Remove the temp file ``tmp_name`` (with ``part``: its :func:`part_name`) beside ``root/rel`` if it is
    a regular file reached without crossing a symlink (POSIX: ``unlink`` relative to the directory's
    ``O_NOFOLLOW`` descriptor). True when a file was removed. Never raises."""
    if not TMP_NAME.match(tmp_name):
        return False
    if part:
        tmp_name = part_name(tmp_name)
    parts = _parts(rel)
    if not parts:
        return False
    if not _DIR_FD:
        tmp_rel = "/".join([*parts[:-1], tmp_name])
        if not isinstance(lstat_path(root, tmp_rel), os.stat_result):
            return False
        unlink_quietly(os.path.join(root, *parts[:-1], tmp_name))
        return True
    try:
        fds = _open_parents(root, parts, create=False)
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
        _unlink_at(tmp_name, fds[-1])
        return True
    finally:
        _close_all(fds)


# ---------------------------------------------------------------- directory descriptors (POSIX)

#: Whether this platform can open directories and name files relative to them (every POSIX system
#: Python supports); else the path-based fallbacks run (Windows).
_DIR_FD = (
    os.name == "posix"
    and hasattr(os, "O_DIRECTORY")
    and hasattr(os, "O_NOFOLLOW")
    and {os.open, os.stat, os.mkdir, os.rename, os.unlink, os.rmdir} <= os.supports_dir_fd
    and os.stat in os.supports_follow_symlinks
)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)  # a FIFO swapped in after the stat never blocks the open
_ROOT_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _CLOEXEC
_DIR_FLAGS = _ROOT_FLAGS | getattr(os, "O_NOFOLLOW", 0)
_TMP_FLAGS = (os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | _CLOEXEC
              | getattr(os, "O_BINARY", 0))


def _open_parents(root: Path, parts: list[str], *, create: bool) -> list[int] | None:
    """Descriptors of ``root`` and of each parent directory of ``parts[-1]``, in order, each opened
    relative to the one before with ``O_DIRECTORY|O_NOFOLLOW``. ``None`` when one is missing (and
    ``create`` is false); with ``create`` a missing one is made (``mkdir(dir_fd=)``). Raises
    ``NotADirectoryError`` for a symlink or non-directory on the way, ``OSError`` otherwise."""
    fds = [os.open(root, _ROOT_FLAGS)]
    try:
        for index, part in enumerate(parts[:-1]):
            fd = _open_dir(fds[-1], part, create, parts[: index + 1])
            if fd is None:
                _close_all(fds)
                return None
            fds.append(fd)
    except BaseException:
        _close_all(fds)
        raise
    return fds


def _open_dir(parent: int, name: str, create: bool, shown: list[str]) -> int | None:
    """``name`` opened as a directory relative to ``parent``, never following a symlink; ``None`` when
    missing and not ``create`` (else made first, then opened the same way)."""
    try:
        try:
            return os.open(name, _DIR_FLAGS, dir_fd=parent)
        except FileNotFoundError:
            if not create:
                return None
        try:
            os.mkdir(name, 0o777, dir_fd=parent)
        except FileExistsError:
            pass  # made meanwhile: opened (never followed) just below
        return os.open(name, _DIR_FLAGS, dir_fd=parent)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):  # a symlink (EMLINK: BSD) or a file
            raise NotADirectoryError(errno.ENOTDIR, f"not a directory: {'/'.join(shown)}") from None
        raise


def _close_all(fds: list[int]) -> None:
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


def _unlink_at(name: str, directory: int) -> None:
    try:
        os.unlink(name, dir_fd=directory)
    except OSError:
        pass


def _prune_empty_dirs_at(fds: list[int], parts: list[str], limit: int | None = None) -> None:
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


_EXCHANGE, _NOREPLACE = 2, 1  # renameat2 flags


def _swap(tmp: str, target: str, directory: int) -> bool | None:
    """Exchange ``tmp`` and ``target`` atomically (Linux ``renameat2(RENAME_EXCHANGE)``), both named
    relative to the directory descriptor ``directory``. False when one is absent, ``None`` when this
    system or file system cannot exchange. Raises ``OSError``."""
    return _rename2(tmp, target, directory, _EXCHANGE)


def _rename2(src: str, dst: str, directory: int, flags: int) -> bool | None:
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


def _prune_empty_dirs(root: Path, directory: Path) -> None:
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



def part_name(tmp_name: str) -> str:
    """The name a temp file is written under before it becomes ``tmp_name`` (``.spotpatch-<hex>.part``):
    only this name can hold a write cut short, and nothing is ever exchanged or moved into it."""
    return tmp_name.removesuffix(".tmp") + ".part"


def new_tmp_name() -> str:
    """A fresh same-directory temp file name (recorded in the journal, so recovery can remove it)."""
    return f".spotpatch-{secrets.token_hex(8)}.tmp"
