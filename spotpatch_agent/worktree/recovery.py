"""Repair of the crash journals a killed Apply or Revert left, at the next engine start
(docs/security.md §7, "Crash safety").

"Apply and revert must survive a crash midway: leave a journal so the next start can tell and repair a
half-written apply." The journal and the write are :mod:`~spotpatch_agent.worktree.journal`; this module
brings every touched path back to the state *without* the agent's change — the bytes the user had before
Apply: a half-done Apply is rolled back (outcome ``rolled-back``), a half-done Revert is completed
(``completed``). Jobs live in memory only (the spec: jobs are not restored after a restart), so after a
restart no job exists that could revert a rolled-forward Apply; the baseline state needs no job to undo
and is what the user's tree was before they clicked.

Per path it is a state machine over what a kill can leave (:func:`_recover_path`): the path holds its
pre-image, its post-image or neither; its ``.part`` file (a write cut short: nothing is ever exchanged
into that name) is present or not; its temp file is absent, a whole image or what a killed exchange or
move took out of the path (possibly a save). Every step is idempotent, so a recovery killed at any
point is finished by the next: the ``.part`` file is deleted; a temp file is deleted only when it is
byte-identical to one of the path's two images, which the journal holds; a temp file holding other bytes
(even a prefix of an image, or nothing) is put back at the path; the path is then written from
the journal's bytes. A path holding neither image (edited after the crash), and every path when HEAD
moved, is left untouched and reported (``needs-attention``), and the journal — every image — is then kept
aside in ``<git-dir>/spotpatch/quarantine/`` instead of deleted. Nothing outside the journal is touched;
the index, HEAD and refs never are. Step boundaries (tests only): ``recover:file-<k>:<step>`` and
``recover:journal:removed`` (:func:`~spotpatch_agent.worktree.journal.fault_point`).
"""

from __future__ import annotations

import errno
import logging
import os
import secrets
import stat
import time
from pathlib import Path
from typing import Literal

import anyio

from spotpatch_agent.errors import SpotPatchError
from spotpatch_agent.policy.redact import redact_cut
from spotpatch_agent.protocol.models import RecoveryReport
from spotpatch_agent.worktree.gitdir_files import UnsafeGitDirEntry, folder, split_git_path
from spotpatch_agent.worktree.image_write import Outcome, Step, replace_image
from spotpatch_agent.worktree.images import (
    Image,
    prune_empty_parents,
    put_back,
    read_image,
    read_tmp,
    remove_tmp,
    set_mode,
)
from spotpatch_agent.worktree.journal import (
    _SUFFIX,
    Operation,
    PathWrite,
    _reason,
    _stepper,
    decode_plan,
    fault_point,
    journal_dir,
    list_paths,
    valid_job_id,
)
from spotpatch_agent.worktree.lock import ProjectWriteLock
from spotpatch_agent.worktree.repo import locate, resolve_head

__all__ = ["QUARANTINE_DIR", "recover_pending", "recover_under_lock"]

log = logging.getLogger("spotpatch.worktree")


