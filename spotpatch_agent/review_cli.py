"""``spotpatch-agent apply`` and ``spotpatch-agent revert``: the terminal's Apply and Revert of a reviewed job
(issue 25; docs/configuration.md "The CLI").

``apply [--project P] JOB_ID [--sha256 HEX]`` writes exactly the changeset ``run`` saved for review
(``worktree/reviews.py``) through the engine's verified Apply (``worktree.changes.apply_change``: HEAD and git
operation state re-read, every target file at its reviewed pre-image or refused naming it, every post-image
verified against the reviewed result hashes before the first write, the crash journal). It never runs a
model. ``--sha256``: the diff's SHA-256 ``run`` printed; any other diff is refused. ``revert [--project P]
JOB_ID`` restores byte for byte what an Apply (the terminal's or an engine's) wrote, only while every file
still holds what Apply wrote (else refused naming the files). Both hold the project write lock (another
engine applying or running a job: refused) and first repair a half-written Apply/Revert a crash left.

Exit codes: 0 applied / reverted; 1 refused or failed (nothing written, or the message says what was);
2 usage (not a git repository, a malformed job id or sha256). ``--json``: one object
``{exitCode, outcome, jobId, diffSha256, files, error}`` on stdout.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from spotpatch_agent.errors import SpotPatchError
from spotpatch_agent.exit_codes import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from spotpatch_agent.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from spotpatch_agent.worktree.reviews import SavedReview

#: What each command needs the saved review's state to be, and what it is after.
_FROM = {"apply": ("review", "reverted"), "revert": ("applied",)}


def review_command(command: str, project: Path, job_id: str, *, sha256: str | None = None,
                   as_json: bool = False) -> int:
    """``apply`` or ``revert`` (``command``); prints the outcome and returns the exit code."""
    report: dict[str, Any] = {"exitCode": EXIT_OK, "outcome": None, "jobId": job_id, "diffSha256": None,
                              "files": [], "error": None}
    out = sys.stderr if as_json else sys.stdout
    if sha256 is not None and not re.fullmatch(r"[0-9a-fA-F]{64}", sha256):
        code = _refuse(report, EXIT_USAGE, "usage-error", f"spotpatch-agent {command}: --sha256 takes the 64 hex "
                       "digits `run` printed")
    else:
        code = anyio.run(_review, command, project, job_id, sha256, report, out)
    report["exitCode"] = code
    if as_json:
        sys.stdout.write(json.dumps(report, ensure_ascii=False) + "\n")
        sys.stdout.flush()
    return code


def _say(out: Any, text: str) -> None:
    out.write(text + "\n")
    out.flush()


def _refuse(report: dict[str, Any], code: int, outcome: str, message: str, error: str | None = None) -> int:
    report.update(outcome=outcome, error={"code": error, "message": message} if error else None)
    _say(sys.stderr, message)
    return code


async def _review(command: str, project: Path, job_id: str, sha256: str | None, report: dict[str, Any],
                  out: Any) -> int:
    from spotpatch_agent.worktree.lock import ProjectWriteLock
    from spotpatch_agent.worktree.recovery import recover_pending
    from spotpatch_agent.worktree.repo import locate
    from spotpatch_agent.worktree.reviews import load_review, valid_job_id

    root = project.resolve()
    if not valid_job_id(job_id):
        return _refuse(report, EXIT_USAGE, "usage-error", f"spotpatch-agent {command}: JOB_ID looks like "
                       "job_0123456789abcdef (the id `run` printed)")
    layout = await locate(root) if root.is_dir() else None
    if layout is None:
        return _refuse(report, EXIT_USAGE, "not-a-git-repository",
                       f"spotpatch-agent {command}: {root.name or root} is not a git repository")
    root = layout.toplevel  # --project may name a folder inside the repository (default: the current one)
    lock = ProjectWriteLock(layout.common_dir)
    if not lock.try_acquire():
        return _refuse(report, EXIT_FAILED, "refused", f"spotpatch-agent {command}: another SpotPatch engine is "
                       "running or applying a job for this project; nothing was changed", "JOB_CONFLICT")
    try:
        for repaired in await recover_pending(root, git_dir=layout.git_dir):
            _say(sys.stderr, f"Repaired a half-written {repaired.operation} of {repaired.job_id} left by a crash: "
                             f"{repaired.outcome}")
        review = await anyio.to_thread.run_sync(load_review, layout.common_dir, job_id)
        report.update(diffSha256=review.diff_sha256, files=list(review.paths))
        if sha256 is not None and sha256.lower() != review.diff_sha256:
            raise SpotPatchError(ErrorCode.CHANGESET_REJECTED,
                                 f"the saved diff of {job_id} has sha256 {review.diff_sha256}, not the "
                                 f"{sha256.lower()} you gave: this is not the diff you reviewed; nothing was changed")
        if review.state not in _FROM[command]:
            done = {"applied": "applied", "reverted": "reverted", "review": "not applied"}[review.state]
            hint = f"; undo it with `spotpatch-agent revert {job_id}`" if review.state == "applied" else ""
            raise SpotPatchError(ErrorCode.INVALID_STATE, f"{job_id} is already {done}{hint}; nothing was changed")
        if command == "apply":
            await _apply(root, layout.common_dir, review)
        else:
            await _revert(root, layout.common_dir, review)
    except SpotPatchError as exc:
        return _refuse(report, EXIT_FAILED, "refused" if exc.code != ErrorCode.INTERNAL else "failed",
                       f"spotpatch-agent {command}: {exc.code.value}: {exc.message}", exc.code.value)
    finally:
        lock.release()
    report["outcome"] = "applied" if command == "apply" else "reverted"
    _say(out, f"{'Applied' if command == 'apply' else 'Reverted'} {job_id}: {', '.join(review.paths)} "
              f"(diff sha256 {review.diff_sha256}).")
    if command == "apply":
        _say(out, f"Undo it with: spotpatch-agent revert --project {_shown(project)} {job_id}")
    return EXIT_OK


async def _apply(root: Path, common_dir: Path, review: SavedReview) -> None:
    """The engine's verified Apply of the saved changeset, then the record with what Revert needs."""
    from spotpatch_agent.worktree.changes import apply_change
    from spotpatch_agent.worktree.reviews import save_review

    with anyio.CancelScope(shield=True):  # Ctrl-C never leaves a written change without its revert record
        applied = await apply_change(root, review.diff, review.baseline_hashes, expected_head=review.head,
                                     result_hashes=review.result_hashes, job_id=review.job_id)
        review.state, review.paths = "applied", list(applied.paths)
        review.post_hashes, review.created_dirs = dict(applied.post_hashes), dict(applied.created_dirs)
        review.baseline_images = applied.baseline_images
        try:
            await anyio.to_thread.run_sync(save_review, common_dir, review)
        except SpotPatchError as exc:
            raise SpotPatchError(ErrorCode.INTERNAL, f"the change WAS applied, but its revert record could not be "
                                 f"saved ({exc.message}): undo it by hand (git checkout -- the files)") from None


async def _revert(root: Path, common_dir: Path, review: SavedReview) -> None:
    """The engine's verified Revert of the saved Apply, then the record marked reverted."""
    from spotpatch_agent.worktree.changes import AppliedChange, revert_change
    from spotpatch_agent.worktree.reviews import save_review

    applied = AppliedChange(diff=review.diff, paths=list(review.paths), baseline_hashes=dict(review.baseline_hashes),
                            post_hashes=dict(review.post_hashes), job_id=review.job_id,
                            baseline_images=dict(review.baseline_images), created_dirs=dict(review.created_dirs))
    with anyio.CancelScope(shield=True):
        await revert_change(root, applied, expected_head=review.head)
        review.state = "reverted"
        try:
            await anyio.to_thread.run_sync(save_review, common_dir, review)
        except SpotPatchError:  # a later revert is refused anyway: the files no longer hold what Apply wrote
            _say(sys.stderr, "note: the saved review could not be marked reverted")


def _shown(project: Path) -> str:
    """The project as the user typed it, quoted for a shell."""
    import shlex

    return shlex.quote(str(project))
