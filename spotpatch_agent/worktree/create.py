"""Create: one detached git worktree per job at the user's HEAD, and its baseline commit (docs/design.md §8).

::

    create_worktree(root, job_id)     health → record HEAD → worktree add --detach (or the warm pool) →
                                      marker → re-verify HEAD → [include-local-changes: health again,
                                      snapshot.py] → baseline commit

Placement is :mod:`~spotpatch_agent.worktree.placement`'s, the ownership marker
:mod:`~spotpatch_agent.worktree.marker`'s. Nothing here writes the user's index, HEAD or branches; the only
writes to the user's repository are git's own worktree registration and the baseline objects.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from spotpatch_agent.errors import GitError, SpotPatchError
from spotpatch_agent.protocol.errors import ErrorCode
from spotpatch_agent.protocol.models import Limits, RepoHealth
from spotpatch_agent.worktree.git import run_git
from spotpatch_agent.worktree.health import blocked_message, health_message, repo_health
from spotpatch_agent.worktree.marker import private_git_dir, write_marker
from spotpatch_agent.worktree.placement import Worktree, make_job_dir
from spotpatch_agent.worktree.refs import head_is
from spotpatch_agent.worktree.removal import remove_worktree
from spotpatch_agent.worktree.repo import resolve_head
from spotpatch_agent.worktree.result import add_all_args

if TYPE_CHECKING:
    from spotpatch_agent.worktree.pool import WorktreePool

__all__ = ["BASELINE_IDENTITY", "commit_baseline", "create_worktree"]


#: ``-c`` options of the baseline commit: a fixed identity, no signing (never the user's identity), and no
#: auto-maintenance — ``git commit`` otherwise runs ``gc --auto`` on the shared repository, which packs the
#: user's refs, expires their reflogs and prunes their stale worktree registrations.
BASELINE_IDENTITY = (
    "-c", "user.name=SpotPatch",
    "-c", "user.email=spotpatch@localhost",
    "-c", "commit.gpgsign=false",
    "-c", "gc.auto=0",
    "-c", "maintenance.auto=false",
)


async def create_worktree(
    root: Path, job_id: str, *, limits: Limits | None = None, include_local_changes: bool = False,
    pool: WorktreePool | None = None, health: RepoHealth | None = None,
) -> Worktree:
    """Create the job's detached worktree at the user's HEAD and commit its baseline (docs/design.md §8).

    ``root`` must be the repository's top level. Without ``include_local_changes`` (require-clean)
    the user's working tree must have no staged, unstaged or untracked changes. With it (the user
    gave ``localChangesConsent``), a dirty but healthy tree is copied into the worktree by
    :func:`~spotpatch_agent.worktree.snapshot.include_local_changes` — ``git diff-index --binary
    HEAD`` applied, bounded regular untracked files copied, then HEAD, diff, path set and digests
    re-verified — before the baseline commit, so the result diff holds only the agent's increment.

    Raises ``SpotPatchError(REPO_BLOCKED)`` when health is blocked, or HEAD or the local changes
    moved while the worktree was being created (``retryable``: "…; try again"),
    ``SpotPatchError(CONSENT_REQUIRED)`` when the working tree is dirty and ``include_local_changes``
    is false, :class:`GitError` when git fails. On any failure (and on cancellation) everything
    created so far is removed before the error propagates. The user's index, HEAD, refs and
    files are never written. With ``pool`` (worktree/pool.py), a warm checkout at HEAD replaces
    ``git worktree add`` when the pool has one. ``health``: the caller's :func:`repo_health` of ``root``
    taken moments before with nothing done in between (job/create's); it replaces the check here.

    One health check per job (issue 17: each is a ``git status`` and a walk of the user's tree): the
    health is read again after the worktree is ready only when local changes are to be copied in
    (``consent-required``), where the snapshot needs it. A require-clean job's baseline is HEAD's tree
    whatever the user's files do meanwhile (HEAD itself is re-verified), so a tree that became dirty after
    the check is the same case as one edited a moment after the job started.
    """
    limits = limits or Limits()
    first = health or await repo_health(root, limits)
    await _check_health(root, first, include_local_changes)
    head = await resolve_head(root)
    if head is None:  # pragma: no cover - health just saw it; a race
        raise SpotPatchError(ErrorCode.REPO_BLOCKED, "HEAD cannot be resolved", retryable=True)
    pooled = await pool.acquire(head) if pool is not None else None  # a warm clean checkout at head (pool.py)
    job_dir = pooled or await make_job_dir(root)
    wt = Worktree(path=job_dir, head_oid=head, baseline_oid="", job_id=job_id)
    try:
        if pooled is None:
            await _add_detached(root, job_dir, head)
        wt.admin_dir = await private_git_dir(job_dir)
        write_marker(wt.admin_dir, job_id)
        if not await head_is(job_dir, head):
            raise GitError("the new worktree is not at the recorded HEAD")
        if not await head_is(root, head):
            raise SpotPatchError(
                ErrorCode.REPO_BLOCKED, "HEAD changed while the job was starting; try again", retryable=True
            )
        clean = True
        if first.state == "consent-required":  # local changes go in: re-read them now (snapshot.py re-verifies)
            health = await repo_health(root, limits)
            await _check_health(root, health, include_local_changes)
            if health.state == "consent-required":
                from spotpatch_agent.worktree.snapshot import include_local_changes as copy_local_changes  # cold

                await copy_local_changes(root, job_dir, head, limits)
            clean = health.state == "clean"
        wt.baseline_oid = await commit_baseline(wt, clean=clean, proven=pool is not None and pool.proven(job_dir))
        return wt
    except BaseException:
        await remove_worktree(root, wt)
        raise


async def _add_detached(root: Path, path: Path, head: str) -> None:
    """Add the detached worktree at ``head`` in the (empty) directory ``path``."""
    with anyio.CancelScope(shield=True):  # never kill git half-way through registering a worktree
        await run_git(["worktree", "add", "--detach", "--quiet", str(path), head], cwd=root, redact=[path])


async def _check_health(root: Path, health: RepoHealth, include_local_changes: bool) -> None:
    if health.state == "blocked":
        raise SpotPatchError(
            ErrorCode.REPO_BLOCKED, "the repository cannot be isolated: " + blocked_message(health)
        )
    if health.state == "consent-required" and not include_local_changes:
        c = health.counts
        raise SpotPatchError(
            ErrorCode.CONSENT_REQUIRED,
            "the working tree has local changes "
            f"({c.staged} staged, {c.unstaged} unstaged, {c.untracked} untracked): " + health_message(health)
            + " In job/create, localChangesConsent: true includes them.",
        )


async def commit_baseline(wt: Worktree, *, clean: bool = False, proven: bool = False) -> str:
    """The worktree's baseline commit (detached HEAD of the worktree only; docs/design.md §8); returns its id.

    ``clean`` (require-clean mode: the worktree is a fresh or pool-reset checkout of ``wt.head_oid`` with
    nothing copied into it): when ``git update-index --refresh`` (the worktree's own index) finds every
    file equal to the index — which equals HEAD after the checkout, and the checkout left no untracked file
    — ``git add --all`` would stage nothing, so the baseline is ``commit-tree`` of HEAD's tree and
    ``update-ref`` of the worktree's HEAD (guarded by its old value): the same commit ``add --all`` +
    ``commit`` make, without re-scanning the tree twice. Anything else (include-local-changes, a file
    that differs after the checkout, e.g. a non-idempotent checkout filter) takes ``add --all`` + ``commit``.
    ``proven`` (with ``clean``): the warm pool handed the worktree over after that very refresh found it
    equal to ``wt.head_oid`` with nothing untracked (``WorktreePool.proven``), so it is not run again.
    """
    message = f"spotpatch baseline {wt.job_id}\n".encode("utf-8", "replace")
    if clean:
        refreshed = None if proven else await run_git(["update-index", "--refresh"], cwd=wt.path, check=False,
                                                      redact=[wt.path], timeout=300)
        if refreshed is None or refreshed.returncode == 0:
            made = await run_git(
                [*BASELINE_IDENTITY, "commit-tree", "--no-gpg-sign", f"{wt.head_oid}^{{tree}}", "-p", wt.head_oid,
                 "-F", "-"],
                cwd=wt.path, input=message, redact=[wt.path],
            )
            baseline = made.stdout.decode("ascii", "replace").strip()
            if len(baseline) not in (40, 64) or not all(c in "0123456789abcdef" for c in baseline):
                raise GitError("the baseline commit was not created")
            await run_git(["update-ref", "--no-deref", "-m", "commit: spotpatch baseline", "HEAD", baseline,
                           wt.head_oid], cwd=wt.path, redact=[wt.path])
            if not await head_is(wt.path, baseline):
                raise GitError("the baseline commit was not created")
            return baseline
    await run_git(await add_all_args(wt.path), cwd=wt.path, timeout=300)  # gitlinks left out (result.py)
    await run_git(
        [*BASELINE_IDENTITY, "commit", "--no-verify", "--allow-empty", "--quiet", "--no-gpg-sign", "-F", "-"],
        cwd=wt.path,
        input=message,
        timeout=300,
    )
    committed = await resolve_head(wt.path)
    if committed is None or committed == wt.head_oid:
        raise GitError("the baseline commit was not created")
    return committed
