"""One annotation job: frozen inputs, status machine, worktree life, result diff (docs/design.md §4, §5, §8).

Status flow (review mode): ``preparing → running → validating → awaiting-review → applying → applied →
reverting → reverted``; terminal ``failed``, ``cancelled``, ``closed``. A failed job keeps its diagnostics
and any reviewable diff; nothing is reported as applied or checked unless it was.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import anyio

from spotpatch_agent.audit import JobLedger
from spotpatch_agent.audit.ledger import job_start_fields, offered_hashes, target_entries
from spotpatch_agent.checks.timeouts import check_deadline
from spotpatch_agent.context.build import build_prompt_context
from spotpatch_agent.context.conventions import ContextFile
from spotpatch_agent.engine import gates
from spotpatch_agent.engine.events import MAX_MESSAGE_CHARS, JobEventLog, error_info, now_iso
from spotpatch_agent.engine.locations import check_tags, lines_reader
from spotpatch_agent.engine.loop import LoopBudget, LoopStats, run_loop
from spotpatch_agent.engine.pictures import drop_pictures, picture_note, target_pictures
from spotpatch_agent.engine.prompt import agent_task, system_prompt
from spotpatch_agent.errors import JobFailure, SpotPatchError
from spotpatch_agent.policy.redact import REDACTOR, shorten_paths
from spotpatch_agent.protocol.errors import ErrorCode
from spotpatch_agent.protocol.limits import LIMITS
from spotpatch_agent.protocol.models import (
    CheckConfig,
    FileStat,
    JobCreateParams,
    JobSnapshot,
    JobStatus,
    Limits,
    ModelProfile,
    ProviderProfile,
    RepoHealth,
    SpotAnnotation,
)
from spotpatch_agent.provider.agent import AgentTurns
from spotpatch_agent.provider.base import ProviderAdapter
from spotpatch_agent.tools.executor import ToolExecutor
from spotpatch_agent.tools.hints import page_texts
from spotpatch_agent.tools.registry import offered_tools, tool_specs
from spotpatch_agent.worktree.create import create_worktree
from spotpatch_agent.worktree.placement import Worktree
from spotpatch_agent.worktree.pool import WorktreePool
from spotpatch_agent.worktree.removal import remove_worktree

if TYPE_CHECKING:
    from spotpatch_agent.worktree.changes import AppliedChange

log = logging.getLogger("spotpatch.job")

#: Longest a failed job spends collecting its diff so far for review, in seconds (:func:`_keep_reviewable_diff`).
KEEP_DIFF_TIMEOUT_SEC = 10

#: The service's Apply for the auto modes: ``apply(job, message_when_applied)``; sets the job's status.
AutoApply = Callable[["Job", str], Awaitable[None]]


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
    #: The job's audit ledger (docs/design.md §13, spotpatch_agent.audit); memory only unless the service
    #: gives one that persists (trusted ``audit.persist``).
    ledger: JobLedger
    #: The trusted config's checks, frozen at creation (docs/design.md §4); the only commands run_check can run.
    checks: tuple[CheckConfig, ...] = ()
    #: The trusted config's ``sandbox`` policy for checks on a machine that cannot confine them (issue 14).
    sandbox: Literal["required", "warn"] = "required"
    #: The explicit capability probe had passed for this model when the job was created (auto gate, §10).
    capability_probed: bool = False
    #: Tool calling was proven for this model profile before the job (the probe or an earlier job's inline
    #: proof): only the wording of a first turn without a tool call depends on it.
    tool_calling_known: bool = False
    #: The probe proved this model profile's vision (issue 26): the first message carries the targets' pictures.
    vision: bool = False
    #: Send ``tool_choice: "required"`` where a call is due (a llama.cpp server then forces a valid call: issue 27);
    #: None: once the job's stream shows a llama.cpp server (``LoopBudget.constrained_tool_calls``).
    constrained_tool_calls: bool | None = False
    #: The project's warm worktree pool (worktree/pool.py): the job's worktree comes from it and goes back.
    pool: WorktreePool | None = None
    #: job/create's repository health, moments old: create_worktree skips its own first check (the
    #: re-verification after ``worktree add`` still runs, docs/design.md §8).
    health: RepoHealth | None = None
    created_at: str = field(default_factory=now_iso)
    updated_at: str = field(default_factory=now_iso)
    status: JobStatus = "preparing"
    message: str | None = None
    error: SpotPatchError | None = None
    stats: LoopStats = field(default_factory=LoopStats)
    diff: str = ""
    files: list[FileStat] = field(default_factory=list)
    #: SHA-256 of each touched path in the baseline (None: absent) and in the result.
    baseline_hashes: dict[str, str | None] = field(default_factory=dict)
    result_hashes: dict[str, str | None] = field(default_factory=dict)
    applied: AppliedChange | None = None
    #: The final check stage's results (engine/gates.py), in config order; empty in trusted-auto.
    check_results: list[gates.FinalCheck] = field(default_factory=list)
    #: The files whose content the first message offered (the targets' files, conventions, samples), path +
    #: SHA-256 each: what the audit ledger records (spotpatch_agent.context). Empty until the loop starts.
    context_files: tuple[ContextFile, ...] = ()
    cancel_scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    done: anyio.Event = field(default_factory=anyio.Event)

    def set_status(self, status: JobStatus, message: str | None = None) -> None:
        self.status = status
        self.message = shorten_paths(REDACTOR(message))[:MAX_MESSAGE_CHARS] if message else None
        self.updated_at = now_iso()
        self.events.emit("status", status=status, message=self.message)

    def fail(self, error: SpotPatchError) -> None:
        error.message = shorten_paths(REDACTOR(error.message))[:MAX_MESSAGE_CHARS]
        self.error = error
        self.events.emit("error", error=error_info(error))
        self.set_status("failed", error.message)

    def snapshot(self) -> JobSnapshot:
        return JobSnapshot(
            job_id=self.job_id, status=self.status, annotation_id=self.params.annotation.annotation_id,
            model_profile_id=self.model.id, apply_mode=self.params.apply_mode, created_at=self.created_at,
            updated_at=self.updated_at, turns=self.stats.turns, tool_calls=self.stats.tool_calls,
            last_seq=self.events.last_seq, files=self.files, message=self.message,
            error=error_info(self.error) if self.error else None,
        )


async def run_job(job: Job, adapter: ProviderAdapter, *, apply: AutoApply | None = None) -> None:
    """Run ``job`` to ``awaiting-review``, ``failed`` or ``cancelled`` — or, in the auto modes, on through
    ``applying`` to ``applied`` — and always remove its worktree.

    After the loop (docs/design.md §9): changeset safety → the final checks (review and auto; none in
    trusted-auto) → the mode's decision (:func:`_decide`). ``apply(job, message)`` is the service's Apply
    for the auto modes; it runs after the worktree is removed and sets the job's status itself (without it,
    an auto job stops at ``awaiting-review``). The terminal status is emitted only after the worktree is
    removed, so a client that sees it may rely on the job having left nothing behind.
    """
    worktree: Worktree | None = None
    executor: ToolExecutor | None = None
    # Emits the run's last status after clean-up; in the auto modes it may return the Apply to await.
    finish: Callable[[], Awaitable[None] | None] | None = None
    try:
        with job.cancel_scope:
            try:
                with anyio.fail_after(job.limits.get("jobTimeoutSec")):
                    await _require_sandbox(job)
                    worktree = await create_worktree(
                        job.root, job.job_id, limits=job.limits,
                        include_local_changes=gates.includes_local_changes(
                            job.params.apply_mode, job.params.trusted_fast_mode_consent,
                            job.params.local_changes_consent),
                        pool=job.pool, health=job.health)
                    REDACTOR.add_path(worktree.path, "<worktree>")
                    if worktree.head_oid != job.head_oid:
                        raise JobFailure(ErrorCode.REPO_BLOCKED, "HEAD moved while the job was starting; try again.")
                    job.set_status("running")
                    executor = _make_executor(job, worktree)
                    await _run_agent(job, adapter, executor)
                    job.set_status("validating")
                    await _collect_changeset(job, worktree)
                    if not job.files:
                        raise JobFailure(ErrorCode.CHANGESET_REJECTED, "The model finished without changing any file.")
                    job.events.emit("diff", files=job.files)
                    finish = await _decide(job, worktree, executor, apply)
            except TimeoutError:
                job.ledger.record_limit(limit="jobTimeoutSec")
                await _keep_reviewable_diff(job, worktree)
                limit = job.limits.get("jobTimeoutSec")
                why = (f"No agent took the job within {limit} s (Send to my agent waits for your agent's "
                       "spotpatch_pending; docs/mcp.md)." if isinstance(adapter, AgentTurns) and adapter.client is None
                       else f"The job took longer than {limit} s.")
                finish = partial(job.fail, JobFailure(ErrorCode.LIMIT_EXCEEDED, why))
            except SpotPatchError as exc:
                if exc.code == ErrorCode.LIMIT_EXCEEDED:
                    job.ledger.record_limit(limit=limit_name(exc.message))
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
            if worktree is not None:  # back to the warm pool (recycled in the background), else removed
                await (job.pool.release(worktree) if job.pool is not None else remove_worktree(job.root, worktree))
            await adapter.aclose()
            if finish is None:  # the engine is stopping (cancelled from outside the job's own scope)
                finish = partial(job.set_status, "cancelled", "Cancelled.")
            try:
                _end_ledger(job, finish)  # before the last status: job/audit then has job_end
                drop_pictures(job.params.annotation)  # sent with the first turn; kept no longer (issue 26)
                pending = finish()
                if pending is not None:  # the auto modes' Apply (docs/design.md §10): validating → applying → …
                    await pending
            finally:
                await job.ledger.flush()  # the JSONL (audit.persist), after the last status; never raises
                job.done.set()


#: Words of a ``LIMIT_EXCEEDED`` message → the limit it names (the ledger's ``limit`` record).
#: Most specific first (the stuck-call message also says "turns").
_LIMIT_WORDS = (("same failing", "maxRepeatedFailedCalls"), ("without acting on its result", "maxRepeatedFailedCalls"),
                ("again after its one correction", "argumentCorrections"),
                ("turns without finishing", "maxTurns"), ("tool calls", "maxToolCalls"),
                ("took longer than", "toolTimeoutSec"), ("exceeded toolTimeoutSec", "toolTimeoutSec"),
                ("arguments", "argumentBytes"), ("output limit", "maxOutputTokens"), ("KiB of text", "turnTextBytes"))


def limit_name(message: str) -> str:
    """The limit a ``LIMIT_EXCEEDED`` message is about, as a config name where there is one; else ``other``."""
    for words, name in _LIMIT_WORDS:
        if words in message:
            return name
    return "other"


def _end_ledger(job: Job, finish: Callable[[], Awaitable[None] | None]) -> None:
    """``job_end`` of the job's ledger (and ``job_start`` when the run ended before its worktree): the
    outcome is the status ``finish`` sets — ``auto-apply`` when it is the auto modes' Apply, whose result
    follows as an ``apply`` record. Never raises (the ledger is fail-open)."""
    try:
        if not job.ledger.has_start():
            job.ledger.record_job_start(**_start_fields(job, None, images_sent=job.vision and job.stats.turns > 0))
        outcome, code = "auto-apply", None
        if isinstance(finish, partial) and finish.func == job.fail:
            outcome, code = "failed", getattr(finish.args[0], "code", None)
        elif isinstance(finish, partial) and finish.func == job.set_status:
            outcome = str(finish.args[0])
        job.ledger.finish(outcome=outcome, error_code=None if code is None else str(code))
    except Exception:  # noqa: BLE001 - fail-open
        log.exception("audit ledger: job_end not recorded")


def _start_fields(job: Job, hashes: dict[str, dict[str, str]] | None, *, images_sent: bool) -> dict:
    return job_start_fields(
        job_id=job.job_id, provider_id=job.provider.id, model_profile_id=job.model.id, mode=job.params.apply_mode,
        limits={name: job.limits.get(name) for name in LIMITS},
        local_changes=gates.includes_local_changes(job.params.apply_mode, job.params.trusted_fast_mode_consent,
                                                   job.params.local_changes_consent),
        targets=target_entries(job.params.annotation, hashes, images_sent=images_sent),
        context_files=job.context_files)


async def _keep_reviewable_diff(job: Job, worktree: Worktree | None) -> None:
    """After a failure, keep the diff so far for review when it passes changeset validation (docs/design.md §4:
    "a failed job keeps its diagnostics and any reviewable diff"). A failed job can never be applied."""
    if worktree is None or job.diff:
        return
    with anyio.move_on_after(KEEP_DIFF_TIMEOUT_SEC) as scope:
        try:
            await _collect_changeset(job, worktree)
        except Exception as exc:  # noqa: BLE001 - an unreviewable change is not kept; the log says why
            job.diff, job.files = "", []
            job.baseline_hashes, job.result_hashes = {}, {}
            _log_diff_dropped(job, _drop_reason(exc), exc)
            return
    if scope.cancelled_caught:
        _log_diff_dropped(job, f"collecting it took longer than {KEEP_DIFF_TIMEOUT_SEC} s")
        return
    if job.files:
        job.events.emit("diff", files=job.files)


def _drop_reason(exc: Exception) -> str:
    """Why the diff was not kept: the error code and message of ours (their messages name relative paths
    only), else just the exception's type (a foreign message may quote anything)."""
    if isinstance(exc, SpotPatchError):
        return f"{exc.code.value}: {exc.message}"
    return f"{type(exc).__name__} while collecting it"


