"""A process that runs journalled writes and crash recoveries, each in a forked child a test can SIGKILL
at a step boundary (``SPOTPATCH_TEST_FAULT_PAUSE``, spotpatch_agent/worktree/journal.py).

    python -m tests.worktree._write_driver

It imports the engine once, then reads one JSON command per stdin line and forks a child for it (so a
kill costs no interpreter start on a loaded machine):

- ``{"args": ["write", <root>, <plan-file>], "point": <point or null>}`` — the child runs
  :func:`~spotpatch_agent.worktree.journal.write_journalled_sync` with the on-disk journal, exactly as
  Apply and Revert call it (the plan in journal format);
- ``{"args": ["recover", <root>], "point": ...}`` — the child runs
  :func:`~spotpatch_agent.worktree.recovery.recover_pending`, as the engine's start does.

With ``"noExchange": true`` the child runs without ``renameat2`` (the hard-link and rename fallbacks of
other systems). With ``"mark": <point>`` the child writes ``SPOTPATCH-TEST-MARK <point>`` to stderr when it passes that
boundary, without pausing (the random-kill run times kills from there).

The driver answers ``{"pid": <child>}`` at once, and ``{"pid": <child>, "status": <wait status>}`` when the
child ended; the child's pause marker goes to stderr. The child is a plain fork of a process without
threads, so a SIGKILL stops it between two system calls, as it would stop the engine.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path

import anyio

from spotpatch_agent.errors import SpotPatchError
from spotpatch_agent.protocol.errors import ErrorCode
from spotpatch_agent.worktree import dirfd
from spotpatch_agent.worktree.journal import (
    FAULT_ENV,
    DiskJournal,
    decode_plan,
    set_fault_hook,
    write_journalled_sync,
)
from spotpatch_agent.worktree.recovery import recover_pending


def run(args: list[str]) -> int:
    """One command in this (child) process: 0 done, 1 conflict."""
    root = Path(args[1])
    if args[0] == "recover":
        anyio.run(recover_pending, root)
        return 0
    plan = decode_plan(Path(args[2]).read_bytes())
    conflict = ErrorCode.APPLY_CONFLICT if plan.operation == "apply" else ErrorCode.REVERT_CONFLICT
    try:
        write_journalled_sync(root, plan, DiskJournal(root / ".git"), conflict)
    except SpotPatchError:
        return 1
    return 0


def _marker(mark: str) -> Callable[[str], None]:
    def hook(point: str) -> None:
        if point == mark:
            os.write(2, f"SPOTPATCH-TEST-MARK {point}\n".encode())

    return hook


def serve() -> None:
    for line in sys.stdin:
        command = json.loads(line)
        pid = os.fork()
        if pid == 0:  # the child: run the command, never return into the loop
            code = 70
            try:
                if command.get("point"):
                    os.environ[FAULT_ENV] = command["point"]
                else:
                    os.environ.pop(FAULT_ENV, None)
                if command.get("mark"):
                    set_fault_hook(_marker(command["mark"]))
                if command.get("noExchange"):  # as on a system without renameat2: the fallbacks run
                    dirfd._renameat2 = False
                code = run(command["args"])
            finally:
                os._exit(code)
        print(json.dumps({"pid": pid}), flush=True)
        _, status = os.waitpid(pid, 0)
        print(json.dumps({"pid": pid, "status": status}), flush=True)


if __name__ == "__main__":
    serve()
