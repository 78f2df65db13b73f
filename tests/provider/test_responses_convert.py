"""Pure conversion of the Responses adapter: request bodies and the stream assembler without HTTP."""

from __future__ import annotations

import pytest

from spotpatch_agent.errors import ProviderError
from spotpatch_agent.protocol.errors import ErrorCode
from spotpatch_agent.provider.base import (
    AssistantTurn,
    TextDelta,
    ToolCallRecord,
    ToolResultMessage,
    ToolSpec,
    TurnEnd,
    TurnRequest,
    UserMessage,
)
from spotpatch_agent.provider.http import SSE
from spotpatch_agent.provider.responses_convert import (
    ResponsesStreamAssembler,
    build_responses_body,
    response_error,
    to_responses_input,
)

TOOL = ToolSpec("read_file", "Read a file.", {"type": "object", "properties": {}, "additionalProperties": False})


def user(text: str) -> dict:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def call_item(cid: str, name: str = "read_file", args: str = "{}") -> dict:
    return {"type": "function_call", "call_id": cid, "name": name, "arguments": args}


def output_item(cid: str, out: str) -> dict:
    return {"type": "function_call_output", "call_id": cid, "output": out}


def test_body_is_stateless_strict_and_streamed():
    request = TurnRequest(system="sys", items=(UserMessage("go"),), tools=(TOOL,), model="m", tool_choice="required",
                          max_output_tokens=64)
    assert build_responses_body(request) == {
        "model": "m", "instructions": "sys", "input": [user("go")],
        "tools": [{"type": "function", "name": "read_file", "description": "Read a file.",
                   "parameters": TOOL.parameters, "strict": True}],
        "tool_choice": "required", "parallel_tool_calls": True, "store": False, "stream": True,
        "max_output_tokens": 64,
    }


def test_body_without_tools_or_system_omits_them():
    body = build_responses_body(TurnRequest(system="", items=(UserMessage("hi"),), tools=(), model="m"))
    assert body == {"model": "m", "input": [user("hi")], "store": False, "stream": True}


def test_each_call_is_followed_by_its_output_and_ids_are_echoed_verbatim():
    items = (
        UserMessage("go"),
        AssistantTurn("Reading.", (ToolCallRecord("c1", "read_file", '{"path": "a"}'),
                                   ToolCallRecord("c2", "list_files", "{}"))),
        ToolResultMessage("c1", "A"), ToolResultMessage("c2", "B"),
        AssistantTurn("", (ToolCallRecord("c1", "read_file", '{"path": "b"}'),)),  # the id reused
        ToolResultMessage("c1", "C"),
        AssistantTurn("All done."),
        UserMessage("thanks"),
    )
    assert to_responses_input(items) == [
        user("go"),
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Reading."}]},
        call_item("c1", args='{"path": "a"}'), output_item("c1", "A"),
        call_item("c2", "list_files"), output_item("c2", "B"),
        call_item("c1", args='{"path": "b"}'), output_item("c1", "C"),
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "All done."}]},
        user("thanks"),
    ]


def test_a_result_without_a_matching_call_stays_in_place():
    items = (UserMessage("go"), AssistantTurn("", (ToolCallRecord("c1", "f", "{}"),)), ToolResultMessage("zz", "?"),
             ToolResultMessage("c1", "ok"))
    assert to_responses_input(items) == [user("go"), call_item("c1", "f"), output_item("c1", "ok"),
                                         output_item("zz", "?")]


def test_assembler_emits_calls_then_one_turn_end():
    a = ResponsesStreamAssembler()
    assert a.feed({"type": "response.created", "response": {"id": "resp_9"}}) == []
    a.feed({"type": "response.output_item.added", "output_index": 0,
            "item": {"id": "fc_1", "type": "function_call", "call_id": "c1", "name": "f", "arguments": ""}})
    a.feed({"type": "response.function_call_arguments.delta", "item_id": "fc_1", "output_index": 0, "delta": "{}"})
    assert a.feed({"type": "response.output_text.delta", "item_id": "m", "delta": "hi"}) == [TextDelta("hi")]
    a.feed({"type": "response.completed", "response": {"status": "completed", "usage": {"total_tokens": 3}}})
    assert a.done and a.response_id == "resp_9"
    events = a.finish()
    assert [type(e).__name__ for e in events] == ["ToolCallEvent", "TurnEnd"]
    assert events[-1] == TurnEnd("tool_calls", {"total_tokens": 3})


def test_assembler_bounds_text_per_turn():
    a = ResponsesStreamAssembler(max_text_bytes=5)
    assert a.feed({"type": "response.output_text.delta", "delta": "héllo world"}) == [TextDelta("héll")]
    assert a.feed({"type": "response.output_text.delta", "delta": "more"}) == []


def test_assembler_without_completed_raises_truncated():
    a = ResponsesStreamAssembler()
    a.feed({"type": "response.output_text.delta", "delta": "hi"})
    with pytest.raises(ProviderError) as info:
        a.finish()
    assert info.value.code == ErrorCode.PROVIDER_PROTOCOL and "truncated" in info.value.message


def test_assembler_reads_server_sent_events_by_name_and_type():
    asm = ResponsesStreamAssembler()
    assert asm.feed_sse(SSE("keepalive", "keepalive")) == []  # a relay's own event, not JSON: ignored
    delta = '{"type": "response.output_text.delta", "item_id": "m", "delta": "ok"}'
    assert asm.feed_sse(SSE("message", delta)) == [TextDelta("ok")]
    with pytest.raises(ProviderError) as info:  # an unnamed event must be JSON
        asm.feed_sse(SSE("message", "{not json"))
    assert info.value.code == ErrorCode.PROVIDER_PROTOCOL


def test_whole_response_objects_by_status():
    done = ResponsesStreamAssembler()
    done.feed_response({"status": "completed", "output": []})
    assert done.finish() == [TurnEnd("stop", None)]
    failed = ResponsesStreamAssembler()
    with pytest.raises(ProviderError) as info:
        failed.feed_response({"status": "failed", "error": {"code": "server_error", "message": "x"}, "output": []})
    assert info.value.code == ErrorCode.PROVIDER_UNAVAILABLE
    error_only = ResponsesStreamAssembler()
    error_only.feed_response({"error": {"message": "model not found", "code": "model_not_found"}})
    with pytest.raises(ProviderError):
        error_only.finish()


def test_response_error_redacts_the_key_in_code_and_message():
    key = "sk-test-0123456789abcdef"
    err = response_error({"code": f"bad_{key}", "message": f"key {key} revoked"}, key, where="response.failed")
    assert key not in err.message and "[REDACTED]" in err.message
    assert err.code == ErrorCode.PROVIDER_PROTOCOL
