"""Run eval tasks through the real engine (issue 27 part 1; docs/eval.md).

Each task runs in a fresh temp git copy of its app, through :class:`~spotpatch_agent.engine.service.EngineService`
exactly as ``spotpatch-agent run`` and ``demo`` drive it: ``configure``, ``job/create`` with the task's
annotation, wait, then ``job/apply`` of the reviewed diff into that throwaway copy so the judge reads the
result. The app's typecheck is the job's required ``typecheck`` check (confined; installed once into the
demo's npm cache, demo/typecheck.py). The provider adapter is wrapped (the service's adapter seam,
engine/providers.py ``AdapterFactory``) to measure model time and the usage each turn reports; nothing is
changed in what the engine sends or receives.

Diagnosis (:func:`diagnose`): ``pass``; ``model`` (the job failed on what the model did — a limit, a
rejected changeset, a failed check, no tool calls — or it finished and the judge found the result wrong);
``provider`` (``PROVIDER_*``); ``engine`` (``INTERNAL``, or the job could not start or be applied);
``timeout`` (the eval's ``--timeout`` cancelled it).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from collections.abc import AsyncGenerator, Callable
from contextlib import AbstractContextManager, redirect_stdout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import anyio

from spotpatch_agent.errors import GitError, SpotPatchError
from spotpatch_agent.eval.judge import changed_files, judge_files, snapshot, typecheck_outcome
from spotpatch_agent.eval.tasks import App, Task
from spotpatch_agent.git_runner import run_git_sync, subcommand
from spotpatch_agent.protocol.models import (
    CheckConfig,
    JobCreateParams,
    JobIdParams,
    Limits,
    SpotAnnotation,
    TrustedConfig,
)
from spotpatch_agent.provider.base import ProviderAdapter, ProviderEvent, TurnEnd, TurnRequest

IDENTITY = ["-c", "user.name=SpotPatch Eval", "-c", "user.email=eval@spotpatch.invalid"]
PROFILE_ID = "eval-model"
PROVIDER_CODES = frozenset({"PROVIDER_UNAVAILABLE", "PROVIDER_AUTH", "PROVIDER_PROTOCOL"})
ENGINE_CODES = frozenset({"INTERNAL", "REPO_BLOCKED", "JOB_CONFLICT", "INVALID_STATE", "INVALID_REQUEST",
                          "APPLY_CONFLICT", "AI_DISABLED"})


@dataclass(frozen=True)
class EvalSettings:
    """One eval run's choices (the CLI's flags). ``key_env`` names the key's environment variable (the
    value is never read here, only by the engine's adapter); ``timeout`` is seconds per task."""

    base_url: str
    model: str
    api: str = "chat"
    key_env: str = "OPENAI_API_KEY"
    runs: int = 1
    timeout: float = 300.0
    keep: bool = False
    edit_format: str = "replace"
    typecheck: bool = True
    max_output_tokens: int | None = None


@dataclass
class Meter:
    """What the adapter wrapper saw for one job: seconds waiting on the provider, requests, and the
    usage the provider reported (None when it reported none)."""

    model_s: float = 0.0
    requests: int = 0
    tokens_in: int | None = None
    tokens_out: int | None = None

    def add_usage(self, usage: dict[str, Any]) -> None:
        """Add a Chat (``prompt_tokens``/``completion_tokens``) or Responses (``input_tokens``/
        ``output_tokens``) usage object."""
        got_in = usage.get("prompt_tokens", usage.get("input_tokens"))
        got_out = usage.get("completion_tokens", usage.get("output_tokens"))
        if isinstance(got_in, int):
            self.tokens_in = (self.tokens_in or 0) + got_in
        if isinstance(got_out, int):
            self.tokens_out = (self.tokens_out or 0) + got_out


class MeteredAdapter:
    """A :class:`ProviderAdapter` that passes every event of ``inner`` through unchanged and adds the time
    spent awaiting the next event and each turn's usage to ``meter``."""

    def __init__(self, inner: ProviderAdapter, meter: Meter) -> None:
        self._inner = inner
        self._meter = meter

    async def stream_turn(self, request: TurnRequest) -> AsyncGenerator[ProviderEvent, None]:
        self._meter.requests += 1
        events = self._inner.stream_turn(request)
        try:
            while True:
                started = time.monotonic()
                try:
                    event = await events.__anext__()
                except StopAsyncIteration:
                    return
                finally:
                    self._meter.model_s += time.monotonic() - started
                if isinstance(event, TurnEnd) and event.usage:
                    self._meter.add_usage(event.usage)
                yield event
        finally:
            await events.aclose()

    async def aclose(self) -> None:
        await self._inner.aclose()


