"""Process-tree termination shared by every subprocess the engine starts (git, checks): docs/design.md §9, §17.

Children are started in their own session (``start_new_session=True``) on POSIX, so one ``killpg`` ends
the whole tree. Windows (marked, untested here): no process groups; only the direct child is killed —
use ``taskkill /T`` or a process library there when checks start grandchildren.

Because children run in their own session, a SIGKILLed engine leaves them running (reparented to init).
:func:`kill_processes_inside` lets the start-up sweep stop those still working in or on an orphaned job
worktree before it deletes it (docs/security.md §6, *Orphan sweep*).
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Protocol

#: Pass as ``start_new_session=`` to ``anyio.open_process`` / ``run_process``.
NEW_SESSION = os.name != "nt"


class Killable(Protocol):
    """What :func:`kill_tree` needs: anyio's ``Process`` and ``subprocess.Popen`` both are."""

    @property
    def pid(self) -> int: ...

    def kill(self) -> None: ...


def kill_tree(process: Killable) -> None:
    """SIGKILL ``process`` and everything in its process group (POSIX); the process only on Windows.
    Never raises for a process that already exited."""
    if os.name != "nt":
        try:
            os.killpg(process.pid, signal.SIGKILL)
            return
        except (ProcessLookupError, PermissionError):
            pass
    try:
        process.kill()
    except ProcessLookupError:
        pass


# ---------------------------------------------------------------- processes left inside a directory

_PROC = Path("/proc")


def processes_inside(directory: Path) -> list[int]:
    """Pids of this user's processes working in or on ``directory`` (Linux ``/proc``): the working directory
    (``/proc/<pid>/cwd``) is ``directory`` or below it, or the process is a ``git`` one of whose arguments
    (``/proc/<pid>/cmdline``) names it or a path below it (``git worktree add <dir>``, which works on the
    directory from the repository; another program merely naming it, an editor say, is not listed). Another
    user's process, a process that cannot be inspected and this process are never listed; without
    ``/proc`` (macOS, Windows) the list is empty. ``directory`` need not exist."""
    spellings = {os.path.abspath(directory), os.path.realpath(directory)}
    try:
        entries = os.listdir(_PROC)
    except OSError:
        return []

    def names(path: str) -> bool:
        return any(path == s or path.startswith(s + os.sep) for s in spellings)

    found = []
    for entry in entries:
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            if os.stat(_PROC / entry).st_uid != os.getuid():
                continue
            if names(os.readlink(_PROC / entry / "cwd")):
                found.append(int(entry))
            elif (_PROC / entry / "comm").read_bytes().strip() == b"git":
                args = (_PROC / entry / "cmdline").read_bytes().split(b"\0")
                if any(names(os.fsdecode(arg)) for arg in args if arg.startswith(b"/")):
                    found.append(int(entry))
        except OSError:
            continue  # gone, or not ours to inspect
    return found


def kill_processes_inside(directory: Path, *, timeout: float = 5.0) -> list[int]:
    """SIGKILL every process :func:`processes_inside` finds in or on ``directory``, with its descendants, and
    the process group of any it belongs to whose leader is a ``git`` of this user in a session of its own
    (how :func:`~spotpatch_agent.worktree.git.run_git` starts git: a ``git worktree add`` whose checkout
    child works in the directory). Waits up to ``timeout`` seconds until they are gone (exited or a zombie:
    they are usually orphans, reaped by init, not by us). Returns the pids killed. Never raises."""
    killed: set[int] = set()
    for pid in processes_inside(directory):
        group = _git_session_group(pid)
        if group is not None:
            try:
                os.killpg(group, signal.SIGKILL)
            except OSError:
                pass
            killed.add(group)
        for member in [pid, *_descendants(pid)]:
            try:
                os.kill(member, signal.SIGKILL)
                killed.add(member)
            except OSError:
                pass
    deadline = time.monotonic() + timeout
    while any(_running(pid) for pid in killed) and time.monotonic() < deadline:
        time.sleep(0.01)
    return sorted(killed)


def _stat_fields(pid: int) -> list[bytes] | None:
    """``/proc/<pid>/stat`` after the command name: [state, ppid, pgrp, session, …], or None."""
    try:
        raw = (_PROC / str(pid) / "stat").read_bytes()
    except OSError:
        return None
    return raw[raw.rindex(b")") + 2 :].split()


def _running(pid: int) -> bool:
    fields = _stat_fields(pid)
    return fields is not None and fields[0] != b"Z"


def _descendants(pid: int) -> list[int]:
    parents: dict[int, list[int]] = {}
    for entry in os.listdir(_PROC):
        if entry.isdigit() and (fields := _stat_fields(int(entry))) is not None:
            parents.setdefault(int(fields[1]), []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _git_session_group(pid: int) -> int | None:
    """The process group of ``pid`` when its leader leads its own session, runs ``git`` and is this user's
    (and is not this process's group); else None."""
    fields = _stat_fields(pid)
    if fields is None:
        return None
    group, session = int(fields[2]), int(fields[3])
    if group != session or group <= 1 or group == os.getpgrp():
        return None
    try:
        if os.stat(_PROC / str(group)).st_uid != os.getuid():
            return None
        comm = (_PROC / str(group) / "comm").read_text().strip()
    except OSError:
        return None
    return group if comm == "git" else None
