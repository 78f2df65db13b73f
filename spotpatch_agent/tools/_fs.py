"""Atomic file replacement inside the worktree (docs/design.md §6: same-directory temp file + atomic rename)."""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path


def write_atomic(path: Path, data: bytes, *, mode: int | None = None) -> None:
    """Replace the existing regular file ``path`` with ``data`` via a temp file in the same directory and
    ``os.replace``, keeping the file's permission bits. Readers see the old or the new bytes, never a mix.
    ``mode`` given: the new file's permission bits instead (``path`` may then not exist yet).

    Raises ``OSError``; on failure the original file is untouched and the temp file removed.
    """
    if mode is None:
        mode = stat.S_IMODE(os.lstat(path).st_mode)
    fd, tmp = tempfile.mkstemp(prefix=".spotpatch-", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
