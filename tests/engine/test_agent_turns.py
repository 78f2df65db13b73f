"""Issue 28's core: a job whose turns come from an attached agent (``provider.agent.AgentTurns``) runs through the
real engine service exactly as a model's job does — the same tools, refusals, worktree, review and diff — and a
job the user cancels answers the agent's next call with a clear end instead of running it."""

from __future__ import annotations

import json
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest

from spotpatch_agent.engine.service import EngineService
from spotpatch_agent.protocol.models import JobCreateParams, JobIdParams, JobSnapshot, TrustedConfig
from spotpatch_agent.provider.agent import AgentJobEnded, AgentTurns
from tests.conftest import make_repo
from tests.support.annotations import annotation, target

KEY_ENV = "SPOTPATCH_AGENT_TURNS_TEST_KEY"
APP = 'export const App = () => <button className="a">Go</button>;\n'
FILES = {"src/App.tsx": APP, ".env": "API_TOKEN=canary-env-secret\n", ".gitignore": ".env\nnode_modules\n"}
ANNOTATION = annotation(target())
CONFIG = {"providers": [{"id": "p", "displayName": "P", "baseUrl": "http://127.0.0.1:9", "apiKeyEnv": KEY_ENV,
                         "models": [{"id": "m", "model": "agent", "displayName": "M"}]}]}


def args(**kw: object) -> str:
    return json.dumps(kw)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo", FILES)


@asynccontextmanager
async def agent_job(
    root: Path, monkeypatch: pytest.MonkeyPatch,
) -> AsyncIterator[tuple[EngineService, AgentTurns, str]]:
    """A running engine service whose one job takes its turns from an :class:`AgentTurns`, started and waiting
    for the agent's first call: ``(service, agent, job_id)``."""
    monkeypatch.setenv(KEY_ENV, "sk-canary-" + secrets.token_hex(12))
    agent = AgentTurns("test-agent")
    service = EngineService(send_event=lambda event: None)
    service._adapter_factory = lambda provider: agent  # the seam the MCP channel uses
    async with service.running():
        await service.configure(root, TrustedConfig.model_validate(CONFIG))
        snap = await service.job_create(
            JobCreateParams.model_validate({"annotation": ANNOTATION, "modelProfileId": "m"}))
        with anyio.fail_after(30):
            await agent.wait_started()
        yield service, agent, snap.job_id


@pytest.mark.anyio
async def test_an_agents_calls_run_as_a_models_do_and_its_submit_reaches_review(root, monkeypatch) -> None:
    async with agent_job(root, monkeypatch) as (service, agent, job_id):
        assert agent.task is not None and "Make the button say Start" in agent.task
        assert {t.name for t in agent.tools} >= {"read_file", "list_files", "search_text", "replace_text"}
        with pytest.raises(ValueError, match="Nothing was done yet"):
            await agent.submit("Done.")  # a job's first turn must call a tool
        read = await agent.call_tool("read_file", args(path="src/App.tsx", startLine=None, endLine=None))
        assert not read.failed and ">Go<" in read.output
        denied = await agent.call_tool("read_file", args(path=".env", startLine=None, endLine=None))
        assert denied.failed and denied.output.startswith("ERROR TOOL_PATH_DENIED")
        assert "canary-env-secret" not in denied.output
        bad = await agent.call_tool("read_file", "[1, 2]")
        assert bad.failed and bad.output.startswith("ERROR TOOL_ARGUMENTS_INVALID")
        edit = await agent.call_tool("replace_text", args(path="src/App.tsx", oldText=">Go<", newText=">Start<"))
        assert not edit.failed, edit.output
        await agent.submit("Target 1: the button says Start.")
        await service.wait_job(job_id)
        snap = await service.job_get(JobIdParams(job_id=job_id))
        diff = await service.job_diff(JobIdParams(job_id=job_id))
        assert snap.status == "awaiting-review", snap.error
        assert ">Start<" in diff.diff and [f.path for f in diff.files] == ["src/App.tsx"]
        with pytest.raises(AgentJobEnded):  # the job left the loop: nothing more runs
            await agent.call_tool("read_file", args(path="src/App.tsx", startLine=None, endLine=None))
    assert (root / "src/App.tsx").read_text() == APP  # the user's tree: only Apply changes it


@pytest.mark.anyio
async def test_the_users_cancel_ends_the_agents_job_and_its_next_call_is_refused(root, monkeypatch) -> None:
    async with agent_job(root, monkeypatch) as (service, agent, job_id):
        await agent.call_tool("read_file", args(path="src/App.tsx", startLine=None, endLine=None))
        await service.job_cancel(JobIdParams(job_id=job_id))
        await service.wait_job(job_id)
        snap = await service.job_get(JobIdParams(job_id=job_id))
        assert snap.status == "cancelled"
        with pytest.raises(AgentJobEnded):
            await agent.call_tool("replace_text", args(path="src/App.tsx", oldText=">Go<", newText=">Start<"))
        with pytest.raises(AgentJobEnded):
            await agent.submit("Done.")
    assert (root / "src/App.tsx").read_text() == APP


async def job_ended_by(root: Path, monkeypatch: pytest.MonkeyPatch, name: str, arguments: str) -> JobSnapshot:
    """A fresh agent job whose one call ``name(arguments)`` ends it: the job's final snapshot."""
    async with agent_job(root, monkeypatch) as (service, agent, job_id):
        with pytest.raises(AgentJobEnded):
            await agent.call_tool(name, arguments)
        await service.wait_job(job_id)
        snap = await service.job_get(JobIdParams(job_id=job_id))
    assert (root / "src/App.tsx").read_text() == APP
    return snap


@pytest.mark.anyio
async def test_a_write_outside_the_allowed_files_ends_the_agents_job_as_it_ends_a_models(root, monkeypatch) -> None:
    snap = await job_ended_by(root, monkeypatch, "replace_text", args(path="../outside.txt", oldText="a", newText="b"))
    assert snap.status == "failed" and snap.error is not None
    assert snap.error.code == "CHANGESET_REJECTED", snap.error  # as for a model (docs/security.md)
    assert not (root.parent / "outside.txt").exists()


@pytest.mark.anyio
async def test_oversized_arguments_end_the_agents_job_at_the_models_limit(root, monkeypatch) -> None:
    oversized = args(path="src/App.tsx", oldText=">Go<", newText="x" * (5 << 20))
    snap = await job_ended_by(root, monkeypatch, "replace_text", oversized)
    assert snap.error is not None and snap.error.code == "LIMIT_EXCEEDED"
    assert "over the size limit" in snap.error.message
