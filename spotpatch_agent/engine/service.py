"""The engine's application service: every protocol method of docs/design.md §3 as one async method.

Used by the JSON-RPC server (``serve``) and in-process by the CLI (``run``, ``demo``). Jobs run as tasks in
the service's task group; ``stop_all`` cancels them and waits for their worktrees to be removed.

The service holds the session's state (project, trusted config, jobs, locks, the warm pool) and the job
lifecycle; each other concern is its own module: ``engine.providers`` (adapters, ``provider/list``,
``provider/probe`` and the proofs of tool calling), ``engine.writes`` (the write locks: ``job/apply``,
``job/revert`` and the automatic Apply run under them), ``engine.apply_revert`` (Apply and Revert of a reviewed
diff), ``engine.suggest`` (``job/suggest``), ``engine.job`` (one job's run).
"""

from __future__ import annotations

import logging
import os
import secrets
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
from anyio.abc import TaskGroup

from spotpatch_agent import PROTOCOL_VERSION, __version__
from spotpatch_agent.audit.sink import audit_dir
from spotpatch_agent.engine.apply_revert import failure_message, save_job_review
from spotpatch_agent.engine.events import JobEventLog
from spotpatch_agent.engine.modes import check_mode_request, includes_local_changes, offered_modes
from spotpatch_agent.engine.providers import (
    AdapterFactory,
    ProbeCache,
    job_profile,
    list_providers,
    make_adapter,
    preload_job_runner,
)
from spotpatch_agent.engine.states import ACTIVE, job_tools
from spotpatch_agent.engine.suggest import draft_suggestion
from spotpatch_agent.engine.writes import ProjectWrites
from spotpatch_agent.errors import SpotPatchError
from spotpatch_agent.policy.redact import REDACTOR, redact_cut, register_provider_secrets
from spotpatch_agent.protocol.errors import ErrorCode
from spotpatch_agent.protocol.models import (
    Capabilities,
    ChecksSandbox,
    DiffResult,
    InitializeParams,
    InitializeResult,
    JobCreateParams,
    JobIdParams,
    JobListResult,
    JobSnapshot,
    ProbeResult,
    PromptRenderParams,
    PromptRenderResult,
    ProviderListResult,
    ProviderProbeParams,
    RecoveryReport,
    RepoHealth,
    ServerInfo,
    SessionGetResult,
    SessionLimits,
    TrustedConfig,
)
from spotpatch_agent.worktree.git import run_git
from spotpatch_agent.worktree.health import blocked_message, health_message, repo_health
from spotpatch_agent.worktree.lock import ProjectWriteLock
from spotpatch_agent.worktree.removal import empty_trash
from spotpatch_agent.worktree.repo import locate, operation_reasons, resolve_head
from spotpatch_agent.worktree.sweep import sweep_orphans

if TYPE_CHECKING:
    from spotpatch_agent.engine.job import Job
    from spotpatch_agent.protocol.audit import JobAuditResult
    from spotpatch_agent.protocol.events import JobEventsResult
    from spotpatch_agent.protocol.jobs import JobEventsParams
    from spotpatch_agent.protocol.suggestion import SuggestionResult
    from spotpatch_agent.provider.agent import AgentTurns
    from spotpatch_agent.provider.base import ProviderAdapter
    from spotpatch_agent.worktree.pool import WorktreePool

# Imported where first needed (cold start, issues 3 and 17): engine.job (the tool loop, the tools, wcmatch),
# worktree.changes, provider.probe, engine.prompt and engine.locations (prompt/render) and worktree.pool
# (opened after initialize's reply) are not needed to answer initialize; nor are the models of job/events,
# job/audit and job/suggest (protocol/events.py, audit.py, suggestion.py).

log = logging.getLogger("spotpatch.engine")

#: Longest a job/create waits for the start-up sweep and pool opening after initialize, in seconds.
_SETTLE_WAIT = 60.0

#: Statuses in which a job's task is still running (cancellable by job/cancel).
RUNNING = frozenset({"preparing", "running", "validating"})


