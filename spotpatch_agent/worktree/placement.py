"""Where a job's worktree lives, and the :class:`Worktree` record every step of the job passes on
(docs/design.md §8).

Placement: ``<root>/node_modules/.spotpatch/job-*`` when ``node_modules`` is a real directory (not a
symlink) that git ignores — so checks resolve the installed packages and the user's ``git status``
never shows the worktree — else ``<tempdir>/spotpatch-worktrees/job-*``. Before the job directory exists,
its ownership sidecar (:mod:`~spotpatch_agent.worktree.sidecar`) is created beside it in that base
directory, so a kill at any point leaves something the sweep can prove ours.
"""

from __future__ import annotations

import os
import re
import secrets
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

from spotpatch_agent.errors import SpotPatchError
from spotpatch_agent.protocol.errors import ErrorCode
from spotpatch_agent.worktree.git import run_git
from spotpatch_agent.worktree.sidecar import unlink_sidecar, write_sidecar

__all__ = [
    "JOB_NAME",
    "Worktree",
    "ensure_private_dir",
    "is_real_dir",
    "looks_like_job_dir",
    "make_job_dir",
    "node_modules_base",
    "our_bases",
    "temp_base",
]


@dataclass
class Worktree:
    """A job's isolated worktree.

    ``path``: absolute directory of the worktree (never shown to clients). ``head_oid``: the user's
    HEAD when the job started. ``baseline_oid``: the detached baseline commit inside the worktree —
    the agent's result is diffed against it. ``admin_dir``: the worktree's private git directory
    (holds the marker), ``None`` if unknown.
    """

    path: Path
    head_oid: str
    baseline_oid: str
    job_id: str
    admin_dir: Path | None = None


async def make_job_dir(root: Path) -> Path:
    """A fresh private (0700) empty directory ``<base>/job-<random>`` for the worktree (see the module
    docstring), its ownership sidecar ``<base>/job-<random>.owner`` created first."""
    base = await node_modules_base(root)
    if base is None:
        base = temp_base()
    for _attempt in range(3):  # another engine may remove the empty base dir in between
        ensure_private_dir(base)
        name = "job-" + secrets.token_hex(8)
        try:
            write_sidecar(base, name)
        except (FileNotFoundError, FileExistsError):
            continue
        try:
            os.mkdir(base / name, 0o700)
        except BaseException:
            unlink_sidecar(base / name)
            raise
        return base / name
    raise SpotPatchError(ErrorCode.INTERNAL, "could not create a worktree directory")


def temp_base() -> Path:
    return Path(tempfile.gettempdir()) / "spotpatch-worktrees"


#: Our job directory names (``job-`` + 16 hex digits; older engines: ``mkdtemp``'s 8 characters).
JOB_NAME = re.compile(r"^job-[A-Za-z0-9_]{8,32}$")


async def node_modules_base(root: Path) -> Path | None:
    node_modules = root / "node_modules"
    if not is_real_dir(node_modules):
        return None
    base = node_modules / ".spotpatch"
    if os.path.lexists(base) and not is_real_dir(base):
        return None
    ignored = await run_git(
        ["check-ignore", "--quiet", "node_modules/.spotpatch/job"], cwd=root, check=False, read_only=True
    )
    return base if ignored.returncode == 0 else None


def is_real_dir(path: Path) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def ensure_private_dir(base: Path) -> None:
    base.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = os.lstat(base)
    owned = not hasattr(os, "getuid") or st.st_uid == os.getuid()  # Windows: no uid to compare
    if not stat.S_ISDIR(st.st_mode) or not owned:
        raise SpotPatchError(ErrorCode.INTERNAL, "the worktree directory is not a private directory")


def our_bases(root: Path) -> list[Path]:
    """Our base directories that exist as real directories (never through a symlink)."""
    bases = []
    node_modules = root / "node_modules"
    if is_real_dir(node_modules) and is_real_dir(node_modules / ".spotpatch"):
        bases.append(node_modules / ".spotpatch")
    if is_real_dir(temp_base()):
        bases.append(temp_base())
    return bases


def looks_like_job_dir(path: Path) -> bool:
    return path.name.startswith("job-") and path.parent.name in (".spotpatch", "spotpatch-worktrees")
