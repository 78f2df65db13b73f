"""Issue 28: ``spotpatch-agent mcp`` driven by the official MCP SDK's own stdio client (real protocol, no mocks),
attached to a real ``spotpatch-agent serve`` engine over the agent channel: a job sent "to my agent" is taken,
read, edited and submitted through MCP; the engine's review, Apply and Revert work as for a model's job; the
agent's calls get a model's refusals; a second agent cannot take a taken job; a vanished agent leaves a job
that another can take or the page can cancel; the page's Cancel answers the agent's next call; and nothing
secret or absolute crosses MCP."""

from __future__ import annotations

import json
import os
import secrets
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.conftest import make_repo
from tests.engine_client import EngineProcess
from tests.support.annotations import annotation, target
from tests.support.hostile_model import World, hostile_paths

APP = 'export const App = () => <button className="a">Go</button>;\n'
ANNOTATION = annotation(target())
CANARY_KEY = "sk-canary-" + secrets.token_hex(12)
CANARY_ENV = "ENVCANARY" + secrets.token_hex(8)
CONFIG = {"providers": [{"id": "p", "displayName": "P", "baseUrl": "http://127.0.0.1:9", "apiKeyEnv": "OPENAI_API_KEY",
                         "models": [{"id": "m", "model": "x", "displayName": "M"}]}],
          "limits": {"maxTurns": 64, "maxToolCalls": 200}}

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="the agent channel is a Unix socket")


def agent_bin() -> str:
    script = Path(sys.executable).with_name("spotpatch-agent")
    return str(script) if script.exists() else "spotpatch-agent"


class Stage:
    """A project, its engine (the one the Vite plugin would run) and the environment both sides share."""

    def __init__(self, tmp: Path, root: Path) -> None:
        self.root = root
        self.runtime = tmp / "run"
        self.runtime.mkdir(mode=0o700)
        self.env = {"XDG_RUNTIME_DIR": str(self.runtime), "OPENAI_API_KEY": CANARY_KEY,
                    "SPOTPATCH_SECRET_CANARY": CANARY_ENV}
        self.engine = EngineProcess(env=self.env)
        self.seen: list[str] = []  # every text that crossed MCP to the agent

    def start(self, config: dict[str, Any] = CONFIG) -> None:
        self.engine.initialize(self.root, config)
        deadline = time.monotonic() + 20  # the channel's socket appears once the project is configured
        while not any((self.runtime / "spotpatch").glob("*.sock")):
            assert time.monotonic() < deadline, "no agent channel: " + self.engine.all_output()[-2000:]
            time.sleep(0.05)

    def send_to_agent(self, annotation: dict[str, Any] = ANNOTATION) -> str:
        snap = self.engine.call("job/create", {"annotation": annotation, "agent": True})
        return str(snap["jobId"])

    @asynccontextmanager
    async def agent(self, name: str = "test-agent") -> AsyncIterator[Agent]:
        params = StdioServerParameters(command=agent_bin(), args=["mcp", "--project", str(self.root)],
                                       env={**os.environ, **self.env})
        async with stdio_client(params) as (read, write), ClientSession(
                read, write, client_info=types.Implementation(name=name, version="1")) as session:
            await session.initialize()
            yield Agent(session, self.seen)


class Agent:
    def __init__(self, session: ClientSession, seen: list[str]) -> None:
        self.session = session
        self.seen = seen

    async def refused(self, name: str, arguments: dict[str, Any] | None = None) -> str:
        """The text of a call that must fail (``isError``)."""
        text, failed, _ = await self.call(name, arguments)
        assert failed, text
        return text

    async def call(self, name: str, arguments: dict[str, Any] | None = None) -> tuple[str, bool, Any]:
        result = await self.session.call_tool(name, arguments or {})
        text = "".join(c.text for c in result.content if isinstance(c, types.TextContent))
        self.seen.append(text + json.dumps(result.structured_content or {}))
        return text, bool(result.is_error), result.structured_content


def read(path: Any) -> dict[str, Any]:
    return {"path": path, "startLine": None, "endLine": None}


@pytest.fixture
def stage(tmp_path: Path) -> Any:
    root = make_repo(tmp_path / "repo", {"src/App.tsx": APP, ".env": f"API_TOKEN={CANARY_ENV}\n",
                                         ".gitignore": ".env\nnode_modules\n"})
    s = Stage(tmp_path, root)
    s.start()
    try:
        yield s
    finally:
        s.engine.stop()


