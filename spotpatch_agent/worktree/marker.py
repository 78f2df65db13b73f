"""The ownership marker and git's worktree registrations.

Ownership marker: a file :data:`MARKER_NAME` in the worktree's private git directory
(``<common-dir>/worktrees/<id>/``), never among the working files. It names the job (or the warm pool's
``pool-…`` id) and the engine process (:func:`~spotpatch_agent.worktree.sidecar.process_start`), so the
sweep never removes a live engine's worktree.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from spotpatch_agent.worktree.git import run_git
from spotpatch_agent.worktree.gitdir_files import read_small, write_replacing
from spotpatch_agent.worktree.refs import read_git_dir
from spotpatch_agent.worktree.repo import locate, same_path
from spotpatch_agent.worktree.sidecar import process_start, recorded_process_runs

__all__ = [
    "CLAIM_INFIX",
    "MARKER_NAME",
    "is_parked",
    "list_registrations",
    "owner_alive",
    "points_back",
    "private_git_dir",
    "read_marker",
    "registered_path",
    "write_marker",
]


#: Name of the ownership marker inside a worktree's private git directory.
MARKER_NAME = "spotpatch-owner.json"
#: ``<MARKER_NAME><CLAIM_INFIX><pid>-<hex>``: a parked marker being taken over by process ``pid`` (pool.py).
CLAIM_INFIX = ".claim-"


async def private_git_dir(worktree_path: Path) -> Path:
    known = read_git_dir(worktree_path)  # in process: the worktree's ``.git`` file names it (refs.py)
    if known is not None and known.parent.name == "worktrees":
        return known
    result = await run_git(
        ["rev-parse", "--path-format=absolute", "--git-dir"], cwd=worktree_path, read_only=True
    )
    return Path(os.path.realpath(result.stdout.decode("utf-8", "surrogateescape").rstrip("\n")))


def write_marker(admin_dir: Path, job_id: str, **extra: object) -> None:
    record = {"owner": "spotpatch", "jobId": job_id, "pid": os.getpid(), "start": process_start(os.getpid()),
              "createdAt": int(time.time()), **extra}
    write_replacing(admin_dir / MARKER_NAME, json.dumps(record).encode("utf-8"))  # never through a symlink


def read_marker(admin_dir: Path) -> dict[str, object] | None:
    try:
        record = json.loads(read_small(admin_dir / MARKER_NAME).decode("utf-8"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and record.get("owner") == "spotpatch" else None


def registered_path(admin_dir: Path) -> Path | None:
    """The working directory a worktree registration points at (``gitdir`` holds ``<path>/.git``)."""
    try:
        gitdir = (admin_dir / "gitdir").read_text("utf-8", "surrogateescape").strip("\n")
    except OSError:
        return None
    return Path(gitdir).parent if gitdir else None


def points_back(worktree_path: Path, admin_dir: Path) -> bool:
    """Whether ``<worktree_path>/.git`` is a gitfile naming ``admin_dir`` (guards every deletion)."""
    try:
        text = (worktree_path / ".git").read_text("utf-8", "surrogateescape").strip()
    except OSError:
        return False
    if not text.startswith("gitdir:"):
        return False
    target = Path(text[len("gitdir:"):].strip())
    if not target.is_absolute():
        target = worktree_path / target
    return same_path(target, admin_dir)


async def list_registrations(root: Path) -> list[Path]:
    layout = await locate(root)
    if layout is None:
        return []
    folder = layout.common_dir / "worktrees"
    try:
        return sorted(p for p in folder.iterdir() if p.is_dir() and not p.is_symlink())
    except OSError:
        return []


def owner_alive(marker: dict[str, object]) -> bool:
    """Whether another live engine process owns this worktree (never sweep a running job of another
    engine on the same repository). POSIX probe; on Windows ``os.kill(pid, 0)`` is not a probe, so
    the owner is assumed alive unless it is this process."""
    pid = marker.get("pid")
    if not isinstance(pid, int) or pid == os.getpid() or pid <= 0:
        return False
    return recorded_process_runs(pid, marker.get("start"))


def is_parked(marker: dict[str, object] | None) -> bool:
    """Whether a marker is a warm pool worktree parked idle by an engine's clean shutdown (worktree/pool.py,
    ``WorktreePool.aclose(park=True)``): ``idle`` true, a ``pool-…`` id and the 40/64-hex HEAD it is a clean
    checkout of. Never a job's: a job's marker names ``job_…`` and no ``idle``."""
    if marker is None or marker.get("idle") is not True:
        return False
    job_id, head = marker.get("jobId"), marker.get("head")
    return (isinstance(job_id, str) and job_id.startswith("pool-") and isinstance(head, str)
            and len(head) in (40, 64) and all(c in "0123456789abcdef" for c in head))
