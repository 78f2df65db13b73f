"""Replay of real recorded Chat Completions streams (see fixtures/README.md for their origin)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spotpatch_agent.provider.base import ToolCallEvent, TurnEnd

from .conftest import run_turn

pytestmark = pytest.mark.anyio

FIXTURES = Path(__file__).parent / "fixtures"
EXPECTED: dict[str, dict] = json.loads((FIXTURES / "expected.json").read_text(encoding="utf-8"))


def _pieces(data: bytes, size: int | None) -> list[bytes]:
    if size is None:
        return [data]
    return [data[i : i + size] for i in range(0, len(data), size)]


@pytest.mark.parametrize("split", [None, 97], ids=["whole", "split-97-bytes"])
@pytest.mark.parametrize("name", sorted(EXPECTED))
async def test_recorded_stream(server, adapter, name, split):
    expected = EXPECTED[name]
    server.add_turns({"raw": _pieces((FIXTURES / name).read_bytes(), split)})
    events = await run_turn(adapter)
    calls = [e for e in events if isinstance(e, ToolCallEvent)]
    assert [c.invalid for c in calls] == [None] * len(calls)
    got = [{"id": c.id, "name": c.name, "arguments": json.loads(c.arguments_json)} for c in calls]
    assert got == expected["toolCalls"]
    end = events[-1]
    assert isinstance(end, TurnEnd)
    assert end.stop_reason == expected["finishReason"]
    assert end.usage == expected["usage"]
