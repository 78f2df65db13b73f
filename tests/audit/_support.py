"""Scripted jobs for the audit ledger tests: the real engine service, the real Chat adapter, a local
scripted provider, real git (docs/design.md §13)."""

from __future__ import annotations

import secrets
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from spotpatch_agent.engine.service import EngineService
from spotpatch_agent.protocol.models import JobCreateParams, JobIdParams, TrustedConfig
from spotpatch_agent.provider.scripted import ScriptedProviderServer
from tests.support.annotations import target as build_target

KEY_ENV = "SPOTPATCH_AUDIT_TEST_KEY"


def call(cid: str, name: str, args: Any) -> dict:
    return {"id": cid, "name": name, "arguments": args}


def read(cid: str, path: str, start: int | None = None, end: int | None = None) -> dict:
    return call(cid, "read_file", {"path": path, "startLine": start, "endLine": end})


def replace(cid: str, path: str, old: str, new: str) -> dict:
    return call(cid, "replace_text", {"path": path, "oldText": old, "newText": new})


def target(index: int, path: str | None, line: int = 1, instruction: str = "Change it") -> dict:
    """The audit tests' target: a button "x" at ``path:line`` (``None``: no location)."""
    return build_target(path, line, index=index, instruction=instruction,
                        element={"tagName": "button", "text": "x"})


@dataclass
class Ran:
    status: str
    audit: dict[str, Any]
    events: list[dict]
    key: str
    service: EngineService
    job_id: str


def config(server: ScriptedProviderServer, *, audit: dict | None = None, checks: list[dict] | None = None,
           sandbox: str = "warn", **limits: int) -> TrustedConfig:
    body: dict[str, Any] = {"providers": [{
        "id": "p", "displayName": "P", "baseUrl": server.base_url, "apiKeyEnv": KEY_ENV,
        "models": [{"id": "m", "model": "scripted-model", "displayName": "M"}]}],
        "checks": checks or [], "limits": limits, "sandbox": sandbox}
    if audit is not None:
        body["audit"] = audit
    return TrustedConfig.model_validate(body)


async def run_audited_job(
    root: Path, turns: list, monkeypatch: pytest.MonkeyPatch, ann: dict, *, audit: dict | None = None,
    checks: list[dict] | None = None, before_create=None, after=None, key: str | None = None, sandbox: str = "warn",
    **limits: int,
) -> Ran:
    """Run one job to its end and return its ``job/audit`` result (wire dict). ``after(service, job_id)``
    runs while the service is still up (Apply, Revert …); the audit is taken after it."""
    key = key or "sk-canary-" + secrets.token_hex(12)
    monkeypatch.setenv(KEY_ENV, key)
    events: list[dict] = []
    with ScriptedProviderServer(turns) as server:
        service = EngineService(send_event=events.append)
        async with service.running():
            await service.configure(root, config(server, audit=audit, checks=checks, sandbox=sandbox, **limits))
            if before_create is not None:
                before_create(service)
            snap = await service.job_create(JobCreateParams.model_validate({"annotation": ann, "modelProfileId": "m"}))
            await service.wait_job(snap.job_id)
            if after is not None:
                await after(service, snap.job_id)
            snap = await service.job_get(JobIdParams(job_id=snap.job_id))
            result = (await service.job_audit(JobIdParams(job_id=snap.job_id))).dump()
    return Ran(snap.status, result, events, key, service, snap.job_id)


def records_of(ran: Ran, kind: str) -> list[dict]:
    return [r for r in ran.audit["records"] if r["type"] == kind]


def run_cli(*args: str) -> str:
    code = "import sys; from spotpatch_agent.cli import main; sys.exit(main(sys.argv[1:]))"
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, check=True)
    return done.stdout + done.stderr
