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


def _responses_events(turn: dict) -> list[dict]:
    from spotpatch_agent.provider.scripted import render_responses_turn

    out = []
    for event in render_responses_turn(turn, model="m", turn_no=2):
        name, data = event.split("\n")[:2]
        payload = json.loads(data.removeprefix("data: "))
        assert name == f"event: {payload['type']}"
        out.append(payload)
    return out


def test_rendered_responses_turn_looks_like_openai():
    events = _responses_events(
        {"text": "hi", "toolCalls": [{"id": "call_1", "name": "f", "arguments": {"a": 1}}], "argumentChunks": 2})
    kinds = [e["type"] for e in events]
    assert kinds[:2] == ["response.created", "response.in_progress"] and kinds[-1] == "response.completed"
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    [added] = [e for e in events if e["type"] == "response.output_item.added" and e["item"]["type"] == "function_call"]
    assert added["item"] == {"id": "fc_scripted_2_0", "type": "function_call", "status": "in_progress",
                             "arguments": "", "call_id": "call_1", "name": "f"}
    assert added["output_index"] == 1  # the message item is output 0
    deltas = [e["delta"] for e in events if e["type"] == "response.function_call_arguments.delta"]
    assert "".join(deltas) == '{"a": 1}' and len(deltas) == 2
    final = events[-1]["response"]
    assert final["status"] == "completed" and [i["type"] for i in final["output"]] == ["message", "function_call"]
    assert final["usage"]["input_tokens"] == 100 and final["usage"]["output_tokens"] == 20
    cut = _responses_events({"text": "long", "finishReason": "length"})[-1]
    assert cut["type"] == "response.incomplete"
    assert cut["response"]["incomplete_details"] == {"reason": "max_output_tokens"}


def test_one_script_serves_both_endpoints():
    with ScriptedProviderServer([{"text": "a"}, {"text": "b"}]) as server:
        chat = httpx.post(server.base_url + "/chat/completions", json={"model": "m", "stream": True})
        responses = httpx.post(server.base_url + "/responses", json={"model": "m", "stream": True})
    assert chat.headers["content-type"].startswith("text/event-stream") and '"content": "a"' in chat.text
    assert "event: response.output_text.delta" in responses.text and '"delta": "b"' in responses.text
    assert "data: [DONE]" not in responses.text
