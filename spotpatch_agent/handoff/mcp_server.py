"""``spotpatch-agent mcp``: the MCP stdio server an MCP client (Claude Code, Codex CLI, VS Code, Cursor…) starts as its
own child process (docs/mcp.md). Built on the official Python SDK's low-level server (``mcp`` on PyPI).

It holds no job state of its own: every tool forwards to the project's engine — the one the Vite plugin runs —
over the agent channel (handoff/channel.py), and the engine runs the job exactly as a model's (the same six tools
and refusals, the job's isolated worktree, validation, checks, review on the page; handoff/hub.py). Tools:

- ``spotpatch_pending``: take the job the user sent from the page ("Send to my agent"): its targets and
  instructions as data, and the job's first message (what a model would read) as text;
- the six SpotPatch tools (``read_file``, ``list_files``, ``search_text``, ``replace_text``, ``apply_patch``,
  ``run_check``) with their exact schemas, in that job's worktree;
- ``spotpatch_submit``: done — the job goes through validation and checks, and the page shows the review;
- ``spotpatch_status``: the job's state and the user's decision (Apply, Revert, Cancel).

stdout carries MCP frames only; diagnostics go to stderr. The engine is found from ``--project`` (default: the
current directory): the socket of its git repository. Without a running engine every tool answers so, plainly.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

import anyio
import anyio.abc

from spotpatch_agent import __version__
from spotpatch_agent.handoff.channel import (
    ChannelClient,
    ChannelError,
    ChannelUnavailable,
    repository_toplevel,
    socket_path,
)

log = logging.getLogger("spotpatch.mcp")

#: The job tools, in the engine's order (their schemas: tools/registry.py, the same a model gets).
JOB_TOOLS = ("read_file", "list_files", "search_text", "replace_text", "apply_patch", "run_check")

INSTRUCTIONS = (
    "SpotPatch hands you a change the user asked for on their running web page. Call spotpatch_pending to take "
    "the job (the picked elements, each with its instruction and source location). Then work ONLY through this "
    "server's read_file, list_files, search_text, replace_text, apply_patch and run_check tools: they act on an "
    "isolated copy of the project, never on the user's files, and your own file tools would bypass the review. "
    "Before submitting, run the project's checks with run_check (when the job offers it) and fix what fails: a "
    "required check that fails at submit ends the job. When done, call spotpatch_submit with a one-line summary "
    "per target. The user reviews the diff on the page and decides whether to Apply; spotpatch_status tells you "
    "what they decided."
)

_PENDING_SCHEMA = {"type": "object", "additionalProperties": False, "properties": {
    "jobId": {"type": "string", "description": "A job id from an earlier answer; absent: the oldest waiting job."}}}
_SUBMIT_SCHEMA = {"type": "object", "additionalProperties": False, "required": ["summary"], "properties": {
    "summary": {"type": "string", "minLength": 1, "maxLength": 4000,
                "description": "What you changed, one line per target (the page shows it beside the diff)."}}}
_STATUS_SCHEMA = {"type": "object", "additionalProperties": False, "properties": {
    "jobId": {"type": "string", "description": "Absent: the job you took."}}}


#: Seconds between two attempts to reach the engine while none answers (the page shows an attached agent only
#: while this process is connected).
RETRY_SEC = 2.0


class Bridge:
    """One MCP session's link to the engine: the channel (opened when the client finished initializing, and again
    whenever the engine restarted, so that the page knows an agent is attached) and the job this session took."""

    def __init__(self, project: Path, tg: anyio.abc.TaskGroup) -> None:
        self.project = project
        self._tg = tg
        self._channel: ChannelClient | None = None
        self._lock = anyio.Lock()
        self.job_id: str | None = None
        #: The tools the taken job offers (``run_check`` only with checks).
        self.job_tools: set[str] = set()
        self.client = "agent"

    def attach(self, client: str) -> None:
        """The MCP client ``client`` is ready: stay connected to the engine from now on."""
        self.client = client
        self._tg.start_soon(self._keep_attached)

    async def _keep_attached(self) -> None:
        while True:
            try:
                await (await self._open()).wait_closed()
            except (ChannelUnavailable, ChannelError, OSError):
                pass
            await anyio.sleep(RETRY_SEC)

    async def _open(self) -> ChannelClient:
        async with self._lock:
            if self._channel is None or self._channel.closed is not None:
                self._channel = None
                path = socket_path(await repository_toplevel(self.project))
                opened = await ChannelClient.connect(path)
                self._tg.start_soon(opened.run)
                await opened.request("agent/hello", {"client": self.client})
                self._channel = opened
            return self._channel

    async def request(self, client: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if client != self.client and self._channel is None:
            self.client = client
        return await (await self._open()).request(method, params)


def _text(text: str, *, error: bool = False, data: dict[str, Any] | None = None) -> Any:
    import mcp_types as types

    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=error,
                                structured_content=data)


def _pending_text(taken: dict[str, Any]) -> str:
    return (f"You took SpotPatch job {taken['jobId']}. Work only through this server's tools (they act on the "
            "job's isolated worktree), then call spotpatch_submit.\n\n" + str(taken.get("task") or ""))


def build_server(bridge_box: list[Bridge]) -> Any:
    """The low-level MCP server; ``bridge_box[0]`` is the session's :class:`Bridge` (set once running)."""
    import mcp_types as types
    from mcp.server.lowlevel import Server

    from spotpatch_agent.tools.registry import tool_specs

    specs = tool_specs(JOB_TOOLS)
    tools = [
        types.Tool(name="spotpatch_pending", input_schema=_PENDING_SCHEMA,
                   description="Take the job the user sent from their page with 'Send to my agent': the picked "
                               "elements, their instructions, source locations, excerpts and the project's "
                               "conventions. Call this first."),
        *(types.Tool(name=s.name, description=s.description, input_schema=s.parameters) for s in specs),
        types.Tool(name="spotpatch_submit", input_schema=_SUBMIT_SCHEMA,
                   description="Finish the job: your changes are validated, the project's checks run, and the user "
                               "reviews the diff on the page. Returns the job's state after validation."),
        types.Tool(name="spotpatch_status", input_schema=_STATUS_SCHEMA,
                   description="The job's state and the user's decision (applied, reverted, cancelled)."),
    ]

    async def list_tools(ctx: Any, params: Any) -> Any:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: Any) -> Any:
        bridge = bridge_box[0]
        info = ctx.session.client_params.client_info if ctx.session.client_params is not None else None
        client = getattr(info, "name", None) or "agent"
        arguments = params.arguments if isinstance(params.arguments, dict) else {}
        try:
            return await _dispatch(bridge, client, params.name, arguments)
        except ChannelUnavailable as exc:
            return _text(f"SpotPatch: {exc}", error=True)
        except ChannelError as exc:
            return _text(f"ERROR {exc.code}: {exc}", error=True)

    async def initialized(ctx: Any, params: Any) -> None:
        info = ctx.session.client_params.client_info if ctx.session.client_params is not None else None
        bridge_box[0].attach(getattr(info, "name", None) or "agent")

    server = Server("spotpatch", version=__version__, instructions=INSTRUCTIONS, on_list_tools=list_tools,
                    on_call_tool=call_tool)
    server.add_notification_handler("notifications/initialized", types.NotificationParams, initialized)
    return server


