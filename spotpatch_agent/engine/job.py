"""One annotation job: frozen inputs, status machine, worktree life, result diff (DESIGN.md §4, §5, §8).

Status flow (review mode): ``preparing → running → validating → awaiting-review → applying → applied →
reverting → reverted``; terminal ``failed``, ``cancelled``, ``closed``. A failed job keeps its diagnostics
and any reviewable diff; nothing is reported as applied or checked unless it was.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import anyio

from spotpatch_agent.engine.events import MAX_MESSAGE_CHARS, JobEventLog, now_iso
from spotpatch_agent.engine.loop import LoopBudget, LoopStats, run_loop
from spotpatch_agent.engine.prompt import SYSTEM_PROMPT, agent_task
from spotpatch_agent.engine.states import job_tools  # defined there: a light import
from spotpatch_agent.errors import JobFailure, SpotPatchError
from spotpatch_agent.policy.paths import PathDenied, is_protected, normalize_rel_path
from spotpatch_agent.policy.redact import REDACTOR, shorten_paths
from spotpatch_agent.protocol.errors import ErrorCode
from spotpatch_agent.protocol.models import (
    ErrorInfo,
    FileStat,
    JobCreateParams,
    CheckConfig,
    JobSnapshot,
    Limits,
    ModelProfile,
    ProviderProfile,
)
from spotpatch_agent.provider.base import ProviderAdapter
from spotpatch_agent.tools.executor import ToolExecutor
from spotpatch_agent.tools.registry import TOOL_DEFS, tool_specs
from spotpatch_agent.worktree.changes import change_hashes
from spotpatch_agent.worktree.isolation import Worktree, create_worktree, remove_worktree, result_diff

log = logging.getLogger("spotpatch.job")


@dataclass
class Job:
    """A job's frozen inputs and mutable state. Only :class:`JobRunner` and the service mutate it."""

    job_id: str
    params: JobCreateParams
    root: Path
    head_oid: str
    provider: ProviderProfile
    model: ModelProfile
    limits: Limits
    events: JobEventLog
    #: The trusted config's checks, frozen at creation (DESIGN.md §4); the only commands run_check can run.
    checks: tuple[CheckConfig, ...] = ()
    created_at: str = field(default_factory=now_iso)
    updated_at: str = field(default_factory=now_iso)
    status: str = "preparing"
    message: str | None = None
    error: SpotPatchError | None = None
    stats: LoopStats = field(default_factory=LoopStats)
    diff: str = ""
    files: list[FileStat] = field(default_factory=list)
    #: SHA-256 of each touched path in the baseline (None: absent) and in the result.
    baseline_hashes: dict[str, str | None] = field(default_factory=dict)
    result_hashes: dict[str, str | None] = field(default_factory=dict)
    applied: object | None = None
    cancel_scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    done: anyio.Event = field(default_factory=anyio.Event)

    def set_status(self, status: str, message: str | None = None) -> None:
        self.status = status
        self.message = shorten_paths(REDACTOR(message))[:MAX_MESSAGE_CHARS] if message else None
        self.updated_at = now_iso()
        self.events.emit("status", status=status, message=self.message)

    def fail(self, error: SpotPatchError) -> None:
        error.message = shorten_paths(REDACTOR(error.message))[:MAX_MESSAGE_CHARS]
        self.error = error
        self.events.emit("error", error=ErrorInfo(**error.to_data()))
        self.set_status("failed", error.message)

    def snapshot(self) -> JobSnapshot:
        return JobSnapshot(
            job_id=self.job_id, status=self.status, annotation_id=self.params.annotation.annotation_id,
            model_profile_id=self.model.id, apply_mode=self.params.apply_mode, created_at=self.created_at,
            updated_at=self.updated_at, turns=self.stats.turns, tool_calls=self.stats.tool_calls,
            last_seq=self.events.last_seq, files=self.files, message=self.message,
            error=ErrorInfo(**self.error.to_data()) if self.error else None,
        )


