"""The Chat Completions request on the wire (body and headers, docs/design.md §11), against the real local
scripted server. What the HTTP boundary does for both adapters is tested in ``test_shared_http.py``."""

from __future__ import annotations

import pytest

from spotpatch_agent.provider.base import (
    AssistantTurn,
    ToolCallEvent,
    ToolCallRecord,
    ToolResultMessage,
    TurnRequest,
    UserMessage,
)
from spotpatch_agent.provider.chat import ChatCompletionsAdapter

from .conftest import CANARY_KEY, REQUEST, run_turn

pytestmark = pytest.mark.anyio


async def test_request_body_and_headers(server):
    server.add_turns({"toolCalls": [{"id": "call_2", "name": "read_file", "arguments": {"path": "b"}}]})
    adapter = ChatCompletionsAdapter(base_url=server.base_url + "/", api_key=CANARY_KEY,
                                     headers={"X-Title": "SpotPatch"})
    request = TurnRequest(
        system="sys",
        items=(
            UserMessage("go"),
            AssistantTurn("", (ToolCallRecord("call_1", "read_file", '{"path": "a"}'),)),
            ToolResultMessage("call_1", "contents"),
        ),
        tools=REQUEST.tools,
        model="scripted-model",
        tool_choice="required",
        max_output_tokens=256,
    )
    try:
        events = await run_turn(adapter, request)
    finally:
        await adapter.aclose()
    assert [e.id for e in events if isinstance(e, ToolCallEvent)] == ["call_2"]
    [body] = server.requests
    assert body["model"] == "scripted-model" and body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["tool_choice"] == "required" and body["parallel_tool_calls"] is True
    assert body["max_completion_tokens"] == 256 and "max_tokens" not in body
    assert body["tools"] == [{"type": "function", "function": {
        "name": "read_file", "description": "Read a file.", "parameters": REQUEST.tools[0].parameters, "strict": True}}]
    assert body["messages"][2] == {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "a"}'}}]}
    assert body["messages"][3] == {"role": "tool", "tool_call_id": "call_1", "content": "contents"}
    [headers] = server.headers
    assert headers["authorization"] == f"Bearer {CANARY_KEY}" and headers["x-title"] == "SpotPatch"
    assert headers["accept"] == "text/event-stream"