def assert_nothing_secret(stage: Stage, extra: tuple[str, ...] = ()) -> None:
    crossed = "\n".join(stage.seen)
    for secret in (CANARY_KEY, CANARY_ENV, str(stage.root), str(stage.runtime), *extra):
        assert secret not in crossed, secret[:12]


@pytest.mark.anyio
async def test_an_agent_takes_edits_and_submits_over_mcp_and_the_review_applies_and_reverts(stage: Stage) -> None:
    before = (stage.root / "src/App.tsx").read_bytes()
    job_id = stage.send_to_agent()
    async with stage.agent() as agent:
        listed = {t.name for t in (await agent.session.list_tools()).tools}
        assert listed == {"spotpatch_pending", "read_file", "list_files", "search_text", "replace_text",
                          "apply_patch", "run_check", "spotpatch_submit", "spotpatch_status"}
        text, failed, data = await agent.call("spotpatch_pending")
        assert not failed and data["jobId"] == job_id and "Make the button say Start" in text
        assert data["targets"] == [{"index": 1, "instruction": "Make the button say Start",
                                    "source": "src/App.tsx:1",
                                    "element": {"tagName": "button", "text": "Go", "attributes": {}}}]
        text, failed, _ = await agent.call("read_file", read("src/App.tsx"))
        assert not failed and ">Go<" in text
        text, failed, _ = await agent.call("read_file", read(".env"))
        assert failed and text.startswith("ERROR TOOL_PATH_DENIED")
        text, failed, _ = await agent.call("replace_text", {"path": "src/App.tsx", "oldText": ">Go<",
                                                           "newText": ">Start<"})
        assert not failed, text
        text, failed, status = await agent.call("spotpatch_submit", {"summary": "Target 1: the button says Start."})
        assert not failed and status["status"] == "awaiting-review", text
        assert [f["path"] for f in status["files"]] == ["src/App.tsx"]
        assert (stage.root / "src/App.tsx").read_bytes() == before  # the user's tree: untouched until Apply
        diff = stage.engine.call("job/diff", {"jobId": job_id})
        assert ">Start<" in diff["diff"]
        stage.engine.call("job/apply", {"jobId": job_id})
        assert b">Start<" in (stage.root / "src/App.tsx").read_bytes()
        text, _, status = await agent.call("spotpatch_status")
        assert status["status"] == "applied" and "applied" in text
        stage.engine.call("job/revert", {"jobId": job_id})
        assert (stage.root / "src/App.tsx").read_bytes() == before
        _, _, status = await agent.call("spotpatch_status")
        assert status["status"] == "reverted"
        text, failed, _ = await agent.call("read_file", read("src/App.tsx"))
        assert failed and "takes no more calls" in text
    audit = stage.engine.call("job/audit", {"jobId": job_id})
    start = next(r for r in audit["records"] if r.get("type") == "job_start")
    assert start["providerId"] == "mcp:test-agent"
    assert_nothing_secret(stage)


@pytest.mark.anyio
async def test_a_second_agent_cannot_take_a_taken_job_and_a_vanished_agent_leaves_it_for_another(
        stage: Stage) -> None:
    job_id = stage.send_to_agent()
    async with stage.agent("first") as first:
        _, failed, data = await first.call("spotpatch_pending")
        assert not failed and data["jobId"] == job_id
        await first.call("replace_text", {"path": "src/App.tsx", "oldText": ">Go<", "newText": ">Sta<"})
        await first.call("read_file", read("src/App.tsx"))  # the next agent makes this same read
        async with stage.agent("second") as second:
            text, failed, _ = await second.call("spotpatch_pending")
            assert failed and "Another agent has taken this job" in text
            text, failed, _ = await second.call("read_file", read("src/App.tsx"))
            assert failed and "spotpatch_pending" in text  # no job of its own: nothing runs
    # the first agent is gone (its MCP server exited): the job waits, its edit kept, for another agent
    assert stage.engine.call("job/get", {"jobId": job_id})["status"] == "running"
    async with stage.agent("third") as third:
        _, failed, data = await third.call("spotpatch_pending")
        assert not failed and data["jobId"] == job_id
        assert "another agent worked on this job before you" in data["task"]  # the excerpts may be stale
        text, failed, _ = await third.call("read_file", read("src/App.tsx"))
        assert not failed and ">Sta<" in text  # nothing was lost; its first agent's identical read is no repeat
        await third.call("replace_text", {"path": "src/App.tsx", "oldText": ">Sta<", "newText": ">Start<"})
        _, failed, status = await third.call("spotpatch_submit", {"summary": "Target 1: Start."})
        assert not failed and status["status"] == "awaiting-review"
    assert_nothing_secret(stage)


