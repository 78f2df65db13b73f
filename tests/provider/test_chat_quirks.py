"""Stream-assembly rules of the Chat Completions adapter, one named test per relay quirk (docs/design.md §11).

Each test serves a small hand-written SSE stream from the real local server and reads it through
``ChatCompletionsAdapter.stream_turn`` — the production code path.
"""

from __future__ import annotations

import json

import anyio
import pytest

from spotpatch_agent.errors import ProviderError
from spotpatch_agent.protocol.errors import ErrorCode
from spotpatch_agent.provider.base import TextDelta, ToolCallEvent, TurnEnd
from spotpatch_agent.provider.chat import MAX_TEXT_BYTES, ChatCompletionsAdapter

from .conftest import CANARY_KEY, DONE, call, calls_of, chunk, end_of, events_of, run_turn

pytestmark = pytest.mark.anyio

ROLE = chunk({"role": "assistant", "content": None})
FINISH = chunk({}, "tool_calls")


async def test_deltas_are_keyed_by_index_when_calls_interleave(server, adapter):
    events = await events_of(
        server, adapter, ROLE,
        call(0, "call_a", "read_file", ""), call(1, "call_b", "list_files", ""),
        call(0, args='{"path":'), call(1, args='{"glob":'), call(1, args='"*.ts"}'), call(0, args='"a.ts"}'),
        FINISH, DONE,
    )
    assert calls_of(events) == [("call_a", "read_file", {"path": "a.ts"}), ("call_b", "list_files", {"glob": "*.ts"})]


async def test_id_only_on_first_delta_is_kept_for_the_whole_call(server, adapter):
    events = await events_of(server, adapter, call(0, "call_1", "read_file", ""), call(0, args="{}"), FINISH, DONE)
    assert calls_of(events) == [("call_1", "read_file", {})]


async def test_new_id_at_used_index_starts_a_new_call(server, adapter):
    # Ollama: every parallel call at index 0, each with a fresh id and complete arguments.
    events = await events_of(
        server, adapter,
        call(0, "call_x", "read_file", '{"path": "a"}'), call(0, "call_y", "read_file", '{"path": "b"}'),
        FINISH, DONE,
    )
    assert calls_of(events) == [("call_x", "read_file", {"path": "a"}), ("call_y", "read_file", {"path": "b"})]


async def test_delta_without_index_continues_the_current_call(server, adapter):
    events = await events_of(
        server, adapter, call(None, "call_1", "read_file", '{"pa'), call(None, args='th": "x"}'), FINISH, DONE
    )
    assert calls_of(events) == [("call_1", "read_file", {"path": "x"})]


async def test_delta_without_index_but_with_id_is_keyed_by_id(server, adapter):
    events = await events_of(
        server, adapter,
        call(None, "call_1", "read_file", '{"path":'), call(None, "call_2", "read_file", '{"path":'),
        call(None, "call_1", args=' "a"}'), call(None, "call_2", args=' "b"}'),
        FINISH, DONE,
    )
    assert calls_of(events) == [("call_1", "read_file", {"path": "a"}), ("call_2", "read_file", {"path": "b"})]


async def test_empty_id_on_continuation_is_not_a_new_call(server, adapter):
    # Qwen: "id": "" on every continuation delta.
    events = await events_of(
        server, adapter, call(0, "call_1", "read_file", ""), call(0, "", args='{"path"'), call(0, "", args=': "a"}'),
        FINISH, DONE,
    )
    assert calls_of(events) == [("call_1", "read_file", {"path": "a"})]


async def test_empty_name_on_continuation_is_ignored(server, adapter):
    # LM Studio: "name": "" repeated on continuations.
    events = await events_of(
        server, adapter, call(0, "call_1", "read_file", ""), call(0, name="", args='{"path": "a"}'), FINISH, DONE
    )
    assert calls_of(events) == [("call_1", "read_file", {"path": "a"})]


async def test_name_repeated_in_every_delta_is_set_once_never_concatenated(server, adapter):
    # old llama.cpp: the full name in every delta.
    events = await events_of(
        server, adapter,
        call(0, "call_1", "read_file", '{"path"'), call(0, name="read_file", args=': "a"}'), FINISH, DONE,
    )
    assert calls_of(events) == [("call_1", "read_file", {"path": "a"})]


