"""The warm worktree pool's state and the checks that need no git (worktree/pool.py runs the git ones): when
there is a pool (:func:`pool_mode`), a pooled worktree (:class:`Slot`) and a hand-out in flight
(:class:`Prepared`), that it is still ours and intact (:func:`check_intact`), that its index holds only plain
entries (:func:`plain_entries`), the stat rules its proofs run under (:data:`STAT_RULES`), and the claim of a
parked marker (:func:`claim_parked`).

**When**: ``mode`` ``"on"``, ``"off"`` or ``"auto"`` (default: on when the index holds at least
``min_files`` paths — below that a cold add takes tens of milliseconds and an extra registered worktree,
visible in the user's ``git worktree list``, buys nothing); never for a sparse checkout (skip-worktree
entries never pass :func:`plain_entries`). The engine reads it from ``SPOTPATCH_WORKTREE_POOL`` (``1``/``on``,
``0``/``off``, anything else: auto).
"""

from __future__ import annotations

import json
import os
import secrets
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import anyio

from spotpatch_agent.errors import GitError
from spotpatch_agent.worktree.git import run_git
from spotpatch_agent.worktree.gitdir_files import read_small
from spotpatch_agent.worktree.marker import (
    CLAIM_INFIX,
    MARKER_NAME,
    is_parked,
    owner_alive,
    points_back,
    read_marker,
    registered_path,
    write_marker,
)
from spotpatch_agent.worktree.placement import looks_like_job_dir
from spotpatch_agent.worktree.repo import same_path

__all__ = [
    "MIN_FILES",
    "POOL_ENV",
    "STAT_RULES",
    "PoolMode",
    "Prepared",
    "Slot",
    "check_intact",
    "claim_parked",
    "plain_entries",
    "pool_mode",
    "scoped_args",
    "sparse_checkout",
]

#: Environment variable the engine reads the pool mode from (see :func:`pool_mode`).
POOL_ENV = "SPOTPATCH_WORKTREE_POOL"
#: ``auto`` keeps a warm worktree when the index holds at least this many paths.
MIN_FILES = 2000
PoolMode = Literal["auto", "on", "off"]


def pool_mode(value: str | None) -> PoolMode:
    """``"on"`` for ``1/on/true/yes``, ``"off"`` for ``0/off/false/no`` (any case), else ``"auto"``."""
    text = (value or "").strip().lower()
    if text in ("1", "on", "true", "yes"):
        return "on"
    if text in ("0", "off", "false", "no"):
        return "off"
    return "auto"



@dataclass
class Slot:
    path: Path
    admin_dir: Path
    pool_id: str
    #: The commit the worktree was last made a clean checkout of (``worktree add`` or a reset), else None.
    head: str | None = None
    #: Parked by an earlier engine and adopted unproven (:meth:`WorktreePool._adopt`): handed out only when
    #: :meth:`WorktreePool._untouched` holds, never reset.
    adopted: bool = False


@dataclass
class Prepared:
    """:meth:`WorktreePool.prepare`'s hand-out in flight: ``done`` once ``slot`` (None: none to give) is proven
    (``untouched``) or reset at ``head``."""

    head: str
    done: anyio.Event = field(default_factory=anyio.Event)
    slot: Slot | None = None
    untouched: bool = False


def check_intact(slot: Slot, *, job_marker: bool = False) -> None:
    """The directory and registration of a pooled worktree are still ours and intact (worktree/pool.py, module
    docstring, *Reset*); raises :class:`GitError` if not."""
    try:
        st = os.lstat(slot.path)
    except OSError:
        raise GitError("the pooled worktree directory is gone") from None
    registered = registered_path(slot.admin_dir)
    marker = read_marker(slot.admin_dir)
    if (
        not stat.S_ISDIR(st.st_mode)
        or not looks_like_job_dir(slot.path)
        or not points_back(slot.path, slot.admin_dir)
        or registered is None
        or not same_path(registered, slot.path)
        or marker is None
        or marker.get("pid") != os.getpid()
        or (not job_marker and marker.get("jobId") != slot.pool_id)
    ):
        raise GitError("the pooled worktree is not intact")