async def recover_pending(root: Path, *, git_dir: Path | None = None) -> list[RecoveryReport]:
    """Repair every half-written Apply/Revert of ``root`` left by a crashed engine (docs/security.md §7).

    ``git_dir``: the working tree's git dir when known (saves one git call). For each journal: when HEAD
    still equals the journal's, every touched path holding its pre- or post-image is brought to the
    no-change state (Apply → pre-image, ``rolled-back``; Revert → post-image, ``completed``) by an atomic
    write, whatever temp files the crash left (see :func:`_recover_path`); a path holding neither, or
    whose temp file holds a save, is left with the user's bytes and listed in ``unresolvedPaths``
    (``needs-attention``); when HEAD moved nothing is written and every path is unresolved. Then the
    journal is removed — or, with an unresolved path, kept aside in ``<git-dir>/spotpatch/quarantine/``
    (it holds every image; never deleted). Idempotent: a recovery killed at any step is finished by the
    next. Call it holding the project write lock (worktree/lock.py) with no Apply/Revert
    running. Returns one :class:`RecoveryReport` per journal (paths relative). A journal that cannot be
    trusted — unreadable, truncated, not our format, or naming an absolute path, ``..`` or ``.git`` — is
    never acted on: it is moved to ``<git-dir>/spotpatch/quarantine/``, logged with a relative message and
    reported ``needs-attention`` with no paths; a failure while repairing one is reported the same way (the
    journal is kept). Never raises for a journal; raises :class:`~spotpatch_agent.errors.GitError` only if
    git cannot run.
    """
    if git_dir is None:
        layout = await locate(root)
        if layout is None:
            return []
        git_dir = layout.git_dir
    directory = journal_dir(git_dir)
    names = await anyio.to_thread.run_sync(_pending_names, directory)
    if not names:
        return []
    head = await resolve_head(root)
    reports = []
    for name in names:
        try:
            report = await anyio.to_thread.run_sync(_recover_one, root, directory, name, head)
        except Exception as exc:  # noqa: BLE001 - one bad journal never stops the engine starting; it stays for the next start
            log.error("crash recovery of %s failed (%s); the journal was kept, check the files it may name by hand",
                      _shown(root, directory / name), type(exc).__name__)
            report = RecoveryReport(job_id=_job_id_of(name), operation="apply", outcome="needs-attention", paths=[])
        _log_report(report)
        reports.append(report)
    return reports


def _pending_names(directory: Path) -> list[str]:
    try:  # never through a symlink planted at .git/spotpatch/journal (gitdir_files)
        with folder(*split_git_path(directory), create=False) as where:
            names = where.names()
    except FileNotFoundError:
        return []
    except UnsafeGitDirEntry as exc:
        log.error("crash recovery skipped: %s (`spotpatch-agent doctor` lists every such entry)", exc.strerror)
        return []
    except OSError as exc:  # not a directory, no permission…: never stops the engine starting
        log.error("the crash journal directory cannot be read (%s); check it by hand", _reason(exc))
        return []
    for name in names:  # an unfinished journal write: nothing was written to the tree after it
        if name.startswith(".") and name.endswith(".tmp"):
            _unlink_quietly(directory, name)
    return [n for n in names if n.endswith(_SUFFIX) and not n.startswith(".")]