def _log_diff_dropped(job: Job, reason: str, exc: Exception | None = None) -> None:
    """The stderr line for a failed job whose diff was dropped (issue 21: never silently), redacted and
    with absolute paths shortened here as well as by the log handler (``policy.redact.RedactingFilter``,
    which also redacts the traceback logged for an exception that is not ours)."""
    log.warning("job %s failed and its diff was not kept for review: %s", job.job_id,
                shorten_paths(REDACTOR(reason))[:MAX_MESSAGE_CHARS],
                exc_info=None if exc is None or isinstance(exc, SpotPatchError) else exc)


async def _decide(
    job: Job, worktree: Worktree, executor: ToolExecutor, apply: AutoApply | None,
) -> Callable[[], Awaitable[None] | None]:
    """The final checks and the mode's decision, after the changeset passed (docs/design.md §9, §10).

    Returns what ends the run: ``awaiting-review`` (review; an auto mode whose gate does not hold, with the
    reasons as the status message) or the Apply (auto when every gate of engine/gates.py holds;
    trusted-auto, which runs no check, once tool calling is proven). Raises ``JobFailure(CHECK_FAILED)``
    when a required check did not pass or a check run by the host wrote files."""
    mode = job.params.apply_mode
    proven = job.capability_probed or job.stats.tool_round_trip_proven
    if mode == "trusted-auto":  # no project checks run; it never claims they passed
        for check in job.checks:
            job.events.emit("check", check_id=check.id, name=check.name, status="skipped", ok=False,
                            duration_ms=0, required=check.required)
            job.ledger.record_check(check_id=check.id, status="skipped", duration_ms=0, exit_code=None)
        skipped = "project checks were skipped, not passed"
        blockers = [] if proven else [gates.UNPROVEN]  # unreachable after a real loop; kept fail-closed
        return _apply_unless_blocked(
            job, apply, blockers, applied=f"Applied directly (trusted-auto); {skipped}.",
            not_applied="Not applied automatically: {why}; " + skipped + ". Review the change.",
        )
    # Fresh: the model's run saw exactly the final tree (nothing written since, and it wrote nothing itself).
    wrote = executor.checks_that_wrote
    fresh = {cid: run for cid, (version, run) in executor.check_runs.items()
             if version == executor.version and cid not in wrote}
    job.check_results = await gates.run_final_checks(
        job.checks, cwd=worktree.path, limits=job.limits, fresh=fresh, fingerprint=executor.fingerprint,
        on_result=partial(_emit_check, job), project_root=job.root, sandbox=job.sandbox,
    )
    failure = gates.checks_failure(job.checks, job.check_results)
    if failure is not None:
        raise failure
    if mode != "auto":
        return partial(job.set_status, "awaiting-review", job.stats.final_text or None)
    blockers = gates.auto_apply_blockers(gates.GateFacts(
        capability_proven=proven,
        files=job.files, checks=job.checks, results=job.check_results,
        check_wrote=executor.checks_changed_files, diff=job.diff,
    ))
    return _apply_unless_blocked(
        job, apply, blockers, applied="Applied automatically: every gate passed.",
        not_applied="Not applied automatically: {why}. Review the change and apply it yourself.",
    )


