"""Real llama.cpp ``llama-server`` streams (fixtures/llamacpp/README.md) through the production adapters
and the probe over a real local HTTP server (issue 16 parts 3 and 4): a text answer to a forced call cut
at the output cap, the usage chunk with ``timings``, a real tool call, a Responses text answer, and an
in-stream server error after a complete call (asked again; the call never surfaces from the void attempt)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spotpatch_agent.errors import ProviderError
from spotpatch_agent.protocol.errors import ErrorCode
from spotpatch_agent.provider.base import TextDelta, ToolCallEvent, TurnEnd, TurnRestart
from spotpatch_agent.provider.probe import run_probe

from .apis import make_adapter
from .conftest import CANARY_KEY, run_turn

pytestmark = pytest.mark.anyio

FIXTURES = Path(__file__).parent / "fixtures" / "llamacpp"
EXPECTED: dict[str, dict] = json.loads((FIXTURES / "expected.json").read_text(encoding="utf-8"))
TEXT_INSTEAD = "chat/llamacpp-qwen05b-text-instead-of-call.sse"
SERVER_ERROR = "chat/llamacpp-qwen15b-server-error-after-call.sse"
TOOL_CALL = "chat/llamacpp-qwen15b-tool-call.sse"
RESPONSES_TEXT = "responses/llamacpp-qwen05b-text-only.sse"


def raw(name: str) -> dict:
    return {"raw": [(FIXTURES / name).read_bytes()]}


def test_every_llamacpp_fixture_has_an_expectation():
    assert {p.relative_to(FIXTURES).as_posix() for p in FIXTURES.glob("*/*.sse")} == set(EXPECTED)


async def test_text_instead_of_a_required_call_is_cut_at_the_output_limit_and_keeps_its_usage(server):
    expected = EXPECTED[TEXT_INSTEAD]
    server.add_turns(raw(TEXT_INSTEAD))
    adapter = make_adapter("chat", server)
    try:
        events = await run_turn(adapter)
    finally:
        await adapter.aclose()
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert text.startswith(expected["textStartsWith"])
    assert not [e for e in events if isinstance(e, ToolCallEvent)]
    end = events[-1]
    assert isinstance(end, TurnEnd) and end.stop_reason == expected["finishReason"] == "length"
    # The usage chunk carries llama.cpp's ``timings`` beside ``usage``: the usage object is read as sent.
    assert end.usage == {"completion_tokens": 400, "prompt_tokens": 177, "total_tokens": 577,
                         "prompt_tokens_details": {"cached_tokens": 0}}


async def test_a_real_llamacpp_tool_call_and_a_responses_text_answer_parse(server):
    server.add_turns(raw(TOOL_CALL), raw(RESPONSES_TEXT))
    chat, responses = make_adapter("chat", server), make_adapter("responses", server)
    try:
        call_events = await run_turn(chat)
        text_events = await run_turn(responses)
    finally:
        await chat.aclose()
        await responses.aclose()
    [call] = [e for e in call_events if isinstance(e, ToolCallEvent)]
    [want] = EXPECTED[TOOL_CALL]["toolCalls"]
    assert (call.id, call.name, json.loads(call.arguments_json), call.invalid) == (
        want["id"], want["name"], want["arguments"], None)
    assert call_events[-1] == TurnEnd("tool_calls", EXPECTED[TOOL_CALL]["usage"], server="llama.cpp")
    assert "".join(e.text for e in text_events if isinstance(e, TextDelta)) == EXPECTED[RESPONSES_TEXT]["text"]
    end = text_events[-1]
    assert isinstance(end, TurnEnd) and end.stop_reason == "stop"
    assert end.usage is not None and end.usage["total_tokens"] == EXPECTED[RESPONSES_TEXT]["usage"]["total_tokens"]


async def test_the_probe_diagnoses_the_recorded_text_answer_as_cut_off_at_the_output_limit(server):
    server.add_turns(raw(TEXT_INSTEAD))
    adapter = make_adapter("chat", server)
    try:
        outcome = await run_probe(adapter, model="scripted-model", base_url=server.base_url, api_key=CANARY_KEY,
                                  max_output_tokens=400)
    finally:
        await adapter.aclose()
    assert outcome.code == ErrorCode.MODEL_TOOL_CALL_UNSUPPORTED and not outcome.tool_calling
    assert outcome.message.startswith("The endpoint lists 1 model(s).")
    assert "cut off at the output limit" in outcome.message
    assert server.requests[0]["max_completion_tokens"] == 400


async def test_the_probe_passes_with_the_recorded_llamacpp_call(server):
    server.add_turns(raw(TOOL_CALL), {"text": "OK", "finishReason": "stop"})
    adapter = make_adapter("chat", server)
    try:
        outcome = await run_probe(adapter, model="scripted-model", base_url=server.base_url, api_key=CANARY_KEY,
                                  max_output_tokens=1024)
    finally:
        await adapter.aclose()
    assert outcome.tool_calling and outcome.code is None
    assert [r["max_completion_tokens"] for r in server.requests] == [1024, 1024]  # both probe turns carry the cap


async def test_a_server_error_after_a_complete_call_is_asked_again_and_the_call_surfaces_once(server):
    expected = EXPECTED[SERVER_ERROR]
    call = expected["partialCall"]
    server.add_turns(raw(SERVER_ERROR), {"toolCalls": [call]})
    adapter = make_adapter("chat", server)
    try:
        events = await run_turn(adapter)
    finally:
        await adapter.aclose()
    calls = [e for e in events if isinstance(e, ToolCallEvent)]
    assert [(c.id, c.name, json.loads(c.arguments_json)) for c in calls] == [
        (call["id"], call["name"], call["arguments"])]
    assert len(server.requests) == 2 and server.requests[0] == server.requests[1]  # the same turn, asked again
    assert not [e for e in events if isinstance(e, TurnRestart)]  # nothing was yielded before the error


async def test_the_recorded_server_error_every_time_ends_unavailable_after_the_retry_budget(server):
    for _ in range(3):
        server.add_turns(raw(SERVER_ERROR))
    adapter = make_adapter("chat", server)
    seen: list = []
    try:
        with pytest.raises(ProviderError) as info:
            async for event in adapter.stream_turn(make_request()):
                seen.append(event)
    finally:
        await adapter.aclose()
    assert info.value.code == ErrorCode.PROVIDER_UNAVAILABLE and info.value.retryable
    assert EXPECTED[SERVER_ERROR]["error"]["message"] in info.value.message
    assert "after 2 retries" in info.value.message
    assert seen == [] and len(server.requests) == 3  # no call ever surfaced; 1 + MAX_RETRIES requests


def make_request():
    from .conftest import REQUEST

    return REQUEST
