"""What ``init`` and ``init --undo`` share (docs/adopt.md): the repository they work in — its top level, its
common git directory, the lock that lets one init or undo run at a time — and how their output names a path.
``command.py`` and ``undo.py`` both import it, so neither imports the other's private names."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from spotpatch_agent.git_runner import run_git_sync
from spotpatch_agent.init.app import InitError

__all__ = ["git_common_dir", "git_top", "lock", "say", "shown_path", "tell"]


def say(text: str = "") -> None:
    """One line of the command's answer on stdout (the plan, the diffs, the next commands: what a script may
    read, as from ``git diff``). ``init`` is a terminal command: ``serve`` never imports this package
    (cli.py imports it only for ``init``), so this stdout is never the protocol stream."""
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def tell(text: str) -> None:
    """Progress and errors, on stderr."""
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


def shown_path(path: Path, top: Path) -> str:
    """``path`` as the output names it: relative to ``top``, else under ``$XDG_CONFIG_HOME`` or ``~``, else its
    name (never a whole absolute path)."""
    try:
        return path.relative_to(top).as_posix()
    except ValueError:
        pass
    xdg = os.environ.get("XDG_CONFIG_HOME", "")
    if xdg and os.path.isabs(xdg) and path.is_relative_to(xdg):
        return "$XDG_CONFIG_HOME/" + path.relative_to(xdg).as_posix()
    home = Path.home()
    return "~/" + path.relative_to(home).as_posix() if path.is_relative_to(home) else path.name


def git_top(folder: Path) -> Path | None:
    """The top level of the git repository ``folder`` is in (resolved), or None outside one."""
    done = run_git_sync(["rev-parse", "--show-toplevel"], cwd=folder, read_only=True)
    return Path(done.stdout.decode().strip()).resolve() if done.returncode == 0 and done.stdout.strip() else None


def git_common_dir(top: Path) -> Path:
    """The repository's common git directory (the undo record and the lock live under its ``spotpatch/``)."""
    done = run_git_sync(["rev-parse", "--git-common-dir"], cwd=top, read_only=True)
    if done.returncode != 0:
        raise InitError("This repository cannot be read (`git rev-parse --git-common-dir` failed).")
    return (top / done.stdout.decode().strip()).resolve()


_LOCKS: list[Any] = []  # held until the process ends


def lock(top: Path) -> None:
    """One init (or undo) at a time per repository: an exclusive lock on ``.git/spotpatch/init.lock``."""
    import fcntl

    folder = git_common_dir(top) / "spotpatch"
    folder.mkdir(parents=True, exist_ok=True)
    handle = (folder / "init.lock").open("a")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.close()
        raise InitError("Another init (or undo) is running in this repository: wait for it, then run init again.") \
            from None
    _LOCKS.append(handle)
