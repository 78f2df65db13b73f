"""Writing one file image into the user's working tree, atomically and without losing a racing save
(docs/design.md §8).

:func:`replace_image` replaces the file through a same-directory temp file, so the file is wholly old or
wholly new at any instant, and discards nothing it has not verified to be the expected old image: a save
racing the write is put back (:class:`Outcome`). Its steps (:data:`WRITE_STEPS`) are the boundaries the
crash tests kill at. Reading, and the temp-file upkeep recovery needs, are in
:mod:`~spotpatch_agent.worktree.images`.
"""

from __future__ import annotations

import enum
import errno
import os
import stat
from collections.abc import Callable
from pathlib import Path

from spotpatch_agent.worktree.dirfd import (
    DIR_FD,
    NOREPLACE,
    TMP_FLAGS,
    close_all,
    move_no_replace,
    open_parents,
    prune_empty_dirs_at,
    rename2,
    replace_via_temp,
    swap,
    unlink_at,
    write_fully,
)
from spotpatch_agent.worktree.images import (
    Image,
    image_at,
    new_file_mode,
    part_name,
    path_parts,
    prune_empty_parents,
    read_image,
    same_image,
)

__all__ = ["WRITE_STEPS", "Outcome", "Step", "replace_image", "write_image", "write_kind"]


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
    if not DIR_FD:
        return _replace_by_path(root, rel, old, new, tmp_name, step, prune)
    parts = path_parts(rel)
    if not parts:
        raise IsADirectoryError("no file name")
    fds = open_parents(root, parts, create=new.data is not None)
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
        close_all(fds)


def _write_tmp_at(directory: int, tmp_name: str, image: Image) -> None:
    """Write ``image`` under :func:`part_name`, then rename it to ``tmp_name`` without replacing: after a
    kill a file under ``tmp_name`` is never a write cut short — it holds a whole image of ours, or what came
    out of an exchange or move (which recovery never deletes unless it is a journalled image). Not
    ``fdatasync``'d (2.5-4.5 ms a file measured here, against ~5 ms for a whole 20-file Apply): after a
    power loss the temp name may hold an unflushed image, which recovery keeps like a save
    (docs/architecture.md)."""
    part = part_name(tmp_name)
    fd = os.open(part, TMP_FLAGS, 0o600, dir_fd=directory)
    try:
        try:
            _write_all(fd, image)
        finally:
            os.close(fd)
        if not move_no_replace(part, tmp_name, directory):
            raise FileNotFoundError(errno.ENOENT, "the temp file vanished")
    except BaseException:
        unlink_at(part, directory)
        raise


def _exchange_at(directory: int, name: str, old: Image, new: Image, tmp_name: str, step: Step) -> Outcome:
    try:
        swapped = swap(tmp_name, name, directory)
        if swapped is None:  # no exchange here: re-check, then rename over (the documented window)
            if not same_image(image_at(directory, name), old):
                unlink_at(tmp_name, directory)
                return Outcome.CHANGED
            os.rename(tmp_name, name, src_dir_fd=directory, dst_dir_fd=directory)
            step("exchanged")
            step("unlinked")
            return Outcome.WRITTEN
    except BaseException:
        unlink_at(tmp_name, directory)
        raise
    if not swapped:  # the path is gone (deleted meanwhile): nothing to keep
        unlink_at(tmp_name, directory)
        return Outcome.CHANGED
    step("exchanged")
    if same_image(image_at(directory, tmp_name), old):
        unlink_at(tmp_name, directory)  # verified: the old bytes (also in the journal)
        step("unlinked")
        return Outcome.WRITTEN
    # Not the bytes we replaced: a save raced us. Put them back; the temp name then holds ours again.
    if not swap(tmp_name, name, directory):
        raise OSError(errno.EIO, "a file changed while it was written and could not be put back")
    step("put-back")
    if _image_sha(image_at(directory, tmp_name)) == new.sha256:
        unlink_at(tmp_name, directory)
        return Outcome.CHANGED
    return Outcome.CHANGED_KEPT  # saved again into our file meanwhile: both versions stay


def _place_at(directory: int, name: str, tmp_name: str, step: Step) -> Outcome:
    try:
        if not move_no_replace(tmp_name, name, directory, unlink_src=False):
            raise FileNotFoundError(errno.ENOENT, "the temp file vanished")
    except FileExistsError:  # created meanwhile: the user's file stays
        unlink_at(tmp_name, directory)
        return Outcome.CHANGED
    except BaseException:
        unlink_at(tmp_name, directory)
        raise
    step("placed")
    unlink_at(tmp_name, directory)  # after a hard link: the file's second name
    step("unlinked")
    return Outcome.WRITTEN


def _delete_at(fds: list[int], parts: list[str], old: Image, tmp_name: str, step: Step, prune: int | None) -> Outcome:
    directory, name = fds[-1], parts[-1]
    if not _take_aside(name, tmp_name, directory):
        return Outcome.CHANGED if old.data is not None else Outcome.WRITTEN  # already absent
    step("moved")
    if same_image(image_at(directory, tmp_name), old):
        unlink_at(tmp_name, directory)
        prune_empty_dirs_at(fds, parts, prune)
        step("unlinked")
        return Outcome.WRITTEN
    try:
        move_no_replace(tmp_name, name, directory)
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
    done = rename2(name, tmp_name, directory, NOREPLACE)
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


def _write_all(fd: int, image: Image) -> None:
    assert image.data is not None
    write_fully(fd, image.data)
    if hasattr(os, "fchmod"):  # Windows: no permission bits to keep (docs/design.md §17)
        os.fchmod(fd, image.mode if image.mode is not None else new_file_mode())


def _write_image_by_path(root: Path, rel: str, image: Image, tmp_name: str, prune: int | None = None) -> None:
    """:func:`write_image` where descriptors cannot name directories (Windows): ``lstat`` per parent."""
    parts = path_parts(rel)
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
    replace_via_temp(os.path.join(parent, part_name(tmp_name)), target, TMP_FLAGS, lambda fd: _write_all(fd, image))
