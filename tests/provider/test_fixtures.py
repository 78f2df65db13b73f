"""Replay of real recorded Chat Completions and Responses streams through the matching adapter over a real
local HTTP server (issue 7 acceptance 3; see fixtures/README.md for their origin)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spotpatch_agent.errors import ProviderError
from spotpatch_agent.protocol.errors import ErrorCode
from spotpatch_agent.provider.base import TextDelta, ToolCallEvent, TurnEnd

from .apis import api_of, make_adapter
from .conftest import run_turn

pytestmark = pytest.mark.anyio

FIXTURES = Path(__file__).parent / "fixtures"
EXPECTED: dict[str, dict] = json.loads((FIXTURES / "expected.json").read_text(encoding="utf-8"))


def _pieces(data: bytes, size: int | None) -> list[bytes]:
    if size is None:
        return [data]
    return [data[i : i + size] for i in range(0, len(data), size)]


def test_every_fixture_file_has_an_expectation():
    files = {p.relative_to(FIXTURES).as_posix() for p in FIXTURES.glob("*/*.sse")}
    assert files == set(EXPECTED)
    assert {e["api"] for e in EXPECTED.values()} == {"chat", "responses"}


@pytest.mark.parametrize("split", [None, 97], ids=["whole", "split-97-bytes"])
@pytest.mark.parametrize("name", sorted(EXPECTED))
async def test_recorded_stream(server, name, split):
    expected = EXPECTED[name]
    server.add_turns({"raw": _pieces((FIXTURES / name).read_bytes(), split)})
    adapter = make_adapter(expected["api"], server)
    try:
        if expected.get("terminal") == "response.failed":
            with pytest.raises(ProviderError) as info:
                await run_turn(adapter)
            events = None
        else:
            events = await run_turn(adapter)
    finally:
        await adapter.aclose()
    assert api_of(server.requests[0]) == expected["api"]
    if events is None:  # a failed response: the provider's own error code is named, no call ever surfaced
        assert expected["toolCalls"] == []
        assert f"response.failed: {expected['errorCode']}" in info.value.message
        assert info.value.code == ErrorCode.PROVIDER_UNAVAILABLE  # rate_limit_exceeded
        return
    calls = [e for e in events if isinstance(e, ToolCallEvent)]
    assert [c.invalid for c in calls] == [None] * len(calls)
    got = [{"id": c.id, "name": c.name, "arguments": json.loads(c.arguments_json)} for c in calls]
    assert got == expected["toolCalls"]
    assert all(isinstance(e, (TextDelta, ToolCallEvent)) for e in events[:-1])
    end = events[-1]
    assert isinstance(end, TurnEnd)
    if expected["api"] == "chat":
        assert end.stop_reason == expected["finishReason"]
        assert end.usage == expected["usage"]
    else:
        assert expected["terminal"] == "response.completed" and expected["errorCode"] is None
        assert end.stop_reason == ("tool_calls" if calls else "stop")
        assert isinstance(end.usage, dict) and end.usage["total_tokens"] > 0