class EngineService:
    """One project, one trusted config, many jobs (one write job at a time: docs/design.md §4)."""

    def __init__(self, *, send_event: Callable[[dict[str, Any]], None]) -> None:
        self._send_event = send_event
        self._root: Path | None = None
        self._config = TrustedConfig()
        self._jobs: dict[str, Job] = {}
        #: The crash-journal repairs of the last ``initialize`` (answered again by ``session/get``).
        self._recovered: list[RecoveryReport] = []
        #: The write locks and the Apply and Revert run under them (engine/writes.py).
        self._writes = ProjectWrites()
        #: Proven tool calling for the session (explicit probe or inline proof) and failed probes.
        self._probes = ProbeCache()
        #: Jobs whose suggestion lane is running now (one request per job at a time).
        self._suggesting: set[str] = set()
        self._reserved = 0  # job/create calls past the conflict check that have not registered their job yet
        self._tg: TaskGroup | None = None
        self._pool: WorktreePool | None = None  # the project's warm worktree (worktree/pool.py)
        self._adapter_factory: AdapterFactory = make_adapter
        #: Jobs created with ``agent: true`` and their adapters, by job id (served by handoff/hub.py).
        self.agent_jobs: dict[str, tuple[Job, AgentTurns]] = {}
        self.toplevel: Path | None = None  # the repository's working-tree root once configured (the agent channel)
        self._audit_dir: Path | None = None
        #: Set once the start-up work after ``initialize`` (:meth:`_settle`) ran; ``None`` before any.
        self._settled: anyio.Event | None = None

    def _lock(self) -> anyio.Lock:
        return self._writes.lock()

    @asynccontextmanager
    async def running(self) -> AsyncIterator[EngineService]:
        """Open the task group jobs run in; on exit cancel every job and remove its worktree."""
        async with anyio.create_task_group() as tg:
            self._tg = tg
            try:
                yield self
            finally:
                await self.stop_all()
                tg.cancel_scope.cancel()

    # ------------------------------------------------------------------ lifecycle

    async def initialize(self, params: InitializeParams) -> InitializeResult:
        if params.protocol_version != PROTOCOL_VERSION:
            raise SpotPatchError(
                ErrorCode.INVALID_REQUEST,
                "Protocol version mismatch: the client speaks "
                f"{redact_cut(params.protocol_version, 32, ellipsis='')!r}, "
                f"this engine speaks {PROTOCOL_VERSION!r}.",
            )
        recovered = await self.configure(Path(params.project_root), params.config)
        self._recovered = recovered
        return InitializeResult(
            recovered=recovered,
            protocol_version=PROTOCOL_VERSION,
            server_info=ServerInfo(name="spotpatch-agent", version=__version__),
            capabilities=Capabilities(
                ai_enabled=self.ai_enabled(), apply_modes=offered_modes(self._config.modes),
                tools=list(job_tools(has_checks=bool(self._config.checks))),  # what a job of this config offers
                checks_sandbox=self._checks_sandbox(), suggestions=self._config.suggestions.enabled),
        )

    async def configure(self, root: Path, config: TrustedConfig) -> list[RecoveryReport]:
        """Set the project root (must be an existing directory) and trusted config; repair an Apply/Revert a crashed
        engine left half-written (crash journal, docs/design.md §8; returns the reports); sweep orphan worktrees."""
        if not root.is_absolute() or not root.is_dir():
            raise SpotPatchError(ErrorCode.INVALID_REQUEST, "projectRoot must be an existing absolute directory.")
        self._root = root.resolve()
        REDACTOR.add_path(self._root, ".")
        layout = await locate(self._root)
        self._writes.project_lock = ProjectWriteLock(layout.common_dir) if layout is not None else None
        self.toplevel = layout.toplevel if layout is not None else None
        #: Where job ledgers are persisted when ``audit.persist`` (docs/design.md §13): never the working tree.
        self._audit_dir = audit_dir(layout.common_dir) if layout is not None and config.audit.persist else None
        self._config = config
        for provider in config.providers:
            # The key, and the extra headers (relays often put tokens there): policy/redact.py's rules.
            register_provider_secrets(provider.base_url, os.environ.get(provider.api_key_env), provider.headers)
        recovered: list[RecoveryReport] = []
        if layout is not None and self._writes.project_lock is not None:
            from spotpatch_agent.worktree.recovery import recover_under_lock

            async with self._lock():  # never while this engine applies or reverts
                recovered = await recover_under_lock(self._root, layout.git_dir, self._writes.project_lock)
        async with anyio.create_task_group() as tg:
            if config.checks:  # one cached trial run of the check sandbox (checks/sandbox), beside the sweep
                from spotpatch_agent.checks.sandbox import detect

                tg.start_soon(detect)
            # The sweep touches only our own registrations, so it runs whatever state the user's tree is in
            # (a rebase in progress, an index.lock): an orphan is never kept for a later start. Its cost does
            # not grow with the repository: an orphan's directory is moved aside in one rename, its files are
            # deleted after the reply (issue 17).
            # A warm worktree the last engine parked at its shutdown is kept for the pool (which adopts it only
            # when clean at the same HEAD, else removes it: worktree/pool.py).
            swept = await sweep_orphans(self._root, defer_deletes=True, keep_parked=True)
            if swept:
                log.info("removed %d orphaned SpotPatch worktree(s) from an earlier run", swept)
        # Nothing proportional to the repository before the reply (issue 17): the health check that decides
        # the warm pool (git status and a walk of the tree) and emptying the trash run after it, in the
        # service's task group. job/create waits for the first (:meth:`_wait_settled`); health/get always
        # reads the disk afresh.
        self._settled = anyio.Event()
        if self._tg is None:  # in-process without a task group: as before, before returning
            await self._settle(self._root, config, self._settled)
        else:
            self._tg.start_soon(self._settle, self._root, config, self._settled)
        return recovered

    async def _settle(self, root: Path, config: TrustedConfig, settled: anyio.Event) -> None:
        """Start-up work after ``initialize``'s reply: open the warm pool at once unless git's own state blocks
        the repository (an operation in progress, ``index.lock``, no HEAD: files of the git directory) — its
        warm, or the adoption of a worktree the last engine parked, runs beside the health check; job/create
        waits for the opening only —, then the health check: a blocked repository closes the pool again and
        moves parked worktrees aside; then delete the worktrees the sweep or an earlier engine moved aside
        (never awaited by anyone). The sweep ran before (it would remove a pooled worktree of this process).
        Never raises."""
        blocked = True
        try:
            layout = await locate(root)  # what blocks without reading the tree (an operation, index.lock): no pool
            if root == self._root and layout is not None and not operation_reasons(layout) \
                    and await resolve_head(root) is not None:
                await self._open_pool()
            settled.set()
            async with anyio.create_task_group() as tg:
                tg.start_soon(preload_job_runner)  # beside the health check's git work
                blocked = (await repo_health(root, config.limits)).state == "blocked"
        except Exception as exc:  # noqa: BLE001 - jobs then start cold; their own health check reports
            log.warning("start-up health check failed: %s", failure_message(exc, "The start-up health check"))
        finally:
            settled.set()
        if blocked or root != self._root:  # no pool: a worktree the last engine parked is not kept
            from spotpatch_agent.worktree.pool import drop_parked

            pool, self._pool = (self._pool, None) if root == self._root else (None, self._pool)
            if pool is not None:
                await pool.aclose()
            await drop_parked(root)
        log.debug("start-up settled: health checked, warm pool %s", "open" if self._pool else "off")
        await empty_trash(root)

    async def _wait_settled(self) -> None:
        """Wait (bounded) for :meth:`_settle`'s pool opening (the sweep ran before ``initialize``'s reply)."""
        if self._settled is not None:
            with anyio.move_on_after(_SETTLE_WAIT):
                await self._settled.wait()

    async def _open_pool(self) -> None:
        """A fresh warm worktree pool for the project, warmed in the background (never awaited here)."""
        from spotpatch_agent.worktree.pool import POOL_ENV, WorktreePool, pool_mode

        if self._pool is not None:
            await self._pool.aclose()
        assert self._root is not None
        self._pool = WorktreePool(self._root, task_group=self._tg, mode=pool_mode(os.environ.get(POOL_ENV)))
        if self._tg is not None:
            self._tg.start_soon(self._pool.warm)

    def ai_enabled(self) -> bool:
        return any(os.environ.get(p.api_key_env) for p in self._config.providers)

    async def stop_all(self) -> None:
        """Cancel every running job and wait (bounded) until each removed its worktree."""
        for job in self._jobs.values():
            job.cancel_scope.cancel()
        with anyio.move_on_after(8, shield=True):
            for job in list(self._jobs.values()):
                await job.done.wait()
        if self._pool is not None:  # after the jobs, whose worktrees went back to it or were removed
            with anyio.move_on_after(5, shield=True):  # the idle warm worktree stays for the next start
                await self._pool.aclose(park=True)

    # ------------------------------------------------------------------ methods

    def _require_root(self) -> Path:
        if self._root is None:
            raise SpotPatchError(ErrorCode.INVALID_STATE, "The engine has no project yet: send initialize first.")
        return self._root

    async def health(self, _params: Any = None) -> RepoHealth:
        return await repo_health(self._require_root(), self._config.limits)

    async def session_get(self, _params: Any = None) -> SessionGetResult:
        """The page's view of this session: ``initialize``'s ``aiEnabled`` and ``applyModes``, the trusted
        config's target/instruction limits (defaults filled in), and the repairs ``initialize`` reported."""
        self._require_root()
        limits = self._config.limits
        return SessionGetResult(
            ai_enabled=self.ai_enabled(), apply_modes=offered_modes(self._config.modes),
            limits=SessionLimits(max_targets=limits.get("maxTargets"),
                                 max_instruction_chars=limits.get("maxInstructionChars")),
            recovered=list(self._recovered), checks_sandbox=self._checks_sandbox(),
            suggestions=self._config.suggestions.enabled)

    def _checks_sandbox(self) -> ChecksSandbox | None:
        """Whether checks run confined (``initialize``, ``session/get``); ``None`` without configured checks."""
        if not self._config.checks:
            return None
        from spotpatch_agent.checks.sandbox import status

        return status(self._config.sandbox)

    async def prompt_render(self, params: PromptRenderParams) -> PromptRenderResult:
        """The copy prompt: each target's location checked against the project (excerpt or warning, and
        marked exact or approximate: ``engine.locations``) and the conventions summary
        (``spotpatch_agent.context``). Without a project yet, or when it is not a git repository, nothing is
        read: the locations as given."""
        from spotpatch_agent.engine.locations import check_tags, lines_reader
        from spotpatch_agent.engine.prompt import render_prompt

        # No project, or not a git repository: the git-ignore policy cannot be applied, read nothing.
        if self._root is None or self._writes.project_lock is None:
            return render_prompt(params.annotation)
        from spotpatch_agent.context.build import project_prompt_context
        from spotpatch_agent.tools.context import WorktreeContext

        context = await project_prompt_context(self._root, params.annotation, limits=self._config.limits,
                                               checks=self._config.checks)
        reader = lines_reader(WorktreeContext(self._root, self._config.limits))
        tag_checks = await check_tags(reader, params.annotation.targets)
        return render_prompt(params.annotation, context, tag_checks)

    async def job_create(self, params: JobCreateParams) -> JobSnapshot:
        root = self._require_root()
        limits = self._config.limits
        provider, model = job_profile(self._config, params)
        # applyMode vs modes vs trustedFastModeConsent (docs/design.md §10); the consent is never stored.
        check_mode_request(self._config.modes, params.apply_mode, params.trusted_fast_mode_consent)
        if len(params.annotation.targets) > limits.get("maxTargets"):
            raise SpotPatchError(ErrorCode.INVALID_REQUEST, f"At most {limits.get('maxTargets')} targets per job.")
        if any(len(t.instruction) > limits.get("maxInstructionChars") for t in params.annotation.targets):
            raise SpotPatchError(ErrorCode.INVALID_REQUEST,
                                 f"An instruction is longer than {limits.get('maxInstructionChars')} characters.")
        active = sum(1 for j in self._jobs.values() if j.status in ACTIVE)
        if active + self._reserved >= limits.get("writeJobsPerProject"):
            raise SpotPatchError(ErrorCode.JOB_CONFLICT,
                                 "Another job is running for this project; wait for it or cancel it.")
        self._reserved += 1  # held across the awaits below, so two concurrent creates cannot both pass
        locked = False
        pool: WorktreePool | None = None
        try:
            await self._wait_settled()  # the start-up sweep ran and the warm pool is open (when it will be)
            locked = self._writes.acquire()
            resolved = await run_git(["rev-parse", "--verify", "HEAD^{commit}"], cwd=root, check=False,
                                     read_only=True)
            head = resolved.stdout.decode().strip() if resolved.returncode == 0 else ""
            pool = self._pool
            if pool is not None and head:  # the warm worktree's hand-out checks beside the health check (issue 17)
                await pool.prepare(head)
            health = await repo_health(root, limits)
            if health.state == "blocked":
                raise SpotPatchError(ErrorCode.REPO_BLOCKED,
                                     "The repository cannot host a job now: " + blocked_message(health))
            if health.state == "consent-required" and not includes_local_changes(
                    params.apply_mode, params.trusted_fast_mode_consent, params.local_changes_consent):
                raise SpotPatchError(
                    ErrorCode.CONSENT_REQUIRED,
                    "The working tree has local changes (staged {staged}, unstaged {unstaged}, untracked {untracked}): "
                    .format(**health.counts.dump()) + health_message(health)
                    + " In job/create, localChangesConsent: true includes them (docs/configuration.md "
                    "\u201cRepository health\u201d).",
                )
            if not head:  # health saw HEAD resolve a moment later: as before, read it now
                head = (await run_git(["rev-parse", "--verify", "HEAD^{commit}"], cwd=root)).stdout.decode().strip()
            from spotpatch_agent.engine.job import Job
            from spotpatch_agent.provider.agent import AgentTurns

            adapter = AgentTurns() if params.agent else self._adapter_factory(provider)
            from spotpatch_agent.audit import JobLedger

            job_id = "job_" + secrets.token_hex(8)
            ledger = JobLedger(job_id, persist_dir=self._audit_dir, keep=self._config.audit.keep)
            job = Job(job_id=job_id, ledger=ledger, params=params, root=root, head_oid=head, provider=provider,
                      model=model, limits=limits, events=JobEventLog(job_id, self._send_event),
                      checks=tuple(self._config.checks), sandbox=self._config.sandbox, pool=self._pool, health=health,
                      **self._probes.job_facts(provider, model))
            self._jobs[job_id] = job
            if isinstance(adapter, AgentTurns):  # waits for an agent to take it (handoff/hub.py)
                self.agent_jobs[job_id] = (job, adapter)
            job.set_status("preparing")
        except BaseException:
            if pool is not None:  # no job takes the prepared worktree: back to the pool
                await pool.unprepare()
            if locked:
                self._writes.release()
            raise
        finally:
            self._reserved -= 1
        assert self._tg is not None
        self._tg.start_soon(self._run_and_unlock, job, adapter)
        return job.snapshot()

    async def _run_and_unlock(self, job: Job, adapter: ProviderAdapter) -> None:
        from spotpatch_agent.engine.job import run_job

        try:
            await run_job(job, adapter, apply=self._writes.auto_apply)
        finally:
            self._probes.note_inline_proof(job)
            self._writes.release()

    def _job(self, job_id: str) -> Job:
        job = self._jobs.get(job_id)
        if job is None:
            raise SpotPatchError(ErrorCode.JOB_NOT_FOUND, "No such job in this engine session.")
        return job

    async def job_save_review(self, params: JobIdParams) -> str | None:
        """Save the job's reviewed changeset for ``spotpatch-agent apply`` (worktree/reviews.py); why not, or None."""
        return await save_job_review(self._job(params.job_id))

    async def job_get(self, params: JobIdParams) -> JobSnapshot:
        return self._job(params.job_id).snapshot()

    async def job_diff(self, params: JobIdParams) -> DiffResult:
        job = self._job(params.job_id)
        if job.status == "closed":
            raise SpotPatchError(ErrorCode.INVALID_STATE, "The job is closed; its diff was discarded.")
        return DiffResult(diff=job.diff, files=job.files)

    async def job_cancel(self, params: JobIdParams) -> JobSnapshot:
        job = self._job(params.job_id)
        if job.status in RUNNING:
            await self.cancel_running(job.job_id)
        elif job.status == "awaiting-review":
            job.set_status("cancelled", "Cancelled; nothing was applied.")
        elif job.status not in ("cancelled", "failed"):
            raise SpotPatchError(ErrorCode.INVALID_STATE, f"A job in status {job.status!r} cannot be cancelled.")
        return job.snapshot()

    async def cancel_running(self, job_id: str) -> None:
        """Cancel ``job_id`` if it is still running (a ``$/cancelRequest`` for its ``job/create``); else no-op."""
        job = self._jobs.get(job_id)
        if job is not None and job.status in RUNNING:
            job.cancel_scope.cancel()
            with anyio.move_on_after(5):
                await job.done.wait()

    async def job_apply(self, params: JobIdParams) -> JobSnapshot:
        return await self._writes.apply(self._job(params.job_id))

    async def job_revert(self, params: JobIdParams) -> JobSnapshot:
        return await self._writes.revert(self._job(params.job_id))

    async def job_close(self, params: JobIdParams) -> JobSnapshot:
        job = self._job(params.job_id)
        if job.status in ACTIVE:
            raise SpotPatchError(ErrorCode.INVALID_STATE, "Cancel the running job before closing it.")
        if job.status != "closed":
            job.diff, job.applied = "", None
            job.set_status("closed")
        return job.snapshot()

    async def wait_job(self, job_id: str) -> None:
        """Wait until the job's run ended (awaiting-review, failed or cancelled)."""
        await self._job(job_id).done.wait()

    async def job_list(self, _params: Any = None) -> JobListResult:
        """Every job of this engine session, oldest first."""
        return JobListResult(jobs=[job.snapshot() for job in self._jobs.values()])

    async def job_events(self, params: JobEventsParams) -> JobEventsResult:
        """Every event after ``afterSeq``, in order, none twice (a reconnecting client's catch-up)."""
        from spotpatch_agent.protocol.events import JobEventsResult

        job = self._job(params.job_id)
        return JobEventsResult.model_validate({"jobId": job.job_id, "events": job.events.after(params.after_seq),
                                               "lastSeq": job.events.last_seq})

    async def job_audit(self, params: JobIdParams) -> JobAuditResult:
        """The job's audit ledger (docs/design.md §13, spotpatch_agent.audit): the live summary and the records."""
        from spotpatch_agent.protocol.audit import JobAuditResult

        job = self._job(params.job_id)
        return JobAuditResult.model_validate({"jobId": job.job_id, "summary": job.ledger.summary(status=job.status),
                                              "records": job.ledger.records})

    async def job_suggest(self, params: JobIdParams) -> SuggestionResult:
        """The read-only suggestion lane for a job whose model failed the capability (docs/design.md §14,
        ``spotpatch_agent.suggestion``): bounded excerpts read by the host, one request without tools, a
        draft labelled as having changed nothing. Writes nothing, runs no tool or check.

        Refused with ``INVALID_REQUEST`` when the trusted config's ``suggestions.enabled`` is not true,
        ``INVALID_STATE`` unless the job failed by the capability (``MODEL_TOOL_CALL_UNSUPPORTED``, or its model's
        explicit probe failed this session) or while a suggestion for it is running, ``AI_DISABLED`` when the
        provider's key variable is unset. A provider failure or a breaker is an ``outcome``, not an error."""
        job = self._job(params.job_id)
        return await draft_suggestion(job, self._config.suggestions, running=self._suggesting,
                                      probe_failed=self._probes.failed(job.provider, job.model),
                                      adapter_factory=self._adapter_factory)

    async def provider_list(self, _params: Any = None) -> ProviderListResult:
        """Profiles with ids and display names only — never URLs, headers or key names (docs/design.md §3)."""
        return list_providers(self._config)

    async def provider_probe(self, params: ProviderProbeParams) -> ProbeResult:
        """Explicit probe (docs/design.md §11): see :meth:`ProbeCache.probe
        <spotpatch_agent.engine.providers.ProbeCache.probe>` for the cache, the errors and the result."""
        return await self._probes.probe(self._config, params, adapter_factory=self._adapter_factory)