async def test_same_id_repeated_in_every_delta_continues_the_call(server, adapter):
    # LiteLLM: the id on every chunk of the same call.
    events = await events_of(
        server, adapter,
        call(0, "call_1", "read_file", '{"qu'), call(0, "call_1", args='ery":'), call(0, "call_1", args=' "hi"}'),
        FINISH, DONE,
    )
    assert calls_of(events) == [("call_1", "read_file", {"query": "hi"})]


async def test_first_index_may_be_one(server, adapter):
    # LiteLLM: indexes are opaque keys, not positions.
    events = await events_of(
        server, adapter, call(1, "call_1", "read_file", '{"path":'), call(1, args=' "a"}'), FINISH, DONE
    )
    assert calls_of(events) == [("call_1", "read_file", {"path": "a"})]


async def test_arguments_split_mid_token_and_mid_escape_are_concatenated(server, adapter):
    full = json.dumps({"text": 'say "hi" \u00e9\n', "n": 12})
    cut = full.index("\\u00e9") + 3  # inside the \\u escape
    pieces = [full[:5], full[5:cut], full[cut : cut + 1], full[cut + 1 :]]
    events = await events_of(
        server, adapter, call(0, "call_1", "write", ""), *[call(0, args=p) for p in pieces], FINISH, DONE
    )
    assert calls_of(events) == [("call_1", "write", {"text": 'say "hi" \u00e9\n', "n": 12})]


async def test_arguments_given_as_json_object_are_dumped(server, adapter):
    # TGI / llama-server: arguments as an object instead of a string.
    events = await events_of(server, adapter, call(0, "call_1", "read_file", {"path": "a", "n": [1, 2]}), FINISH, DONE)
    assert calls_of(events) == [("call_1", "read_file", {"path": "a", "n": [1, 2]})]


@pytest.mark.parametrize("args", ["", None, "  "], ids=["empty", "absent", "blank"])
async def test_empty_or_absent_arguments_are_an_empty_object(server, adapter, args):
    events = await events_of(server, adapter, call(0, "call_1", "list_files", args), FINISH, DONE)
    [event] = [e for e in events if isinstance(e, ToolCallEvent)]
    assert (event.arguments_json, event.invalid) == ("{}", None)


@pytest.mark.parametrize(
    "args",
    ['{"path": "a"}{"path": "a"}', '{"path": "a', "[1, 2]", '"text"', "{'path': 'a'}"],
    ids=["appended-twice", "truncated", "array", "string", "python-quotes"],
)
async def test_arguments_that_are_not_a_json_object_make_an_invalid_call_never_empty(server, adapter, args):
    events = await events_of(server, adapter, call(0, "call_1", "read_file", ""), call(0, args=args), FINISH, DONE)
    [event] = [e for e in events if isinstance(e, ToolCallEvent)]
    assert event.invalid is not None and event.invalid.startswith("arguments are not valid JSON")
    assert event.arguments_json == args and event.arguments_json != "{}"
    assert (event.id, event.name) == ("call_1", "read_file")


async def test_finish_reason_stop_with_calls_is_tool_calls(server, adapter):
    events = await events_of(server, adapter, call(0, "call_1", "read_file", "{}"), chunk({}, "stop"), DONE)
    assert end_of(events).stop_reason == "tool_calls"


async def test_finish_reason_stop_without_calls_stays_stop(server, adapter):
    events = await events_of(server, adapter, chunk({"content": "done"}), chunk({}, "stop"), DONE)
    assert end_of(events).stop_reason == "stop"


async def test_empty_finish_reason_is_null(server, adapter):
    events = await events_of(server, adapter, chunk({"content": "hi"}, ""), DONE)
    assert end_of(events).stop_reason is None
    events = await events_of(server, adapter, chunk({"content": "hi"}, ""), chunk({}, "length"), DONE)
    assert end_of(events).stop_reason == "length"


async def test_first_non_null_finish_reason_wins(server, adapter):
    events = await events_of(server, adapter, chunk({"content": "x"}), chunk({}, "length"), chunk({}, "stop"), DONE)
    assert end_of(events).stop_reason == "length"


