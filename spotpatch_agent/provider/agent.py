"""Turns from an attached coding agent (issue 28): the :class:`~spotpatch_agent.provider.base.ProviderAdapter` of a
job whose tool calls come from an agent the developer already uses (over MCP) instead of from a model over HTTP.

The job runs exactly as a model's job does — the same loop (turn and call limits, the retry-once rule, the
stuck-call guard, repeated reads), the same six tools, path policy, worktree, changeset validation, checks,
review, ledger — only the turns come from here: each :meth:`AgentTurns.call_tool` is one turn carrying one tool
call, answered with the loop's own result text (the same text a model reads, "ERROR <code>: …" when it
failed); :meth:`AgentTurns.submit` is the final turn, its summary the job's final message.

One call at a time per job (an agent's calls are serial; a second caller waits its turn). When the job ends for
any reason (the user's Cancel on the page, a limit, a failure, the end of the review), :meth:`aclose` answers
every waiting caller with :class:`AgentJobEnded` and refuses later calls: an agent never waits on a job that
is gone, and nothing it sends after that runs.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field

import anyio

from spotpatch_agent.provider.base import (
    ProviderEvent,
    TextDelta,
    ToolCallEvent,
    ToolResultMessage,
    ToolSpec,
    TurnEnd,
    TurnRequest,
    UserMessage,
)
from spotpatch_agent.provider.calls import ArgumentBuffer, tool_call_event

#: Longest summary an agent's submit carries (the loop keeps 16 KiB of a final message).
MAX_SUMMARY_CHARS = 4000


class AgentJobEnded(Exception):
    """The job is no longer taking calls (cancelled on the page, failed, or finished); ``str()`` says why."""


@dataclass
class _Call:
    #: The call as the model adapters make it (calls.tool_call_event: size bound, one JSON object, a name).
    event: ToolCallEvent
    done: anyio.Event = field(default_factory=anyio.Event)
    output: str | None = None


@dataclass(frozen=True)
class _Submit:
    summary: str


@dataclass(frozen=True)
class AgentResult:
    """One call's answer: the loop's result text, and whether it reports a failure (the MCP ``isError``)."""

    output: str
    failed: bool


class AgentTurns:
    """The adapter of one agent-driven job (module docstring). ``client``: the agent's name as its MCP client
    reported it (the ledger's provider is ``mcp:<client>``)."""

    def __init__(self, client: str | None = None) -> None:
        #: Who took the job (None until an agent takes it; given here, the job is taken from the start).
        self.client = client
        self._send, self._recv = anyio.create_memory_object_stream[_Call | _Submit](1)
        self._serial = anyio.Lock()
        self._waiting: dict[str, _Call] = {}
        self._ended: str | None = None
        self._started = anyio.Event()
        self._taken = anyio.Event()
        if client is not None:
            self._taken.set()
        self._calls_made = 0
        #: The job's first message and system prompt, once its loop asked for the first turn: what a model would
        #: have been given (``spotpatch_pending`` hands the same to the agent).
        self.task: str | None = None
        self.system: str | None = None
        #: The tools the job offers (names, descriptions and exact JSON Schemas).
        self.tools: tuple[ToolSpec, ...] = ()

    async def wait_started(self) -> None:
        """Until the job's task, system prompt and tools are known (:meth:`offer`, or the loop's first turn) or the
        job ended."""
        await self._started.wait()

    def offer(self, task: str, system: str, tools: tuple[ToolSpec, ...]) -> None:
        """The job is ready for an agent: what its first turn will carry (engine/job.py, before the loop)."""
        self.task, self.system, self.tools = task, system, tools
        self._started.set()

    def take(self, client: str) -> None:
        """An agent named ``client`` takes the job (once; a later take by another agent is the hub's to refuse)."""
        self._refuse_if_ended()
        if self.client is None:
            self.client = client
        self._taken.set()

    async def wait_taken(self) -> str:
        """Until an agent took the job; returns its name. Raises :class:`AgentJobEnded` when the job ended first."""
        await self._taken.wait()
        self._refuse_if_ended()
        assert self.client is not None
        return self.client

    @property
    def ended(self) -> str | None:
        """Why the job no longer takes calls, or None while it does."""
        return self._ended

    async def call_tool(self, name: str, arguments_json: str) -> AgentResult:
        """Run one tool call as the job's next turn; returns the loop's answer. Raises :class:`AgentJobEnded`."""
        async with self._serial:
            self._refuse_if_ended()
            arguments = ArgumentBuffer()
            arguments.add(arguments_json)
            call = _Call(tool_call_event("agent_" + secrets.token_hex(8), name, arguments))
            self._waiting[call.event.id] = call
            try:
                await self._hand_over(call)
                await call.done.wait()
            finally:
                self._waiting.pop(call.event.id, None)
            if call.output is None:
                raise AgentJobEnded(self._ended or "The job ended.")
            self._calls_made += 1
            return AgentResult(output=call.output, failed=call.output.startswith("ERROR "))

    async def submit(self, summary: str) -> None:
        """The agent is done: ``summary`` becomes the job's final message and the job goes on to validation,
        checks and review. Raises :class:`AgentJobEnded`, or ValueError before any tool call (a job's first
        turn must call a tool) or for an empty summary."""
        summary = summary.strip()
        if not summary:
            raise ValueError("The summary is empty: say what you changed for each target.")
        async with self._serial:
            self._refuse_if_ended()
            if self._calls_made == 0:
                raise ValueError("Nothing was done yet: read and edit through the SpotPatch tools first, then submit.")
            await self._hand_over(_Submit(summary[:MAX_SUMMARY_CHARS]))

    async def _hand_over(self, action: _Call | _Submit) -> None:
        try:
            await self._send.send(action)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            raise AgentJobEnded(self._ended or "The job ended.") from None

    def _refuse_if_ended(self) -> None:
        if self._ended is not None:
            raise AgentJobEnded(self._ended)

    async def stream_turn(self, request: TurnRequest) -> AsyncGenerator[ProviderEvent, None]:
        if self.task is None:
            first = request.items[0] if request.items else None
            self.task = first.text if isinstance(first, UserMessage) else ""
            self.system, self.tools = request.system, request.tools
            self._started.set()
        # The previous turn's answers come with this request: hand each to the caller that waits for it.
        for item in reversed(request.items):
            if not isinstance(item, ToolResultMessage):
                break
            waiting = self._waiting.get(item.call_id)
            if waiting is not None and not waiting.done.is_set():
                waiting.output = item.output
                waiting.done.set()
        try:
            action = await self._recv.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise AgentJobEnded(self._ended or "The job ended.") from None
        if isinstance(action, _Submit):
            yield TextDelta(action.summary)
            yield TurnEnd(stop_reason="stop")
            return
        yield action.event
        yield TurnEnd(stop_reason="tool_calls")

    def end(self, reason: str) -> None:
        """No more calls: every waiting caller gets :class:`AgentJobEnded` with ``reason``."""
        if self._ended is None:
            self._ended = reason
        self._send.close()
        self._recv.close()
        for call in list(self._waiting.values()):
            call.done.set()  # output None: the caller raises AgentJobEnded
        self._started.set()
        self._taken.set()

    async def aclose(self) -> None:
        self.end("The job ended.")
