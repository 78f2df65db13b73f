"""Crash journal of Apply and Revert, and its repair at the next engine start (docs/design.md §8).

"Apply and revert must survive a crash midway: leave a journal so the next start can tell and repair a
half-written apply." Protocol of one write (:func:`write_journalled`, called by
:mod:`~spotpatch_agent.worktree.changes`; file I/O in :mod:`~spotpatch_agent.worktree.images`)::

    plan      every touched path: pre-image and post-image (bytes, SHA-256, permission bits; None = absent)
    begin     <git-dir>/spotpatch/journal/<jobId>.journal written whole: temp file, fdatasync, rename, fsync dir
    write     per path (re-hashed first): :func:`~spotpatch_agent.worktree.image_write.replace_image` — the
              temp file named in the journal is exchanged with the file, placed without replacing, or
              the file is moved to it; the bytes that came out must be the pre-image before they are
              discarded, else they are put back and the write is a conflict. Each file is wholly old or
              wholly new at any instant, and a save racing the write is never lost
    verify    every path at its post-image (a path saved after its write keeps the save; the others
              are undone)
    end       journal removed (only once every path is verified; a failed roll-back keeps it)

Journal file (one write, then ``fdatasync``): line 1 is a JSON header ``{format, version, jobId, operation, head,
entries: [{path, tmp, pre, post, dirs}]}`` where ``pre``/``post`` are ``null`` (absent) or ``{sha256,
mode, offset, length}`` and ``dirs`` is :attr:`PathWrite.dirs` (``null``: every empty parent; missing: none);
after that newline come the image bytes (each distinct image once), which ``offset`` and ``length`` (bytes)
address. The directory is the *per-worktree* git dir, not the common one: a journal concerns one working
tree. Mode ``0700``/``0600``: it holds source bytes, only while a write is in flight or until the next start
after a crash.

Recovery at the next start — the repair of a journal left by a crash — is
:mod:`~spotpatch_agent.worktree.recovery` (it imports this module, never the other way round).

Test-only: :func:`fault_point` marks every step boundary (:func:`write_steps` lists a write's); it pauses
there when ``SPOTPATCH_TEST_FAULT_PAUSE`` names it (fault-injection tests SIGKILL the process) and calls a
hook a test installed (:func:`set_fault_hook`). Unset in production, it costs two lookups.
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
from spotpatch_agent.protocol.errors import ErrorCode
from spotpatch_agent.worktree.dirfd import write_fully
from spotpatch_agent.worktree.gitdir_files import Folder, folder, split_git_path
from spotpatch_agent.worktree.image_write import WRITE_STEPS, Outcome, Step, replace_image, write_kind
from spotpatch_agent.worktree.images import ABSENT, TMP_NAME, Image, file_hash, read_image, safe_path, same_image

__all__ = [
    "FAULT_ENV",
    "FAULT_RESUME_ENV",
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
    "set_fault_hook",
    "valid_job_id",
    "write_journalled",
    "write_journalled_sync",
    "write_steps",
]

log = logging.getLogger("spotpatch.worktree")

Operation = Literal["apply", "revert"]

#: Test-only environment variable: ``<operation>:<step>`` where the engine pauses (see :func:`fault_point`).
FAULT_ENV = "SPOTPATCH_TEST_FAULT_PAUSE"
#: Test-only environment variable: a file whose appearance ends the pause (else it lasts an hour).
FAULT_RESUME_ENV = "SPOTPATCH_TEST_FAULT_RESUME"
#: Journal directory inside the working tree's git dir.
JOURNAL_DIR = ("spotpatch", "journal")

_FORMAT, _VERSION = "spotpatch-journal", 1
_SUFFIX = ".journal"
_JOB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")


# ---------------------------------------------------------------- the journal


@dataclass(frozen=True)
class PathWrite:
    """One touched path (relative POSIX): its image before (``pre``) and after (``post``) the write.

    ``dirs``: when the path ends absent on either side (a delete, or the undo or recovery of a create),
    how many of its lowest parent directories may then be removed when empty — ``None`` every one (a file
    the diff deletes, as ``git apply``), ``k`` the ``k`` an Apply or Revert made for it (a user's own
    empty directory is never removed)."""

    path: str
    pre: Image
    post: Image
    tmp: str
    dirs: int | None = None


@dataclass(frozen=True)
class WritePlan:
    """Everything one Apply or Revert will write, journalled before the first byte (docs/design.md §8)."""

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

    entries = [{"path": w.path, "tmp": w.tmp, "pre": ref(w.pre), "post": ref(w.post), "dirs": w.dirs}
               for w in plan.writes]
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
        offset, length = number(ref.get("offset")), number(ref.get("length"))
        digest, mode = ref.get("sha256"), ref.get("mode")
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
        dirs = entry.get("dirs", 0)  # absent (an older journal): remove no directory
        writes.append(PathWrite(path, image(entry.get("pre")), image(entry.get("post")), tmp,
                                None if dirs is None else number(dirs)))
    return WritePlan(job_id, operation, head, writes)


class ChangeJournal(Protocol):
    """The crash journal of docs/design.md §8 ("leave a journal so the next start can repair").

    Called from a worker thread. ``begin`` after every check passed and right before the working tree
    is written: it must make ``plan`` durable, or raise ``OSError`` (the operation then refuses with
    nothing changed). ``end`` once every path was verified (or restored); an ``OSError`` there is
    logged, never fatal. :class:`DiskJournal` is the default.
    """

    def begin(self, plan: WritePlan) -> None: ...

    def end(self, plan: WritePlan) -> None: ...


class DiskJournal:
    """The on-disk :class:`ChangeJournal` of docs/design.md §8.

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
        name = self.path_for(plan.job_id).name
        tmp = f".{plan.job_id}{_SUFFIX}.{secrets.token_hex(4)}.tmp"
        # Never through a symlink planted at .git/spotpatch/journal (gitdir_files: UnsafeGitDirEntry).
        with folder(*split_git_path(self._dir), create=True) as where:
            fd = where.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o600)
            try:
                try:
                    write_fully(fd, encode_plan(plan))
                    _fdatasync(fd)
                    fault_point(plan.operation, "journal:synced")
                finally:
                    os.close(fd)
                where.rename(tmp, where, name)
            except BaseException:
                _unlink_quietly(where, tmp)
                raise
            if os.name != "nt":  # Windows cannot open a directory for fsync; NTFS journals the rename itself
                where.fsync()
        fault_point(plan.operation, "journal:durable")

    def end(self, plan: WritePlan) -> None:
        # No directory fsync: should the removal be lost to a power cut, the next start finds every path
        # at its post-image and rolls the write back to the no-change state, as for any interrupted write.
        try:
            with folder(*split_git_path(self._dir), create=False) as where:
                where.unlink(self.path_for(plan.job_id).name)
        except FileNotFoundError:
            pass


