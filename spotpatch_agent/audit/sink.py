"""Persisting ledgers as JSONL under the repository's git directory, and reading them back (docs/design.md §13).

Layout: ``<git-common-dir>/spotpatch/audit/<jobId>.jsonl`` — one JSON record per line, never in the working
tree. A file is written by appending lines, each batch flushed and ``fsync``-ed; a crash can leave a torn
last line, which :func:`read_ledger` skips (and reports). After a new ledger file is created, the oldest
files beyond ``keep`` are removed (:func:`prune`).

Reading trusts nothing in that directory: :func:`read_ledger` opens only a regular file (never through a
symlink, never a FIFO or device), at most :data:`MAX_LEDGER_BYTES`, and keeps only lines that are valid
``AuditRecord`` s (protocol/models.py); :func:`list_ledgers` lists only regular files.

Every function here that writes returns ``False`` instead of raising on an OS error: the ledger is
fail-open (the caller records ``auditWriteFailed``).
"""

from __future__ import annotations

import errno
import functools
import json
import logging
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter

from spotpatch_agent.worktree.gitdir_files import Folder, UnsafeGitDirEntry, folder, split_git_path

log = logging.getLogger("spotpatch.audit")

#: The ledger directory under a git common dir.
AUDIT_SUBDIR = ("spotpatch", "audit")
_JOB_FILE = re.compile(r"^(job_[0-9a-f]{16})\.jsonl$")
#: Largest ledger file read back. A ledger the engine writes stays far below it (at most 256 records up to
#: ``job_end`` and 64 after it, each bounded); anything bigger was not written by it.
MAX_LEDGER_BYTES = 16 * 1024 * 1024


def audit_dir(common_dir: Path) -> Path:
    return common_dir.joinpath(*AUDIT_SUBDIR)


def encode(record: dict[str, Any]) -> bytes:
    """One JSONL line (compact, UTF-8, newline-terminated)."""
    return (json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


def append(path: Path, records: list[dict[str, Any]], *, create: bool = True) -> bool:
    """Append ``records`` to ``path`` and ``fsync`` it. ``create``: the ledger's first write, which makes a
    new file (mode 0600, its directory 0700) and never opens one already there; else the file must exist
    (a ledger retention removed is not made again holding only its later records). No symlink is followed,
    neither the file nor a directory under the git directory (``.git/spotpatch/audit`` planted as a link:
    refused, worktree/gitdir_files.py). Returns False on any OS error (logged without the path), True
    otherwise."""
    if not records:
        return True
    data = b"".join(encode(r) for r in records)
    flags = os.O_WRONLY | os.O_APPEND
    if create:
        flags |= os.O_CREAT | os.O_EXCL
    try:
        with folder(*split_git_path(path.parent), create=create) as where:
            fd = where.open(path.name, flags, 0o600)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
    except UnsafeGitDirEntry as exc:
        log.warning("the audit ledger was not written: %s; the job goes on", exc.strerror)
        return False
    except OSError as exc:
        log.warning("the audit ledger could not be written (%s); the job goes on", type(exc).__name__)
        return False
    return True


def prune(directory: Path, keep: int) -> int:
    """Remove the oldest ledger files (by modification time, then name) beyond ``keep``; returns how many
    were removed. Only regular ``job_<16 hex>.jsonl`` files are counted and touched (never a symlink or a
    directory), in a directory reached without following a symlink. Errors are ignored."""
    try:
        with folder(*split_git_path(directory), create=False) as where:
            return _prune_in(where, keep)
    except OSError:
        return 0


def _prune_in(where: Folder, keep: int) -> int:
    files = []
    for name in where.names():  # one entry gone or odd (removed by another engine, a symlink) never stops the rest
        if not _JOB_FILE.match(name):
            continue
        try:
            st = where.lstat(name)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):
            files.append((st.st_mtime_ns, name))
    files.sort()
    removed = 0
    for _, name in files[: max(0, len(files) - keep)]:
        try:
            where.unlink(name)
            removed += 1
        except OSError:
            continue
    return removed


@dataclass(frozen=True)
class LedgerFile:
    """A persisted ledger: its ``job_id``, file ``size`` in bytes and modification time (Unix ms)."""

    job_id: str
    size: int
    modified_ms: int


def list_ledgers(common_dir: Path) -> list[LedgerFile]:
    """The persisted ledgers of a repository, newest first (empty when there are none, or when the ledger
    directory is reached only through a symlink: never followed)."""
    found: list[LedgerFile] = []
    try:
        with folder(common_dir, AUDIT_SUBDIR, create=False) as where:
            for name in where.names():
                match = _JOB_FILE.match(name)
                if match is None:
                    continue
                try:
                    st = where.lstat(name)
                except OSError:
                    continue
                if not stat.S_ISREG(st.st_mode):  # a symlink, directory or FIFO planted under a ledger's name
                    continue
                found.append(LedgerFile(match.group(1), st.st_size, st.st_mtime_ns // 1_000_000))
    except OSError:
        return []
    found.sort(key=lambda f: (f.modified_ms, f.job_id), reverse=True)
    return found


def ledger_path(common_dir: Path, job_id: str) -> Path | None:
    """The file of ``job_id``'s ledger, or None when ``job_id`` is not a job id (never a path outside)."""
    if not _JOB_FILE.match(job_id + ".jsonl"):
        return None
    return audit_dir(common_dir) / f"{job_id}.jsonl"


@functools.cache
def _record_adapter() -> TypeAdapter[Any]:
    """Validates one persisted line as an ``AuditRecord`` (built on first use)."""
    from spotpatch_agent.protocol.models import AuditRecord

    return TypeAdapter(AuditRecord)


def read_ledger(path: Path) -> tuple[list[dict[str, Any]], int]:
    """The records of a ledger file and how many lines were skipped (a torn last line after a crash, or
    a line that is not a valid ledger record). Raises ``OSError`` when the file cannot be read: it is not
    a regular file (a symlink is never followed, a FIFO never waited on) or is over :data:`MAX_LEDGER_BYTES`."""
    with folder(*split_git_path(path.parent), create=False) as where:  # no symlink followed on the way either
        fd = where.open(path.name, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "not a regular file")
        chunks: list[bytes] = []
        size = 0
        while chunk := os.read(fd, 1 << 20):
            size += len(chunk)
            if size > MAX_LEDGER_BYTES:
                raise OSError(errno.EFBIG, "larger than any audit ledger")
            chunks.append(chunk)
    finally:
        os.close(fd)
    records: list[dict[str, Any]] = []
    skipped = 0
    for line in b"".join(chunks).split(b"\n"):
        if not line.strip():
            continue
        try:
            record = _record_adapter().validate_json(line)
        except ValueError:
            skipped += 1
            continue
        records.append(record.dump())
    return records, skipped