async def test_summary_chunk_repeating_calls_after_finish_is_ignored(server, adapter):
    # LiteLLM #20480: every call repeated in one chunk after the finish reason.
    events = await events_of(
        server, adapter, call(0, "call_1", "read_file", '{"path":'), call(0, args=' "a"}'), FINISH,
        call(0, "call_1", "read_file", '{"path": "a"}'), DONE,
    )
    assert calls_of(events) == [("call_1", "read_file", {"path": "a"})]


async def test_chunks_with_empty_choices_are_skipped(server, adapter):
    azure_filter = 'data: {"choices": [], "prompt_filter_results": [{"prompt_index": 0}], "id": ""}\n\n'
    events = await events_of(server, adapter, azure_filter, chunk({"content": "ok"}), chunk({}, "stop"), DONE)
    assert [e for e in events if isinstance(e, TextDelta)] == [TextDelta("ok")]


async def test_usage_is_taken_from_any_chunk_and_the_last_wins(server, adapter):
    events = await events_of(
        server, adapter,
        chunk({"content": "a"}, usage=None), chunk({}, "stop", usage={"total_tokens": 1}),
        'data: {"choices": [], "usage": {"total_tokens": 7}}\n\n', DONE,
    )
    assert end_of(events).usage == {"total_tokens": 7}


async def test_sse_comments_and_ping_data_are_ignored(server, adapter):
    events = await events_of(
        server, adapter, ": keep-alive\n\n", ": OPENROUTER PROCESSING\n\n", 'data: {"type": "ping"}\n\n',
        chunk({"content": "hi"}), 'event: ping\ndata: {"type":"ping"}\n\n', chunk({}, "stop"), DONE,
    )
    assert events == [TextDelta("hi"), TurnEnd("stop", None)]


async def test_done_ends_the_stream(server, adapter):
    # Anything after [DONE] is never read (here it would be an invalid chunk).
    events = await events_of(server, adapter, chunk({"content": "hi"}, "stop"), DONE, "data: {not json\n\n")
    assert events == [TextDelta("hi"), TurnEnd("stop", None)]


async def test_done_without_finish_reason_ends_the_turn(server, adapter):
    events = await events_of(server, adapter, chunk({"content": "hi"}), DONE)
    assert events == [TextDelta("hi"), TurnEnd(None, None)]


async def test_finish_reason_without_done_ends_the_turn(server, adapter):
    events = await events_of(server, adapter, call(0, "call_1", "read_file", "{}"), FINISH)
    assert calls_of(events) == [("call_1", "read_file", {})]
    assert end_of(events).stop_reason == "tool_calls"


async def test_stream_ending_without_done_or_finish_reason_is_truncated(server, adapter):
    server.add_turns({"raw": [chunk({"content": "hi"}), call(0, "call_1", "read_file", '{"path": "a"}')]})
    with pytest.raises(ProviderError) as info:
        await run_turn(adapter)
    assert info.value.code == ErrorCode.PROVIDER_PROTOCOL and "truncated" in info.value.message


async def test_connection_cut_mid_body_is_truncated(server, adapter):
    server.add_turns({"raw": [chunk({"content": "hi"}), call(0, "call_1", "read_file", '{"pa')], "abort": True})
    with pytest.raises(ProviderError) as info:
        await run_turn(adapter)
    assert info.value.code == ErrorCode.PROVIDER_PROTOCOL and "truncated" in info.value.message


async def test_error_object_inside_200_stream_is_a_protocol_error(server, adapter):
    err = {"error": {"message": "the request is not valid", "type": "invalid_request_error", "code": "bad"}}
    server.add_turns({"raw": [chunk({"content": "hi"}), f"data: {json.dumps(err)}\n\n"]})
    with pytest.raises(ProviderError) as info:
        await run_turn(adapter)
    assert info.value.code == ErrorCode.PROVIDER_PROTOCOL
    assert "the request is not valid" in info.value.message
    assert len(server.requests) == 1  # not server-side: never asked again


