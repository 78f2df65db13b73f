"""Crash journal of Apply and Revert, and its repair at the next engine start (DESIGN.md §8).

"Apply and revert must survive a crash midway: leave a journal so the next start can tell and repair a
half-written apply." Protocol of one write (:func:`write_journalled`, called by
:mod:`~spotpatch_agent.worktree.changes`; file I/O in :mod:`~spotpatch_agent.worktree.images`)::

    plan      every touched path: pre-image and post-image (bytes, SHA-256, permission bits; None = absent)
    begin     <git-dir>/spotpatch/journal/<jobId>.journal written whole: temp file, fdatasync, rename, fsync dir
    write     per path: temp file in the same directory, swapped or renamed into place (or an unlink),
              so each file is wholly old or wholly new at any instant
    end       journal removed (only once every path is verified; a failed roll-back keeps it)

Journal file (one write, then ``fdatasync``): line 1 is a JSON header ``{format, version, jobId, operation, head,
entries: [{path, tmp, pre, post}]}`` where ``pre``/``post`` are ``null`` (absent) or ``{sha256, mode,
offset, length}``; after that newline come the image bytes (each distinct image once), which ``offset``
and ``length`` (bytes) address. The directory is the *per-worktree* git dir, not the common one: a
journal concerns one working tree. Mode ``0700``/``0600``: it holds source bytes, only while a write is
in flight or until the next start after a crash.

Recovery (:func:`recover_pending`) brings every touched path back to the state *without* the agent's
change — the bytes the user had before Apply: a half-done Apply is rolled back (outcome ``rolled-back``),
a half-done Revert is completed (``completed``). Jobs live in memory only (the spec: jobs are not
restored after a restart), so after a restart no job exists that could revert a rolled-forward Apply;
the baseline state needs no job to undo and is what the user's tree was before they clicked. A path holding neither image (edited
after the crash), and every path when HEAD moved, is left untouched and reported (``needs-attention``).
Nothing outside the journal is touched; the index, HEAD and refs never are.

Test-only: :func:`fault_point` pauses at a named write step when ``SPOTPATCH_TEST_FAULT_PAUSE`` names it
(fault-injection tests kill the engine there). Unset in production, it costs one environment lookup.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

import anyio

from spotpatch_agent.errors import SpotPatchError
from spotpatch_agent.policy.redact import redact_cut
from spotpatch_agent.protocol.errors import ErrorCode
from spotpatch_agent.protocol.models import RecoveryReport
from spotpatch_agent.worktree.images import (
    ABSENT,
    TMP_NAME,
    Image,
    file_hash,
    read_image,
    remove_tmp,
    replace_via_temp,
    safe_path,
    set_mode,
    unlink_quietly,
    write_fully,
    write_image,
)
from spotpatch_agent.worktree.lock import ProjectWriteLock
from spotpatch_agent.worktree.repo import locate, resolve_head

__all__ = [
    "FAULT_ENV",
    "JOURNAL_DIR",
    "ChangeJournal",
    "DiskJournal",
    "PathWrite",
    "WritePlan",
    "decode_plan",
    "encode_plan",
    "fault_point",
    "journal_dir",
    "list_paths",
    "recover_pending",
    "recover_under_lock",
    "valid_job_id",
    "write_journalled",
    "write_journalled_sync",
]

log = logging.getLogger("spotpatch.worktree")

Operation = Literal["apply", "revert"]

#: Test-only environment variable: ``<operation>:<step>`` where the engine pauses (see :func:`fault_point`).
FAULT_ENV = "SPOTPATCH_TEST_FAULT_PAUSE"
#: Journal directory inside the working tree's git dir.
JOURNAL_DIR = ("spotpatch", "journal")

_FORMAT, _VERSION = "spotpatch-journal", 1
_SUFFIX = ".journal"
_JOB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")


# ---------------------------------------------------------------- the journal


@dataclass(frozen=True)
class PathWrite:
    """One touched path (relative POSIX): its image before (``pre``) and after (``post``) the write."""

    path: str
    pre: Image
    post: Image
    tmp: str


@dataclass(frozen=True)
class WritePlan:
    """Everything one Apply or Revert will write, journalled before the first byte (DESIGN.md §8)."""

    job_id: str
    operation: Operation
    head: str
    writes: list[PathWrite]


def journal_dir(git_dir: Path) -> Path:
    """``<git-dir>/spotpatch/journal`` of one working tree."""
    return git_dir.joinpath(*JOURNAL_DIR)


def valid_job_id(job_id: str) -> bool:
    """Whether ``job_id`` can name a journal file: 1–64 of ``[A-Za-z0-9_-]``, not starting with ``-``/``_``."""
    return bool(_JOB_ID.match(job_id))


def encode_plan(plan: WritePlan) -> bytes:
    """The journal file's bytes: JSON header line, then every distinct image once."""
    blobs: list[bytes] = []
    offsets: dict[str, tuple[int, int]] = {}
    size = 0

    def ref(image: Image) -> dict[str, Any] | None:
        nonlocal size
        if image.data is None:
            return None
        digest = image.sha256
        assert digest is not None
        if digest not in offsets:
            offsets[digest] = (size, len(image.data))
            blobs.append(image.data)
            size += len(image.data)
        offset, length = offsets[digest]
        return {"sha256": digest, "mode": image.mode, "offset": offset, "length": length}

    entries = [{"path": w.path, "tmp": w.tmp, "pre": ref(w.pre), "post": ref(w.post)} for w in plan.writes]
    header = {"format": _FORMAT, "version": _VERSION, "jobId": plan.job_id, "operation": plan.operation,
              "head": plan.head, "entries": entries}
    return json.dumps(header, ensure_ascii=True, separators=(",", ":")).encode("ascii") + b"\n" + b"".join(blobs)


