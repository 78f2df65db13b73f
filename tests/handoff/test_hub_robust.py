"""The agent channel never takes the engine down and answers every bad request (issue 28 breaker findings): a
failing accept (out of file descriptors) is retried, a flood of connections is capped, any failure while the
channel starts leaves "no agent channel" with a reason (never a service whose jobs all fail), a socket path too
long for AF_UNIX is refused, an oversize call is refused before it is sent, a wrong-typed jobId is an error (never
"the oldest job"), and a take that waits too long says so with a code."""

from __future__ import annotations

import errno
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import pytest

from spotpatch_agent.handoff import channel, hub
from spotpatch_agent.handoff.channel import ChannelClient, ChannelError, ChannelUnavailable
from spotpatch_agent.handoff.hub import AgentHub
from spotpatch_agent.provider.agent import AgentTurns
from tests.conftest import make_repo

pytestmark = [pytest.mark.skipif(sys.platform == "win32", reason="the agent channel is a Unix socket"),
              pytest.mark.anyio]


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    run = tmp_path / "run"
    run.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(run))
    return make_repo(tmp_path / "repo", {"a.txt": "a\n"})


def fake_service(toplevel: Path, **jobs: tuple[Any, AgentTurns]) -> Any:
    return SimpleNamespace(agent_jobs=dict(jobs), toplevel=toplevel)


async def started(agents: AgentHub, repo: Path) -> Path:
    agents.configure(repo)
    with anyio.fail_after(15):
        while agents.path is None or not agents.path.exists():
            assert agents.unavailable is None, agents.unavailable
            await anyio.sleep(0.02)
    return agents.path


async def hello(path: Path, tg: anyio.abc.TaskGroup) -> ChannelClient:
    client = await ChannelClient.connect(path)
    tg.start_soon(client.run)
    await client.request("agent/hello", {"client": "t"})
    return client


async def test_a_failing_accept_is_retried_and_a_flood_of_connections_is_capped(repo, monkeypatch) -> None:
    real_listen = channel.listen

    class FlakyListener:  # the first accept fails as it does without file descriptors (EMFILE)
        def __init__(self, inner: Any) -> None:
            self.inner, self.failed = inner, False

        async def accept(self) -> Any:
            if not self.failed:
                self.failed = True
                raise OSError(errno.EMFILE, "Too many open files")
            return await self.inner.accept()

        async def __aenter__(self) -> Any:
            return self

        async def __aexit__(self, *exc: object) -> None:
            await self.inner.aclose()

    async def flaky_listen(path: Path) -> Any:
        return FlakyListener(await real_listen(path))

    monkeypatch.setattr(channel, "listen", flaky_listen)
    monkeypatch.setattr(hub, "MAX_CONNECTIONS", 5)
    agents = AgentHub(fake_service(repo))
    async with anyio.create_task_group() as tg:
        tg.start_soon(agents.serve)
        path = await started(agents, repo)
        idle = [await anyio.connect_unix(path) for _ in range(12)]  # a flood: past the cap they are closed
        await anyio.sleep(0.3)
        for stream in idle:
            await stream.aclose()
        with anyio.fail_after(10):
            while True:  # the cap frees as the flood closes; a legit client is served again
                try:
                    client = await hello(path, tg)
                    break
                except (ChannelUnavailable, ChannelError):
                    await anyio.sleep(0.1)
            assert (await client.request("agent/pending", {})) == {"jobs": []}
        assert agents.unavailable is None
        tg.cancel_scope.cancel()


async def test_any_failure_while_the_channel_starts_leaves_no_channel_with_a_reason(repo, monkeypatch) -> None:
    def broken(toplevel: Path) -> Path:
        raise RuntimeError("unexpected")

    monkeypatch.setattr(channel, "socket_path", broken)
    agents = AgentHub(fake_service(repo))
    agents.configure(repo)
    with anyio.fail_after(5):
        await agents.serve()  # returns: never raises into the service's task group
    assert agents.info() == {"available": False, "clients": [],
                             "reason": "the agent channel stopped (see the engine log)"}


async def test_a_socket_path_too_long_for_af_unix_is_no_channel(tmp_path, monkeypatch) -> None:
    deep = tmp_path / ("d" * 100)
    deep.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(deep))
    with pytest.raises(ChannelUnavailable, match="too long"):
        channel.socket_path(Path("/x/app"))


async def test_bad_requests_get_coded_answers_and_an_oversize_call_is_not_sent(repo, monkeypatch) -> None:
    job = SimpleNamespace(job_id="job_1", status="running", created_at="now",
                          params=SimpleNamespace(annotation=SimpleNamespace(targets=[])))
    turns = AgentTurns()  # never offered: a job still preparing its worktree
    monkeypatch.setattr(hub, "TAKE_WAIT_SEC", 0.2)
    agents = AgentHub(fake_service(repo, job_1=(job, turns)))
    async with anyio.create_task_group() as tg:
        tg.start_soon(agents.serve)
        client = await hello(await started(agents, repo), tg)
        for bad in (7, ["job_1"], "", {"x": 1}):
            with pytest.raises(ChannelError) as refused:
                await client.request("agent/take", {"jobId": bad})
            assert refused.value.code == "INVALID_REQUEST" and "jobId" in str(refused.value)
        with pytest.raises(ChannelError) as slow:
            await client.request("agent/take", {"jobId": "job_1"})
        assert slow.value.code == "INVALID_STATE" and "still starting" in str(slow.value)
        with anyio.fail_after(5), pytest.raises(ChannelError) as big:
            await client.request("agent/call", {"jobId": "job_1", "name": "replace_text",
                                                "arguments": {"newText": "x" * (channel.MAX_CHANNEL_FRAME + 1)}})
        assert big.value.code == "LIMIT_EXCEEDED"
        # An id that is not a string or an integer: refused, not run.
        await client._stream.send(channel.encode_frame({"jsonrpc": "2.0", "id": {"x": 1}, "method": "agent/pending",
                                                        "params": {}}))
        # The connection still works after all of it.
        assert (await client.request("agent/pending", {}))["jobs"][0]["jobId"] == "job_1"
        tg.cancel_scope.cancel()