async def test_server_error_inside_200_stream_is_asked_again_then_unavailable(server, adapter):
    err = {"error": {"message": "upstream model crashed", "type": "server_error", "code": 502}}
    for _ in range(3):
        server.add_turns({"raw": [chunk({"content": "hi"}), f"data: {json.dumps(err)}\n\n"]})
    with pytest.raises(ProviderError) as info:
        await run_turn(adapter)
    assert info.value.code == ErrorCode.PROVIDER_UNAVAILABLE and info.value.retryable
    assert "upstream model crashed" in info.value.message and "after 2 retries" in info.value.message
    assert len(server.requests) == 3  # the first attempt and MAX_RETRIES more, never more


async def test_context_length_error_inside_200_stream_is_limit_exceeded(server, adapter):
    err = {"error": {"message": "This model's maximum context length is 8192 tokens",
                     "code": "context_length_exceeded"}}
    server.add_turns({"raw": [f"data: {json.dumps(err)}\n\n"]})
    with pytest.raises(ProviderError) as info:
        await run_turn(adapter)
    assert info.value.code == ErrorCode.LIMIT_EXCEEDED


async def test_error_event_line_is_a_protocol_error(server, adapter):
    server.add_turns({"raw": ['event: error\ndata: {"message": "overloaded"}\n\n']})
    with pytest.raises(ProviderError) as info:
        await run_turn(adapter)
    assert info.value.code == ErrorCode.PROVIDER_PROTOCOL and "overloaded" in info.value.message


async def test_non_json_chunk_is_a_protocol_error(server, adapter):
    server.add_turns({"raw": [chunk({"content": "hi"}), "data: {oops\n\n", DONE]})
    with pytest.raises(ProviderError) as info:
        await run_turn(adapter)
    assert info.value.code == ErrorCode.PROVIDER_PROTOCOL


async def test_text_is_emitted_as_it_comes_and_calls_at_the_end_in_index_order(server, adapter):
    events = await events_of(
        server, adapter, chunk({"content": "Reading "}),
        call(1, "call_b", "read_file", '{"path": "b"}'), chunk({"content": "two files."}),
        call(0, "call_a", "read_file", '{"path": "a"}'), FINISH, DONE,
    )
    assert events[:2] == [TextDelta("Reading "), TextDelta("two files.")]
    assert [e.id for e in events[2:4]] == ["call_a", "call_b"]
    assert isinstance(events[4], TurnEnd) and len(events) == 5


async def test_tool_markup_in_text_is_only_text(server, adapter):
    markup = '<tool_call>{"name": "write_file", "arguments": {"path": "x"}}</tool_call>'
    events = await events_of(server, adapter, chunk({"content": markup}), chunk({}, "stop"), DONE)
    assert events == [TextDelta(markup), TurnEnd("stop", None)]


async def test_text_is_bounded_to_16_kib_per_turn_and_calls_still_assemble(server, adapter):
    piece = "é" * 1000  # 2000 bytes each
    events = await events_of(
        server, adapter, call(0, "call_1", "read_file", '{"pa'), *[chunk({"content": piece}) for _ in range(10)],
        call(0, None, None, 'th": "a"}'), FINISH, DONE,
    )
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert len(text.encode()) <= MAX_TEXT_BYTES and len(text.encode()) > MAX_TEXT_BYTES - 2
    assert calls_of(events) == [("call_1", "read_file", {"path": "a"})]  # a started call still completes


async def test_text_past_the_budget_before_any_call_ends_the_turn_at_once(server, adapter):
    piece = "é" * 1000  # 2000 bytes each
    events = await events_of(
        server, adapter, *[chunk({"content": piece}) for _ in range(10)],
        call(0, "call_1", "read_file", '{"path": "a"}'), FINISH, DONE,
    )
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert len(text.encode()) <= MAX_TEXT_BYTES and len(text.encode()) > MAX_TEXT_BYTES - 2
    assert calls_of(events) == [] and events[-1] == TurnEnd("text_limit", None)


async def test_two_calls_of_one_turn_with_the_same_id_are_rejected(server, adapter):
    server.add_turns({"raw": [call(0, "call_1", "read_file", "{}"), call(1, "call_1", "read_file", "{}"),
                              FINISH, DONE]})
    with pytest.raises(ProviderError) as info:
        await run_turn(adapter)
    assert info.value.code == ErrorCode.PROVIDER_PROTOCOL and "share the id" in info.value.message