def _read_journal(directory: Path, name: str) -> bytes:
    """The bytes of the journal ``name``: a regular file opened without following a symlink anywhere
    under the git directory (never a FIFO waited on). Raises ``OSError``."""
    with folder(*split_git_path(directory), create=False) as where:
        fd = where.open(name, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _unlink_quietly(directory: Path, name: str) -> None:
    try:
        with folder(*split_git_path(directory), create=False) as where:
            where.unlink(name)
    except OSError:
        pass


def _recover_one(root: Path, directory: Path, name: str, head: str | None) -> RecoveryReport:
    try:
        plan = decode_plan(_read_journal(directory, name))
    except (OSError, ValueError) as exc:
        return _quarantine(root, directory, name, exc)
    paths = [w.path for w in plan.writes]
    unresolved: list[str] = []
    for number, write in enumerate(plan.writes, start=1):
        step = _stepper("recover", f"file-{number}")
        if not _recover_path(root, write, plan.operation, repair=head == plan.head, step=step):
            unresolved.append(write.path)
    if unresolved:
        # Some path does not hold its no-change image: the journal (every pre- and post-image) is kept
        # aside for the user instead of deleted, so no image is ever lost.
        _keep_aside(root, directory, name, unresolved)
    else:
        _unlink_quietly(directory, name)
        _fsync_dir_quietly(directory)
    fault_point("recover", "journal:removed")
    outcome: Literal["completed", "rolled-back", "needs-attention"] = (
        "needs-attention" if unresolved else ("rolled-back" if plan.operation == "apply" else "completed")
    )
    return RecoveryReport(job_id=plan.job_id, operation=plan.operation, outcome=outcome, paths=paths,
                          unresolved_paths=unresolved)


def _recover_path(root: Path, write: PathWrite, operation: Operation, *, repair: bool, step: Step) -> bool:
    """Bring one path to its no-change image (a state machine over what a kill can leave: the path holds
    the pre-image, the post-image or neither; its temp file is absent, a partial or whole image, or a save
    a killed write had swapped out). True when the path holds its no-change image and no temp file is
    left; False (reported ``needs-attention``) when it holds bytes that are neither image, a temp file
    holds such bytes, or ``repair`` is false (HEAD moved: no file is written, only our own temp files go).

    Every step is idempotent and leaves a state this function handles: the ``.part`` file (only ever a
    write of ours cut short) is deleted; a temp file is deleted only when it is byte-identical to one of
    the two images, which the journal holds (never guessed from a prefix: a save can be one); a temp file
    holding other bytes is put back at the path when the path holds an image (the killed write had
    swapped it out), else left where it is."""
    target, other = (write.pre, write.post) if operation == "apply" else (write.post, write.pre)
    images = (write.pre, write.post)
    if remove_tmp(root, write.path, write.tmp, part=True):  # a write cut short: only ever our bytes
        step("part-removed")
    tmp = read_tmp(root, write.path, write.tmp)
    if isinstance(tmp, str):
        return False  # not a regular file under our temp name: not ours to touch
    if tmp.data is not None:
        if _ours(tmp.data, images):
            remove_tmp(root, write.path, write.tmp)
            step("tmp-removed")
        else:
            current = read_image(root, write.path)
            if repair and isinstance(current, Image) and current.sha256 in {i.sha256 for i in images} \
                    and put_back(root, write.path, write.tmp):
                step("put-back")
                left = read_tmp(root, write.path, write.tmp)
                if isinstance(left, Image) and left.data is not None and _ours(left.data, images):
                    remove_tmp(root, write.path, write.tmp)
                    step("tmp-removed")
            return False
    if not repair:
        return False
    current = read_image(root, write.path)
    if isinstance(current, str):
        return False
    if current.sha256 == target.sha256:
        if target.data is not None and target.mode is not None and current.mode != target.mode:
            try:
                set_mode(root, write.path, target.mode)
            except OSError:
                return False
        if target.data is None:
            prune_empty_parents(root, write.path, write.dirs)  # a directory a killed create had made
        return True
    if current.sha256 != other.sha256:
        return False
    try:
        # Judged by its bytes (a mode left by the killed write is fixed, as above): mode None is not compared.
        found = Image(other.data, None)
        return replace_image(root, write.path, found, target, write.tmp, step=step, prune=write.dirs) \
            is Outcome.WRITTEN
    except OSError:
        return False


def _ours(data: bytes, images: tuple[Image, ...]) -> bool:
    """Whether temp-file bytes are byte-identical to one of the journalled images (which the journal keeps).

    Never guessed from a prefix: a write cut short is only ever under the ``.part`` name; the temp name
    holds a whole image of ours or what came out of an exchange or move — possibly a user's save that is a
    prefix of an image, or empty, which must be kept."""
    return any(image.data is not None and image.data == data for image in images)


def _keep_aside(root: Path, directory: Path, name: str, unresolved: list[str]) -> None:
    """Move a journal whose paths are not all repaired to ``<git-dir>/spotpatch/quarantine/`` (kept, never
    applied, never deleted: it holds the bytes of every path before and after the write)."""
    log.warning("crash recovery: the bytes before and after the interrupted write of %s are kept in %s",
                list_paths(unresolved), _move_aside(root, directory, name))


def _move_aside(root: Path, directory: Path, name: str) -> str:
    """Move the journal ``name`` to the quarantine directory; where it is now, for a log line."""
    aside = f"{name}.{int(time.time())}-{secrets.token_hex(4)}"
    git_dir, parts = split_git_path(directory)
    try:  # neither folder through a symlink planted under .git/spotpatch (gitdir_files)
        with folder(git_dir, parts, create=False) as source, \
                folder(git_dir, (*parts[:-1], QUARANTINE_DIR[-1]), create=True) as quarantine:
            source.rename(name, quarantine, aside)
            if os.name != "nt":
                source.fsync()
    except OSError:
        return f"{_shown(root, directory / name)} (it could not be moved aside)"
    return _shown(root, directory.parent / QUARANTINE_DIR[-1] / aside)


#: Where an unreadable journal is moved (beside the journal directory; never read or deleted by SpotPatch).
QUARANTINE_DIR = ("spotpatch", "quarantine")


def _quarantine(root: Path, directory: Path, name: str, exc: OSError | ValueError) -> RecoveryReport:
    """A journal that is unreadable, truncated, foreign or names an unsafe path: nothing it names is
    touched; it is moved aside to ``<git-dir>/spotpatch/quarantine/`` (kept for the user, never applied,
    never deleted) and reported ``needs-attention``. If it cannot be moved it stays (reported again)."""
    source = directory / name
    reason = str(exc) if isinstance(exc, ValueError) else (exc.strerror or type(exc).__name__)
    log.error("crash journal %s is unreadable (%s); nothing it names was changed; kept in %s: check the files the "
              "interrupted apply or revert may have touched by hand", _shown(root, source), _bounded(reason),
              _move_aside(root, directory, name))
    return RecoveryReport(job_id=_job_id_of(name), operation="apply", outcome="needs-attention", paths=[])


def _job_id_of(name: str) -> str:
    stem = name.removesuffix(_SUFFIX)
    return stem if valid_job_id(stem) else "unknown"


def _shown(root: Path, path: Path) -> str:
    """``path`` relative to the project when inside it (a linked worktree's git dir is not): bounded, printable."""
    try:
        text = path.relative_to(root).as_posix()
    except ValueError:
        parts = path.parts
        text = "<git dir>/" + "/".join(parts[parts.index("spotpatch"):]) if "spotpatch" in parts else path.name
    return _bounded(text)


def _bounded(text: str, limit: int = 200) -> str:
    return redact_cut("".join(c if c.isprintable() else "?" for c in text), limit)


def _fsync_dir_quietly(directory: Path) -> None:
    if os.name == "nt":  # Windows cannot open a directory for fsync; NTFS journals the rename itself
        return
    try:
        with folder(*split_git_path(directory), create=False) as where:
            where.fsync()
    except OSError:
        pass


def _log_report(report: RecoveryReport) -> None:
    if not report.paths:  # a quarantined or failed journal: logged where it was judged
        return
    shown = ", ".join(report.paths[:5]) + (f" (and {len(report.paths) - 5} more)" if len(report.paths) > 5 else "")
    if report.outcome == "needs-attention":
        log.warning("crash recovery: the interrupted %s of %s needs attention; left untouched, resolve by hand: %s "
                    "(touched: %s)", report.operation, report.job_id, ", ".join(report.unresolved_paths), shown)
    else:
        log.warning("crash recovery: the interrupted %s of %s was %s: %s", report.operation, report.job_id,
                    report.outcome, shown)


async def recover_under_lock(root: Path, git_dir: Path, lock: ProjectWriteLock) -> list[RecoveryReport]:
    """:func:`recover_pending` holding the project write lock (worktree/lock.py), never waiting for it.

    When another engine (or a running job) holds the lock, its journal may belong to a write in flight:
    nothing is recovered and ``[]`` is returned (the holder's own start already recovered)."""
    try:
        taken = lock.try_acquire()
    except SpotPatchError as exc:  # .git/spotpatch is a symlink: refused; a job's start says so again
        log.error("crash recovery skipped: %s", exc.message)
        return []
    if not taken:
        log.info("crash recovery skipped: another SpotPatch engine holds this project's write lock")
        return []
    try:
        return await recover_pending(root, git_dir=git_dir)
    finally:
        lock.release()