def decode_plan(raw: bytes) -> WritePlan:
    """Parse a journal file; every image's bytes must match its recorded SHA-256. Raises ``ValueError`` —
    and only ``ValueError`` — for anything else: truncated, not JSON, JSON of another shape (``null``,
    ``[]``, a string…), a foreign format, or an unsafe path (absolute, ``..``, into ``.git``, a drive…)."""
    try:
        return _decode_plan(raw)
    except ValueError:
        raise
    except (KeyError, TypeError, AttributeError, IndexError, OverflowError, RecursionError) as exc:
        raise ValueError(f"malformed journal ({type(exc).__name__})") from None


def _decode_plan(raw: bytes) -> WritePlan:
    head_line, sep, data = raw.partition(b"\n")
    if not sep:
        raise ValueError("no header line")
    header = json.loads(head_line)
    if not isinstance(header, dict):
        raise ValueError("the header is not a JSON object")  # noqa: TRY004 - ValueError is the contract
    if header.get("format") != _FORMAT or header.get("version") != _VERSION:
        raise ValueError("unknown journal format")
    job_id, operation, head = header.get("jobId"), header.get("operation"), header.get("head")
    if operation not in ("apply", "revert") or not isinstance(job_id, str) or not valid_job_id(job_id):
        raise ValueError("bad operation or job id")
    if not isinstance(head, str) or not re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", head):
        raise ValueError("bad HEAD")
    entries = header.get("entries")
    if not isinstance(entries, list):
        raise ValueError("no entries")  # noqa: TRY004 - ValueError is the contract

    def number(value: object) -> int:
        if type(value) is not int or value < 0:
            raise ValueError("bad number in journal")
        return value

    def image(ref: object) -> Image:
        if ref is None:
            return ABSENT
        if not isinstance(ref, dict):
            raise ValueError("bad image reference")  # noqa: TRY004 - ValueError is the contract
        offset, length, digest, mode = number(ref.get("offset")), number(ref.get("length")), ref.get("sha256"), ref.get("mode")
        blob = data[offset : offset + length]
        if len(blob) != length or not isinstance(digest, str) or hashlib.sha256(blob).hexdigest() != digest:
            raise ValueError("an image does not match its hash")
        return Image(blob, number(mode) & 0o7777 if mode is not None else None)

    writes = []
    seen: set[str] = set()
    for entry in entries:
        if not isinstance(entry, dict):
            raise ValueError("bad entry")  # noqa: TRY004 - ValueError is the contract
        path, tmp = entry.get("path"), entry.get("tmp")
        if not isinstance(path, str) or not isinstance(tmp, str) or not safe_path(path) or not TMP_NAME.match(tmp):
            raise ValueError("unsafe path in journal")
        if path in seen:
            raise ValueError("a path appears twice in the journal")
        seen.add(path)
        writes.append(PathWrite(path, image(entry.get("pre")), image(entry.get("post")), tmp))
    return WritePlan(job_id, operation, head, writes)