#: git options under which ``update-index --refresh`` judges every file by its full stat data whatever the
#: user's configuration: ctime and inode too (a same-size write that kept the mtime), the executable bit
#: (POSIX: a chmod), and no entry marked unchanged by ``core.ignoreStat``. A fresh ``worktree add`` writes
#: the same files whatever these say, so they can only make the proof stricter.
STAT_RULES = ("-c", "core.trustctime=true", "-c", "core.checkStat=default", "-c", "core.ignoreStat=false",
               *(("-c", "core.fileMode=true") if os.name != "nt" else ()))


def plain_entries(entries: bytes, dirs: bytes, top: bytes) -> bool:
    """``ls-files -s -v`` of a worktree (``top``) and its tracked directories: no entry tagged other than
    ``H`` (assume-unchanged and skip-worktree entries are skipped by ``update-index --refresh``, so a write
    to one would go unseen), no ``.git`` entry in a tracked directory (git never lists one, nor does
    ``clean`` delete it: a nested repository or a gitfile there would reach the job), and every submodule
    an empty directory, as a fresh checkout leaves it (git never looks inside one)."""
    records = b"\0" + entries
    if records.count(b"\0H ") != entries.count(b"\0"):
        return False
    if b"\0H 160000 " in records:
        for record in entries.split(b"\0"):
            if record.startswith(b"H 160000 "):
                path = top + b"/" + record.partition(b"\t")[2]
                try:
                    if not stat.S_ISDIR(os.lstat(path).st_mode) or os.listdir(path):
                        return False
                except OSError:
                    return False
    return not any(os.path.lexists(top + b"/" + d + b"/.git") for d in dirs.split(b"\0") if d)


def claim_parked(admin: Path, pool_id: str) -> str | None:
    """Take a parked marker for this process: renamed to a unique name naming this process first, so of two
    engines starting at once only one succeeds (and another engine's sweep, finding no marker, leaves the
    registration alone while this process runs: ``sweep.sweep_orphans``); then it must still be parked by a
    process that is gone (else it is put back), and our marker (``pool_id``, this process) replaces it.
    Returns the HEAD it was parked at, or None."""
    claim = admin / f"{MARKER_NAME}{CLAIM_INFIX}{os.getpid()}-{secrets.token_hex(6)}"  # names us: the sweep waits
    try:
        os.rename(admin / MARKER_NAME, claim)
    except OSError:
        return None
    try:
        record = json.loads(read_small(claim).decode("utf-8"))  # never through a symlink
    except (OSError, ValueError):
        record = None
    if not isinstance(record, dict) or not is_parked(record) or owner_alive(record):
        try:
            os.rename(claim, admin / MARKER_NAME)  # not ours to take (it changed in between)
        except OSError:
            pass
        return None
    write_marker(admin, pool_id)
    try:
        os.unlink(claim)
    except OSError:
        pass
    return str(record["head"])


async def sparse_checkout(root: Path) -> bool:
    """Whether ``root`` uses sparse checkout (``core.sparseCheckout``): its worktrees hold skip-worktree
    entries, which the untouched proof never accepts (:func:`plain_entries`), so a warm worktree could never
    be handed out — no pool, jobs start cold. A git failure counts as sparse (no pool)."""
    try:
        out = await run_git(["config", "--type=bool", "core.sparseCheckout"], cwd=root, check=False, read_only=True)
    except GitError:
        return True
    return out.returncode not in (0, 1) or out.stdout.strip() == b"true"


def scoped_args(slot: Slot) -> list[str]:
    """git options that confine a command to the pooled worktree (never the user's repository)."""
    return [f"--git-dir={slot.admin_dir}", f"--work-tree={slot.path}"]
