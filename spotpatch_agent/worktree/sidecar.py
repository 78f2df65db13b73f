"""Ownership records of an engine process: the sidecar ``<base>/<name>.owner`` beside a job directory, and
the process identity (pid plus start time) that both it and the worktree marker record.

Because a kill can fall between ``git worktree add`` and the marker (:mod:`~spotpatch_agent.worktree.marker`),
ownership is knowable earlier too: before the job directory exists a sidecar ``<base>/<name>.owner`` (our
process id) is created beside it in our own base directory, so the sweep recognises an unmarked
registration whose directory is ``<base>/job-<random>`` with a dead-owner sidecar as ours.
"""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path

__all__ = [
    "OWNER_SUFFIX",
    "process_start",
    "read_sidecar",
    "recorded_process_runs",
    "sidecar_owner_dead",
    "sidecar_path",
    "unlink_sidecar",
    "write_sidecar",
]


#: Suffix of the ownership sidecar beside a job directory in our base directory.
OWNER_SUFFIX = ".owner"


def sidecar_path(job_dir: Path) -> Path:
    return job_dir.parent / (job_dir.name + OWNER_SUFFIX)


def write_sidecar(base: Path, name: str) -> None:
    """``<base>/<name>.owner``: this process owns ``<base>/<name>`` (exclusive create, never through a symlink)."""
    record = json.dumps({"owner": "spotpatch", "pid": os.getpid(), "start": process_start(os.getpid()),
                         "createdAt": int(time.time())}).encode()
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(base / (name + OWNER_SUFFIX), flags, 0o600)
    try:
        os.write(fd, record)
    finally:
        os.close(fd)


def read_sidecar(job_dir: Path) -> dict[str, object] | None:
    path = sidecar_path(job_dir)
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            return None
        record = json.loads(path.read_bytes()[:4096])
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and record.get("owner") == "spotpatch" else None


def unlink_sidecar(job_dir: Path) -> None:
    path = sidecar_path(job_dir)
    try:
        if stat.S_ISREG(os.lstat(path).st_mode):
            os.unlink(path)
    except OSError:
        pass


def sidecar_owner_dead(record: dict[str, object]) -> bool:
    """Whether the process a sidecar names is gone. This process counts as alive (it may be creating that
    worktree right now), and so does any process on Windows (no cheap liveness probe) — but a sidecar with
    this process's pid and another start is a dead engine's whose pid was reused (containers restart with
    the same small pids), see :func:`recorded_process_runs`."""
    pid = record.get("pid")
    if type(pid) is not int or pid <= 0:
        return False
    return not recorded_process_runs(pid, record.get("start"))


def process_start(pid: int) -> str | None:
    """When process ``pid`` started, as ``"<boot id>:<start time in clock ticks>"`` (Linux ``/proc``), so a
    record of a dead process is not mistaken for a new process that got the same pid; None elsewhere."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            data = handle.read()
        start = data[data.rindex(b")") + 2 :].split()[19].decode("ascii")  # field 22 of proc(5)
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as handle:
            boot = handle.read().strip()
    except (OSError, ValueError, IndexError, UnicodeDecodeError):
        return None
    return f"{boot}:{start}"


def recorded_process_runs(pid: int, start: object) -> bool:
    """Whether the engine process a marker or sidecar names (``pid`` and, when recorded, its ``start``) still
    runs. A pid that now belongs to a process with another start is a new process (pid reuse): the recorded
    one is gone. This process runs; without a start to compare (another platform, an older record) its
    pid alone decides. On Windows every other process counts as running (no cheap liveness probe)."""
    if pid == os.getpid():
        mine = process_start(pid)
        return mine is None or start == mine
    if os.name == "nt":
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        pass  # it runs, as another user: its start still tells whether it is the recorded process
    if isinstance(start, str):
        now = process_start(pid)
        return now is None or now == start
    return True
