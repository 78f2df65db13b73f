"""Issue 26: the targets' pictures reach the model of a proven vision profile, and nothing else. The ledger
(in memory, the persisted JSONL, ``spotpatch-agent audit``), the job's events and the engine's log (DEBUG)
hold each picture's SHA-256 and size only — never its base64 or its bytes — and the job forgets the picture
once its run ended. Canary-style, like
test_canary.py: real engine service, real Chat adapter, local scripted provider, real git."""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import secrets
from pathlib import Path

import pytest

from spotpatch_agent.engine.service import EngineService
from spotpatch_agent.protocol.models import JobCreateParams, JobIdParams, ProviderProbeParams, TrustedConfig
from spotpatch_agent.provider.scripted import ScriptedProviderServer
from tests.audit._support import run_cli
from tests.conftest import make_repo

KEY_ENV = "SPOTPATCH_PICTURES_TEST_KEY"
PROBE_AND_VISION = [{"toolCalls": [{"id": "p1", "name": "report_ready", "arguments": {"ready": True}}]},
                    {"text": "OK", "finishReason": "stop"}, {"text": "Red", "finishReason": "stop"}]
JOB = [{"toolCalls": [{"id": "w1", "name": "replace_text",
                       "arguments": {"path": "src/App.tsx", "oldText": ">Go<", "newText": ">Start<"}}]},
       {"text": "Done.", "finishReason": "stop"}]


@pytest.mark.anyio
async def test_pictures_leave_only_their_hash_and_size_in_ledger_jsonl_cli_events_and_log(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    # A picture whose bytes carry a canary (the engine checks the type, not the pixels).
    canary = "pic-canary-" + secrets.token_hex(16)
    raw = b"\x89PNG\r\n\x1a\n" + canary.encode() * 200
    data = base64.b64encode(raw).decode()
    root = make_repo(tmp_path / "repo", {"src/App.tsx": "export const App = () => <button>Go</button>;\n",
                                         ".gitignore": "node_modules\n"})
    ann = {"annotationId": "a1", "pageUrl": "/", "targets": [
        {"index": 1, "instruction": "Say Start", "source": {"file": "src/App.tsx", "line": 1},
         "element": {"tagName": "button", "text": "Go"}, "image": {"mediaType": "image/png", "data": data}}]}
    monkeypatch.setenv(KEY_ENV, "sk-canary-" + secrets.token_hex(12))
    events: list[object] = []
    caplog.set_level(logging.DEBUG)
    with ScriptedProviderServer([*PROBE_AND_VISION, *JOB]) as server:
        config = TrustedConfig.model_validate({"providers": [{
            "id": "p", "displayName": "P", "baseUrl": server.base_url, "apiKeyEnv": KEY_ENV,
            "models": [{"id": "m", "model": "scripted-model", "displayName": "M", "vision": True}]}],
            "audit": {"persist": True, "keep": 5}})
        service = EngineService(send_event=events.append)
        async with service.running():
            await service.configure(root, config)
            assert (await service.provider_probe(ProviderProbeParams(model_profile_id="m"))).vision is True
            snap = await service.job_create(JobCreateParams.model_validate({"annotation": ann, "modelProfileId": "m"}))
            await service.wait_job(snap.job_id)
            audit = (await service.job_audit(JobIdParams(job_id=snap.job_id))).dump()
            kept = service._jobs[snap.job_id].params.annotation.targets[0]
        sent = json.dumps(server.requests[3])
    assert data in sent  # the model did receive the picture (the checks below are not vacuous)
    assert kept.image is None and kept.instruction == "Say Start"  # forgotten once the run ended, the text kept

    start = next(r for r in audit["records"] if r["type"] == "job_start")
    assert start["targets"][0]["imageSha256"] == hashlib.sha256(raw).hexdigest()
    assert start["targets"][0]["imageBytes"] == len(raw) and start["targets"][0]["imageSent"] is True
    jsonl = (root / ".git/spotpatch/audit" / f"{snap.job_id}.jsonl").read_text()
    cli = run_cli("audit", snap.job_id, "--json", "--project", str(root))
    assert hashlib.sha256(raw).hexdigest() in jsonl and snap.job_id in cli
    everywhere = {
        "memory": json.dumps(audit), "jsonl": jsonl, "cli": cli, "log": caplog.text,
        "events": json.dumps([getattr(e, "dump", lambda e=e: e)() for e in events], default=str),
    }
    for where, text in everywhere.items():
        for name, value in {"canary": canary, "base64 head": data[:48], "base64 tail": data[-48:]}.items():
            assert value not in text, f"{where} holds the picture's {name}"
