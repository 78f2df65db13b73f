"""The session's working-tree writes (docs/design.md §8): one Apply or Revert at a time in this engine (the
in-process write lock) and across engines (the project's cross-engine write lock, worktree/lock.py). Owns the two
locks and the order they are taken in, and runs ``job/apply``, ``job/revert`` and the automatic Apply of ``auto``
and ``trusted-auto`` under both. engine/service.py owns the session and delegates these here (it sets
:attr:`ProjectWrites.project_lock` at ``initialize``; a job/create takes the project lock for the job's run);
engine/apply_revert.py does the Apply and Revert themselves.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import anyio

from spotpatch_agent.engine.apply_revert import apply_job, failure_message, persist_ledger, revert_job
from spotpatch_agent.errors import SpotPatchError
from spotpatch_agent.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from spotpatch_agent.engine.job import Job
    from spotpatch_agent.protocol.models import JobSnapshot
    from spotpatch_agent.worktree.lock import ProjectWriteLock

__all__ = ["ProjectWrites"]

log = logging.getLogger("spotpatch.engine")


class ProjectWrites:
    """The write locks of one session's project, and the Apply and Revert run under them."""

    def __init__(self) -> None:
        #: The project's cross-engine write lock (set at ``initialize``); ``None`` outside a git repository.
        self.project_lock: ProjectWriteLock | None = None
        #: Apply and Revert of any job are serialised: one working-tree write at a time (docs/design.md §8).
        self._write_lock: anyio.Lock | None = None

    def lock(self) -> anyio.Lock:
        """The in-process write lock (made on first use, inside the event loop)."""
        self._write_lock = self._write_lock or anyio.Lock()
        return self._write_lock

    def acquire(self) -> bool:
        """Take the cross-engine write lock or raise ``JOB_CONFLICT`` (worktree/lock.py)."""
        if self.project_lock is None:
            raise SpotPatchError(ErrorCode.REPO_BLOCKED, "The project is not a git repository.")
        if not self.project_lock.try_acquire():
            raise SpotPatchError(ErrorCode.JOB_CONFLICT,
                                 "Another SpotPatch engine is running or applying a job for this project.")
        return True

    def release(self) -> None:
        if self.project_lock is not None:
            self.project_lock.release()

    async def apply(self, job: Job) -> JobSnapshot:
        """``job/apply``: the job's Apply under both locks; its ledger persisted whatever the outcome."""
        try:
            async with self.lock():
                self.acquire()
                try:
                    return await apply_job(job)
                finally:
                    self.release()
        finally:
            await persist_ledger(job)

    async def auto_apply(self, job: Job, message: str) -> None:
        """The Apply of ``auto`` (every gate held) and ``trusted-auto``, called by ``run_job`` after the
        worktree is gone (engine/job.py): the same Apply as ``job/apply``, under the same locks. Anything
        that leaves the working tree unchanged (``APPLY_CONFLICT`` …) leaves the job ``awaiting-review``
        with the reason; a cancelled job is not applied. Never raises."""
        if job.cancel_scope.cancel_called:
            job.set_status("cancelled", "Cancelled; nothing was applied.")
            return
        try:
            async with self.lock():
                if job.cancel_scope.cancel_called:  # job/cancel while this waited for another Apply/Revert
                    job.set_status("cancelled", "Cancelled; nothing was applied.")
                    return
                self.acquire()  # re-entrant: the job's run holds it
                try:
                    await apply_job(job, auto=message)
                finally:
                    self.release()
        except Exception as exc:  # noqa: BLE001 - apply_job already set the status it implies
            log.info("job %s was not applied automatically: %s", job.job_id, failure_message(exc, "Apply"))
            if job.status == "validating":
                job.set_status("awaiting-review", "Not applied automatically: " + failure_message(exc, "Apply"))

    async def revert(self, job: Job) -> JobSnapshot:
        """``job/revert``: the job's Revert under both locks; its ledger persisted whatever the outcome."""
        try:
            async with self.lock():
                self.acquire()
                try:
                    return await revert_job(job)
                finally:
                    self.release()
        finally:
            await persist_ledger(job)
