"""The gitlink directories of a check's working directory, shown empty and read-only to the check (issue 25).

A job worktree has each submodule of HEAD as a gitlink in its index and an empty directory on disk. A check
that could write there could make it a repository of its own (its config, filters, hooks) for host git to
find; the sandbox plan mounts an empty read-only view over each (``SandboxPlan.readonly_dirs``, bwrap.py),
and the scan after the check (worktree/scan.py) refuses any ``.git`` that still appears.

:func:`gitlink_dirs` reads the mode-160000 entries of ``git ls-files -s -z`` through the git runner (the
index is the engine's: the worktree's ``.git`` is read-only to checks, its admin directory hidden).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from spotpatch_agent.git_runner import run_git_process

__all__ = ["gitlink_dirs"]

#: Seconds the listing may take (the index of a very large repository is read in well under that).
LIST_TIMEOUT_SEC = 60


async def gitlink_dirs(cwd: Path) -> tuple[Path, ...]:
    """Absolute paths of the gitlink entries below ``cwd`` that are real directories (no symlink anywhere
    on the way: a mount over a symlink would land on its target). Empty when ``cwd`` is not in a git
    repository or has none. Raises ``GitError`` when git times out, ``OSError`` when it cannot start."""
    records = bytearray()
    tail = b""

    async def keep(chunk: bytes) -> bool:
        nonlocal tail
        lines = (tail + chunk).split(b"\0")
        tail = lines.pop()
        for line in lines:
            if line.startswith(b"160000 "):
                records.extend(line + b"\0")
        return True

    run = await run_git_process(["ls-files", "-s", "-z"], cwd=cwd, read_only=True, timeout=LIST_TIMEOUT_SEC,
                                sink=keep)
    if run.returncode != 0:
        return ()
    await keep(b"\0")
    base = os.path.realpath(cwd)
    found: list[Path] = []
    for record in bytes(records).split(b"\0"):
        if not record:
            continue
        rel = os.fsdecode(record.split(b"\t", 1)[1])
        path = os.path.join(base, rel)
        try:
            is_dir = stat.S_ISDIR(os.lstat(path).st_mode)
        except OSError:
            continue
        if is_dir and os.path.realpath(path) == os.path.normpath(path):
            found.append(Path(path))
    return tuple(found)