def _unlink_quietly(where: Folder, name: str) -> None:
    try:
        where.unlink(name)
    except OSError:
        pass


def _fdatasync(fd: int) -> None:
    """The journal's bytes and size durable; its timestamps need not be (``fsync`` where there is no
    ``fdatasync``, e.g. macOS)."""
    (getattr(os, "fdatasync", None) or os.fsync)(fd)


# ---------------------------------------------------------------- one journalled write


async def write_journalled(
    root: Path, plan: WritePlan, journal: ChangeJournal, conflict: ErrorCode,
    *, before: Callable[[], None] | None = None,
) -> dict[str, str | None]:
    """Write ``plan`` into ``root`` (docs/design.md §8): ``before()`` (the caller's last HEAD/operation check; it
    raises ``SpotPatchError`` to refuse), ``journal.begin``, then path by path (each re-checked at its
    pre-image, then :func:`~spotpatch_agent.worktree.image_write.write_image`), verify every post-image hash,
    ``journal.end``. Runs in a worker thread. Returns path → post-apply SHA-256 (``None`` = absent).

    Raises ``SpotPatchError(conflict)`` — the journal could not be written, or a path changed or failed
    to write while writing, and every written path was put back (nothing changed) — or
    ``SpotPatchError(INTERNAL)`` when that undo could not finish (the journal is kept for the next start).
    A save to a touched path while it is written is never lost: it stays at the path, the other paths are
    undone, and the conflict names the path. Step boundaries: :func:`write_steps`."""
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
    done: list[PathWrite] = []
    failure: str | None = None
    saved: list[str] = []  # paths holding a save that raced the write (kept, never overwritten)
    after: dict[str, str | None] = {}
    try:
        for number, item in enumerate(plan.writes, start=1):
            if not same_image(read_image(root, item.path), item.pre):  # bytes and permission bits
                failure = f"{item.path} changed while it was being {verb}"
                break
            done.append(item)  # the undo looks at what the path holds, so a half-done write is safe to list
            try:
                outcome = replace_image(root, item.path, item.pre, item.post, item.tmp,
                                        step=_stepper(op, f"file-{number}"), prune=item.dirs)
            except OSError as exc:
                failure = f"{item.path} could not be written ({_reason(exc)})"
                break
            if outcome is not Outcome.WRITTEN:  # a save raced this write: it is back at the path
                done.pop()
                saved.append(item.path)
                failure = f"{item.path} changed while it was being {verb}"
                if outcome is Outcome.CHANGED_KEPT:
                    failure += f" (a second version saved meanwhile is in {_tmp_rel(item)})"
                break
        if failure is None:
            after = {w.path: file_hash(root, w.path) for w in plan.writes}
            wrong = [w.path for w in plan.writes if after[w.path] != w.post.sha256]
            if wrong:
                failure = f"these files changed while being {verb}: {list_paths(wrong)}"
    except BaseException:
        if _undo(root, done, op)[0]:
            _end(journal, plan)
        raise
    if failure is not None:
        paths = [w.path for w in plan.writes]
        restored, kept = _undo(root, done, op)
        if restored:
            _end(journal, plan)
            kept = list(dict.fromkeys([*saved, *kept]))
            rest = "nothing was changed" if not kept else (
                f"the version saved meanwhile is kept in {list_paths(kept)} and nothing else was changed")
            raise SpotPatchError(conflict, f"not {verb}; {failure}; {rest}")
        raise SpotPatchError(
            ErrorCode.INTERNAL,
            f"{op} failed part-way and could not be undone ({failure}); the crash journal was kept, so the next "
            f"engine start repairs what it can; check these files by hand: {list_paths(paths)}",
        )
    fault_point(op, "verified")
    _end(journal, plan)
    fault_point(op, "journal:removed")
    return after


