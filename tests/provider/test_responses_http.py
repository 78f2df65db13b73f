"""HTTP boundary of the Responses adapter against the real local scripted server: the request on the wire,
status mapping and retries that the shared suite does not repeat, and secret hygiene of the error paths
only this format has (docs/design.md §11)."""

from __future__ import annotations

import json
import socket
import time
import traceback

import pytest

from spotpatch_agent.protocol.errors import ErrorCode
from spotpatch_agent.provider.base import (AssistantTurn, TextDelta, ToolCallEvent, ToolCallRecord, ToolResultMessage,
                                           TurnRequest, UserMessage)
from spotpatch_agent.provider.responses import ResponsesAdapter

from .conftest import CANARY_KEY, OK_TURN, REQUEST, raises, run_turn

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


async def test_no_api_key_sends_no_authorization(server):
    server.add_turns(OK_TURN)
    adapter = ResponsesAdapter(base_url=server.base_url, api_key=None)
    try:
        await run_turn(adapter)
    finally:
        await adapter.aclose()
    assert "authorization" not in server.headers[0]


async def test_404_says_the_model_may_be_missing(server, adapter):
    server.add_turns({"status": 404, "body": {"error": {"message": "model not found"}}})
    err = await raises(adapter)
    assert err.code == ErrorCode.PROVIDER_UNAVAILABLE and not err.retryable
    assert "'scripted-model' may be missing" in err.message and len(server.requests) == 1


async def test_400_with_context_length_is_limit_exceeded(server, adapter):
    server.add_turns({"status": 400, "body": {"error": {"message": "Your input exceeds the context window of this "
                                                                   "model.", "code": "context_length_exceeded"}}})
    err = await raises(adapter)
    assert err.code == ErrorCode.LIMIT_EXCEEDED and "HTTP 400" in err.message


async def test_other_4xx_is_a_protocol_error_not_retried(server, adapter):
    server.add_turns({"status": 400, "body": {"error": {"message": "Unknown parameter: 'store'."}}}, OK_TURN)
    err = await raises(adapter)
    assert err.code == ErrorCode.PROVIDER_PROTOCOL and "Unknown parameter" in err.message
    assert len(server.requests) == 1


async def test_retry_honours_retry_after_seconds_and_x_should_retry(server, adapter):
    server.add_turns({"status": 503, "headers": {"retry-after": "0.2"}}, OK_TURN)
    started = time.monotonic()
    assert (await run_turn(adapter))[0] == TextDelta("ok")
    assert time.monotonic() - started >= 0.19 and len(server.requests) == 2
    server.add_turns({"status": 503, "headers": {"x-should-retry": "false"}}, OK_TURN)
    err = await raises(adapter)
    assert err.code == ErrorCode.PROVIDER_UNAVAILABLE and len(server.requests) == 3


async def test_an_html_answer_is_a_protocol_error(server, adapter):
    server.add_turns({"status": 200, "body": "<html>proxy login</html>", "headers": {"Content-Type": "text/html"}})
    err = await raises(adapter)
    assert err.code == ErrorCode.PROVIDER_PROTOCOL and "text/html" in err.message


async def test_connection_refused_is_unavailable():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    adapter = ResponsesAdapter(base_url=f"http://127.0.0.1:{port}/v1?api-version=1", api_key=CANARY_KEY, timeout=2)
    try:
        err = await raises(adapter)
    finally:
        await adapter.aclose()
    text = str(err) + "".join(traceback.format_exception(err))
    assert err.code == ErrorCode.PROVIDER_UNAVAILABLE and err.retryable
    assert CANARY_KEY not in text and "api-version" not in text and str(port) not in text


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
