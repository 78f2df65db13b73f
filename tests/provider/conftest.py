"""Provider tests: a real local HTTP server (ScriptedProviderServer) and the production adapter code path."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import aclosing
from typing import Any

import pytest

from spotpatch_agent.provider.base import ProviderEvent, ToolSpec, TurnRequest, UserMessage
from spotpatch_agent.provider.chat import ChatCompletionsAdapter
from spotpatch_agent.provider.scripted import ScriptedProviderServer

#: A key value that must never show up in any error text.
CANARY_KEY = "sk-canary-7Yq3ZpL0vW2xN9tR4sB8"

REQUEST = TurnRequest(
    system="You edit files.",
    items=(UserMessage("Make the button primary."),),
    tools=(ToolSpec("read_file", "Read a file.", {"type": "object", "properties": {}, "additionalProperties": False}),),
    model="scripted-model",
)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def server() -> Iterator[ScriptedProviderServer]:
    with ScriptedProviderServer() as srv:
        yield srv


@pytest.fixture
async def adapter(server: ScriptedProviderServer) -> AsyncIterator[ChatCompletionsAdapter]:
    a = ChatCompletionsAdapter(base_url=server.base_url, api_key=CANARY_KEY, timeout=5, idle_timeout=5)
    try:
        yield a
    finally:
        await a.aclose()


async def run_turn(adapter: ChatCompletionsAdapter, request: TurnRequest = REQUEST) -> list[ProviderEvent]:
    """All events of one turn."""
    async with aclosing(adapter.stream_turn(request)) as events:
        return [event async for event in events]


def chunk(delta: dict[str, Any] | None = None, finish: str | None = None, **extra: Any) -> str:
    """One ``chat.completion.chunk`` SSE event with a single choice."""
    body = {"id": "chatcmpl-t", "object": "chat.completion.chunk", "model": "m",
            "choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}], **extra}
    return f"data: {json.dumps(body)}\n\n"


def call(index: int | None = None, id: str | None = None, name: str | None = None, args: Any = None) -> str:
    """A chunk whose delta holds one tool-call fragment (only the given fields are present)."""
    fragment: dict[str, Any] = {}
    if index is not None:
        fragment["index"] = index
    if id is not None:
        fragment["id"] = id
        fragment["type"] = "function"
    function: dict[str, Any] = {}
    if name is not None:
        function["name"] = name
    if args is not None:
        function["arguments"] = args
    if function:
        fragment["function"] = function
    return chunk({"tool_calls": [fragment]})


DONE = "data: [DONE]\n\n"
