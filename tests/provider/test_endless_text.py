"""A model that answers with text for ever, against a real local server (issue 16 part 3): the probe and
one adapter turn end within seconds — the stream is closed at the text budget and the server sees the
disconnect — and every request carries the output cap in the field its API expects."""

from __future__ import annotations

import time

import pytest

from spotpatch_agent.protocol.errors import ErrorCode
from spotpatch_agent.provider.base import TextDelta, ToolCallEvent, TurnEnd, TurnRequest
from spotpatch_agent.provider.calls import MAX_TEXT_BYTES
from spotpatch_agent.provider.probe import PROBE_TEXT_BYTES, run_probe

from .apis import APIS, make_adapter
from .conftest import CANARY_KEY, REQUEST, run_turn

pytestmark = pytest.mark.anyio

FOREVER = {"textForever": "I will now call the tool. " * 4}
CAP_FIELD = {"chat": "max_completion_tokens", "responses": "max_output_tokens"}


@pytest.mark.parametrize("api", APIS)
async def test_the_probe_ends_within_seconds_with_the_text_only_diagnosis(server, api):
    server.add_turns(FOREVER)
    adapter = make_adapter(api, server)
    started = time.monotonic()
    try:
        outcome = await run_probe(adapter, model="scripted-model", base_url=server.base_url, api_key=CANARY_KEY,
                                  max_output_tokens=8192)
    finally:
        await adapter.aclose()
    assert time.monotonic() - started < 5
    assert outcome.code == ErrorCode.MODEL_TOOL_CALL_UNSUPPORTED and not outcome.tool_calling
    # The listing's diagnosis is kept, and the verdict is the one of a short text-only answer.
    assert outcome.message.startswith("The endpoint lists 1 model(s). The model answered the forced tool call "
                                      "with no tool call")
    assert "Choose a model with tool calling" in outcome.message
    assert server.wait_for_disconnect(5), "the server never saw the client close the endless stream"
    [body] = server.requests
    assert body[CAP_FIELD[api]] == 8192 and "max_tokens" not in body


@pytest.mark.parametrize("api", APIS)
async def test_one_turn_of_endless_text_is_cut_at_its_budget_and_the_stream_closed(server, api):
    server.add_turns(FOREVER)
    adapter = make_adapter(api, server)
    started = time.monotonic()
    try:
        events = await run_turn(adapter, TurnRequest(**{**REQUEST.__dict__, "max_output_tokens": 321}))
    finally:
        await adapter.aclose()
    assert time.monotonic() - started < 5
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert MAX_TEXT_BYTES - 200 < len(text.encode()) <= MAX_TEXT_BYTES
    assert not [e for e in events if isinstance(e, ToolCallEvent)]
    assert isinstance(events[-1], TurnEnd) and events[-1].stop_reason == "text_limit"
    assert server.wait_for_disconnect(5)
    assert server.requests[0][CAP_FIELD[api]] == 321


def test_the_probe_text_budget_is_smaller_than_a_turn():
    assert PROBE_TEXT_BYTES < MAX_TEXT_BYTES
