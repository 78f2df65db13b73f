"""Issue 19 acceptance 2: the real recorded ``llama-server`` streams (tests/provider/fixtures/llamacpp/README.md),
text-only answers to a tool-calling request, produce a labelled suggestion, not an error: the Qwen 0.5B
answer that wrote its "call" as plain text (cut at the output limit) through the Chat adapter, and the
Responses text-only answer through the Responses adapter."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.suggestion._support import suggest_after_failure

pytestmark = pytest.mark.anyio

FIXTURES = Path(__file__).parents[1] / "provider" / "fixtures" / "llamacpp"
EXPECTED = json.loads((FIXTURES / "expected.json").read_text(encoding="utf-8"))
TEXT_INSTEAD = "chat/llamacpp-qwen05b-text-instead-of-call.sse"
RESPONSES_TEXT = "responses/llamacpp-qwen05b-text-only.sse"


def recorded(name: str) -> dict:
    return {"raw": [(FIXTURES / name).read_bytes()]}


async def test_the_recorded_text_instead_of_a_call_is_a_labelled_partial_suggestion(tmp_path, monkeypatch):
    result, session, _ = await suggest_after_failure(tmp_path, monkeypatch, recorded(TEXT_INSTEAD))
    assert result.kind == "suggestion" and "changed nothing" in result.label
    assert result.outcome == "partial" and result.error is None  # cut at the model's output limit: said so
    assert "cut at the model's output limit" in result.message
    assert result.text.startswith(EXPECTED[TEXT_INSTEAD]["textStartsWith"])
    assert result.excerpts and result.output_bytes == len(result.text.encode())
    assert result.unverified == 0 and result.diff is None
    assert "tools" not in session.server.requests[1]


async def test_the_recorded_responses_text_answer_is_a_complete_suggestion(tmp_path, monkeypatch):
    # The job's first turn fails on the Responses API too (the scripted PROSE turn), then the recording.
    result, session, _ = await suggest_after_failure(tmp_path, monkeypatch, recorded(RESPONSES_TEXT), api="responses")
    assert result.outcome == "complete" and result.breaker == "none" and result.error is None
    assert result.text == EXPECTED[RESPONSES_TEXT]["text"]
    assert (result.verified, result.unverified) == (0, 0) and result.citations == []
    assert "tools" not in session.server.requests[1]
