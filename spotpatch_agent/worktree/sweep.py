"""Sweep: at start-up, remove every worktree of the repository a crashed or failed run left behind
(docs/security.md §6, *Orphan sweep*), in every state a kill can leave one — marked, unmarked with a
dead-owner sidecar, registration without a directory, directory without a registration.
"""

from __future__ import annotations

import logging
import os
import secrets
import stat
from pathlib import Path

import anyio

from spotpatch_agent.process import kill_processes_inside
from spotpatch_agent.worktree.marker import (
    CLAIM_INFIX,
    MARKER_NAME,
    is_parked,
    list_registrations,
    owner_alive,
    points_back,
    read_marker,
    registered_path,
)
from spotpatch_agent.worktree.placement import (
    JOB_NAME,
    Worktree,
    is_real_dir,
    looks_like_job_dir,
    our_bases,
    temp_base,
)
from spotpatch_agent.worktree.removal import TRASH_PREFIX, drop_worktree, empty_trash, remove_worktree, rmtree
from spotpatch_agent.worktree.repo import same_path
from spotpatch_agent.worktree.sidecar import (
    OWNER_SUFFIX,
    read_sidecar,
    recorded_process_runs,
    sidecar_owner_dead,
    sidecar_path,
    unlink_sidecar,
)

__all__ = ["sweep_orphans"]

log = logging.getLogger("spotpatch.worktree")


#: How many times the sweep stops leftover processes in an orphan and removes it before it gives up.
_SWEEP_ATTEMPTS = 3


async def sweep_orphans(root: Path, *, live_job_ids: frozenset[str] | set[str] = frozenset(),
                        defer_deletes: bool = False, keep_parked: bool = False) -> int:
    """Remove worktrees of ``root`` left by a crashed or failed run; returns how many were removed.

    Only our registrations are touched, in every state a kill or a failed clean-up can leave them
    (docs/security.md §6, *Orphan sweep*):

    - marked (our marker in the private git directory): every one whose job id is not in ``live_job_ids``
      (at start-up: all) and whose owner process is gone (:func:`recorded_process_runs`: a reused pid
      is not the owner) — also when its directory, or its ``gitdir`` file, is already gone;
    - unmarked, killed between ``git worktree add`` and the marker — the registration may still be locked
      ("initializing") with an ``index.lock`` from the checkout: the registered directory is
      ``job-<random>`` directly inside one of our base directories (``<root>/node_modules/.spotpatch``,
      ``<tempdir>/spotpatch-worktrees``) and its sidecar ``<name>.owner`` names a dead process;
    - unmarked, killed inside ``git worktree add`` before it wrote ``gitdir``: a private git directory named
      ``job-<random>`` with a dead-owner sidecar of that name in one of our base directories;
    - unmarked, whose ``job-<random>`` directory in one of our base locations is gone together with its
      sidecar (a removal cut short, a cleaned temp dir): no live engine has such a worktree, since the
      sidecar outlives the directory.

    Processes the dead engine left working in or on an orphan's directory (its ``git worktree add`` and that
    checkout, a check: they run in their own session and outlive a SIGKILLed engine) are SIGKILLed with
    their process tree first (:func:`~spotpatch_agent.process.kill_processes_inside`: this user's processes
    whose working directory is inside, or a ``git`` naming it; Linux), and removal is retried up to
    :data:`_SWEEP_ATTEMPTS` times.
    Locked registrations are removed too (``worktree remove --force --force``). Other worktrees — the
    user's own, locked or prunable ones included — are never touched, not even pruned, and nothing outside
    our base directories is deleted but a marked registration's own directory. Never raises for cleanup
    failures (logged, see :func:`remove_worktree`); returns 0 when ``root`` is not a repository.

    An orphan in one of our base directories is moved aside in one rename (:func:`drop_worktree`); its files
    are deleted at the end (:func:`empty_trash`) — or, with ``defer_deletes``, left for the caller to delete
    in the background (the engine's start-up: issue 17, nothing proportional to the repository blocks).

    ``keep_parked`` (the engine's start-up): a warm pool worktree a clean shutdown parked (:func:`is_parked`)
    whose directory is one of our job directories naming its registration is left for the new engine's pool,
    which adopts it only after proving it clean at the same HEAD, and otherwise removes it
    (``WorktreePool.warm``, ``drop_parked``). Every other orphan — a job's worktree, a pool worktree that
    was being warmed or recycled — is removed as always.
    """
    removed = _sweep_detached_temp_worktrees()
    bases = our_bases(root)
    for admin in await list_registrations(root):
        marker = read_marker(admin)
        if marker is not None and (marker.get("jobId") in live_job_ids or owner_alive(marker)):
            continue
        path = registered_path(admin)
        if keep_parked and is_parked(marker) and path is not None and looks_like_job_dir(path) \
                and is_real_dir(path) and points_back(path, admin):
            continue
        if marker is None and _claim_in_progress(admin):
            continue  # a live engine's pool is taking over the parked marker this very moment
        if marker is None:
            path = _unmarked_orphan(admin, path, root, bases)
            if path is None:
                continue
        if path is not None and _names_another(path, admin):  # a copied repository's registration: the
            path = None  # directory is another repository's worktree (its .git names that one); ours goes alone
        if path is None:  # marked, but git never wrote (or lost) ``gitdir``: only the registration is left
            await anyio.to_thread.run_sync(_rmtree_quietly, admin)
        else:
            job_id = str(marker.get("jobId")) if marker is not None else path.name
            await _remove_orphan(root, Worktree(path=path, head_oid="", baseline_oid="", job_id=job_id,
                                                admin_dir=admin))
        if not admin.exists():
            removed += 1
    await anyio.to_thread.run_sync(_sweep_stale_sidecars, our_bases(root))
    if not defer_deletes:
        await empty_trash(root)
        await anyio.to_thread.run_sync(_sweep_stale_sidecars, our_bases(root))  # each base once empty
    return removed


