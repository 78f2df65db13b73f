"""The scripted OpenAI-compatible server itself (tests and the offline demo rely on it)."""

from __future__ import annotations

import json

import httpx
import pytest

from spotpatch_agent.provider.base import AssistantTurn, ToolCallEvent, ToolCallRecord, ToolResultMessage, TurnRequest
from spotpatch_agent.provider.scripted import ScriptedProviderServer, render_chat_turn

from .conftest import REQUEST, run_turn


def test_models_endpoint_lists_the_scripted_models():
    with ScriptedProviderServer(models=["a", "b"]) as server:
        response = httpx.get(server.base_url + "/models")
    assert response.status_code == 200
    assert [m["id"] for m in response.json()["data"]] == ["a", "b"]


def test_exhausted_script_answers_500():
    with ScriptedProviderServer() as server:
        response = httpx.post(server.base_url + "/chat/completions", json={"model": "m"})
        assert response.status_code == 500
        assert response.json()["error"]["message"] == "script exhausted"
        assert server.requests == [{"model": "m"}]


def test_rendered_turn_looks_like_openai():
    events = render_chat_turn(
        {"text": "hi", "toolCalls": [{"id": "call_1", "name": "f", "arguments": {"a": 1}}], "argumentChunks": 2},
        model="m",
    )
    data = [e.removeprefix("data: ").strip() for e in events]
    assert data[-1] == "[DONE]"
    chunks = [json.loads(d) for d in data[:-1]]
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    first_call = [c for c in chunks if c["choices"] and "tool_calls" in c["choices"][0]["delta"]][0]
    assert first_call["choices"][0]["delta"]["tool_calls"][0] == {
        "index": 0, "id": "call_1", "type": "function", "function": {"name": "f", "arguments": ""}}
    assert chunks[-2]["choices"][0]["finish_reason"] == "tool_calls"
    assert chunks[-1]["choices"] == [] and "usage" in chunks[-1]
    no_usage = render_chat_turn({"text": "bye"}, model="m", include_usage=False)
    assert json.loads(no_usage[-2].removeprefix("data: "))["choices"][0]["finish_reason"] == "stop"


def test_start_stop_are_idempotent():
    server = ScriptedProviderServer()
    server.start()
    url = server.base_url
    server.start()
    assert server.base_url == url
    server.stop()
    server.stop()
    with pytest.raises(RuntimeError):
        _ = server.base_url


@pytest.mark.anyio
async def test_callable_turn_reacts_to_the_request(server, adapter):
    def second(body: dict) -> dict:
        result = body["messages"][-1]
        return {"text": f"got {result['content']} for {result['tool_call_id']}"}

    server.chunk_delay = 0.001
    server.add_turns({"toolCalls": [{"id": "call_1", "name": "read_file", "arguments": '{"path": "a"}'}]}, second)
    events = await run_turn(adapter)
    [call] = [e for e in events if isinstance(e, ToolCallEvent)]
    follow_up = TurnRequest(
        system=REQUEST.system,
        items=(*REQUEST.items, AssistantTurn("", (ToolCallRecord(call.id, call.name, call.arguments_json),)),
               ToolResultMessage(call.id, "42")),
        tools=REQUEST.tools,
        model=REQUEST.model,
    )
    events = await run_turn(adapter, follow_up)
    assert "".join(e.text for e in events[:-1]) == "got 42 for call_1"
    assert server.remaining == 0 and server.disconnects == 0