async def test_ids_reused_across_turns_are_accepted(server, adapter):
    for _ in range(2):
        events = await events_of(server, adapter, call(0, "call_1", "read_file", "{}"), FINISH, DONE)
        assert calls_of(events) == [("call_1", "read_file", {})]


async def test_call_without_id_gets_a_local_id_and_without_name_is_invalid(server, adapter):
    events = await events_of(server, adapter, call(0, args='{"a": 1}'), FINISH, DONE)
    [event] = [e for e in events if isinstance(e, ToolCallEvent)]
    assert event.id == "spotpatch_call_0" and event.invalid == "the tool call has no function name"


async def test_relay_that_ignores_stream_true_answers_one_json_completion(server, adapter):
    completion = {
        "object": "chat.completion",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": "Reading.",
            "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": "{}"}}],
        }}],
        "usage": {"total_tokens": 3},
    }
    server.add_turns({"status": 200, "body": completion})
    events = await run_turn(adapter)
    assert events[0] == TextDelta("Reading.")
    assert calls_of(events) == [("call_1", "read_file", {})]
    assert end_of(events) == TurnEnd("tool_calls", {"total_tokens": 3})


# ------------------------------------------------------- audit of the quirk list (issue 7, acceptance 2)


async def test_first_non_null_finish_reason_wins_over_a_trailing_stop_after_tool_calls(server, adapter):
    events = await events_of(
        server, adapter, call(0, "call_1", "read_file", '{"path": "a"}'), FINISH, chunk({}, "stop"), DONE
    )
    assert calls_of(events) == [("call_1", "read_file", {"path": "a"})]
    assert end_of(events).stop_reason == "tool_calls"


async def test_all_calls_at_index_zero_with_split_arguments_are_never_merged(server, adapter):
    # Ollama-style: every call at index 0; each call's arguments continue without id after its first delta.
    events = await events_of(
        server, adapter,
        call(0, "call_a", "read_file", '{"path":'), call(0, args=' "a"}'),
        call(0, "call_b", "read_file", '{"path":'), call(0, args=' "b"}'), FINISH, DONE,
    )
    assert calls_of(events) == [("call_a", "read_file", {"path": "a"}), ("call_b", "read_file", {"path": "b"})]


@pytest.mark.parametrize("index", [0, None], ids=["same-index", "no-index"])
async def test_another_name_without_id_starts_a_new_call_never_a_merge(server, adapter, index):
    # A relay that sends no ids: a different non-empty name is a different call, so the second call's
    # arguments can never end up in the first tool.
    events = await events_of(
        server, adapter,
        call(index, name="list_files", args=""), call(index, name="read_file", args='{"path": "a"}'), FINISH, DONE,
    )
    assert calls_of(events) == [("spotpatch_call_0", "list_files", {}),
                                ("spotpatch_call_1", "read_file", {"path": "a"})]


async def test_http_200_with_error_data_is_a_typed_error_not_an_empty_turn(server, adapter):
    err = {"error": {"message": "rate limit reached for requests", "type": "requests", "code": "rate_limit_exceeded"}}
    server.add_turns({"raw": [f"data: {json.dumps(err)}\n\n", DONE]})
    with pytest.raises(ProviderError) as info:
        await run_turn(adapter)
    assert info.value.code == ErrorCode.PROVIDER_PROTOCOL and "rate limit reached" in info.value.message


async def test_stalled_stream_ends_at_the_idle_timeout(server):
    # Headers and one chunk, then silence (no finish reason, no [DONE]): not a hang, a typed error.
    server.add_turns({"raw": [chunk({"content": "hi"})], "stall": True})
    stalled = ChatCompletionsAdapter(base_url=server.base_url, api_key=CANARY_KEY, idle_timeout=0.3)
    try:
        with anyio.fail_after(5), pytest.raises(ProviderError) as info:
            await run_turn(stalled)
    finally:
        await stalled.aclose()
    assert info.value.code == ErrorCode.PROVIDER_UNAVAILABLE and "stream stalled" in info.value.message
