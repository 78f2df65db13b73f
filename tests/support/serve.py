"""A real ``spotpatch-agent serve`` subprocess on the demo project with a scripted provider: its config,
the demo job, its worktrees, the probe turns."""

from __future__ import annotations

import time
from pathlib import Path

from spotpatch_agent.provider.scripted import ScriptedProviderServer
from tests.conftest import git
from tests.engine_client import EngineProcess
from tests.support.annotations import demo_annotation

KEY_ENV = "SPOTPATCH_TEST_PROVIDER_KEY"


def config_for(server: ScriptedProviderServer) -> dict:
    return {"providers": [{"id": "scripted", "displayName": "Scripted", "api": "chat", "baseUrl": server.base_url,
                           "apiKeyEnv": KEY_ENV,
                           "models": [{"id": "m1", "model": "scripted-model", "displayName": "Scripted model"}]}],
            "checks": [], "limits": {}}


def create_job(eng: EngineProcess) -> str:
    """``job/create`` for the demo annotation with model profile ``m1``; returns the job id."""
    return eng.call("job/create", {"annotation": demo_annotation(), "modelProfileId": "m1"})["jobId"]


def worktree_count(root: Path) -> int:
    return git(root, "worktree", "list", "--porcelain").count("worktree ")


def job_worktrees(root: Path) -> list[Path]:
    """Paths of every registered worktree except the main one."""
    lines = git(root, "worktree", "list", "--porcelain").splitlines()
    paths = [Path(line[len("worktree "):]) for line in lines if line.startswith("worktree ")]
    return [p for p in paths if p.resolve() != root.resolve()]


def wait_model_turn(server: ScriptedProviderServer, timeout: float = 10) -> None:
    """Wait until the provider received the job's first model request (the stream is then open)."""
    deadline = time.monotonic() + timeout
    while not server.requests and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.requests, "the model turn never started"


def start_engine(canary: str) -> EngineProcess:
    return EngineProcess(env={KEY_ENV: canary})


def run_to_review(eng: EngineProcess, project: Path, server: ScriptedProviderServer) -> str:
    eng.initialize(project, config_for(server))
    job_id = create_job(eng)
    assert eng.wait_status(job_id, {"awaiting-review", "failed"}, timeout=60)["status"] == "awaiting-review"
    return job_id


PROBE_TURNS = [
    {"toolCalls": [{"id": "p1", "name": "report_ready", "arguments": {"ready": True}}]},
    {"text": "OK", "finishReason": "stop"},
]
