"""One job through the real engine service, the real Chat adapter and a local scripted server: the setup
shared by test_loop_rules.py and test_job_rules.py (each passes its own key variable and annotation)."""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest

from spotpatch_agent.engine.service import EngineService
from spotpatch_agent.protocol.models import DiffResult, JobCreateParams, JobIdParams, JobSnapshot, TrustedConfig
from spotpatch_agent.provider.scripted import ScriptedProviderServer


def scripted_config(server: ScriptedProviderServer, key_env: str, checks: list[dict] | None = None,
                    **limits: int) -> TrustedConfig:
    """One provider ``p`` (key in ``key_env``) with one model ``m`` served by ``server``."""
    return TrustedConfig.model_validate({"providers": [{
        "id": "p", "displayName": "P", "baseUrl": server.base_url, "apiKeyEnv": key_env,
        "models": [{"id": "m", "model": "scripted-model", "displayName": "M"}]}],
        "checks": checks or [], "limits": limits})


async def run_service_job(
    root: Path, turns: list, monkeypatch: pytest.MonkeyPatch, *, key_env: str, annotation: dict,
    checks: list[dict] | None = None, **limits: int,
) -> tuple[JobSnapshot, DiffResult, list[dict], ScriptedProviderServer, str]:
    """Run one job on ``root`` with a fresh canary key to its end: ``(snapshot, diff, events, server, key)``."""
    key = "sk-canary-" + secrets.token_hex(12)
    monkeypatch.setenv(key_env, key)
    events: list[dict] = []
    with ScriptedProviderServer(turns) as server:
        service = EngineService(send_event=events.append)
        async with service.running():
            await service.configure(root, scripted_config(server, key_env, checks, **limits))
            snap = await service.job_create(JobCreateParams.model_validate(
                {"annotation": annotation, "modelProfileId": "m"}))
            await service.wait_job(snap.job_id)
            snap = await service.job_get(JobIdParams(job_id=snap.job_id))
            diff = await service.job_diff(JobIdParams(job_id=snap.job_id))
    return snap, diff, events, server, key