class ChangeJournal(Protocol):
    """The crash journal of DESIGN.md §8 ("leave a journal so the next start can repair").

    Called from a worker thread. ``begin`` after every check passed and right before the working tree
    is written: it must make ``plan`` durable, or raise ``OSError`` (the operation then refuses with
    nothing changed). ``end`` once every path was verified (or restored); an ``OSError`` there is
    logged, never fatal. :class:`DiskJournal` is the default.
    """

    def begin(self, plan: WritePlan) -> None: ...

    def end(self, plan: WritePlan) -> None: ...


class DiskJournal:
    """The on-disk :class:`ChangeJournal` of DESIGN.md §8.

    Called from a worker thread. ``begin(plan)``: the whole plan is durable (fdatasync'd file, rename,
    fsync'd directory) before it returns; raises ``OSError`` (then nothing else was written).
    ``end(plan)``: removes the journal; raises ``OSError``."""

    def __init__(self, git_dir: Path) -> None:
        self._dir = journal_dir(git_dir)

    def path_for(self, job_id: str) -> Path:
        if not valid_job_id(job_id):
            raise ValueError("job id not usable as a journal name")
        return self._dir / f"{job_id}{_SUFFIX}"

    def begin(self, plan: WritePlan) -> None:
        target = self.path_for(plan.job_id)
        self._dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        tmp = self._dir / f".{plan.job_id}{_SUFFIX}.{secrets.token_hex(4)}.tmp"

        def write(fd: int) -> None:
            write_fully(fd, encode_plan(plan))
            _fdatasync(fd)

        replace_via_temp(tmp, target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), write)
        _fsync_dir(self._dir)

    def end(self, plan: WritePlan) -> None:
        # No directory fsync: should the removal be lost to a power cut, the next start finds every path
        # at its post-image and rolls the write back to the no-change state, as for any interrupted write.
        try:
            os.unlink(self.path_for(plan.job_id))
        except FileNotFoundError:
            pass


def _fdatasync(fd: int) -> None:
    """The journal's bytes and size durable; its timestamps need not be (``fsync`` where there is no
    ``fdatasync``, e.g. macOS)."""
    (getattr(os, "fdatasync", None) or os.fsync)(fd)


def _fsync_dir(directory: Path) -> None:
    if os.name == "nt":  # Windows cannot open a directory for fsync; NTFS journals the rename itself
        return
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# ---------------------------------------------------------------- one journalled write


async def write_journalled(
    root: Path, plan: WritePlan, journal: ChangeJournal, conflict: ErrorCode,
    *, before: Callable[[], None] | None = None,
) -> dict[str, str | None]:
    """Write ``plan`` into ``root`` (DESIGN.md §8): ``before()`` (the caller's last HEAD/operation check; it
    raises ``SpotPatchError`` to refuse), ``journal.begin``, then path by path (each re-checked at its
    pre-image, then :func:`~spotpatch_agent.worktree.images.write_image`), verify every post-image hash,
    ``journal.end``. Runs in a worker thread. Returns path → post-apply SHA-256 (``None`` = absent).

    Raises ``SpotPatchError(conflict)`` — the journal could not be written, or a path changed or failed
    to write while writing, and every written path was put back (nothing changed) — or
    ``SpotPatchError(INTERNAL)`` when that undo could not finish (the journal is kept for the next start).
    Test-only pause points: :func:`fault_point`."""
    return await anyio.to_thread.run_sync(_write_sync, root, plan, journal, conflict, before)


def write_journalled_sync(
    root: Path, plan: WritePlan, journal: ChangeJournal, conflict: ErrorCode,
    *, before: Callable[[], None] | None = None,
) -> dict[str, str | None]:
    """:func:`write_journalled` on the calling (worker) thread: for a caller already off the event loop."""
    return _write_sync(root, plan, journal, conflict, before)