@dataclass
class TypecheckCache:
    """Per app: the ``typecheck`` check once it passed on the unchanged app, or why there is none."""

    enabled: bool = True
    checks: dict[str, CheckConfig | None] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)
    confined: str | None = None  # why checks cannot be confined here; None when they can (or not asked yet)
    detected: bool = False

    def prepare(self, app: App, project: Path, out: TextIO) -> tuple[CheckConfig | None, str | None]:
        """The check for ``project`` (a fresh copy of ``app``), installing the app's packages into it."""
        from spotpatch_agent.demo.typecheck import install_node_modules, prepare_typecheck

        if not self.enabled:
            return None, "off (--no-typecheck)"
        if not self.detected:
            from spotpatch_agent.checks.sandbox import detect

            found = anyio.run(detect)
            self.detected = True
            if found.confinement is None:
                self.confined = f"checks cannot be confined here ({found.reason}); the eval never runs model-" \
                                "written code unconfined"
        if self.confined is not None:
            return None, self.confined
        if app.name not in self.checks:
            with redirect_stdout(out):
                setup = prepare_typecheck(project, Limits(), sandbox="required", packages=app.packages)
            self.checks[app.name] = setup.check
            # The first line only: a failing baseline's check output (file paths of the temp copy) stays out.
            self.reasons[app.name] = setup.message.splitlines()[0][:300] if setup.message else "no typecheck"
            return setup.check, None if setup.check else self.reasons[app.name]
        check = self.checks[app.name]
        if check is None:
            return None, self.reasons[app.name]
        with redirect_stdout(out):
            why = install_node_modules(project, app.packages)
        return (check, None) if why is None else (None, why)


def make_project(app: App, dest: Path) -> Path:
    """Copy ``app`` to ``dest`` and commit it (fixed argv git through git_runner; no global identity)."""
    shutil.copytree(app.directory, dest, ignore=shutil.ignore_patterns("__pycache__", "node_modules", "dist"))
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], [*IDENTITY, "commit", "-q", "-m", "eval app"]):
        done = run_git_sync(args, cwd=dest, timeout=120)
        if done.returncode != 0:
            raise GitError(f"git {subcommand(args)} failed (exit {done.returncode}) while setting up an eval project")
    return dest


def build_config(settings: EvalSettings, base_url: str, check: CheckConfig | None) -> TrustedConfig:
    """The trusted config of one task's project: one provider, one model profile (``editFormat`` passed
    through when given and not ``replace``), the typecheck as its one required check."""
    profile: dict[str, Any] = {"id": PROFILE_ID, "model": settings.model, "displayName": settings.model}
    if settings.max_output_tokens is not None:
        profile["maxOutputTokens"] = settings.max_output_tokens
    if settings.edit_format != "replace":
        profile["editFormat"] = settings.edit_format
    return TrustedConfig.model_validate({"providers": [{
        "id": "eval", "displayName": "Eval provider", "api": settings.api, "baseUrl": base_url,
        "apiKeyEnv": settings.key_env, "models": [profile],
    }], "checks": [check.dump()] if check is not None else [], "sandbox": "required"})


def diagnose(status: str, code: str | None, reasons: list[str], timed_out: bool) -> str:
    """``pass`` / ``model`` / ``provider`` / ``engine`` / ``timeout`` for one task's outcome (module docstring)."""
    if timed_out:
        return "timeout"
    if status == "awaiting-review" and not reasons and code is None:
        return "pass"
    if code in PROVIDER_CODES:
        return "provider"
    if code in ENGINE_CODES:
        return "engine"
    return "model"


EndpointFor = Callable[[Task, int], AbstractContextManager[str]]


async def _drive(project: Path, config: TrustedConfig, task: Task, settings: EvalSettings,
                 check_id: str | None, unavailable: str | None, before: dict[str, bytes]) -> dict[str, Any]:
    from spotpatch_agent.engine.providers import make_adapter
    from spotpatch_agent.engine.service import EngineService

    events: list[dict[str, Any]] = []
    meter = Meter()
    service = EngineService(send_event=events.append)
    # The service's adapter seam (engine/providers.py AdapterFactory): the same adapter, measured.
    service._adapter_factory = lambda provider: MeteredAdapter(make_adapter(provider), meter)
    result: dict[str, Any] = {"status": "not-started", "errorCode": None, "message": None, "reasons": [],
                              "turns": 0, "toolCalls": 0, "failedCalls": {}, "timedOut": False}
    started = time.monotonic()
    async with service.running():
        try:
            await service.configure(project, config)
            annotation = SpotAnnotation.model_validate(task.annotation())
            snap = await service.job_create(JobCreateParams(annotation=annotation, model_profile_id=PROFILE_ID))
            ids = JobIdParams(job_id=snap.job_id)
            with anyio.move_on_after(settings.timeout) as scope:
                await service.wait_job(snap.job_id)
            if scope.cancelled_caught:
                result["timedOut"] = True
                await service.job_cancel(ids)
            snap = await service.job_get(ids)
            summary = (await service.job_audit(ids)).summary.dump()
            result.update(status=snap.status, turns=snap.turns, toolCalls=snap.tool_calls,
                          failedCalls=dict(summary.get("failedCalls") or {}))
            if snap.error is not None:
                result.update(errorCode=str(snap.error.code), message=snap.error.message)
            elif snap.status != "awaiting-review":
                result["message"] = snap.message
            result["wallMs"] = round((time.monotonic() - started) * 1000)
            if snap.status == "awaiting-review":
                applied = await service.job_apply(ids)
                if applied.status != "applied":
                    result.update(errorCode="APPLY_CONFLICT", message=f"Apply ended {applied.status}")
        except SpotPatchError as exc:
            result.update(errorCode=exc.code.value, message=exc.message)
    result.setdefault("wallMs", round((time.monotonic() - started) * 1000))
    after = snapshot(project)
    result["changedFiles"] = changed_files(before, after)
    if result["status"] == "awaiting-review" and result["errorCode"] is None:
        result["reasons"] = judge_files(task, before, after)
    elif result["errorCode"] == "CHECK_FAILED":
        result["reasons"] = ["the job's typecheck (or another required check) failed"]
    result["typecheck"] = typecheck_outcome([e for e in events if e.get("kind") == "check"], check_id, unavailable)
    result.update(modelMs=round(meter.model_s * 1000), requests=meter.requests, tokensIn=meter.tokens_in,
                  tokensOut=meter.tokens_out)
    result["engineMs"] = max(0, result["wallMs"] - result["modelMs"])
    return result


