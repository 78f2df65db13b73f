"""Changeset validation through the real engine service (docs/design.md §8): a violation made during the job — here
by a trusted check that writes into the worktree, which the file tools themselves would refuse — fails the
job whole with ``CHANGESET_REJECTED``; no diff is kept and nothing can be applied."""

from __future__ import annotations

import json
import secrets
import sys
from pathlib import Path

import pytest

from spotpatch_agent.engine.service import EngineService
from spotpatch_agent.errors import SpotPatchError
from spotpatch_agent.protocol.models import JobCreateParams, JobIdParams, TrustedConfig
from spotpatch_agent.provider.scripted import ScriptedProviderServer
from tests.conftest import git, make_repo
from tests.support.annotations import annotation, target

KEY_ENV = "SPOTPATCH_VALIDATION_TEST_KEY"
APP = 'export const App = () => <button className="a">Go</button>;\n'
FILES = {"src/App.tsx": APP, ".gitignore": "node_modules\n"}
TARGET = annotation(target())
EDIT = {"path": "src/App.tsx", "oldText": ">Go<", "newText": ">Start<"}


def call(cid: str, name: str, args: dict) -> dict:
    return {"id": cid, "name": name, "arguments": args}


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("writer", "shown"),
    [("open('logo.png', 'wb').write(bytes(range(256)))", "logo.png"),
     ("import os; os.symlink('src/App.tsx', 'link.tsx')", "link.tsx")],
    ids=["binary", "symlink"],
)
async def test_a_violation_made_during_the_job_fails_it_whole_and_nothing_is_applied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, writer: str, shown: str
) -> None:
    root = make_repo(tmp_path / "repo", FILES)
    monkeypatch.setenv(KEY_ENV, "sk-canary-" + secrets.token_hex(12))
    checks = [{"id": "gen", "name": "Generate", "command": sys.executable, "args": ["-c", writer], "required": False}]
    turns = [{"toolCalls": [call("w", "replace_text", EDIT)]},
             {"toolCalls": [call("c", "run_check", {"checkId": "gen"})]},
             {"text": "Done.", "finishReason": "stop"}]
    events: list[dict] = []
    with ScriptedProviderServer(turns) as server:
        config = TrustedConfig.model_validate({"providers": [{
            "id": "p", "displayName": "P", "baseUrl": server.base_url, "apiKeyEnv": KEY_ENV,
            "models": [{"id": "m", "model": "scripted-model", "displayName": "M"}]}], "checks": checks})
        service = EngineService(send_event=events.append)
        async with service.running():
            await service.configure(root, config)
            create = JobCreateParams.model_validate({"annotation": TARGET, "modelProfileId": "m"})
            snap = await service.job_create(create)
            await service.wait_job(snap.job_id)
            ids = JobIdParams(job_id=snap.job_id)
            snap = await service.job_get(ids)
            diff = await service.job_diff(ids)
            with pytest.raises(SpotPatchError) as refused:
                await service.job_apply(ids)

    assert snap.status == "failed" and snap.error is not None and snap.error.code == "CHANGESET_REJECTED"
    assert f"'{shown}'" in snap.error.message and str(tmp_path) not in json.dumps(events)
    assert refused.value.code.value == "INVALID_STATE"
    # The whole change is discarded: not the bad file only, the valid edit of src/App.tsx too.
    assert diff.diff == "" and diff.files == []
    assert not any(e["kind"] == "diff" for e in events)
    assert (root / "src/App.tsx").read_text() == APP and not (root / shown).exists()
    assert git(root, "status", "--porcelain") == ""