def _write_sync(
    root: Path, plan: WritePlan, journal: ChangeJournal, conflict: ErrorCode, before: Callable[[], None] | None = None
) -> dict[str, str | None]:
    op, verb = plan.operation, "applied" if plan.operation == "apply" else "reverted"
    if before is not None:
        before()
    try:
        journal.begin(plan)
    except OSError as exc:
        raise SpotPatchError(
            conflict, f"not {verb}; the crash journal could not be written ({_reason(exc)}); nothing was changed"
        ) from None
    fault_point(op, "after-journal")
    done: list[PathWrite] = []
    failure: str | None = None
    after: dict[str, str | None] = {}
    try:
        for number, item in enumerate(plan.writes, start=1):
            if file_hash(root, item.path) != item.pre.sha256:
                failure = f"{item.path} changed while it was being {verb}"
                break
            try:
                write_image(root, item.path, item.post, item.tmp)
            except OSError as exc:
                failure = f"{item.path} could not be written ({_reason(exc)})"
                break
            done.append(item)
            fault_point(op, f"after-file-{number}")
        if failure is None:
            after = {w.path: file_hash(root, w.path) for w in plan.writes}
            wrong = [w.path for w in plan.writes if after[w.path] != w.post.sha256]
            if wrong:
                failure = f"these files changed while being {verb}: {list_paths(wrong)}"
    except BaseException:
        if _undo(root, done):
            _end(journal, plan)
        raise
    if failure is not None:
        paths = [w.path for w in plan.writes]
        if _undo(root, done):
            _end(journal, plan)
            raise SpotPatchError(conflict, f"not {verb}; {failure}; nothing was changed")
        raise SpotPatchError(
            ErrorCode.INTERNAL,
            f"{op} failed part-way and could not be undone ({failure}); the crash journal was kept, so the next "
            f"engine start repairs what it can; check these files by hand: {list_paths(paths)}",
        )
    fault_point(op, "before-journal-removal")
    _end(journal, plan)
    return after


def _undo(root: Path, done: list[PathWrite]) -> bool:
    """Put every written path back to its pre-image; False if one holds neither image or fails."""
    restored = True
    for item in reversed(done):
        current = file_hash(root, item.path)
        if current == item.pre.sha256:
            continue
        if current != item.post.sha256:
            restored = False
            continue
        try:
            write_image(root, item.path, item.pre, item.tmp)
        except OSError:
            restored = False
    return restored


def _end(journal: ChangeJournal, plan: WritePlan) -> None:
    try:
        journal.end(plan)
    except OSError as exc:  # the next start will treat this finished write as interrupted and undo it
        log.error("could not remove the crash journal of %s (%s); the next engine start will restore the files "
                  "it names to their state without the change", plan.job_id, _reason(exc))


def list_paths(paths: list[str]) -> str:
    """At most three relative paths for a message, then "(and N more)"."""
    shown = ", ".join(paths[:3])
    return shown + (f" (and {len(paths) - 3} more)" if len(paths) > 3 else "")


