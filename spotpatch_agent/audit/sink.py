"""Persisting ledgers as JSONL under the repository's git directory, and reading them back (docs/design.md §13).

Layout: ``<git-common-dir>/spotpatch/audit/<jobId>.jsonl`` — one JSON record per line, never in the working
tree. A file is written by appending lines, each batch flushed and ``fsync``-ed; a crash can leave a torn
last line, which :func:`read_ledger` skips (and reports). After a new ledger file is created, the oldest
files beyond ``keep`` are removed (:func:`prune`).

Every function here that writes returns ``False`` instead of raising on an OS error: the ledger is
fail-open (the caller records ``auditWriteFailed``).
"""

from __future__ import annotations

import json
import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger("spotpatch.audit")

#: The ledger directory under a git common dir.
AUDIT_SUBDIR = ("spotpatch", "audit")
_JOB_FILE = re.compile(r"^(job_[0-9a-f]{16})\.jsonl$")


def audit_dir(common_dir: Path) -> Path:
    return common_dir.joinpath(*AUDIT_SUBDIR)


def encode(record: dict[str, Any]) -> bytes:
    """One JSONL line (compact, UTF-8, newline-terminated)."""
    return (json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


def append(path: Path, records: list[dict[str, Any]]) -> bool:
    """Append ``records`` to ``path`` (created with mode 0600, its directory 0700) and ``fsync`` it.
    Returns False on any OS error (logged without the path), True otherwise."""
    if not records:
        return True
    data = b"".join(encode(r) for r in records)
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        log.warning("the audit ledger could not be written (%s); the job goes on", type(exc).__name__)
        return False
    return True


def prune(directory: Path, keep: int) -> int:
    """Remove the oldest ledger files (by modification time, then name) beyond ``keep``; returns how many
    were removed. Only ``job_<16 hex>.jsonl`` files are touched. Errors are logged and ignored."""
    try:
        files = [(e.stat().st_mtime_ns, e.name) for e in os.scandir(directory) if _JOB_FILE.match(e.name)]
    except OSError:
        return 0
    files.sort()
    removed = 0
    for _, name in files[: max(0, len(files) - keep)]:
        try:
            (directory / name).unlink()
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
    """The persisted ledgers of a repository, newest first (empty when there are none)."""
    directory = audit_dir(common_dir)
    found: list[LedgerFile] = []
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return []
    for entry in entries:
        match = _JOB_FILE.match(entry.name)
        if match is None:
            continue
        try:
            st = entry.stat()
        except OSError:
            continue
        found.append(LedgerFile(match.group(1), st.st_size, st.st_mtime_ns // 1_000_000))
    found.sort(key=lambda f: (f.modified_ms, f.job_id), reverse=True)
    return found


def ledger_path(common_dir: Path, job_id: str) -> Path | None:
    """The file of ``job_id``'s ledger, or None when ``job_id`` is not a job id (never a path outside)."""
    if not _JOB_FILE.match(job_id + ".jsonl"):
        return None
    return audit_dir(common_dir) / f"{job_id}.jsonl"


def read_ledger(path: Path) -> tuple[list[dict[str, Any]], int]:
    """The records of a ledger file and how many lines were skipped (a torn last line after a crash, or
    a line that is not a JSON object). Raises ``OSError`` when the file cannot be read."""
    records: list[dict[str, Any]] = []
    skipped = 0
    for line in path.read_bytes().split(b"\n"):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            skipped += 1
            continue
        if isinstance(record, dict):
            records.append(record)
        else:
            skipped += 1
    return records, skipped
