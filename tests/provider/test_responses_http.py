"""The Responses request on the wire and the secret hygiene of the error paths only this format has
(docs/design.md §11), against the real local scripted server. What the HTTP boundary does for both adapters
is tested in ``test_shared_http.py``."""

from __future__ import annotations

import json
import traceback

import pytest

from spotpatch_agent.provider.base import (
    AssistantTurn,
    ToolCallEvent,
    ToolCallRecord,
    ToolResultMessage,
    TurnRequest,
    UserMessage,
)
from spotpatch_agent.provider.responses import ResponsesAdapter

from .conftest import CANARY_KEY, REQUEST, raises, run_turn

pytestmark = pytest.mark.anyio


@pytest.fixture
def api() -> str:
    return "responses"


async def test_request_body_and_headers(server):
    server.add_turns({"toolCalls": [{"id": "call_2", "name": "read_file", "arguments": {"path": "b"}}]})
    adapter = ResponsesAdapter(base_url=server.base_url + "/", api_key=CANARY_KEY, headers={"X-Title": "SpotPatch"})
    request = TurnRequest(
        system="sys",
        items=(UserMessage("go"), AssistantTurn("", (ToolCallRecord("call_1", "read_file", '{"path": "a"}'),)),
               ToolResultMessage("call_1", "contents")),
        tools=REQUEST.tools, model="scripted-model", tool_choice="required", max_output_tokens=256,
    )
    try:
        events = await run_turn(adapter, request)
    finally:
        await adapter.aclose()
    assert [e.id for e in events if isinstance(e, ToolCallEvent)] == ["call_2"]
    [body] = server.requests
    assert body["model"] == "scripted-model" and body["stream"] is True and body["store"] is False
    assert "previous_response_id" not in body and body["instructions"] == "sys"
    assert body["tool_choice"] == "required" and body["parallel_tool_calls"] is True
    assert body["max_output_tokens"] == 256
    assert body["tools"] == [{"type": "function", "name": "read_file", "description": "Read a file.",
                              "parameters": REQUEST.tools[0].parameters, "strict": True}]
    assert body["input"][1:] == [
        {"type": "function_call", "call_id": "call_1", "name": "read_file", "arguments": '{"path": "a"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": "contents"}]
    [headers] = server.headers
    assert headers["authorization"] == f"Bearer {CANARY_KEY}" and headers["x-title"] == "SpotPatch"
    assert headers["accept"] == "text/event-stream"


def _stream(*events: dict) -> dict:
    return {"raw": [f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events]}


@pytest.mark.parametrize("turn", [
    _stream({"type": "response.failed", "response": {"status": "failed", "error": {
        "code": f"invalid_{CANARY_KEY}", "message": f"Incorrect API key provided: {CANARY_KEY}"}}}),
    _stream({"type": "error", "code": "invalid_api_key", "message": f"Bearer {CANARY_KEY} is not valid"}),
    _stream({"type": "response.incomplete", "response": {"status": "incomplete",
                                                         "incomplete_details": {"reason": CANARY_KEY}}}),
    _stream({"type": "response.output_item.done", "output_index": 0, "item": {
        "id": "fc_1", "type": "function_call", "call_id": CANARY_KEY, "name": "f", "arguments": "{}"}},
        {"type": "response.output_item.done", "output_index": 1, "item": {
            "id": "fc_2", "type": "function_call", "call_id": CANARY_KEY, "name": "f", "arguments": "{}"}},
        {"type": "response.completed", "response": {"status": "completed", "output": []}}),
], ids=["response.failed", "error-event", "incomplete-reason", "duplicate-call-id"])
async def test_the_key_never_appears_in_a_responses_error(server, adapter, turn):
    server.add_turns(turn)
    err = await raises(adapter)
    text = "\n".join([str(err), repr(err), "".join(traceback.format_exception(err)), str(err.to_data())])
    assert CANARY_KEY not in text and CANARY_KEY[:-1] not in text
    assert err.__cause__ is None


async def test_no_key_prefix_survives_when_a_long_provider_text_is_cut(server):
    key = "zz-custom-secret-0123456789abcdef"  # not key-shaped: only the exact value is known
    server.add_turns(_stream({"type": "response.incomplete", "response": {
        "status": "incomplete", "incomplete_details": {"reason": "x" * 50 + key}}}))
    adapter = ResponsesAdapter(base_url=server.base_url, api_key=key)
    try:
        err = await raises(adapter)
    finally:
        await adapter.aclose()
    assert key[:8] not in err.message and "[REDACTED]"[:5] in err.message