def _stepper(op: str, prefix: str) -> Step:
    return lambda name: fault_point(op, f"{prefix}:{name}")


def _tmp_rel(item: PathWrite) -> str:
    return "/".join([*item.path.split("/")[:-1], item.tmp])


def _undo(root: Path, done: list[PathWrite], op: str = "apply") -> tuple[bool, list[str]]:
    """Put every written path back to its pre-image. Returns ``(restored, kept)``: ``restored`` is False
    when a write failed (the journal must stay); ``kept`` lists paths left alone because they hold a save
    made after their write (neither image: the user's newest bytes win, never overwritten)."""
    restored, kept = True, []
    for number, item in reversed(list(enumerate(done, start=1))):
        current = file_hash(root, item.path)
        if current == item.pre.sha256:
            continue
        if current != item.post.sha256:
            kept.append(item.path)
            continue
        try:
            outcome = replace_image(root, item.path, item.post, item.pre, item.tmp,
                                    step=_stepper(op, f"undo-{number}"), prune=item.dirs)
        except OSError:
            restored = False
            continue
        if outcome is not Outcome.WRITTEN:
            kept.append(item.path)
    return restored, kept


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


_fault_hook: Callable[[str], None] | None = None


def set_fault_hook(hook: Callable[[str], None] | None) -> Callable[[str], None] | None:
    """Test-only: call ``hook("<operation>:<step>")`` at every :func:`fault_point` of this process (e.g. to
    save a file at a step boundary); ``None`` removes it. Returns the previous hook."""
    global _fault_hook
    previous, _fault_hook = _fault_hook, hook
    return previous


def fault_point(operation: str, step: str) -> None:
    """A named step boundary of a journalled write or of its recovery (tests only; inert in production:
    one global and one environment lookup). The boundaries of a write are :func:`write_steps`; recovery's
    are ``recover:file-<k>:<part-removed|tmp-removed|put-back|written|exchanged|placed|moved|unlinked>`` and
    ``recover:journal:removed``; an undo's ``<operation>:undo-<k>:<step>``.

    When a hook is set (:func:`set_fault_hook`) it is called with ``<operation>:<step>``. When
    ``SPOTPATCH_TEST_FAULT_PAUSE`` equals ``<operation>:<step>``, ``SPOTPATCH-TEST-PAUSED <operation>:<step>``
    is written to stderr and this (worker) thread blocks for an hour — the fault-injection test SIGKILLs the
    process meanwhile — or, when ``SPOTPATCH_TEST_FAULT_RESUME`` names a file, until that file exists (a
    test does something at the boundary, e.g. saves a touched file, then lets the write go on). Never set
    either variable outside tests."""
    if _fault_hook is not None:
        _fault_hook(f"{operation}:{step}")
    wanted = os.environ.get(FAULT_ENV)
    if wanted is None or wanted != f"{operation}:{step}":
        return
    os.write(2, f"SPOTPATCH-TEST-PAUSED {wanted}\n".encode("ascii", "replace"))
    resume, deadline = os.environ.get(FAULT_RESUME_ENV), time.monotonic() + 3600
    while time.monotonic() < deadline and not (resume and os.path.exists(resume)):
        time.sleep(0.01 if resume else 1)


def write_steps(plan: WritePlan) -> list[str]:
    """Every step boundary of writing ``plan`` without a race, in order, as ``<operation>:<step>``:
    ``journal:synced`` (the journal's temp file is durable, not yet renamed), ``journal:durable``, per
    path k (1…n, journal order) ``file-<k>:<step>`` for each step of
    :data:`~spotpatch_agent.worktree.image_write.WRITE_STEPS` of its kind, ``verified`` (every path checked,
    the journal still there), ``journal:removed``. (The journal steps exist with a :class:`DiskJournal`.)"""
    steps = ["journal:synced", "journal:durable"]
    for number, write in enumerate(plan.writes, start=1):
        steps += [f"file-{number}:{name}" for name in WRITE_STEPS[write_kind(write.pre, write.post)]]
    return [f"{plan.operation}:{name}" for name in [*steps, "verified", "journal:removed"]]