@pytest.mark.anyio
async def test_the_pages_cancel_ends_the_agents_job_with_a_clear_answer(stage: Stage) -> None:
    job_id = stage.send_to_agent()
    async with stage.agent() as agent:
        await agent.call("spotpatch_pending")
        await agent.call("read_file", read("src/App.tsx"))
        await anyio.to_thread.run_sync(lambda: stage.engine.call("job/cancel", {"jobId": job_id}))
        text, failed, _ = await agent.call("replace_text", {"path": "src/App.tsx", "oldText": ">Go<",
                                                           "newText": ">Start<"})
        assert failed and "cancelled on the page" in text
        text, failed, _ = await agent.call("spotpatch_submit", {"summary": "done"})
        assert failed and "cancelled" in text
        _, _, status = await agent.call("spotpatch_status")
        assert status["status"] == "cancelled"
    assert (stage.root / "src/App.tsx").read_text() == APP


@pytest.mark.anyio
async def test_without_a_job_or_an_engine_the_agent_is_told_plainly(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", {"src/App.tsx": APP})
    stage = Stage(tmp_path, root)  # the engine is started but never initialized: no channel yet
    try:
        async with stage.agent() as agent:
            assert "no SpotPatch engine is running for this project" in await agent.refused("spotpatch_pending")
        stage.start()
        async with stage.agent() as agent:
            text = await agent.refused("spotpatch_pending")
            assert "Nothing is waiting" in text and "Send to my agent" in text
            assert "spotpatch_pending" in await agent.refused("spotpatch_submit", {"summary": "x"})
    finally:
        stage.engine.stop()


@pytest.mark.anyio
async def test_the_hostile_path_suite_through_mcp_reveals_nothing_and_changes_nothing(tmp_path: Path) -> None:
    """tests/engine/test_hostile_model.py's paths, sent by an agent over MCP instead of a model."""
    world = World(tmp_path)
    stage = Stage(tmp_path, world.root)
    stage.start()
    before = world.digest()
    try:
        paths = list(dict.fromkeys(hostile_paths(world)))  # an identical failing call repeated ends a job
        async with stage.agent() as agent:
            for start in range(0, len(paths), 60):  # one job per 60 reads (maxTurns 64)
                job_id = stage.send_to_agent()
                _, failed, _ = await agent.call("spotpatch_pending", {"jobId": job_id})
                assert not failed
                for path in paths[start:start + 60]:
                    text, failed, _ = await agent.call("read_file", read(path))
                    assert failed and text.startswith(("ERROR TOOL_PATH_DENIED", "ERROR TOOL_ARGUMENTS_INVALID")), \
                        (path, text[:200])
                for glob in ("../**", "/etc/*", "**/.env*", ".git/**", "linkdir/**"):
                    text, _, _ = await agent.call("list_files", {"glob": glob, "maxResults": 100})
                    assert ".env" not in text and "canary" not in text.lower()
                await anyio.to_thread.run_sync(lambda j=job_id: stage.engine.call("job/cancel", {"jobId": j}))
            outside = str(world.outside / "canary.txt")
            for path in (".env", "link.txt", "linkdir/canary.txt", "../outside/canary.txt", outside, ".git/config",
                         "ignored.txt"):
                job_id = stage.send_to_agent()
                await agent.call("spotpatch_pending", {"jobId": job_id})
                text, failed, _ = await agent.call("replace_text", {"path": path, "oldText": "CANARY",
                                                                   "newText": "PWNED"})
                assert failed, path
                snap = await anyio.to_thread.run_sync(lambda j=job_id: stage.engine.wait_status(
                    j, {"failed", "cancelled"}))
                assert snap["status"] == "failed", path
            job_id = stage.send_to_agent()
            await agent.call("spotpatch_pending", {"jobId": job_id})
            text, failed, _ = await agent.call("replace_text", {"path": "src/App.tsx", "oldText": ">Go<",
                                                               "newText": "x" * (1024 * 1024 + 1)})
            assert failed and "LIMIT_EXCEEDED" in text + json.dumps(
                stage.engine.call("job/get", {"jobId": job_id}))
        assert world.digest() == before
        assert_nothing_secret(stage, extra=world.secrets)
    finally:
        stage.engine.stop()


@pytest.mark.anyio
async def test_session_get_tells_the_page_whether_an_agent_is_attached(stage: Stage) -> None:
    def agents() -> dict[str, Any]:
        return stage.engine.call("session/get", {})["agents"]

    assert agents() == {"available": True, "clients": []}
    async with stage.agent("claude-code"):  # attached once the client finished initializing, before any call
        with anyio.fail_after(10):
            while agents()["clients"] != ["claude-code"]:
                await anyio.sleep(0.05)
    with anyio.fail_after(10):  # its session closed: no longer attached
        while agents()["clients"]:
            await anyio.sleep(0.05)


@pytest.mark.anyio
async def test_pending_data_leaves_out_locations_that_are_not_project_paths(stage: Stage) -> None:
    hostile = {"annotationId": "a2", "pageUrl": "/", "targets": [
        {"index": 1, "instruction": "Change it", "source": {"file": str(stage.root / "src/App.tsx"), "line": 1},
         "usageChain": [{"component": "App", "file": "../outside/x.tsx", "line": 2}],
         "element": {"tagName": "button", "text": "Go"}}]}
    stage.send_to_agent(hostile)
    async with stage.agent() as agent:
        _, failed, data = await agent.call("spotpatch_pending")
        assert not failed
        assert data["targets"][0]["source"] is None and data["targets"][0]["usageChain"] == [
            {"component": "App", "at": None}]
    assert_nothing_secret(stage)


@pytest.mark.anyio
async def test_a_failing_required_check_at_submit_tells_the_agent_its_output(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", {"src/App.tsx": APP})
    stage = Stage(tmp_path, root)
    check = {"id": "typecheck", "name": "Typecheck", "command": sys.executable,
             "args": ["-c", "import sys; print('src/App.tsx(1,1): error TS2322: nope'); sys.exit(2)"]}
    stage.start({**CONFIG, "checks": [check]})
    try:
        stage.send_to_agent()
        async with stage.agent() as agent:
            await agent.call("spotpatch_pending")
            tools = {t.name for t in (await agent.session.list_tools()).tools}
            assert "run_check" in tools
            await agent.call("replace_text", {"path": "src/App.tsx", "oldText": ">Go<", "newText": ">Start<"})
            text, failed, status = await agent.call("spotpatch_submit", {"summary": "Target 1: Start."})
            assert failed and status["status"] == "failed"
            assert "Check Typecheck (required): failed" in text and "error TS2322: nope" in text
        assert_nothing_secret(stage)
    finally:
        stage.engine.stop()


@pytest.mark.anyio
async def test_a_job_no_agent_takes_ends_at_its_time_limit_saying_so(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", {"src/App.tsx": APP})
    stage = Stage(tmp_path, root)
    stage.start({**CONFIG, "limits": {"jobTimeoutSec": 2}})
    try:
        job_id = stage.send_to_agent()
        snap = await anyio.to_thread.run_sync(lambda: stage.engine.wait_status(job_id, {"failed"}, timeout=30))
        job = stage.engine.call("job/get", {"jobId": job_id})
        assert job["error"]["code"] == "LIMIT_EXCEEDED"
        assert "No agent took the job within 2 s" in job["error"]["message"]
        assert snap["status"] == "failed"
        async with stage.agent() as agent:  # a late agent is told what happened, not "no such job"
            assert "No agent took the job within 2 s" in await agent.refused("spotpatch_pending", {"jobId": job_id})
            text = await agent.refused("spotpatch_pending", {"jobId": "job_unknown"})
            assert "if the dev server stopped or restarted, the job ended with it" in text
    finally:
        stage.engine.stop()


@pytest.mark.anyio
async def test_a_summary_cannot_reorder_the_review_and_an_overlong_one_is_refused(stage: Stage) -> None:
    job_id = stage.send_to_agent()
    async with stage.agent() as agent:
        await agent.call("spotpatch_pending")
        await agent.call("replace_text", {"path": "src/App.tsx", "oldText": ">Go<", "newText": ">Start<"})
        text, failed, _ = await agent.call("spotpatch_submit", {"summary": "x" * 4001})
        assert failed and "longer than 4000 characters" in text
        assert "summary must be one string" in await agent.refused("spotpatch_submit", {"summary": ["Target 1: x"]})
        _, failed, status = await agent.call("spotpatch_submit", {"summary": "Target 1: \u202egnp.exe\u202c done"})
        assert not failed and status["status"] == "awaiting-review"
    messages = [e for e in stage.engine.events(job_id) if e["kind"] == "message"]
    assert messages and "\u202e" not in messages[-1]["text"] and "<U+202E>gnp.exe<U+202C>" in messages[-1]["text"]
