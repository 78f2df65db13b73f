"""Stream-assembly rules of the Responses adapter, one named test per quirk (docs/design.md §11, issue 7
acceptance 2). Each test serves a small hand-written SSE stream from the real local server and reads it
through ``ResponsesAdapter.stream_turn`` — the production code path. None may surface a call with wrong
arguments or merge two calls into one.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from spotpatch_agent.errors import ProviderError
from spotpatch_agent.protocol.errors import ErrorCode
from spotpatch_agent.provider.base import TextDelta, ToolCallEvent, TurnEnd
from spotpatch_agent.provider.http import ERROR_FOLLOW_UP_WAIT

from .conftest import REQUEST, calls_of, end_of, events_of, run_turn

pytestmark = pytest.mark.anyio

USAGE = {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}


def ev(kind: str, *, typed: bool = True, named: bool = True, **fields: Any) -> str:
    """One SSE event: ``event: kind`` (when ``named``) and JSON data with ``type`` (when ``typed``)."""
    payload = {"type": kind, **fields} if typed else fields
    head = f"event: {kind}\n" if named else ""
    return f"{head}data: {json.dumps(payload)}\n\n"


def fc(item_id: str, call_id: str, name: str, arguments: str = "", status: str = "in_progress") -> dict:
    return {"id": item_id, "type": "function_call", "status": status, "arguments": arguments, "call_id": call_id,
            "name": name}


CREATED = ev("response.created", response={"id": "resp_1", "status": "in_progress", "output": []})


def added(item_id: str, call_id: str, name: str, index: int | None = 0) -> str:
    fields: dict[str, Any] = {"item": fc(item_id, call_id, name)}
    if index is not None:
        fields["output_index"] = index
    return ev("response.output_item.added", **fields)


def delta(item_id: str | None, text: str, index: int | None = 0) -> str:
    fields: dict[str, Any] = {"delta": text}
    if item_id is not None:
        fields["item_id"] = item_id
    if index is not None:
        fields["output_index"] = index
    return ev("response.function_call_arguments.delta", **fields)


def args_done(item_id: str, arguments: str, index: int | None = 0) -> str:
    fields: dict[str, Any] = {"item_id": item_id, "arguments": arguments}
    if index is not None:
        fields["output_index"] = index
    return ev("response.function_call_arguments.done", **fields)


def item_done(item_id: str, call_id: str, name: str, arguments: str, index: int | None = 0) -> str:
    fields: dict[str, Any] = {"item": fc(item_id, call_id, name, arguments, "completed")}
    if index is not None:
        fields["output_index"] = index
    return ev("response.output_item.done", **fields)


def completed(*output: dict, usage: dict | None = USAGE) -> str:
    return ev("response.completed", response={"id": "resp_1", "status": "completed", "output": list(output),
                                              "usage": usage})


def text_delta(text: str, item_id: str = "msg_1") -> str:
    return ev("response.output_text.delta", item_id=item_id, output_index=0, content_index=0, delta=text)


@pytest.fixture
def api() -> str:
    return "responses"


async def error_of(server, adapter, *pieces: str, times: int = 1) -> tuple[ProviderError, list]:
    """The error of a turn served as ``pieces`` (``times`` times: a server-side error is asked again)."""
    for _ in range(times):
        server.add_turns({"raw": list(pieces)})
    seen: list = []
    with pytest.raises(ProviderError) as info:
        async for event in adapter.stream_turn(REQUEST):
            seen.append(event)
    return info.value, seen


# ---------------------------------------------------------------- where the final arguments come from


async def test_arguments_only_in_done_without_deltas(server, adapter):
    events = await events_of(server, adapter, CREATED, added("fc_1", "call_1", "read_file"),
                             args_done("fc_1", '{"path": "a.ts"}'), completed())
    assert calls_of(events) == [("call_1", "read_file", {"path": "a.ts"})]
    assert end_of(events).stop_reason == "tool_calls"


async def test_done_arguments_win_over_differing_deltas(server, adapter):
    events = await events_of(server, adapter, CREATED, added("fc_1", "call_1", "read_file"),
                             delta("fc_1", '{"path": "a.ts"}'), delta("fc_1", '{"path": "a.ts"}'),  # doubled deltas
                             args_done("fc_1", '{"path": "b.ts"}'), completed())
    assert calls_of(events) == [("call_1", "read_file", {"path": "b.ts"})]


async def test_output_item_done_is_the_last_word_on_arguments(server, adapter):
    events = await events_of(server, adapter, CREATED, added("fc_1", "call_1", "read_file"),
                             delta("fc_1", '{"path": "x'), args_done("fc_1", '{"path": "y.ts"}'),
                             item_done("fc_1", "call_1", "read_file", '{"path": "z.ts"}'), completed())
    assert calls_of(events) == [("call_1", "read_file", {"path": "z.ts"})]


async def test_empty_done_arguments_do_not_erase_streamed_ones(server, adapter):
    events = await events_of(server, adapter, CREATED, added("fc_1", "call_1", "read_file"),
                             delta("fc_1", '{"path": "a.ts"}'), args_done("fc_1", ""), completed())
    assert calls_of(events) == [("call_1", "read_file", {"path": "a.ts"})]


async def test_output_item_done_without_a_preceding_delta(server, adapter):
    events = await events_of(server, adapter, CREATED, added("fc_1", "call_1", "read_file"),
                             item_done("fc_1", "call_1", "read_file", '{"path": "a.ts"}'), completed())
    assert calls_of(events) == [("call_1", "read_file", {"path": "a.ts"})]


async def test_output_item_done_without_added_or_deltas(server, adapter):
    events = await events_of(server, adapter, CREATED, item_done("fc_1", "call_1", "read_file", '{"path": "a.ts"}'),
                             completed())
    assert calls_of(events) == [("call_1", "read_file", {"path": "a.ts"})]


async def test_calls_only_in_the_completed_response(server, adapter):
    events = await events_of(server, adapter, CREATED,
                             completed(fc("fc_1", "call_1", "read_file", '{"path": "a.ts"}', "completed")))
    assert calls_of(events) == [("call_1", "read_file", {"path": "a.ts"})]


async def test_deltas_without_any_done_event_are_used(server, adapter):
    events = await events_of(server, adapter, CREATED, added("fc_1", "call_1", "read_file"),
                             delta("fc_1", '{"path":'), delta("fc_1", ' "a.ts"}'), completed())
    assert calls_of(events) == [("call_1", "read_file", {"path": "a.ts"})]


async def test_arguments_given_as_an_object_are_serialised(server, adapter):
    events = await events_of(server, adapter, CREATED, added("fc_1", "call_1", "read_file"),
                             ev("response.function_call_arguments.done", item_id="fc_1", output_index=0,
                                arguments={"path": "a.ts"}),
                             completed())
    assert calls_of(events) == [("call_1", "read_file", {"path": "a.ts"})]


async def test_empty_arguments_are_an_empty_object(server, adapter):
    events = await events_of(server, adapter, CREATED, added("fc_1", "call_1", "list_files"),
                             args_done("fc_1", ""), completed())
    assert calls_of(events) == [("call_1", "list_files", {})]


async def test_final_arguments_that_do_not_parse_are_an_invalid_call(server, adapter):
    events = await events_of(server, adapter, CREATED, added("fc_1", "call_1", "read_file"),
                             args_done("fc_1", '{"path": "a.ts"}{"path": "a.ts"}'), completed())
    [call] = [e for e in events if isinstance(e, ToolCallEvent)]
    assert call.id == "call_1" and call.invalid is not None and "not valid JSON" in call.invalid


# ---------------------------------------------------------------- keying: never merge two calls


async def test_two_function_calls_interleaved_by_item_id(server, adapter):
    events = await events_of(
        server, adapter, CREATED,
        added("fc_a", "call_a", "read_file", 0), added("fc_b", "call_b", "list_files", 1),
        delta("fc_a", '{"path":', 0), delta("fc_b", '{"glob":', 1), delta("fc_b", '"*.ts"}', 1),
        delta("fc_a", '"a.ts"}', 0), completed(),
    )
    assert calls_of(events) == [("call_a", "read_file", {"path": "a.ts"}), ("call_b", "list_files", {"glob": "*.ts"})]


async def test_calls_without_output_index_are_keyed_by_item_id(server, adapter):
    # llama.cpp's /v1/responses sends no output_index
    events = await events_of(
        server, adapter, CREATED,
        added("fc_a", "call_a", "read_file", None), added("fc_b", "call_b", "read_file", None),
        delta("fc_b", '{"path": "b.ts"}', None), delta("fc_a", '{"path": "a.ts"}', None),
        item_done("fc_b", "call_b", "read_file", '{"path": "b.ts"}', None), completed(),
    )
    assert calls_of(events) == [("call_a", "read_file", {"path": "a.ts"}), ("call_b", "read_file", {"path": "b.ts"})]


async def test_an_output_index_reused_by_another_item_is_another_call(server, adapter):
    events = await events_of(
        server, adapter, CREATED,
        added("fc_a", "call_a", "read_file", 0), delta("fc_a", '{"path": "a.ts"}', 0),
        added("fc_b", "call_b", "read_file", 0), delta("fc_b", '{"path": "b.ts"}', 0), completed(),
    )
    assert calls_of(events) == [("call_a", "read_file", {"path": "a.ts"}), ("call_b", "read_file", {"path": "b.ts"})]


async def test_a_delta_for_an_unknown_item_never_joins_another_call(server, adapter):
    events = await events_of(
        server, adapter, CREATED,
        added("fc_a", "call_a", "read_file", 0), delta("fc_a", '{"path": "a.ts"}', 0),
        delta("fc_x", '{"path": "x.ts"}', 0), item_done("fc_x", "call_x", "read_file", '{"path": "x.ts"}', 0),
        completed(),
    )
    assert calls_of(events) == [("call_a", "read_file", {"path": "a.ts"}), ("call_x", "read_file", {"path": "x.ts"})]


async def test_deltas_without_item_id_or_index_continue_the_current_call(server, adapter):
    events = await events_of(server, adapter, CREATED, added("fc_a", "call_a", "read_file", None),
                             delta(None, '{"path":', None), delta(None, ' "a.ts"}', None), completed())
    assert calls_of(events) == [("call_a", "read_file", {"path": "a.ts"})]


async def test_calls_are_ordered_by_output_index(server, adapter):
    events = await events_of(
        server, adapter, CREATED,
        item_done("fc_b", "call_b", "read_file", '{"path": "b.ts"}', 2),
        item_done("fc_a", "call_a", "read_file", '{"path": "a.ts"}', 1), completed(),
    )
    assert [c[0] for c in calls_of(events)] == ["call_a", "call_b"]


async def test_the_call_id_not_the_item_id_is_the_tool_call_id(server, adapter):
    events = await events_of(server, adapter, CREATED, added("fc_1", "call_1", "read_file"),
                             args_done("fc_1", "{}"), completed())
    assert [e.id for e in events if isinstance(e, ToolCallEvent)] == ["call_1"]


async def test_a_replayed_output_item_done_is_one_call(server, adapter):
    done = item_done("fc_1", "call_1", "read_file", '{"path": "a.ts"}')
    events = await events_of(server, adapter, CREATED, added("fc_1", "call_1", "read_file"), done, done,
                             completed(fc("fc_1", "call_1", "read_file", '{"path": "a.ts"}', "completed")))
    assert calls_of(events) == [("call_1", "read_file", {"path": "a.ts"})]


async def test_two_items_sharing_a_call_id_fail_the_turn(server, adapter):
    err, seen = await error_of(server, adapter, CREATED,
                               item_done("fc_1", "call_1", "read_file", '{"path": "a.ts"}', 0),
                               item_done("fc_2", "call_1", "read_file", '{"path": "b.ts"}', 1), completed())
    assert err.code == ErrorCode.PROVIDER_PROTOCOL and "share the id 'call_1'" in err.message
    assert seen == []


# ---------------------------------------------------------------- text


async def test_reasoning_items_and_text_do_not_disturb_calls(server, adapter):
    reasoning = {"id": "rs_1", "type": "reasoning", "summary": []}
    events = await events_of(
        server, adapter, CREATED,
        ev("response.output_item.added", output_index=0, item=reasoning),
        ev("response.output_item.done", output_index=0, item=reasoning),
        text_delta("Let me "), text_delta("look."),
        added("fc_1", "call_1", "read_file", 2), args_done("fc_1", '{"path": "a.ts"}', 2), completed(),
    )
    assert events[:2] == [TextDelta("Let me "), TextDelta("look.")]
    assert calls_of(events) == [("call_1", "read_file", {"path": "a.ts"})]


async def test_text_is_emitted_once_when_deltas_and_done_events_repeat_it(server, adapter):
    message = {"id": "msg_1", "type": "message", "role": "assistant",
               "content": [{"type": "output_text", "text": "Hello"}]}
    events = await events_of(
        server, adapter, CREATED, text_delta("Hel"), text_delta("lo"),
        ev("response.output_text.done", item_id="msg_1", output_index=0, content_index=0, text="Hello"),
        ev("response.output_item.done", output_index=0, item=message), completed(message),
    )
    assert events == [TextDelta("Hel"), TextDelta("lo"), TurnEnd("stop", USAGE)]


async def test_text_sent_only_in_output_text_done(server, adapter):
    events = await events_of(server, adapter, CREATED,
                             ev("response.output_text.done", item_id="msg_1", output_index=0, text="Hello"),
                             completed())
    assert events == [TextDelta("Hello"), TurnEnd("stop", USAGE)]


# ---------------------------------------------------------------- the end of a response


async def test_eof_before_completed_is_a_truncated_stream(server, adapter):
    # the call item is complete, but the response never was: nothing may run
    err, seen = await error_of(server, adapter, CREATED, added("fc_1", "call_1", "replace_text"),
                               args_done("fc_1", '{"path": "a.ts"}'),
                               item_done("fc_1", "call_1", "replace_text", '{"path": "a.ts"}'))
    assert err.code == ErrorCode.PROVIDER_PROTOCOL and "before response.completed" in err.message
    assert seen == []


async def test_data_done_marker_does_not_end_a_response(server, adapter):
    err, _ = await error_of(server, adapter, CREATED, text_delta("hi"), "data: [DONE]\n\n")
    assert err.code == ErrorCode.PROVIDER_PROTOCOL and "truncated" in err.message


async def test_response_completed_ends_the_turn_even_if_the_body_goes_on(server, adapter):
    server.add_turns({"raw": [CREATED, text_delta("ok"), completed()], "stall": True})
    events = await run_turn(adapter)
    assert events == [TextDelta("ok"), TurnEnd("stop", USAGE)]


@pytest.mark.parametrize(("error", "code"), [
    ({"code": "context_length_exceeded", "message": "Your input exceeds the context window of this model."},
     ErrorCode.LIMIT_EXCEEDED),
    ({"code": "rate_limit_exceeded", "message": "Rate limit reached."}, ErrorCode.PROVIDER_UNAVAILABLE),
    ({"code": "server_error", "message": "The server had an error."}, ErrorCode.PROVIDER_UNAVAILABLE),
    ({"code": "invalid_prompt", "message": "Invalid prompt."}, ErrorCode.PROVIDER_PROTOCOL),
], ids=["context-length", "rate-limit", "server-error", "invalid-prompt"])
async def test_response_failed_maps_its_error(server, adapter, error, code):
    failed = ev("response.failed", response={"id": "resp_1", "status": "failed", "error": error, "output": []})
    server_side = error["code"] == "server_error"
    err, seen = await error_of(server, adapter, CREATED, text_delta("x"), failed, times=3 if server_side else 1)
    assert err.code == code and f"response.failed: {error['code']}" in err.message
    assert error["message"] in err.message
    if server_side:  # asked again twice (the retry budget), each void attempt announced by a TurnRestart
        assert [type(e).__name__ for e in seen] == ["TextDelta", "TurnRestart"] * 2 + ["TextDelta"]
        assert len(server.requests) == 3
    else:
        assert seen == [TextDelta("x")] and len(server.requests) == 1


async def test_response_incomplete_at_the_output_limit_is_stop_reason_length(server, adapter):
    incomplete = ev("response.incomplete", response={
        "id": "resp_1", "status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"},
        "output": [], "usage": USAGE})
    events = await events_of(server, adapter, CREATED, text_delta("The answer is"), incomplete)
    assert events == [TextDelta("The answer is"), TurnEnd("length", USAGE)]


async def test_a_call_cut_by_the_output_limit_is_invalid_and_finished_calls_stand(server, adapter):
    incomplete = ev("response.incomplete", response={
        "id": "resp_1", "status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"},
        "output": [fc("fc_1", "call_1", "read_file", '{"path": "a.ts"}', "completed"),
                   fc("fc_2", "call_2", "read_file", '{"path": "b', "incomplete")]})
    events = await events_of(server, adapter, CREATED, item_done("fc_1", "call_1", "read_file", '{"path": "a.ts"}', 0),
                             added("fc_2", "call_2", "read_file", 1), delta("fc_2", '{"path": "b', 1), incomplete)
    first, second, end = events
    assert (first.id, first.arguments_json, first.invalid) == ("call_1", '{"path": "a.ts"}', None)
    assert second.id == "call_2" and second.invalid is not None
    assert end.stop_reason == "tool_calls"


async def test_a_cut_call_with_parseable_arguments_is_still_invalid(server, adapter):
    incomplete = ev("response.incomplete", response={
        "id": "resp_1", "status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}, "output": []})
    events = await events_of(server, adapter, CREATED, added("fc_1", "call_1", "read_file"),
                             delta("fc_1", '{"path": "a.ts"}'), incomplete)
    [call] = [e for e in events if isinstance(e, ToolCallEvent)]
    assert call.invalid == "the arguments were cut off at the output limit"


async def test_response_incomplete_by_the_content_filter_is_a_clear_error(server, adapter):
    incomplete = ev("response.incomplete", response={
        "id": "resp_1", "status": "incomplete", "incomplete_details": {"reason": "content_filter"}, "output": []})
    err, _ = await error_of(server, adapter, CREATED, item_done("fc_1", "call_1", "read_file", "{}"), incomplete)
    assert err.code == ErrorCode.PROVIDER_PROTOCOL and "content filter" in err.message


async def test_error_event_then_eof_fails_with_its_error(server, adapter):
    err, _ = await error_of(server, adapter, CREATED,
                            ev("error", code="server_error", message="The model crashed.", param=None), times=3)
    assert err.code == ErrorCode.PROVIDER_UNAVAILABLE and "error event: server_error" in err.message
    assert "The model crashed." in err.message


async def test_error_event_then_response_failed_uses_the_failed_error(server, adapter):
    failed = ev("response.failed", response={"id": "resp_1", "status": "failed", "output": [],
                                             "error": {"code": "context_length_exceeded", "message": "too long"}})
    err, _ = await error_of(server, adapter, CREATED, ev("error", error={"code": "unknown", "message": "x"}), failed)
    assert err.code == ErrorCode.LIMIT_EXCEEDED and "response.failed: context_length_exceeded" in err.message


async def test_error_event_then_silence_fails_without_waiting_for_the_idle_timeout(server, adapter):
    server.add_turns({"raw": [CREATED, ev("error", code="invalid_request", message="Bad tool schema.")],
                      "stall": True})
    started = time.monotonic()
    with pytest.raises(ProviderError) as info:
        await run_turn(adapter)
    assert time.monotonic() - started < ERROR_FOLLOW_UP_WAIT + 1.5  # the adapter's idle timeout is 5 s
    assert info.value.code == ErrorCode.PROVIDER_PROTOCOL and "Bad tool schema." in info.value.message


async def test_an_error_event_wins_over_a_later_completed(server, adapter):
    err, _ = await error_of(server, adapter, CREATED, ev("error", code="server_error", message="boom"), completed(),
                            times=3)
    assert err.code == ErrorCode.PROVIDER_UNAVAILABLE and "boom" in err.message


# ---------------------------------------------------------------- noise in the stream


async def test_keep_alive_comments_and_pings_are_ignored(server, adapter):
    events = await events_of(server, adapter, ": keep-alive\n\n", CREATED, ": ping\n\n",
                             'data: {"type": "ping"}\n\n', "event: keepalive\ndata: keepalive\n\n",
                             text_delta("ok"), ": keep-alive\n\n", "\n\n", completed())
    assert events == [TextDelta("ok"), TurnEnd("stop", USAGE)]


async def test_unknown_event_types_are_ignored(server, adapter):
    events = await events_of(
        server, adapter, CREATED,
        ev("response.reasoning_summary_text.delta", item_id="rs_1", output_index=0, delta="thinking"),
        ev("response.web_search_call.in_progress", item_id="ws_1", output_index=0),
        ev("response.some_future_event", payload={"x": 1}),
        ev("response.content_part.added", item_id="msg_1", output_index=1, content_index=0,
           part={"type": "output_text", "text": ""}),
        text_delta("ok"), completed(),
    )
    assert events == [TextDelta("ok"), TurnEnd("stop", USAGE)]


async def test_event_type_only_on_the_event_line(server, adapter):
    events = await events_of(
        server, adapter,
        ev("response.created", typed=False, response={"id": "resp_1"}),
        ev("response.output_item.added", typed=False, output_index=0, item=fc("fc_1", "call_1", "read_file")),
        ev("response.function_call_arguments.done", typed=False, item_id="fc_1", output_index=0, arguments="{}"),
        ev("response.completed", typed=False, response={"id": "resp_1", "status": "completed", "output": []}),
    )
    assert calls_of(events) == [("call_1", "read_file", {})]


async def test_event_type_only_in_the_data(server, adapter):
    events = await events_of(server, adapter, ev("response.created", named=False, response={"id": "r"}),
                             ev("response.output_text.delta", named=False, item_id="m", delta="ok"),
                             ev("response.completed", named=False, response={"status": "completed"}))
    assert events == [TextDelta("ok"), TurnEnd("stop", None)]


async def test_non_json_data_of_a_known_event_is_a_protocol_error(server, adapter):
    err, _ = await error_of(server, adapter, CREATED, "event: response.output_text.delta\ndata: {not json\n\n")
    assert err.code == ErrorCode.PROVIDER_PROTOCOL


async def test_a_whole_json_response_is_accepted_when_the_relay_ignores_stream(server, adapter):
    body = {"id": "resp_1", "object": "response", "status": "completed", "usage": USAGE, "output": [
        {"id": "msg_1", "type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Hi"}]},
        fc("fc_1", "call_1", "read_file", '{"path": "a.ts"}', "completed")]}
    server.add_turns({"status": 200, "body": body})
    events = await run_turn(adapter)
    assert events[0] == TextDelta("Hi")
    assert calls_of(events) == [("call_1", "read_file", {"path": "a.ts"})]
    assert events[-1] == TurnEnd("tool_calls", USAGE)