async def run_job(job: Job, adapter: ProviderAdapter) -> None:
    """Run ``job`` to ``awaiting-review``, ``failed`` or ``cancelled``; always removes its worktree.

    The terminal status is emitted only after the worktree is removed, so a client that sees it may rely
    on the job having left nothing behind.
    """
    worktree: Worktree | None = None
    finish: Callable[[], None] | None = None  # emits the terminal status, after clean-up
    try:
        with job.cancel_scope:
            try:
                with anyio.fail_after(job.limits.get("jobTimeoutSec")):
                    worktree = await create_worktree(job.root, job.job_id, limits=job.limits)
                    REDACTOR.add_path(worktree.path, "<worktree>")
                    if worktree.head_oid != job.head_oid:
                        raise JobFailure(ErrorCode.REPO_BLOCKED, "HEAD moved while the job was starting; try again.")
                    job.set_status("running")
                    await _run_agent(job, adapter, worktree)
                    job.set_status("validating")
                    await _collect_changeset(job, worktree)
                    if not job.files:
                        raise JobFailure(ErrorCode.CHANGESET_REJECTED, "The model finished without changing any file.")
                    job.events.emit("diff", files=job.files)
                    finish = partial(job.set_status, "awaiting-review", job.stats.final_text or None)
            except TimeoutError:
                await _keep_reviewable_diff(job, worktree)
                limit = job.limits.get("jobTimeoutSec")
                finish = partial(job.fail, JobFailure(ErrorCode.LIMIT_EXCEEDED, f"The job took longer than {limit} s."))
            except SpotPatchError as exc:
                if exc.code != ErrorCode.CHANGESET_REJECTED:
                    await _keep_reviewable_diff(job, worktree)
                finish = partial(job.fail, exc)
            except Exception as exc:  # noqa: BLE001 - an engine bug must fail the job visibly, not kill the server
                log.error("job failed unexpectedly", exc_info=exc)
                finish = partial(job.fail, SpotPatchError(
                    ErrorCode.INTERNAL, "Internal error while running the job (see the engine log)."))
        if job.cancel_scope.cancelled_caught or (job.cancel_scope.cancel_called and finish is None):
            finish = partial(job.set_status, "cancelled", "Cancelled.")
    finally:
        with anyio.CancelScope(shield=True):
            if worktree is not None:
                await remove_worktree(job.root, worktree)
            await adapter.aclose()
            if finish is None:  # the engine is stopping (cancelled from outside the job's own scope)
                finish = partial(job.set_status, "cancelled", "Cancelled.")
            finish()
            job.done.set()


async def _keep_reviewable_diff(job: Job, worktree: Worktree | None) -> None:
    """After a failure, keep the diff so far for review when it passes changeset validation (DESIGN.md §4:
    "a failed job keeps its diagnostics and any reviewable diff"). A failed job can never be applied."""
    if worktree is None or job.diff:
        return
    with anyio.move_on_after(10):
        try:
            await _collect_changeset(job, worktree)
        except Exception:  # noqa: BLE001 - an unreviewable change is simply not kept
            job.diff, job.files = "", []
            job.baseline_hashes, job.result_hashes = {}, {}
            return
    if job.files:
        job.events.emit("diff", files=job.files)


async def _run_agent(job: Job, adapter: ProviderAdapter, worktree: Worktree) -> None:
    limits = job.limits
    tools = job_tools(registered=TOOL_DEFS, has_checks=bool(job.checks))
    executor = ToolExecutor(worktree.path, limits, tools=tools, checks=job.checks)
    budget = LoopBudget(
        max_turns=limits.get("maxTurns"), max_tool_calls=limits.get("maxToolCalls"),
        tool_timeout_sec=limits.get("toolTimeoutSec"),
        check_timeout_sec=max((c.timeout_sec or limits.get("checkTimeoutSec") for c in job.checks),
                              default=limits.get("checkTimeoutSec")),
    )
    task = agent_task(job.params.annotation, max_turns=budget.max_turns, max_tool_calls=budget.max_tool_calls)
    await run_loop(
        adapter=adapter, model=job.model.model, system=SYSTEM_PROMPT, task=task, tools=tool_specs(tools),
        executor=executor, budget=budget, events=job.events, stats=job.stats,
    )


async def _collect_changeset(job: Job, worktree: Worktree) -> None:
    """Result diff against the baseline, its validation, and the baseline/result hashes of touched paths."""
    diff, files = await result_diff(worktree)
    limits = job.limits
    if len(files) > limits.get("maxChangedFiles"):
        raise JobFailure(ErrorCode.CHANGESET_REJECTED, f"The change touches {len(files)} files (limit {limits.get('maxChangedFiles')}).")
    if len(diff.encode()) > limits.get("maxDiffBytes"):
        raise JobFailure(ErrorCode.CHANGESET_REJECTED, f"The diff is larger than {limits.get('maxDiffBytes')} bytes.")
    for line in diff.splitlines():
        if line.startswith(("old mode ", "new mode ", "GIT binary patch", "Binary files ", "similarity index")) or (
            line.startswith(("new file mode ", "deleted file mode ")) and not line.endswith(" 100644")
        ):
            raise JobFailure(ErrorCode.CHANGESET_REJECTED, "The change holds a mode change, binary file, link or rename.")
    for f in files:
        try:
            rel = normalize_rel_path(f.path)
        except PathDenied:
            raise JobFailure(ErrorCode.CHANGESET_REJECTED, "The change touches a path outside the allowed set.") from None
        if is_protected(rel):
            raise JobFailure(ErrorCode.CHANGESET_REJECTED, f"The change touches a protected path: {rel}")
    hashes = await change_hashes(worktree)
    if set(hashes.baseline) != {f.path for f in files}:
        raise JobFailure(ErrorCode.CHANGESET_REJECTED, "The diff and the worktree disagree about the touched paths.")
    job.diff, job.files = diff, files
    job.baseline_hashes, job.result_hashes = hashes.baseline, hashes.result