async def _dispatch(bridge: Bridge, client: str, name: str, arguments: dict[str, Any]) -> Any:
    if name == "spotpatch_pending":
        params = {"jobId": arguments["jobId"]} if "jobId" in arguments else {}  # a wrong type: the engine refuses
        taken = await bridge.request(client, "agent/take", params)
        bridge.job_id = str(taken["jobId"])
        bridge.job_tools = {str(t.get("name")) for t in taken.get("tools", []) if isinstance(t, dict)}
        pending = await bridge.request(client, "agent/pending", {})
        mine: dict[str, Any] = next((j for j in pending.get("jobs", []) if j.get("jobId") == bridge.job_id), {})
        return _text(_pending_text(taken), data={"jobId": bridge.job_id, "targets": mine.get("targets", []),
                                                 "task": taken.get("task")})
    if name == "spotpatch_status":
        job_id = arguments.get("jobId") if isinstance(arguments.get("jobId"), str) else bridge.job_id
        if job_id is None:
            return _text("You have not taken a job yet: call spotpatch_pending.", error=True)
        status = await bridge.request(client, "agent/status", {"jobId": job_id})
        return _text(_status_text(status), data=status)
    if bridge.job_id is None:
        return _text("Take the job first: call spotpatch_pending.", error=True)
    if name == "spotpatch_submit":
        summary = arguments.get("summary")
        status = await bridge.request(client, "agent/submit", {"jobId": bridge.job_id,
                                                                "summary": summary})  # a wrong type: the engine says so
        return _text(_status_text(status), error=status.get("status") == "failed", data=status)
    if name not in JOB_TOOLS:
        return _text(f"ERROR TOOL_ARGUMENTS_INVALID: unknown tool {name[:64]!r}.", error=True)
    if bridge.job_tools and name not in bridge.job_tools:
        return _text(f"ERROR TOOL_ARGUMENTS_INVALID: this job does not offer {name} (run_check: the project "
                     "configures no checks). Its tools: " + ", ".join(sorted(bridge.job_tools)) + ".", error=True)
    result = await bridge.request(client, "agent/call", {"jobId": bridge.job_id, "name": name,
                                                          "arguments": arguments})
    return _text(str(result.get("output", "")), error=bool(result.get("isError")))


def _status_text(status: dict[str, Any]) -> str:
    lines = [f"Job {status.get('jobId')}: {status.get('status')}. {status.get('meaning', '')}".rstrip()]
    if status.get("message"):
        lines.append(str(status["message"]))
    error = status.get("error")
    if isinstance(error, dict) and error.get("message"):
        lines.append(f"Error {error.get('code')}: {error['message']}")
    files = status.get("files") or []
    if files:
        lines.append("Files: " + ", ".join(f"{f['path']} (+{f['added']} -{f['removed']})" for f in files))
    for check in status.get("checks") or []:
        if check.get("status") != "passed":
            lines.append(f"Check {check.get('name')} ({'required' if check.get('required') else 'optional'}): "
                         f"{check.get('status')}")
            if check.get("output"):
                lines.append(str(check["output"]))
    return "\n".join(lines)


async def serve_mcp(project: Path) -> None:
    from mcp.server.stdio import stdio_server

    box: list[Bridge] = []
    server = build_server(box)
    async with anyio.create_task_group() as tg:
        box.append(Bridge(project, tg))
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())
        tg.cancel_scope.cancel()


def mcp_command(project: Path) -> int:
    """``spotpatch-agent mcp``: serve MCP on stdio until the client closes it; exit code 0."""
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="spotpatch-agent mcp: %(message)s")
    try:
        anyio.run(serve_mcp, project.resolve())
    except KeyboardInterrupt:
        pass
    return 0
