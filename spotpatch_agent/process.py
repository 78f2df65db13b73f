"""Process-tree termination shared by every subprocess the engine starts (git, checks): DESIGN.md §9, §17.

Children are started in their own session (``start_new_session=True``) on POSIX, so one ``killpg`` ends
the whole tree. Windows (marked, untested here): no process groups; only the direct child is killed —
use ``taskkill /T`` or a process library there when checks start grandchildren.
"""

from __future__ import annotations

import os
import signal

from anyio.abc import Process

#: Pass as ``start_new_session=`` to ``anyio.open_process`` / ``run_process``.
NEW_SESSION = os.name != "nt"


def kill_tree(process: Process) -> None:
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