def _reason(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


# ---------------------------------------------------------------- fault injection (tests only)


def fault_point(operation: Operation, step: str) -> None:
    """Test-only pause: when ``SPOTPATCH_TEST_FAULT_PAUSE`` equals ``<operation>:<step>``, write
    ``SPOTPATCH-TEST-PAUSED <operation>:<step>`` to stderr and block this (worker) thread for an hour —
    the fault-injection test SIGKILLs the engine meanwhile. Steps: ``after-journal``, ``after-file-<k>``
    (k = 1…n, journal order), ``before-journal-removal``. Never set the variable outside tests."""
    wanted = os.environ.get(FAULT_ENV)
    if wanted is None or wanted != f"{operation}:{step}":
        return
    os.write(2, f"SPOTPATCH-TEST-PAUSED {wanted}\n".encode("ascii", "replace"))
    time.sleep(3600)


# ---------------------------------------------------------------- recovery


async def recover_pending(root: Path, *, git_dir: Path | None = None) -> list[RecoveryReport]:
    """Repair every half-written Apply/Revert of ``root`` left by a crashed engine (DESIGN.md §8).

    ``git_dir``: the working tree's git dir when known (saves one git call). For each journal: when HEAD
    still equals the journal's, every touched path holding its pre- or post-image is brought to the
    no-change state (Apply → pre-image, ``rolled-back``; Revert → post-image, ``completed``) by an atomic
    write; a path holding neither is left alone and listed in ``unresolvedPaths`` (``needs-attention``);
    when HEAD moved nothing is written and every path is unresolved. Then the journal and any temp file
    it names are removed. Call it holding the project write lock (worktree/lock.py) with no Apply/Revert
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
    try:
        names = sorted(os.listdir(directory))
    except FileNotFoundError:
        return []
    except OSError as exc:  # not a directory, no permission…: never stops the engine starting
        log.error("the crash journal directory cannot be read (%s); check it by hand", _reason(exc))
        return []
    for name in names:  # an unfinished journal write: nothing was written to the tree after it
        if name.startswith(".") and name.endswith(".tmp"):
            unlink_quietly(directory / name)
    return [n for n in names if n.endswith(_SUFFIX) and not n.startswith(".")]


def _recover_one(root: Path, directory: Path, name: str, head: str | None) -> RecoveryReport:
    try:
        plan = decode_plan((directory / name).read_bytes())
    except (OSError, ValueError) as exc:
        return _quarantine(root, directory, name, exc)
    paths = [w.path for w in plan.writes]
    unresolved: list[str] = []
    if head != plan.head:
        unresolved = list(paths)
    else:
        for write in plan.writes:
            if not _restore(root, write, plan.operation):
                unresolved.append(write.path)
    for write in plan.writes:
        remove_tmp(root, write.path, write.tmp)
    unlink_quietly(directory / name)
    _fsync_dir_quietly(directory)
    outcome = "needs-attention" if unresolved else ("rolled-back" if plan.operation == "apply" else "completed")
    return RecoveryReport(job_id=plan.job_id, operation=plan.operation, outcome=outcome, paths=paths,
                          unresolved_paths=unresolved)


#: Where an unreadable journal is moved (beside the journal directory; never read or deleted by SpotPatch).
QUARANTINE_DIR = ("spotpatch", "quarantine")


def _quarantine(root: Path, directory: Path, name: str, exc: Exception) -> RecoveryReport:
    """A journal that is unreadable, truncated, foreign or names an unsafe path: nothing it names is
    touched; it is moved aside to ``<git-dir>/spotpatch/quarantine/`` (kept for the user, never applied,
    never deleted) and reported ``needs-attention``. If it cannot be moved it stays (reported again)."""
    source = directory / name
    reason = str(exc) if isinstance(exc, ValueError) else (exc.strerror or type(exc).__name__)
    aside = directory.parent.joinpath(QUARANTINE_DIR[-1]) / f"{name}.{int(time.time())}-{secrets.token_hex(4)}"
    try:
        aside.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.rename(source, aside)
        _fsync_dir_quietly(directory)
        where = f"moved aside to {_shown(root, aside)}"
    except OSError:
        where = f"left at {_shown(root, source)}"
    log.error("crash journal %s is unreadable (%s); nothing it names was changed; %s: check the files the "
              "interrupted apply or revert may have touched by hand", _shown(root, source), _bounded(reason), where)
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
    try:
        _fsync_dir(directory)
    except OSError:
        pass


def _restore(root: Path, write: PathWrite, operation: Operation) -> bool:
    """Bring one path to its no-change image; False (untouched) when it holds neither image."""
    target, other = (write.pre, write.post) if operation == "apply" else (write.post, write.pre)
    current = read_image(root, write.path)
    if isinstance(current, str):
        return False
    if current.sha256 == target.sha256:
        if target.data is not None and target.mode is not None and current.mode != target.mode:
            try:
                set_mode(root, write.path, target.mode)
            except OSError:
                return False
        return True
    if current.sha256 != other.sha256:
        return False
    try:
        write_image(root, write.path, target, write.tmp)
    except OSError:
        return False
    return True


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
    if not lock.try_acquire():
        log.info("crash recovery skipped: another SpotPatch engine holds this project's write lock")
        return []
    try:
        return await recover_pending(root, git_dir=git_dir)
    finally:
        lock.release()
