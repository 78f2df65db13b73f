"""Removal of a job's worktree: ``git worktree remove`` with a prune scoped to our own registration
(:func:`remove_worktree`), or one rename into the trash whose files are deleted later in the background
(:func:`drop_worktree`, :func:`empty_trash`; issue 17: no exit waits for per-file deletes). Never raises.
"""

from __future__ import annotations

import logging
import os
import re
import secrets
import stat
import threading
from pathlib import Path

import anyio

from spotpatch_agent.tree_remove import remove_tree
from spotpatch_agent.worktree.git import run_git, sanitize
from spotpatch_agent.worktree.marker import list_registrations, points_back, registered_path
from spotpatch_agent.worktree.placement import Worktree, is_real_dir, looks_like_job_dir, our_bases
from spotpatch_agent.worktree.sidecar import unlink_sidecar

__all__ = ["TRASH_PREFIX", "drop_worktree", "empty_trash", "empty_trash_in", "remove_worktree", "rmtree"]

log = logging.getLogger("spotpatch.worktree")


_CLEANUP_TIMEOUT = 60.0


async def remove_worktree(root: Path, wt: Worktree) -> None:
    """Remove the job's worktree registration and directory (docs/design.md §8). Never raises.

    ``git worktree remove --force``; then, if anything remains, deletes the directory (only after
    checking its ``.git`` file points at this registration) and this registration's private git
    directory — a prune scoped to our own entry, so unrelated stale worktrees of the user are never
    pruned. Runs shielded from cancellation (bounded by a timeout); failures are logged, sanitized,
    to the ``spotpatch.worktree`` logger.
    """
    with anyio.CancelScope(shield=True), anyio.move_on_after(_CLEANUP_TIMEOUT):
        try:
            admin = wt.admin_dir or await _find_admin_dir(root, wt.path)
            await _remove(root, wt.path, admin)
        except Exception as exc:  # noqa: BLE001 - cleanup never replaces the job's result
            log.warning("worktree cleanup failed: %s", sanitize(str(exc), root, wt.path))


async def _find_admin_dir(root: Path, path: Path) -> Path | None:
    """Our registration of ``path``: by its ``gitdir`` file, or — for a ``worktree add`` that died
    before writing it — the entry git names after our (random, unique) job directory."""
    registrations = await list_registrations(root)
    for admin in registrations:
        registered = registered_path(admin)
        if registered is not None and os.path.realpath(registered) == os.path.realpath(path):
            return admin
    if looks_like_job_dir(path):
        for admin in registrations:
            if admin.name == path.name and not (admin / "gitdir").exists():
                return admin
    return None


async def _remove(root: Path, path: Path, admin: Path | None) -> None:
    if admin is not None and path.exists():
        result = await run_git(
            # Twice --force: also a locked registration (``git worktree lock``, or "initializing" left by a
            # `worktree add` that was killed); it is ours (the caller proved it).
            ["worktree", "remove", "--force", "--force", str(path)], cwd=root, check=False, redact=[path],
            timeout=120
        )
        if result.returncode != 0:
            log.info("git worktree remove failed; deleting the directory directly")
    ours = looks_like_job_dir(path)
    if os.path.lexists(path) and (ours or (admin is not None and points_back(path, admin))):
        # Only one of our job directories, or a directory whose .git names this registration.
        await anyio.to_thread.run_sync(rmtree, path)
    if admin is not None and admin.exists():
        await anyio.to_thread.run_sync(rmtree, admin)
    if ours:
        if not os.path.lexists(path):
            unlink_sidecar(path)
        try:
            path.parent.rmdir()  # the shared base directory, once it is empty
        except OSError:
            pass


def rmtree(path: Path) -> None:
    def retry_writable(func, target, _exc_info):  # type: ignore[no-untyped-def]
        try:
            os.chmod(target, stat.S_IWRITE | stat.S_IREAD | stat.S_IEXEC)
            func(target)
        except OSError:
            pass

    if os.path.islink(path) or not os.path.isdir(path):
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        return
    remove_tree(path, onerror=retry_writable)  # any depth: a check may nest directories past the recursion limit
    if os.path.lexists(path):
        raise OSError(f"could not delete {path}")


#: Prefix of a job directory moved aside in its base directory to be deleted later (``<base>/trash-<hex>``).
TRASH_PREFIX = "trash-"


_TRASH_NAME = re.compile(r"^trash-[0-9a-f]{16}$")


async def drop_worktree(root: Path, wt: Worktree, *, proven: bool = False) -> bool:
    """Remove the job's worktree in time independent of its size (issue 17): its directory is renamed to
    ``<base>/trash-<random>`` in its own base directory (deleted later by :func:`empty_trash`), then its
    registration (the private git directory) and sidecar are deleted — what ``git worktree remove`` leaves,
    minus the per-file deletes. Only for one of our job directories whose ``.git`` names its registration;
    returns False (nothing done) otherwise, or when the rename fails: then use :func:`remove_worktree`.
    ``proven``: the caller proved the registration ours another way (the sweep: marker or dead-owner
    sidecar), so a ``.git`` file that a killed ``worktree add`` never wrote is no reason to refuse.
    Never raises."""
    try:
        admin = wt.admin_dir or await _find_admin_dir(root, wt.path)
        if admin is None or not looks_like_job_dir(wt.path) or not is_real_dir(wt.path) \
                or not (proven or points_back(wt.path, admin)):
            return False
        trash = wt.path.parent / (TRASH_PREFIX + secrets.token_hex(8))
        os.rename(wt.path, trash)
        unlink_sidecar(wt.path)
        await anyio.to_thread.run_sync(rmtree, admin)
        return True
    except Exception as exc:  # noqa: BLE001 - the caller falls back to remove_worktree
        log.info("could not move a worktree aside: %s", sanitize(str(exc), root, wt.path))
        return False


async def empty_trash(root: Path) -> int:
    """Delete every ``trash-<hex>`` directory in our base directories of ``root`` (see :func:`drop_worktree`);
    returns how many. Slow on a big checkout (per-file deletes), so it runs in a daemon thread: the engine
    runs it in the background after start-up, and an exit never waits for it — a deletion cut short is
    finished by the next start. Never raises."""
    bases = our_bases(root)
    result: list[int] = []
    worker = threading.Thread(target=lambda: result.append(empty_trash_in(bases)), name="spotpatch-trash",
                              daemon=True)
    worker.start()
    while worker.is_alive():
        await anyio.sleep(0.05)
    return result[0] if result else 0


def empty_trash_in(bases: list[Path]) -> int:
    removed = 0
    for base in bases:
        try:
            names = [n for n in os.listdir(base) if _TRASH_NAME.match(n)]
        except OSError:
            continue
        for name in names:
            path = base / name
            if not is_real_dir(path):
                continue
            try:
                rmtree(path)
                removed += 1
            except OSError:
                log.warning("could not delete a SpotPatch worktree moved aside for deletion")
        try:
            base.rmdir()  # once empty
        except OSError:
            pass
    return removed