def _apply_unless_blocked(
    job: Job, apply: AutoApply | None, blockers: list[str], *, applied: str, not_applied: str,
) -> Callable[[], Awaitable[None] | None]:
    """The auto modes' end: the Apply (status message ``applied``) when nothing blocks it, else
    ``awaiting-review`` with ``not_applied`` (``{why}``: the blockers). Without ``apply`` it is blocked."""
    if apply is None:
        blockers.append("this engine path cannot apply automatically")
    if blockers or apply is None:
        return partial(job.set_status, "awaiting-review", not_applied.format(why="; ".join(blockers)))
    return partial(apply, job, applied)


def _emit_check(job: Job, result: gates.FinalCheck) -> None:
    run = result.run
    job.ledger.record_check(check_id=run.check_id, status=run.status, duration_ms=run.duration_ms,
                            exit_code=run.exit_code)
    job.events.emit("check", check_id=run.check_id, name=run.name, status=run.status, ok=run.ok,
                    duration_ms=run.duration_ms, required=run.required, output=run.output or None,
                    sandbox=run.sandbox, network=run.network)


async def _require_sandbox(job: Job) -> None:
    """Fail the job before any work (``CHECK_FAILED``, the reason and the fix) when it would run checks,
    they must run confined (``sandbox: "required"``) and this machine cannot confine them (issue 14)."""
    if not _job_checks(job) or job.sandbox == "warn":
        return
    from spotpatch_agent.checks.runner import SandboxUnavailable
    from spotpatch_agent.checks.sandbox import detect, unavailable_message

    detection = await detect()
    if detection.confinement is None:
        raise SandboxUnavailable(unavailable_message(detection))


