"""Provider tests: a real local HTTP server (ScriptedProviderServer) and the production adapter code path."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import aclosing
from typing import Any

import pytest

from spotpatch_agent.errors import ProviderError
from spotpatch_agent.provider.base import ProviderEvent, ToolCallEvent, ToolSpec, TurnEnd, TurnRequest, UserMessage
from spotpatch_agent.provider.chat import ChatCompletionsAdapter
from spotpatch_agent.provider.responses import ResponsesAdapter
from spotpatch_agent.provider.scripted import ScriptedProviderServer

#: A key value that must never show up in any error text.
CANARY_KEY = "sk-canary-7Yq3ZpL0vW2xN9tR4sB8"

REQUEST = TurnRequest(
    system="You edit files.",
    items=(UserMessage("Make the button primary."),),
    tools=(ToolSpec("read_file", "Read a file.", {"type": "object", "properties": {}, "additionalProperties": False}),),
    model="scripted-model",
)
#: A plain text turn that ends normally.
OK_TURN = {"text": "ok", "textChunks": 1, "finishReason": "stop"}
#: Seconds within which a cancelled turn ends and the server sees its connection closed. Broken, the
#: connection stays open (the server never sees it close) or the turn runs on to the adapter's 5 s idle
#: timeout (``make_adapter``) and fails with it. Both are in-process and take milliseconds; 2 s leaves room for
#: a loaded 2-core CI (the old 1 s had less) and still fails a cancel that waits for that timeout.
CANCEL_CLOSES_WITHIN = 2.0


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def server() -> Iterator[ScriptedProviderServer]:
    with ScriptedProviderServer() as srv:
        yield srv


@pytest.fixture
def api() -> str:
    """The wire format of the ``adapter`` fixture; a module overrides this fixture (or parametrises it)."""
    return "chat"


@pytest.fixture
async def adapter(api: str, server: ScriptedProviderServer) -> AsyncIterator[ChatCompletionsAdapter | ResponsesAdapter]:
    from .apis import make_adapter  # apis imports this module

    a = make_adapter(api, server)
    try:
        yield a
    finally:
        await a.aclose()


async def run_turn(adapter: ChatCompletionsAdapter | ResponsesAdapter,
                   request: TurnRequest = REQUEST) -> list[ProviderEvent]:
    """All events of one turn."""
    async with aclosing(adapter.stream_turn(request)) as events:
        return [event async for event in events]


async def raises(adapter: ChatCompletionsAdapter | ResponsesAdapter, request: TurnRequest = REQUEST) -> ProviderError:
    """The :class:`ProviderError` that one turn raises."""
    with pytest.raises(ProviderError) as info:
        await run_turn(adapter, request)
    return info.value


async def events_of(server: ScriptedProviderServer, adapter: ChatCompletionsAdapter | ResponsesAdapter,
                    *pieces: str) -> list[ProviderEvent]:
    """All events of one turn served as exactly these raw SSE ``pieces``."""
    server.add_turns({"raw": list(pieces)})
    return await run_turn(adapter)


def calls_of(events) -> list[tuple[str, str, object]]:
    """``(id, name, parsed arguments)`` of the tool calls, each of which must be valid."""
    out = []
    for e in events:
        if isinstance(e, ToolCallEvent):
            assert e.invalid is None, e.invalid
            out.append((e.id, e.name, json.loads(e.arguments_json)))
    return out


def end_of(events) -> TurnEnd:
    """The one :class:`TurnEnd`, which must be the last event."""
    assert isinstance(events[-1], TurnEnd)
    assert sum(isinstance(e, TurnEnd) for e in events) == 1
    return events[-1]


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