async def _remove_orphan(root: Path, wt: Worktree) -> None:
    """Remove an orphan's directory and registration: first SIGKILL the processes still working inside its
    directory (a ``git worktree add`` checkout or a check the dead engine started: they run in their own
    session, so the engine's SIGKILL left them running, still writing files), then :func:`remove_worktree`;
    up to :data:`_SWEEP_ATTEMPTS` times while anything is left. Processes are looked for only in a directory
    that is provably ours (one of our job directories, or one whose ``.git`` names this registration)."""
    assert wt.admin_dir is not None
    for _attempt in range(_SWEEP_ATTEMPTS):
        if looks_like_job_dir(wt.path) or (os.path.lexists(wt.path) and points_back(wt.path, wt.admin_dir)):
            killed = await anyio.to_thread.run_sync(kill_processes_inside, wt.path)  # in it, or git on it
            if killed:
                log.info("stopped %d process(es) left running in an orphaned worktree", len(killed))
        # One rename into the trash when the directory is one of ours (issue 17: the start-up work never
        # pays per-file deletes); else, or if that fails, git's own removal.
        if not await drop_worktree(root, wt, proven=True):
            await remove_worktree(root, wt)
        if not os.path.lexists(wt.path) and not wt.admin_dir.exists():
            return


def _unmarked_orphan(admin: Path, registered: Path | None, root: Path, bases: list[Path]) -> Path | None:
    """The job directory of an unmarked registration that is provably ours and orphaned (the unmarked cases
    of :func:`sweep_orphans`), else None."""
    if registered is None:
        if not JOB_NAME.match(admin.name):
            return None
        for base in bases:
            record = read_sidecar(base / admin.name)
            if record is not None and sidecar_owner_dead(record):
                return base / admin.name
        return None
    found = _ours_by_sidecar(registered, bases)
    if found is not None:
        return found
    if not JOB_NAME.match(registered.name) or os.path.lexists(registered) or os.path.lexists(sidecar_path(registered)):
        return None
    parent = os.path.realpath(registered.parent)
    locations = (root / "node_modules" / ".spotpatch", temp_base())
    return registered if any(parent == os.path.realpath(loc) for loc in locations) else None


def _ours_by_sidecar(registered: Path, bases: list[Path]) -> Path | None:
    """``<base>/<name>`` when the registered worktree path is one of our job directories (our name pattern,
    directly inside one of our base directories) whose sidecar names a dead owner; else ``None``."""
    if not JOB_NAME.match(registered.name):
        return None
    for base in bases:
        if same_path(registered.parent, base):
            candidate = base / registered.name
            record = read_sidecar(candidate)
            return candidate if record is not None and sidecar_owner_dead(record) else None
    return None


