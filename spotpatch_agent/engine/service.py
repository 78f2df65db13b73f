"""The engine's application service: every protocol method of DESIGN.md §3 as one async method.

Used by the JSON-RPC server (``serve``) and in-process by the CLI (``run``, ``demo``). Jobs run as tasks in
the service's task group; ``stop_all`` cancels them and waits for their worktrees to be removed.
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
from spotpatch_agent.engine.events import JobEventLog
from spotpatch_agent.engine.prompt import render_prompt
from spotpatch_agent.engine.states import ACTIVE, job_tools
from spotpatch_agent.errors import SpotPatchError
from spotpatch_agent.policy.redact import REDACTOR, shorten_paths
from spotpatch_agent.protocol.errors import ErrorCode
from spotpatch_agent.protocol.models import (
    Capabilities,
    DiffResult,
    InitializeParams,
    InitializeResult,
    JobCreateParams,
    JobIdParams,
    ErrorInfo,
    JobAuditResult,
    JobEventsParams,
    JobEventsResult,
    JobListResult,
    JobSnapshot,
    ProbeResult,
    PromptRenderParams,
    ProviderInfo,
    ProviderListResult,
    ProviderModelInfo,
    ProviderProbeParams,
    PromptRenderResult,
    ProviderProfile,
    RepoHealth,
    ServerInfo,
    TrustedConfig,
)
from spotpatch_agent.worktree.git import run_git
from spotpatch_agent.worktree.health import repo_health
from spotpatch_agent.worktree.isolation import sweep_orphans
from spotpatch_agent.worktree.lock import ProjectWriteLock
from spotpatch_agent.worktree.repo import locate

if TYPE_CHECKING:
    from spotpatch_agent.engine.job import Job
    from spotpatch_agent.provider.base import ProviderAdapter

# Imported where first needed (cold start, issue 3): engine.job (the tool loop, the tools, wcmatch),
# worktree.changes and provider.probe are not needed to answer initialize.

log = logging.getLogger("spotpatch.engine")

#: Statuses in which a job's task is still running (cancellable by job/cancel).
RUNNING = frozenset({"preparing", "running", "validating"})


def make_adapter(provider: ProviderProfile) -> ProviderAdapter:
    """The adapter for ``provider`` with its key read from ``apiKeyEnv`` (never logged: DESIGN.md §11)."""
    if provider.api != "chat":
        raise SpotPatchError(
            ErrorCode.PROVIDER_UNAVAILABLE,
            f"Provider {provider.id!r} uses the Responses API, which this engine version does not speak yet.",
            retryable=False,
        )
    from spotpatch_agent.provider.chat import ChatCompletionsAdapter

    key = os.environ.get(provider.api_key_env) or None
    REDACTOR.add_secret(key)
    return ChatCompletionsAdapter(base_url=provider.base_url, api_key=key, headers=provider.headers)


#: Apply/Revert errors after which the working tree is known to be unchanged (worktree/changes.py).
_UNCHANGED = frozenset({ErrorCode.APPLY_CONFLICT, ErrorCode.REVERT_CONFLICT, ErrorCode.REPO_BLOCKED,
                        ErrorCode.INVALID_STATE, ErrorCode.CHANGESET_REJECTED})


def _nothing_written(exc: BaseException) -> bool:
    return isinstance(exc, SpotPatchError) and exc.code in _UNCHANGED


def _as_error(exc: BaseException, what: str) -> SpotPatchError:
    if isinstance(exc, SpotPatchError):
        return SpotPatchError(exc.code, exc.message + " The working tree may be partly written: check it by hand.")
    return SpotPatchError(ErrorCode.INTERNAL, _failure_message(exc, what) + " Check the working tree by hand.")


def _failure_message(exc: BaseException, what: str) -> str:
    if isinstance(exc, SpotPatchError):
        return REDACTOR(exc.message)
    return f"{what} failed with an internal error; nothing was reported as done (see the engine log)."


class EngineService:
    """One project, one trusted config, many jobs (one write job at a time: DESIGN.md §4)."""

    def __init__(self, *, send_event: Callable[[dict[str, Any]], None]) -> None:
        self._send_event = send_event
        self._root: Path | None = None
        self._config = TrustedConfig()
        self._jobs: dict[str, Job] = {}
        self._project_lock: ProjectWriteLock | None = None
        self._probes: dict[str, ProbeResult] = {}  # successful probes, per model profile, for the session
        self._reserved = 0  # job/create calls past the conflict check that have not registered their job yet
        self._tg: TaskGroup | None = None
        self._adapter_factory: Callable[[ProviderProfile], ProviderAdapter] = make_adapter
        #: Apply and Revert of any job are serialised: one working-tree write at a time (DESIGN.md §8).
        self._write_lock: anyio.Lock | None = None

    def _lock(self) -> anyio.Lock:
        if self._write_lock is None:
            self._write_lock = anyio.Lock()
        return self._write_lock

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
                f"Protocol version mismatch: the client speaks {params.protocol_version[:32]!r}, "
                f"this engine speaks {PROTOCOL_VERSION!r}.",
            )
        await self.configure(Path(params.project_root), params.config)
        return InitializeResult(
            protocol_version=PROTOCOL_VERSION,
            server_info=ServerInfo(name="spotpatch-agent", version=__version__),
            capabilities=Capabilities(ai_enabled=self.ai_enabled(), apply_modes=["review"], tools=list(
                # The tools a job of this config offers; names as registered in tools/registry.py (not
                # imported here: cold start).
                job_tools(registered=("apply_patch", "run_check"), has_checks=bool(self._config.checks)))),
        )

    async def configure(self, root: Path, config: TrustedConfig) -> None:
        """Set the project root (must be an existing directory) and trusted config; sweep orphan worktrees."""
        if not root.is_absolute() or not root.is_dir():
            raise SpotPatchError(ErrorCode.INVALID_REQUEST, "projectRoot must be an existing absolute directory.")
        self._root = root.resolve()
        REDACTOR.add_path(self._root, ".")
        layout = await locate(self._root)
        self._project_lock = ProjectWriteLock(layout.common_dir) if layout is not None else None
        self._config = config
        for provider in config.providers:
            REDACTOR.add_secret(os.environ.get(provider.api_key_env))
            for value in provider.headers.values():  # extra headers often carry tokens too
                REDACTOR.add_secret(value)
        if (await repo_health(self._root, config.limits)).state != "blocked":
            swept = await sweep_orphans(self._root)
            if swept:
                log.info("removed %d orphaned SpotPatch worktree(s) from an earlier run", swept)

    def ai_enabled(self) -> bool:
        return any(p.api == "chat" and os.environ.get(p.api_key_env) for p in self._config.providers)

    async def stop_all(self) -> None:
        """Cancel every running job and wait (bounded) until each removed its worktree."""
        for job in self._jobs.values():
            job.cancel_scope.cancel()
        with anyio.move_on_after(8, shield=True):
            for job in list(self._jobs.values()):
                await job.done.wait()

    # ------------------------------------------------------------------ methods

    def _require_root(self) -> Path:
        if self._root is None:
            raise SpotPatchError(ErrorCode.INVALID_STATE, "The engine has no project yet: send initialize first.")
        return self._root

    async def health(self, _params: Any = None) -> RepoHealth:
        return await repo_health(self._require_root(), self._config.limits)

    async def prompt_render(self, params: PromptRenderParams) -> PromptRenderResult:
        return render_prompt(params.annotation)

    async def job_create(self, params: JobCreateParams) -> JobSnapshot:
        root = self._require_root()
        limits = self._config.limits
        found = self._config.find_model(params.model_profile_id)
        if found is None:
            raise SpotPatchError(ErrorCode.INVALID_REQUEST, "Unknown modelProfileId: it must be the id of a model in the trusted config.")
        provider, model = found
        if not os.environ.get(provider.api_key_env):
            raise SpotPatchError(ErrorCode.AI_DISABLED,
                                 f"AI is off for {provider.display_name}: its key variable {provider.api_key_env} is not set.")
        if params.apply_mode != "review":
            raise SpotPatchError(ErrorCode.INVALID_REQUEST, f"applyMode {params.apply_mode!r} is not enabled by the trusted config.")
        if params.trusted_fast_mode_consent:
            raise SpotPatchError(ErrorCode.INVALID_REQUEST, "trustedFastModeConsent is only valid with applyMode 'trusted-auto'.")
        if len(params.annotation.targets) > limits.get("maxTargets"):
            raise SpotPatchError(ErrorCode.INVALID_REQUEST, f"At most {limits.get('maxTargets')} targets per job.")
        if any(len(t.instruction) > limits.get("maxInstructionChars") for t in params.annotation.targets):
            raise SpotPatchError(ErrorCode.INVALID_REQUEST, f"An instruction is longer than {limits.get('maxInstructionChars')} characters.")
        if sum(1 for j in self._jobs.values() if j.status in ACTIVE) + self._reserved >= limits.get("writeJobsPerProject"):
            raise SpotPatchError(ErrorCode.JOB_CONFLICT, "Another job is running for this project; wait for it or cancel it.")
        self._reserved += 1  # held across the awaits below, so two concurrent creates cannot both pass
        locked = False
        try:
            locked = self._acquire_project_lock()
            health = await repo_health(root, limits)
            if health.state == "blocked":
                raise SpotPatchError(ErrorCode.REPO_BLOCKED, "The repository cannot host a job now: " + ", ".join(health.reasons))
            if health.state == "consent-required":
                raise SpotPatchError(
                    ErrorCode.CONSENT_REQUIRED,
                    "The working tree has local changes (staged {staged}, unstaged {unstaged}, untracked {untracked}); "
                    "commit or stash them first — including them in a job is not supported by this engine version."
                    .format(**health.counts.dump()),
                )
            head = (await run_git(["rev-parse", "--verify", "HEAD^{commit}"], cwd=root)).stdout.decode().strip()
            from spotpatch_agent.engine.job import Job
            adapter = self._adapter_factory(provider)
            job_id = "job_" + secrets.token_hex(8)
            job = Job(job_id=job_id, params=params, root=root, head_oid=head, provider=provider, model=model,
                      limits=limits, events=JobEventLog(job_id, self._emit), checks=tuple(self._config.checks))
            self._jobs[job_id] = job
            job.set_status("preparing")
        except BaseException:
            if locked:
                self._release_project_lock()
            raise
        finally:
            self._reserved -= 1
        assert self._tg is not None
        self._tg.start_soon(self._run_and_unlock, job, adapter)
        return job.snapshot()

    async def _run_and_unlock(self, job: Job, adapter: ProviderAdapter) -> None:
        from spotpatch_agent.engine.job import run_job

        try:
            await run_job(job, adapter)
        finally:
            self._release_project_lock()

    def _acquire_project_lock(self) -> bool:
        """Take the cross-engine write lock or raise ``JOB_CONFLICT`` (worktree/lock.py)."""
        if self._project_lock is None:
            raise SpotPatchError(ErrorCode.REPO_BLOCKED, "The project is not a git repository.")
        if not self._project_lock.try_acquire():
            raise SpotPatchError(ErrorCode.JOB_CONFLICT,
                                 "Another SpotPatch engine is running or applying a job for this project.")
        return True

    def _release_project_lock(self) -> None:
        if self._project_lock is not None:
            self._project_lock.release()

    def _emit(self, event: dict[str, Any]) -> None:
        self._send_event(event)

    def _job(self, job_id: str) -> Job:
        job = self._jobs.get(job_id)
        if job is None:
            raise SpotPatchError(ErrorCode.JOB_NOT_FOUND, "No such job in this engine session.")
        return job

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
        job = self._job(params.job_id)
        async with self._lock():
            self._acquire_project_lock()
            try:
                return await self._apply_locked(job)
            finally:
                self._release_project_lock()

    async def _apply_locked(self, job: Job) -> JobSnapshot:
        if job.status != "awaiting-review":
            raise SpotPatchError(ErrorCode.INVALID_STATE, f"Only a job awaiting review can be applied (status {job.status!r}).")
        from spotpatch_agent.worktree.changes import apply_change

        job.set_status("applying")
        try:
            with anyio.CancelScope(shield=True):
                job.applied = await apply_change(job.root, job.diff, job.baseline_hashes,
                                                 expected_head=job.head_oid, result_hashes=job.result_hashes)
        except BaseException as exc:
            if _nothing_written(exc):
                job.set_status("awaiting-review", _failure_message(exc, "Apply"))
            else:
                job.fail(_as_error(exc, "Apply"))
            raise
        job.set_status("applied")
        return job.snapshot()

    async def job_revert(self, params: JobIdParams) -> JobSnapshot:
        job = self._job(params.job_id)
        async with self._lock():
            self._acquire_project_lock()
            try:
                return await self._revert_locked(job)
            finally:
                self._release_project_lock()

    async def _revert_locked(self, job: Job) -> JobSnapshot:
        if job.status != "applied" or job.applied is None:
            raise SpotPatchError(ErrorCode.INVALID_STATE, f"Only an applied job can be reverted (status {job.status!r}).")
        from spotpatch_agent.worktree.changes import revert_change

        job.set_status("reverting")
        try:
            with anyio.CancelScope(shield=True):
                await revert_change(job.root, job.applied, expected_head=job.head_oid)
        except BaseException as exc:
            if _nothing_written(exc):
                job.set_status("applied", _failure_message(exc, "Revert"))
            else:
                job.fail(_as_error(exc, "Revert"))
            raise
        job.set_status("reverted")
        return job.snapshot()

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
        job = self._job(params.job_id)
        return JobEventsResult(job_id=job.job_id, events=job.events.after(params.after_seq), last_seq=job.events.last_seq)

    async def job_audit(self, params: JobIdParams) -> JobAuditResult:
        """The audit ledger of DESIGN.md §13; until it lands, the job's (redacted) events and counts."""
        job = self._job(params.job_id)
        summary = {"status": job.status, "turns": job.stats.turns, "toolCalls": job.stats.tool_calls,
                   "files": len(job.files), "ledger": "events"}
        return JobAuditResult(job_id=job.job_id, summary=summary, entries=job.events.after(0))

    async def provider_list(self, _params: Any = None) -> ProviderListResult:
        """Profiles with ids and display names only — never URLs, headers or key names (DESIGN.md §3)."""
        return ProviderListResult(providers=[
            ProviderInfo(id=p.id, display_name=p.display_name, api=p.api,
                         available=p.api == "chat" and bool(os.environ.get(p.api_key_env)),
                         models=[ProviderModelInfo(id=m.id, display_name=m.display_name) for m in p.models])
            for p in self._config.providers
        ])

    async def provider_probe(self, params: ProviderProbeParams) -> ProbeResult:
        """Explicit probe (DESIGN.md §11): one forced tool round trip; a success is cached for the session.

        Raises ``INVALID_REQUEST`` (unknown profile) and ``AI_DISABLED`` (key variable unset); provider
        failures are a result with ``ok: false`` and the error, not an RPC error."""
        found = self._config.find_model(params.model_profile_id)
        if found is None:
            raise SpotPatchError(ErrorCode.INVALID_REQUEST, "Unknown modelProfileId: it must be the id of a model in the trusted config.")
        provider, model = found
        if not os.environ.get(provider.api_key_env):
            raise SpotPatchError(ErrorCode.AI_DISABLED, f"AI is off for {provider.display_name}: its key variable is not set.")
        cached = self._probes.get(model.id)
        if cached is not None:
            return cached.model_copy(update={"cached": True})
        from spotpatch_agent.provider.probe import ProbeOutcome, probe_tool_calling

        adapter = self._adapter_factory(provider)
        started = anyio.current_time()
        try:
            outcome = await probe_tool_calling(adapter, model.model)
            error = None
        except SpotPatchError as exc:
            outcome, error = ProbeOutcome(False, shorten_paths(REDACTOR(exc.message))), ErrorInfo(**exc.to_data())
            error.message = outcome.message
        finally:
            with anyio.CancelScope(shield=True):
                await adapter.aclose()
        result = ProbeResult(model_profile_id=model.id, ok=outcome.tool_calling, tool_calling=outcome.tool_calling,
                             cached=False, duration_ms=int((anyio.current_time() - started) * 1000),
                             message=outcome.message, error=error)
        if result.ok:
            self._probes[model.id] = result
        return result