def _job_checks(job: Job) -> tuple[CheckConfig, ...]:
    """The checks the model may run: none in trusted-auto (no ``run_check`` offered: docs/design.md §10)."""
    return () if job.params.apply_mode == "trusted-auto" else job.checks


def _make_executor(job: Job, worktree: Worktree) -> ToolExecutor:
    checks = _job_checks(job)
    tools = offered_tools(has_checks=bool(checks), edit_format=job.model.edit_format)
    executor = ToolExecutor(worktree.path, job.limits, tools=tools, checks=checks, sandbox=job.sandbox,
                            project_root=job.root, focus=target_lines(job.params.annotation),
                            edit_format=job.model.edit_format)
    executor.context.page_texts = page_texts(job.params.annotation.targets)  # replace_text's page-text hint
    return executor


def target_lines(annotation: SpotAnnotation) -> dict[str, tuple[int, ...]]:
    """The offered source lines of the annotation's targets per relative path (unusable paths left out)."""
    from spotpatch_agent.policy.paths import PathDenied, normalize_rel_path

    lines: dict[str, set[int]] = {}
    for target in annotation.targets:
        if target.source is not None:
            try:
                lines.setdefault(normalize_rel_path(target.source.file), set()).add(target.source.line)
            except PathDenied:
                continue
    return {path: tuple(sorted(found)) for path, found in lines.items()}


