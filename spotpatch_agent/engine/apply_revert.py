"""Apply and Revert of a job's reviewed diff to the user's working tree, and their audit records
(docs/design.md §8, §13). The caller holds the engine's write lock and the project write lock
(``EngineService.job_apply`` / ``job_revert`` / the auto modes' Apply).

An Apply saves the job's review record with what Revert needs (``worktree/reviews.py``), inside the same
shielded step as the write, so ``spotpatch-agent revert JOB_ID`` works after the engine exited (issue 25).

Light to import: ``worktree.changes`` is imported at the first Apply or Revert (cold start, issue 3).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from spotpatch_agent.errors import SpotPatchError
from spotpatch_agent.policy.redact import REDACTOR
from spotpatch_agent.protocol.errors import ErrorCode
from spotpatch_agent.protocol.models import JobSnapshot
from spotpatch_agent.worktree.repo import locate

if TYPE_CHECKING:
    from spotpatch_agent.engine.job import Job

log = logging.getLogger("spotpatch.engine")

#: Apply/Revert errors after which the working tree is known to be unchanged (worktree/changes.py).
_UNCHANGED = frozenset({ErrorCode.APPLY_CONFLICT, ErrorCode.REVERT_CONFLICT, ErrorCode.REPO_BLOCKED,
                        ErrorCode.INVALID_STATE, ErrorCode.CHANGESET_REJECTED})


async def persist_ledger(job: Job) -> None:
    """Persist the ledger's records after ``job_end`` (an Apply, a Revert, a suggestion run) off the event
    loop, at most ``audit.ledger.WRITE_TIMEOUT_SEC``, also when the request is being cancelled; never raises
    (the ledger is fail-open)."""
    with anyio.CancelScope(shield=True):
        await job.ledger.persist()


def _record_change(job: Job, kind: str, exc: BaseException | None) -> None:
    """The ledger's ``apply`` / ``revert`` record: the status after it, the files, and for a conflict the
    job's paths its message names (project-relative; never the message itself). Never raises."""
    try:
        paths = [f.path for f in job.files]
        code = getattr(exc, "code", None) if exc is not None else None
        message = getattr(exc, "message", "") if exc is not None else ""
        conflicted = code in (ErrorCode.APPLY_CONFLICT, ErrorCode.REVERT_CONFLICT)
        conflicts = [p for p in paths if p in message] if conflicted else []
        job.ledger.record_apply(kind, status=job.status, file_count=len(paths), conflict_paths=conflicts,
                                error_code=None if exc is None else str(code or ErrorCode.INTERNAL.value))
    except Exception:  # noqa: BLE001 - fail-open
        log.exception("audit ledger: %s not recorded", kind)


def _nothing_written(exc: BaseException) -> bool:
    return isinstance(exc, SpotPatchError) and exc.code in _UNCHANGED


def _as_error(exc: BaseException, what: str) -> SpotPatchError:
    if isinstance(exc, SpotPatchError):
        return SpotPatchError(exc.code, exc.message + " The working tree may be partly written: check it by hand.")
    return SpotPatchError(ErrorCode.INTERNAL, failure_message(exc, what) + " Check the working tree by hand.")


def failure_message(exc: BaseException, what: str) -> str:
    """What to tell the client about ``exc`` raised by ``what`` (``"Apply"`` …): our error's message,
    redacted; for anything else a fixed sentence (the details are in the engine log only)."""
    if isinstance(exc, SpotPatchError):
        return REDACTOR(exc.message)
    return f"{what} failed with an internal error; nothing was reported as done (see the engine log)."


async def _common_dir(root: Path) -> Path:
    from spotpatch_agent.worktree.refs import read_repo_state

    state = await anyio.to_thread.run_sync(read_repo_state, root)  # in process, no git (the usual case)
    layout = state.layout if state is not None else await locate(root)
    if layout is None:
        raise SpotPatchError(ErrorCode.REPO_BLOCKED, "the project is no longer a git repository")
    return layout.common_dir


async def save_job_review(job: Job) -> str | None:
    """Save ``job``'s review record (state ``review``, or ``applied``/``reverted`` with what Revert needs, from
    ``job.applied``) under the git common dir. Returns None, or why it failed (logged; never raises)."""
    from spotpatch_agent.worktree.reviews import SavedReview, save_review

    try:
        review = SavedReview(job_id=job.job_id, head=job.head_oid, diff=job.diff, paths=list(job.baseline_hashes),
                             baseline_hashes=dict(job.baseline_hashes), result_hashes=dict(job.result_hashes))
        if job.applied is not None:
            review.state = "reverted" if job.status == "reverted" else "applied"
            review.paths, review.post_hashes = list(job.applied.paths), dict(job.applied.post_hashes)
            review.baseline_images, review.created_dirs = job.applied.baseline_images, job.applied.created_dirs
        await anyio.to_thread.run_sync(save_review, await _common_dir(job.root), review)
    except Exception as exc:  # noqa: BLE001 - the caller says what it means: only this session can revert
        reason = failure_message(exc, "Saving the review record")
        log.warning("job %s: the review record was not saved: %s", job.job_id, reason)
        return reason
    return None


async def apply_job(job: Job, *, auto: str | None = None) -> JobSnapshot:
    """Apply ``job``'s diff. ``auto``: the auto modes' Apply straight from ``validating`` (docs/design.md §10),
    with this status message when applied; a conflict then reads "Not applied automatically: …"."""
    if job.status != ("validating" if auto is not None else "awaiting-review"):
        raise SpotPatchError(ErrorCode.INVALID_STATE,
                             f"Only a job awaiting review can be applied (status {job.status!r}).")
    from spotpatch_agent.worktree.changes import apply_change

    job.set_status("applying")
    try:
        with anyio.CancelScope(shield=True):
            job.applied = await apply_change(job.root, job.diff, job.baseline_hashes,
                                             expected_head=job.head_oid, result_hashes=job.result_hashes,
                                             job_id=job.job_id)
            unsaved = await save_job_review(job)  # what Revert needs outlives this engine (issue 25)
    except BaseException as exc:
        if _nothing_written(exc):
            reason = failure_message(exc, "Apply")
            job.set_status("awaiting-review", reason if auto is None else "Not applied automatically: " + reason)
        else:
            job.fail(_as_error(exc, "Apply"))
        _record_change(job, "apply", exc)
        raise
    if unsaved is not None:
        auto = f"{auto or 'Applied.'} Only this engine session can revert it: {unsaved}"
    job.set_status("applied", auto)
    _record_change(job, "apply", None)
    return job.snapshot()


async def revert_job(job: Job) -> JobSnapshot:
    """Revert ``job``'s applied change (status ``applied`` only)."""
    if job.status != "applied" or job.applied is None:
        raise SpotPatchError(ErrorCode.INVALID_STATE, f"Only an applied job can be reverted (status {job.status!r}).")
    from spotpatch_agent.worktree.changes import revert_change

    job.set_status("reverting")
    try:
        with anyio.CancelScope(shield=True):
            await revert_change(job.root, job.applied, expected_head=job.head_oid)
            job.status = "reverted"  # the record's state; the event is emitted below
            await save_job_review(job)
    except BaseException as exc:
        if _nothing_written(exc):
            job.set_status("applied", failure_message(exc, "Revert"))
        else:
            job.fail(_as_error(exc, "Revert"))
        _record_change(job, "revert", exc)
        raise
    job.set_status("reverted")
    _record_change(job, "revert", None)
    return job.snapshot()