def _sweep_detached_temp_worktrees() -> int:
    """Delete ``<tempdir>/spotpatch-worktrees/job-*`` whose registration no longer exists (its repository
    was deleted or pruned): nothing can ever sweep them through a repository again."""
    base = temp_base()
    removed = 0
    try:
        candidates = [p for p in base.iterdir() if p.name.startswith("job-") and p.is_dir() and not p.is_symlink()]
    except OSError:
        return 0
    for path in candidates:
        try:
            text = (path / ".git").read_text("utf-8", "surrogateescape").strip()
        except OSError:
            continue  # still being created, or not ours to judge
        if not text.startswith("gitdir:"):
            continue
        admin = Path(text[len("gitdir:"):].strip())
        if admin.is_absolute() and not os.path.lexists(admin):
            try:  # moved aside in one rename; its files are deleted by empty_trash in the background
                os.rename(path, base / (TRASH_PREFIX + secrets.token_hex(8)))
                unlink_sidecar(path)
                removed += 1
            except OSError:
                log.warning("could not remove a detached SpotPatch worktree directory")
    return removed


def _sweep_stale_sidecars(bases: list[Path]) -> None:
    """Remove sidecars of dead owners whose job directory is gone, or still empty (a kill before ``git
    worktree add`` filled it; a ``git`` the dead owner left working on it is stopped first, see
    :func:`_remove_orphan`), and empty sidecars without a job directory (a kill between the sidecar's
    exclusive create and its write: the directory is made only after the write, so no worktree depends on
    it); then each base directory once empty."""
    for base in bases:
        try:
            names = [n for n in os.listdir(base) if n.endswith(OWNER_SUFFIX)]
        except OSError:
            continue
        for name in names:
            job_dir = base / name[: -len(OWNER_SUFFIX)]
            if JOB_NAME.match(job_dir.name) and _is_empty_file(base / name) and not os.path.lexists(job_dir):
                unlink_sidecar(job_dir)
                continue
            record = read_sidecar(job_dir)
            if not JOB_NAME.match(job_dir.name) or record is None or not sidecar_owner_dead(record):
                continue
            # A dead owner's `git worktree add` may still be about to fill (or re-create) the directory.
            kill_processes_inside(job_dir)
            if is_real_dir(job_dir):
                try:
                    os.rmdir(job_dir)  # only when empty
                except OSError:
                    continue
            elif os.path.lexists(job_dir):
                continue
            unlink_sidecar(job_dir)
        try:
            base.rmdir()
        except OSError:
            pass


def _is_empty_file(path: Path) -> bool:
    try:
        info = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISREG(info.st_mode) and info.st_size == 0


def _claim_in_progress(admin: Path) -> bool:
    """Whether a running engine renamed this registration's marker to ``<marker>.claim-<pid>-<hex>`` to adopt
    the parked worktree (worktree/pool.py, ``_claim``): for that moment there is no marker to read."""
    try:
        names = [n for n in os.listdir(admin) if n.startswith(MARKER_NAME + CLAIM_INFIX)]
    except OSError:
        return False
    for name in names:
        pid = name[len(MARKER_NAME + CLAIM_INFIX):].split("-", 1)[0]
        if pid.isdigit() and int(pid) != os.getpid() and recorded_process_runs(int(pid), None):
            return True
    return False


def _names_another(path: Path, admin: Path) -> bool:
    """Whether ``<path>/.git`` is a gitfile naming an existing git directory other than ``admin``: the
    registration was copied with its repository (``cp -r``), and the directory belongs to the original's."""
    try:
        text = (path / ".git").read_text("utf-8", "surrogateescape").strip()
    except OSError:
        return False
    if not text.startswith("gitdir:"):
        return False
    target = Path(text[len("gitdir:"):].strip())
    target = target if target.is_absolute() else path / target
    return target.is_dir() and not same_path(target, admin)


def _rmtree_quietly(path: Path) -> None:
    try:
        rmtree(path)
    except OSError:
        log.warning("could not remove an orphaned SpotPatch worktree registration")