async def _run_agent(job: Job, adapter: ProviderAdapter, executor: ToolExecutor) -> None:
    limits = job.limits
    budget = LoopBudget(
        max_turns=limits.get("maxTurns"), max_tool_calls=limits.get("maxToolCalls"),
        tool_timeout_sec=limits.get("toolTimeoutSec"),
        check_deadline_sec=check_deadline(job.checks, limits),
        max_repeated_failed_calls=limits.get("maxRepeatedFailedCalls"), max_output_tokens=job.model.output_cap,
        constrained_tool_calls=job.constrained_tool_calls,
    )
    tag_checks = await check_tags(lines_reader(executor.context), job.params.annotation.targets)
    # The project context, read through the tools' cache: a later read_file of these files reads nothing again.
    context = await build_prompt_context(executor.context, job.params.annotation, checks=job.checks)
    job.context_files = context.files
    log.debug("job %s: project context of %d file(s) built in %.1f ms", job.job_id, len(context.files),
             context.build_ms)
    task = agent_task(job.params.annotation, max_turns=budget.max_turns, max_tool_calls=budget.max_tool_calls,
                      trusted_auto=job.params.apply_mode == "trusted-auto", context=context, tag_checks=tag_checks,
                      edit_format=job.model.edit_format)
    images = target_pictures(job.params.annotation) if job.vision else ()
    if images:
        task += picture_note(job.params.annotation)
    system, tools = system_prompt(job.model.edit_format), tool_specs(executor.tool_names,
                                                                     edit_format=job.model.edit_format)
    if isinstance(adapter, AgentTurns):  # "Send to my agent": wait for an agent to take the job (handoff/hub.py)
        adapter.offer(task, system, tools)
        client = await adapter.wait_taken()
        job.provider = job.provider.model_copy(update={"id": f"mcp:{client}"})  # the ledger's provider
    try:  # the ledger's job_start: the offered files' hashes through the same (cached) reader; fail-open
        hashes = await offered_hashes(executor.context, job.params.annotation)
        job.ledger.record_job_start(**_start_fields(job, hashes, images_sent=job.vision))
    except Exception:  # noqa: BLE001 - the job goes on; _end_ledger records job_start without hashes
        log.warning("audit ledger: job_start not recorded", exc_info=True)
    await run_loop(
        adapter=adapter, model=job.model.model, system=system, task=task, tools=tools,
        executor=executor, budget=budget, events=job.events, stats=job.stats,
        tool_calling_known=job.tool_calling_known, ledger=job.ledger, images=images,
    )


async def _collect_changeset(job: Job, worktree: Worktree) -> None:
    """Result diff against the baseline, validated whole (docs/design.md §8), and the baseline/result hashes of
    touched paths. Raises ``JobFailure(CHANGESET_REJECTED)`` at the first violation (worktree/validate.py)."""
    from spotpatch_agent.worktree.validate import validate_changeset

    cs = await validate_changeset(worktree, job.limits)
    job.diff, job.files = cs.diff, cs.files
    job.baseline_hashes, job.result_hashes = cs.baseline_hashes, cs.result_hashes