def run_task(task: Task, run: int, settings: EvalSettings, base_url: str, typechecks: TypecheckCache,
             *, out: TextIO) -> dict[str, Any]:
    """One task, one run: a fresh project, the job, the judge. Returns the result row (docs/eval.md
    "JSON"). Never raises for what the model, the provider or the engine did; the temp project is
    removed unless ``settings.keep``."""
    tmp = Path(tempfile.mkdtemp(prefix="spotpatch-eval-"))
    row: dict[str, Any] = {"task": task.id, "app": task.app.name, "kind": task.kind, "run": run}
    try:
        project = make_project(task.app, tmp / task.app.name)
        before = snapshot(project)
        check, unavailable = typechecks.prepare(task.app, project, out)
        config = build_config(settings, base_url, check)
        row.update(anyio.run(_drive, project, config, task, settings, check.id if check else None, unavailable,
                             before))
        if settings.keep:
            row["keptAt"] = str(project)
    except Exception as exc:  # noqa: BLE001 - the set-up or the engine broke: this run is an engine failure, the suite goes on
        row.update(_broken(exc))
    finally:
        if not settings.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    row["diagnosis"] = diagnose(row["status"], row["errorCode"], row["reasons"], row["timedOut"])
    row["passed"] = row["diagnosis"] == "pass"
    return row


def _broken(exc: Exception) -> dict[str, Any]:
    """The row fields of a run the eval itself could not carry out (a git or copy failure, an engine bug):
    ``INTERNAL`` with the exception's type and its first line (an ``OSError``: its reason, never its path),
    cut and redacted like any engine message."""
    from spotpatch_agent.policy.redact import redact_cut

    # An OSError's str() names the absolute path: its reason alone (invariant 3).
    first = (exc.strerror or "") if isinstance(exc, OSError) else (str(exc).splitlines() or [""])[0]
    return {"status": "not-run", "errorCode": "INTERNAL", "message": redact_cut(f"{type(exc).__name__}: {first}", 300),
            "reasons": [], "turns": 0, "toolCalls": 0, "failedCalls": {}, "timedOut": False, "wallMs": 0,
            "modelMs": 0, "engineMs": 0, "requests": 0, "tokensIn": None, "tokensOut": None, "changedFiles": [],
            "typecheck": "not run"}


def run_suite(tasks: list[Task], settings: EvalSettings, endpoint: EndpointFor, *, out: TextIO = sys.stderr,
              rows: list[dict[str, Any]] | None = None,
              typechecks: TypecheckCache | None = None) -> list[dict[str, Any]]:
    """Every task ``settings.runs`` times, in order, with a progress line per task on ``out``; the rows,
    appended to ``rows`` as each run ends (so a caller interrupted by Ctrl-C still holds the finished ones).
    ``typechecks`` may be shared between suites (each app's baseline typecheck then runs once)."""
    rows = [] if rows is None else rows
    if typechecks is None or typechecks.enabled != settings.typecheck:
        typechecks = TypecheckCache(enabled=settings.typecheck)
    total = len(tasks) * settings.runs
    live = out.isatty()
    for run in range(1, settings.runs + 1):
        for task in tasks:
            i = len(rows) + 1
            if live:
                _progress(out, f"\r[{i:>3}/{total}] {task.id} (run {run}) …")
            with endpoint(task, run) as base_url:
                row = run_task(task, run, settings, base_url, typechecks, out=out)
            rows.append(row)
            code = f": {row['errorCode']}" if row["errorCode"] else ""
            verdict = "PASS" if row["passed"] else f"FAIL ({row['diagnosis']}{code})"
            _progress(out, f"{chr(13) if live else ''}[{i:>3}/{total}] {task.id} (run {run}): {verdict}, "
                           f"{row['wallMs'] / 1000:.1f} s\n")
    return rows


def _progress(out: TextIO, text: str) -> None:
    """One progress write on ``out`` (stderr unless a test passes its own stream; never stdout, which
    holds only the table)."""
    out.write(text)
    out.flush()


def key_is_set(settings: EvalSettings) -> bool:
    """Whether the key variable is set (its value is never read further here)."""
    return bool(os.environ.get(settings.key_env))
