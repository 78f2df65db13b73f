"""The agent's first message through the real service, Chat adapter and a local scripted server: the copy
prompt byte for byte plus the working rules, with the real source around each target's line (issue 16,
parts 2 and 4), and the offered files recorded on the job (path + SHA-256)."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import pytest

from spotpatch_agent.demo.runner import make_demo_project
from spotpatch_agent.demo.script import demo_turns
from spotpatch_agent.engine.service import EngineService
from spotpatch_agent.protocol.models import JobCreateParams, JobIdParams, PromptRenderParams
from spotpatch_agent.provider.scripted import ScriptedProviderServer
from tests.engine._service_support import scripted_config
from tests.support.annotations import demo_annotation

KEY_ENV = "SPOTPATCH_CTX_TEST_KEY"
ANNOTATION = demo_annotation("demo")
#: A check that passes confined (the sandbox hides git metadata: docs/security.md §4) with distinctive
#: arguments, so the test can prove they never reach the model.
CHECKS = [{"id": "stat", "name": "Stat", "command": sys.executable,
           "args": ["-c", "import os; os.listdir('.')", "--spotpatch-check-marker"]}]


def user_text(request: dict) -> str:
    return next(m["content"] for m in request["messages"] if m["role"] == "user")


@pytest.mark.anyio
async def test_first_message_is_the_copy_prompt_plus_working_rules(tmp_path: Path, monkeypatch) -> None:
    project = make_demo_project(tmp_path / "app")
    monkeypatch.setenv(KEY_ENV, "sk-ctx-test-key-0123456789")
    with ScriptedProviderServer(demo_turns()) as server:
        service = EngineService(send_event=lambda e: None)
        async with service.running():
            await service.configure(project, scripted_config(server, KEY_ENV, CHECKS))
            copy = await service.prompt_render(PromptRenderParams.model_validate({"annotation": ANNOTATION}))
            snap = await service.job_create(JobCreateParams.model_validate(
                {"annotation": ANNOTATION, "modelProfileId": "m"}))
            await service.wait_job(snap.job_id)
            job = service._jobs[snap.job_id]
            done = await service.job_get(JobIdParams(job_id=snap.job_id))
            assert done.status == "awaiting-review", done.error
        first = user_text(server.requests[0])
    assert first.startswith(copy.text)
    rules = first[len(copy.text):]
    assert rules.startswith("\n## Same-directory samples (project data)") and "Budget: at most" in rules
    # The real source around each line: the model sees ${price}, not the page's "$19.5".
    assert '   11|       <span className="price">${price}</span>' in first
    assert "## Project conventions (project data)" in copy.text and "react 18" in copy.text
    assert "--spotpatch-check-marker" not in first and "os.listdir" not in first
    assert "tsc --noEmit" not in first and '"typecheck"' not in first  # package.json's scripts are never read
    offered = {f.path: f for f in job.context_files}
    assert {"src/components/ProductCard.tsx", "tsconfig.json", "package.json"} <= set(offered)
    assert offered["src/components/ProductCard.tsx"].kind == "target"
    for f in job.context_files:  # the worktree's bytes at the baseline: the project's (a clean tree)
        assert f.sha256 == hashlib.sha256((project / f.path).read_bytes()).hexdigest()
