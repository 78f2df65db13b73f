"""The ``run_check`` tool over the runner: model-facing text, recorded runs, a command that cannot start."""

from __future__ import annotations

import sys

import pytest

from spotpatch_agent.errors import JobFailure
from spotpatch_agent.protocol.errors import ErrorCode
from spotpatch_agent.protocol.models import CheckConfig, Limits
from spotpatch_agent.tools.executor import ToolExecutor

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def executor(repo_factory, *checks: CheckConfig) -> ToolExecutor:
    root = repo_factory({"src/a.ts": "export const a = 1;\n"})
    return ToolExecutor(root, Limits(), tools=["read_file", "run_check"], checks=checks)


def py(check_id: str, script: str, **fields: object) -> CheckConfig:
    return CheckConfig(id=check_id, name=check_id.title(), command=sys.executable, args=["-c", script], **fields)


async def test_results_are_recorded_per_worktree_version_for_the_final_stage(repo_factory) -> None:
    ex = executor(repo_factory, py("ok", "print('fine')"), py("bad", "import sys; print('2 errors'); sys.exit(1)"))
    ok = await ex.execute("run_check", '{"checkId": "ok"}')
    assert ok.ok and ok.output.startswith("Check ok (Ok) PASSED: exit code 0, ")
    assert ok.output.endswith("Output:\nfine\n")
    bad = await ex.execute("run_check", '{"checkId": "bad"}')
    assert not bad.ok and bad.retryable and bad.code is None
    assert bad.output.startswith("Check bad (Bad) FAILED: exit code 1, ") and "2 errors" in bad.output
    runs = ex.check_runs
    assert runs["ok"][0] < runs["bad"][0] == ex.version  # only the latest run is on the current version
    assert runs["ok"][1].ok and runs["bad"][1].exit_code == 1


async def test_timeout_and_signal_texts(repo_factory) -> None:
    ex = executor(repo_factory, py("slow", "import time; time.sleep(30)", timeout_sec=1),
                  py("sig", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"))
    slow = await ex.execute("run_check", '{"checkId": "slow"}')
    assert slow.output.startswith("Check slow (Slow) FAILED: timed out after 1 s, ")
    assert slow.output.endswith("(no output)")
    sig = await ex.execute("run_check", '{"checkId": "sig"}')
    assert sig.output.startswith("Check sig (Sig) FAILED: killed by signal 9, ")


async def test_a_command_that_cannot_start_fails_the_job(repo_factory, tmp_path) -> None:
    ex = executor(repo_factory, CheckConfig(id="gone", name="Gone", command=str(tmp_path / "missing-tool")))
    with pytest.raises(JobFailure) as caught:
        await ex.execute("run_check", '{"checkId": "gone"}')
    assert caught.value.code == ErrorCode.CHECK_FAILED and "could not be started" in caught.value.message
    assert str(tmp_path) not in caught.value.message
