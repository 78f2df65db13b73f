"""The read-only proofs about one pooled worktree (worktree/pool.py combines them in ``_untouched`` before a
hand-out and after a reset; module docstring there): it sits where a fresh worktree would be placed now
(:func:`placed`), its HEAD is the commit asked for (:func:`at_head`), and every index entry is a plain cached
one with no ``.git`` hiding in a tracked directory (:func:`index_clean`). Each only reads the worktree, always
through ``--git-dir``/``--work-tree`` (:func:`~spotpatch_agent.worktree.pool_state.scoped_args`); what changes
a worktree (checkout, clean, refresh, removal) stays in pool.py. Also :data:`STEP_TIMEOUT`, the bound of every
git step of the pool.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import anyio

from spotpatch_agent.errors import GitError
from spotpatch_agent.worktree.git import run_git
from spotpatch_agent.worktree.placement import node_modules_base
from spotpatch_agent.worktree.pool_state import Slot, plain_entries, scoped_args
from spotpatch_agent.worktree.repo import same_path

__all__ = ["STEP_TIMEOUT", "at_head", "index_clean", "placed"]

#: Upper bound of one git step of a reset, in seconds (a checkout after HEAD moved far can be long).
STEP_TIMEOUT = 300.0


async def placed(root: Path, slot: Slot) -> None:
    """Raise :class:`GitError` unless ``slot`` sits where a new worktree of ``root`` would be placed now
    (``node_modules`` may have appeared or gone since it was made)."""
    expected = await node_modules_base(root) or Path(tempfile.gettempdir()) / "spotpatch-worktrees"
    if not same_path(slot.path.parent, expected):
        raise GitError("the pooled worktree is not where a new one would be placed")


async def index_clean(slot: Slot, head: str) -> bool:
    """Whether every index entry of ``slot`` is a plain cached one and nothing hides where ``ls-files
    --others`` never looks (:func:`plain_entries`); ``head``'s directories stand for the index's (the
    caller proves the index equals ``head``'s tree). Raises :class:`GitError` when git fails."""
    scoped = scoped_args(slot)
    listings: dict[str, bytes] = {}

    async def read(name: str, args: list[str]) -> None:
        out = await run_git([*scoped, *args], cwd=slot.path, read_only=True, redact=[slot.path],
                            timeout=STEP_TIMEOUT)
        listings[name] = out.stdout

    async with anyio.create_task_group() as tg:
        tg.start_soon(read, "entries", ["ls-files", "-z", "-s", "-v"])
        tg.start_soon(read, "dirs", ["ls-tree", "-r", "-d", "-z", "--name-only", head])
    return await anyio.to_thread.run_sync(plain_entries, listings["entries"], listings["dirs"],
                                          os.fsencode(slot.path))


async def at_head(slot: Slot, head: str) -> bool:
    """Whether ``slot``'s HEAD is the commit ``head``."""
    out = await run_git([*scoped_args(slot), "rev-parse", "--verify", "--quiet", "HEAD^{commit}"], cwd=slot.path,
                        read_only=True, check=False)
    return out.stdout.decode("ascii", "replace").strip() == head
