"""A failed job whose diff so far cannot be kept for review says so on stderr (issue 21: never silently),
redacted and without an absolute path. Real engine service, real Chat adapter, real local server, real
git and a real check process."""

from __future__ import annotations

import logging
import secrets
import sys
from pathlib import Path

import pytest

from spotpatch_agent.engine.service import EngineService
from spotpatch_agent.policy.redact import REDACTOR
from spotpatch_agent.protocol.models import JobCreateParams, JobIdParams, TrustedConfig
from spotpatch_agent.provider.scripted import ScriptedProviderServer
from tests.conftest import git, make_repo
from tests.support.annotations import annotation, target

KEY_ENV = "SPOTPATCH_DROPPED_DIFF_TEST_KEY"
FILES = {"src/App.tsx": 'export const App = () => <button className="a">Go</button>;\n',
         ".gitignore": "node_modules\n"}
TARGET = annotation(target())
READ = {"path": "src/App.tsx", "startLine": None, "endLine": None}


def call(cid: str, name: str, args: dict) -> dict:
    return {"toolCalls": [{"id": cid, "name": name, "arguments": args}]}


async def run_job(root: Path, turns: list, checks: list[dict], monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(KEY_ENV, "sk-test-" + secrets.token_hex(8))
    events: list[dict] = []
    with ScriptedProviderServer(turns) as server:
        config = TrustedConfig.model_validate({
            "providers": [{"id": "p", "displayName": "P", "baseUrl": server.base_url, "apiKeyEnv": KEY_ENV,
                           "models": [{"id": "m", "model": "scripted-model", "displayName": "M"}]}],
            "checks": checks, "sandbox": "warn", "limits": {"maxTurns": 2}})
        service = EngineService(send_event=events.append)
        async with service.running():
            await service.configure(root, config)
            params = JobCreateParams.model_validate({"annotation": TARGET, "modelProfileId": "m"})
            snap = await service.job_create(params)
            await service.wait_job(snap.job_id)
            ids = JobIdParams(job_id=snap.job_id)
            return await service.job_get(ids), await service.job_diff(ids), events


@pytest.mark.anyio
async def test_a_failed_job_whose_diff_is_rejected_logs_why_it_was_dropped(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    root = make_repo(tmp_path / "repo", FILES)
    canary = "sk-canary-" + secrets.token_hex(10)
    REDACTOR.add_secret(canary)
    # The model's check writes a protected file whose name holds the canary: the diff so far cannot pass
    # changeset validation, and the rejection names that path.
    writer = {"id": "w", "name": "Writer", "command": sys.executable, "required": False,
              "args": ["-c", f"open('.env.{canary}', 'w').write('X=1\\n')"]}
    turns = [call("e", "replace_text", {"path": "src/App.tsx", "oldText": ">Go<", "newText": ">Start<"}),
             call("c", "run_check", {"checkId": "w"}),
             call("r", "read_file", READ)]  # one turn past maxTurns: the job fails with LIMIT_EXCEEDED

    with caplog.at_level(logging.WARNING, logger="spotpatch.job"):
        snap, diff, events = await run_job(root, turns, [writer], monkeypatch)

    assert snap.status == "failed" and snap.error is not None and snap.error.code == "LIMIT_EXCEEDED"
    assert diff.diff == "" and not any(e["kind"] == "diff" for e in events)  # dropped, as before
    lines = [r.getMessage() for r in caplog.records if "was not kept for review" in r.getMessage()]
    assert len(lines) == 1, caplog.text
    assert snap.job_id in lines[0] and "CHANGESET_REJECTED" in lines[0] and "protected path" in lines[0]
    assert canary not in caplog.text and str(tmp_path) not in caplog.text and str(root) not in caplog.text
    assert git(root, "status", "--porcelain") == ""


@pytest.mark.anyio
async def test_a_failed_job_that_keeps_its_diff_logs_no_drop(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    root = make_repo(tmp_path / "repo", FILES)
    turns = [call("e", "replace_text", {"path": "src/App.tsx", "oldText": ">Go<", "newText": ">Start<"}),
             call("r1", "read_file", READ), call("r2", "read_file", READ)]

    with caplog.at_level(logging.WARNING, logger="spotpatch.job"):
        snap, diff, _ = await run_job(root, turns, [], monkeypatch)

    assert snap.status == "failed" and ">Start<" in diff.diff
    assert "was not kept for review" not in caplog.text
