"""One writer per project across engine processes (docs/design.md §4 ``writeJobsPerProject``, §16 invariant 5).

An advisory, non-blocking exclusive lock on ``<git-common-dir>/spotpatch/write.lock``: held while a job
of this engine runs (``preparing`` … until it stops) and while it applies or reverts. Within one engine
the lock is counted (re-entrant); a second engine on the same repository cannot take it and its
``job/create`` / ``job/apply`` / ``job/revert`` fail with ``JOB_CONFLICT`` — never queued. The OS drops the
lock when the holding process dies, so a crashed engine never blocks the next one.
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

from spotpatch_agent.errors import ErrorCode, SpotPatchError
from spotpatch_agent.worktree.gitdir_files import UnsafeGitDirEntry, folder

LOCK_DIR = "spotpatch"
LOCK_FILE = "write.lock"


class ProjectWriteLock:
    """``try_acquire()`` → bool (never blocks; raises ``REPO_BLOCKED`` when ``.git/spotpatch`` or the lock file
    is a symlink: never followed); ``release()`` undoes one successful acquire."""

    def __init__(self, common_dir: Path) -> None:
        self._path = common_dir / LOCK_DIR / LOCK_FILE
        self._fd: int | None = None
        self._count = 0
        self._mutex = threading.Lock()

    def try_acquire(self) -> bool:
        with self._mutex:
            if self._count:
                self._count += 1
                return True
            try:  # never through a symlink planted at .git/spotpatch or its write.lock (gitdir_files)
                with folder(self._path.parent.parent, (LOCK_DIR,), create=True) as where:
                    fd = where.open(LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
            except UnsafeGitDirEntry as exc:
                raise SpotPatchError(ErrorCode.REPO_BLOCKED, f"{exc.strerror} (`spotpatch-agent doctor` lists "
                                     "every such entry).") from None
            if not _lock(fd):
                os.close(fd)
                return False
            self._fd, self._count = fd, 1
            return True

    def release(self) -> None:
        with self._mutex:
            if self._count == 0:
                return
            self._count -= 1
            if self._count == 0 and self._fd is not None:
                _unlock(self._fd)
                os.close(self._fd)
                self._fd = None


if sys.platform == "win32":  # Windows: byte-range lock on the first byte (untested here; docs/design.md §17)
    import msvcrt

    def _lock(fd: int) -> bool:
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True

    def _unlock(fd: int) -> None:
        try:
            os.lseek(fd, 0, os.SEEK_SET)
            msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)
        except OSError:
            pass

else:
    import fcntl

    def _lock(fd: int) -> bool:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False
        return True

    def _unlock(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_UN)
