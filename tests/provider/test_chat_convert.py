"""Pure parts of the Chat Completions adapter: request conversion and the stream assembler on its own."""

from __future__ import annotations

import pytest

from spotpatch_agent.errors import ProviderError
from spotpatch_agent.protocol.errors import ErrorCode
from spotpatch_agent.provider.base import (
    AssistantTurn,
    TextDelta,
    ToolCallEvent,
    ToolCallRecord,
    ToolResultMessage,
    ToolSpec,
    TurnEnd,
    TurnRequest,
    UserMessage,
)
from spotpatch_agent.provider.chat import (
    ChatStreamAssembler,
    build_chat_body,
    to_chat_messages,
)
from spotpatch_agent.provider.http import SSE, sanitize_excerpt

CALL = ToolCallRecord("call_1", "read_file", '{"path": "a"}')


def test_to_chat_messages_covers_every_item_kind():
    request = TurnRequest(
        system="sys",
        items=(
            UserMessage("go"),
            AssistantTurn("Reading.", (CALL,)),
            ToolResultMessage("call_1", "1: x"),
            AssistantTurn("", (CALL,)),
            AssistantTurn("Done."),
            AssistantTurn(""),
        ),
        tools=(),
        model="m",
    )
    assert to_chat_messages(request) == [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "Reading.", "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "a"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "1: x"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "a"}'}}]},
        {"role": "assistant", "content": "Done."},
        {"role": "assistant", "content": ""},
    ]


def test_empty_system_prompt_is_omitted():
    request = TurnRequest(system="", items=(UserMessage("go"),), tools=(), model="m")
    assert to_chat_messages(request) == [{"role": "user", "content": "go"}]


def test_body_without_tools_omits_tool_fields_and_max_tokens():
    body = build_chat_body(TurnRequest(system="s", items=(UserMessage("go"),), tools=(), model="m"))
    assert set(body) == {"model", "messages", "stream", "stream_options"}


def test_body_with_tools():
    tool = ToolSpec("list_files", "List.", {"type": "object"})
    body = build_chat_body(TurnRequest("s", (UserMessage("go"),), (tool,), "m", "required", 10))
    assert body["tools"] == [{"type": "function", "function": {
        "name": "list_files", "description": "List.", "parameters": {"type": "object"}, "strict": True}}]
    assert (body["tool_choice"], body["parallel_tool_calls"], body["max_completion_tokens"]) == ("required", True, 10)
    assert "max_tokens" not in body  # OpenAI reasoning models reject it


def _delta(delta=None, finish=None):
    return {"choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}]}


def test_assembler_alone_feed_and_finish():
    asm = ChatStreamAssembler()
    assert asm.feed(_delta({"role": "assistant", "content": "Hi"})) == [TextDelta("Hi")]
    first_half = {"tool_calls": [{"index": 0, "id": "c", "function": {"name": "f", "arguments": "{"}}]}
    assert asm.feed(_delta(first_half)) == []
    assert asm.feed_data('{"choices":[{"index":0,"delta":{"tool_calls":'
                         '[{"index":0,"function":{"arguments":"}"}}]}}]}') == []
    assert asm.feed(_delta(finish="tool_calls")) == []
    assert asm.feed_data("[DONE]") == [] and asm.done
    assert asm.finish() == [ToolCallEvent("c", "f", "{}"), TurnEnd("tool_calls", None)]


def test_assembler_finish_without_done_or_finish_reason_raises():
    asm = ChatStreamAssembler()
    asm.feed(_delta({"content": "x"}))
    with pytest.raises(ProviderError) as info:
        asm.finish()
    assert info.value.code == ErrorCode.PROVIDER_PROTOCOL


def test_assembler_whole_answer_ends_the_turn_even_without_a_finish_reason():
    asm = ChatStreamAssembler()
    assert asm.feed_answer({"choices": [{"index": 0, "message": {"content": "Hi"}}]}) == [TextDelta("Hi")]
    assert asm.done and asm.finish() == [TurnEnd(None, None)]


def test_assembler_sse_error_event_raises_its_error_redacted():
    asm = ChatStreamAssembler(api_key="sk-secret-0123456789")
    with pytest.raises(ProviderError) as info:
        asm.feed_sse(SSE("error", '{"error": {"message": "key sk-secret-0123456789 is over quota"}}'))
    assert info.value.code == ErrorCode.PROVIDER_PROTOCOL and "sk-secret" not in info.value.message
    assert asm.feed_sse(SSE("message", "[DONE]")) == [] and asm.done


def test_assembler_text_bound_cuts_at_a_character_boundary():
    asm = ChatStreamAssembler(max_text_bytes=5)
    assert asm.feed(_delta({"content": "ab"})) == [TextDelta("ab")]
    assert asm.feed(_delta({"content": "éé"})) == [TextDelta("é")]  # 2 + 2 bytes fit, the next é does not
    assert asm.feed(_delta({"content": "z"})) == []


def test_assembler_other_choices_are_ignored():
    asm = ChatStreamAssembler()
    chunk = {"choices": [{"index": 1, "delta": {"content": "B"}}, {"index": 0, "delta": {"content": "A"}}]}
    assert asm.feed(chunk) == [TextDelta("A")]


def test_sanitize_excerpt_redacts_before_cutting():
    key = "sk-live-abcdef1234567890"
    text = "x" * 290 + key + "y" * 50
    out = sanitize_excerpt(text, key)
    assert key[:6] not in out and len(out) <= 300
    assert sanitize_excerpt("Bearer abcdefghijkl1234 used", None) == "[REDACTED] used"
