"""One behavioural suite for both adapters (issue 7 acceptance 1, 4, 5; docs/design.md §5, §11).

Every test is parametrised over ``api`` ∈ {chat, responses}: the same scripted turns are served by the one
:class:`ScriptedProviderServer` in each wire format, read by the production adapter over a real local HTTP
connection, and must give the same internal events. The last tests run whole jobs through the engine with
either API and compare their results.
"""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import pytest

from spotpatch_agent.demo.runner import TOUCHED, make_demo_project
from spotpatch_agent.demo.script import demo_turns
from spotpatch_agent.engine.service import EngineService
from spotpatch_agent.errors import ProviderError
from spotpatch_agent.protocol.errors import ErrorCode
from spotpatch_agent.protocol.models import JobCreateParams, JobIdParams, TrustedConfig
from spotpatch_agent.provider.base import (
    AssistantTurn,
    TextDelta,
    ToolCallEvent,
    ToolCallRecord,
    ToolResultMessage,
    TurnEnd,
    TurnRequest,
)
from spotpatch_agent.provider.scripted import ScriptedProviderServer
from tests.support.annotations import demo_annotation

from .apis import APIS, api_of, echoed_calls, make_adapter, tool_results
from .conftest import CANARY_KEY, CANCEL_CLOSES_WITHIN, OK_TURN, REQUEST, run_turn

pytestmark = pytest.mark.anyio

READ_A = {"id": "call_1", "name": "read_file", "arguments": {"path": "a.ts"}}
SEARCH = {"id": "call_2", "name": "search_text", "arguments": {"query": "btn", "glob": "src/**"}}


@pytest.fixture(params=APIS)
def api(request: pytest.FixtureRequest) -> str:
    return request.param


def tokens(usage: dict | None) -> tuple[int, int] | None:
    """(input, output) tokens of a usage object in either wire format."""
    if usage is None:
        return None
    return (usage.get("prompt_tokens", usage.get("input_tokens")),
            usage.get("completion_tokens", usage.get("output_tokens")))


def neutral(events) -> list:
    """Events with usage reduced to its token counts (each format keeps its provider's usage object)."""
    return [TurnEnd(e.stop_reason, tokens(e.usage)) if isinstance(e, TurnEnd) else e for e in events]


def after(request: TurnRequest, calls: list[ToolCallEvent], outputs: list[str]) -> TurnRequest:
    """``request`` continued by the assistant turn of ``calls`` and their results."""
    turn = AssistantTurn("", tuple(ToolCallRecord(c.id, c.name, c.arguments_json) for c in calls))
    results = tuple(ToolResultMessage(c.id, out) for c, out in zip(calls, outputs, strict=True))
    return TurnRequest(system=request.system, items=(*request.items, turn, *results), tools=request.tools,
                       model=request.model)


# ---------------------------------------------------------------- one turn: same events


async def test_text_turn(server, adapter, api):
    server.add_turns({"text": "Hello, world", "textChunks": 3, "finishReason": "stop",
                      "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}})
    events = await run_turn(adapter)
    assert neutral(events) == [TextDelta("Hell"), TextDelta("o, w"), TextDelta("orld"), TurnEnd("stop", (7, 3))]
    assert api_of(server.requests[0]) == api


async def test_one_tool_call(server, adapter):
    server.add_turns({"toolCalls": [READ_A], "argumentChunks": 4})
    events = await run_turn(adapter)
    assert neutral(events) == [ToolCallEvent("call_1", "read_file", '{"path": "a.ts"}'),
                               TurnEnd("tool_calls", (100, 20))]


async def test_text_and_two_parallel_tool_calls(server, adapter):
    server.add_turns({"text": "Looking.", "textChunks": 1, "toolCalls": [READ_A, SEARCH]})
    events = await run_turn(adapter)
    assert neutral(events) == [
        TextDelta("Looking."),
        ToolCallEvent("call_1", "read_file", '{"path": "a.ts"}'),
        ToolCallEvent("call_2", "search_text", '{"query": "btn", "glob": "src/**"}'),
        TurnEnd("tool_calls", (100, 20)),
    ]


async def test_malformed_arguments_are_an_invalid_call_never_run(server, adapter):
    server.add_turns({"toolCalls": [{"id": "call_1", "name": "read_file", "arguments": '{"path": "a.ts"'}]})
    [call, end] = await run_turn(adapter)
    assert call.id == "call_1" and call.invalid is not None and "not valid JSON" in call.invalid
    assert end.stop_reason == "tool_calls"


async def test_empty_arguments_are_an_empty_object(server, adapter):
    server.add_turns({"toolCalls": [{"id": "call_1", "name": "list_files", "arguments": ""}]})
    [call, _] = await run_turn(adapter)
    assert (call.arguments_json, call.invalid) == ("{}", None)


async def test_same_script_gives_the_same_events_in_both_formats(server):
    script = [{"text": "Reading two files.", "toolCalls": [READ_A, SEARCH], "argumentChunks": 5},
              {"text": "Done: the button is primary.", "finishReason": "stop"}]
    seen = {}
    for api in APIS:
        server.add_turns(*script)
        adapter = make_adapter(api, server)
        try:
            first = await run_turn(adapter)
            calls = [e for e in first if isinstance(e, ToolCallEvent)]
            second = await run_turn(adapter, after(REQUEST, calls, ["A", "B"]))
        finally:
            await adapter.aclose()
        seen[api] = neutral(first) + neutral(second)
    assert seen["chat"] == seen["responses"]
    assert [api_of(body) for body in server.requests] == ["chat", "chat", "responses", "responses"]


# ---------------------------------------------------------------- tool results and ids across turns


async def test_tool_results_round_trip_under_the_original_ids(server, adapter):
    def answer(body: dict) -> dict:
        results = tool_results(body)
        return {"text": "; ".join(f"{cid}={out}" for cid, out in results), "textChunks": 1}

    server.add_turns({"toolCalls": [READ_A, SEARCH]}, answer)
    calls = [e for e in await run_turn(adapter) if isinstance(e, ToolCallEvent)]
    events = await run_turn(adapter, after(REQUEST, calls, ["contents of a", "3 hits"]))
    assert events[0] == TextDelta("call_1=contents of a; call_2=3 hits")
    assert echoed_calls(server.requests[1]) == [("call_1", "read_file", {"path": "a.ts"}),
                                                ("call_2", "search_text", {"query": "btn", "glob": "src/**"})]


async def test_an_id_reused_in_a_later_turn_is_accepted(server, adapter):
    server.add_turns({"toolCalls": [{**READ_A, "id": "same"}]}, {"toolCalls": [{**SEARCH, "id": "same"}]}, OK_TURN)
    first = [e for e in await run_turn(adapter) if isinstance(e, ToolCallEvent)]
    request = after(REQUEST, first, ["r1"])
    second = [e for e in await run_turn(adapter, request) if isinstance(e, ToolCallEvent)]
    assert [(c.id, c.name) for c in first + second] == [("same", "read_file"), ("same", "search_text")]
    events = await run_turn(adapter, after(request, second, ["r2"]))
    assert events[0] == TextDelta("ok")
    assert tool_results(server.requests[2]) == [("same", "r1"), ("same", "r2")]
    assert [c[:2] for c in echoed_calls(server.requests[2])] == [("same", "read_file"), ("same", "search_text")]


async def test_two_calls_sharing_an_id_in_one_turn_fail(server, adapter):
    server.add_turns({"toolCalls": [{**READ_A, "id": "dup"}, {**SEARCH, "id": "dup"}]})
    seen = []
    with pytest.raises(ProviderError) as info:
        async for event in adapter.stream_turn(REQUEST):
            seen.append(event)
    assert info.value.code == ErrorCode.PROVIDER_PROTOCOL and "share the id 'dup'" in info.value.message
    assert not any(isinstance(e, ToolCallEvent) for e in seen)


# ---------------------------------------------------------------- cancellation (acceptance 5)


@pytest.mark.parametrize("turn", [
    {"text": "hello", "textChunks": 1, "toolCalls": [READ_A], "stallAfterText": True},
    {"text": "hello", "textChunks": 1, "stallAfterText": True},
], ids=["call-pending", "text-only"])
async def test_cancel_mid_stream_closes_the_connection_within_one_second(server, adapter, turn):
    server.add_turns(turn)
    got_text = anyio.Event()

    async def consume() -> None:
        async for event in adapter.stream_turn(REQUEST):
            if isinstance(event, TextDelta):
                got_text.set()

    with anyio.move_on_after(3) as scope:
        async with anyio.create_task_group() as tg:
            tg.start_soon(consume)
            await got_text.wait()
            cancelled_at = time.monotonic()
            tg.cancel_scope.cancel()
    assert not scope.cancelled_caught
    assert time.monotonic() - cancelled_at < CANCEL_CLOSES_WITHIN
    assert await anyio.to_thread.run_sync(server.wait_for_disconnect, CANCEL_CLOSES_WITHIN)
    assert server.disconnect_times[0] - cancelled_at < CANCEL_CLOSES_WITHIN


async def test_cancel_while_waiting_for_the_first_byte_closes_the_connection(server, adapter):
    server.add_turns({"stall": True})
    async with anyio.create_task_group() as tg:
        tg.start_soon(run_turn, adapter)
        with anyio.fail_after(2):
            while not server.requests:  # the server read the whole request: the client waits for the answer
                await anyio.sleep(0.01)
        cancelled_at = time.monotonic()
        tg.cancel_scope.cancel()
    assert await anyio.to_thread.run_sync(server.wait_for_disconnect, CANCEL_CLOSES_WITHIN)
    assert server.disconnect_times[0] - cancelled_at < CANCEL_CLOSES_WITHIN


# ---------------------------------------------------------------- errors and retries


@pytest.mark.parametrize("status", [429, 500])
async def test_transient_status_is_retried_then_the_turn_succeeds(server, adapter, status):
    server.add_turns({"status": status, "headers": {"retry-after-ms": "5"}}, OK_TURN)
    events = await run_turn(adapter)
    assert neutral(events) == [TextDelta("ok"), TurnEnd("stop", (100, 20))]
    assert len(server.requests) == 2


@pytest.mark.parametrize("abort", [False, True], ids=["body-ends", "connection-dropped"])
async def test_eof_mid_stream_is_a_truncated_stream_and_no_call_runs(server, adapter, abort):
    server.add_turns({"text": "partial", "textChunks": 1, "toolCalls": [READ_A], "endAfterText": True, "abort": abort})
    seen = []
    with pytest.raises(ProviderError) as info:
        async for event in adapter.stream_turn(REQUEST):
            seen.append(event)
    assert seen == [TextDelta("partial")]
    assert info.value.code == ErrorCode.PROVIDER_PROTOCOL and "truncated" in info.value.message


async def test_a_stalled_stream_hits_the_idle_timeout(server, api):
    server.add_turns({"text": "partial", "textChunks": 1, "stallAfterText": True})
    adapter = make_adapter(api, server, idle_timeout=0.3)
    seen = []
    try:
        with pytest.raises(ProviderError) as info:
            async for event in adapter.stream_turn(REQUEST):
                seen.append(event)
    finally:
        await adapter.aclose()
    assert seen == [TextDelta("partial")]
    assert info.value.code == ErrorCode.PROVIDER_UNAVAILABLE and "stream stalled" in info.value.message
    assert await anyio.to_thread.run_sync(server.wait_for_disconnect, 2.0)


# ---------------------------------------------------------------- whole jobs through the engine

KEY_ENV = "SPOTPATCH_SHARED_SUITE_KEY"


def _config(server: ScriptedProviderServer, api: str) -> TrustedConfig:
    return TrustedConfig.model_validate({"providers": [{
        "id": "p", "displayName": "P", "api": api, "baseUrl": server.base_url, "apiKeyEnv": KEY_ENV,
        "models": [{"id": "m", "model": "scripted-model", "displayName": "M"}]}], "checks": [], "limits": {}})


async def _run_job(root: Path, api: str, turns: list, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(KEY_ENV, CANARY_KEY)
    events: list[dict] = []
    with ScriptedProviderServer(turns) as server:
        service = EngineService(send_event=events.append)
        async with service.running():
            await service.configure(root, _config(server, api))
            assert service.ai_enabled()
            [info] = (await service.provider_list()).providers
            assert info.available and info.api == api
            annotation = demo_annotation()
            snap = await service.job_create(JobCreateParams.model_validate({"annotation": annotation,
                                                                             "modelProfileId": "m"}))
            await service.wait_job(snap.job_id)
            snap = await service.job_get(JobIdParams(job_id=snap.job_id))
            diff = await service.job_diff(JobIdParams(job_id=snap.job_id)) if snap.status == "awaiting-review" else None
    assert {api_of(body) for body in server.requests} == {api}
    activity = [(e["tool"], e["toolCallId"], e["turn"], e["ok"]) for e in events
                if e.get("kind") == "activity" and e.get("phase") == "finished"]
    return snap, diff, activity, server


async def test_the_demo_job_gives_the_same_result_with_both_apis(tmp_path, monkeypatch):
    results = {}
    for api in APIS:
        project = make_demo_project(tmp_path / api)
        snap, diff, activity, server = await _run_job(project, api, demo_turns(), monkeypatch)
        assert snap.status == "awaiting-review", snap.error
        results[api] = (snap.status, diff.diff, [f.model_dump() for f in diff.files], activity)
        # the reused id of turn 3 went back under the provider's original id
        assert tool_results(server.requests[3])[-1][0] == "call_read_1"
    assert results["chat"] == results["responses"]
    _, text, files, activity = results["responses"]
    assert '+      <button className="btn btn-primary" onClick={onSave}>Save</button>' in text
    assert '+      <span className="price">${price.toFixed(2)}</span>' in text
    assert [f["path"] for f in files] == [TOUCHED]
    assert [(tool, cid, turn) for tool, cid, turn, _ in activity] == [
        ("read_file", "call_read_1", 1), ("search_text", "call_search_1", 1), ("replace_text", "call_edit_1", 2),
        ("replace_text", "call_edit_2", 2), ("read_file", "call_read_1", 3)]


@pytest.mark.parametrize("last", [
    ({"text": "The reply was cut", "finishReason": "length"}, "LIMIT_EXCEEDED"),
    ({"status": 401, "body": {"error": {"message": "revoked"}}}, "PROVIDER_AUTH"),
], ids=["output-limit", "auth"])
async def test_a_failing_turn_fails_the_job_the_same_way_with_both_apis(tmp_path, monkeypatch, last):
    turn, code = last
    first = {"toolCalls": [{"id": "call_read_1", "name": "read_file",
                            "arguments": {"path": TOUCHED, "startLine": None, "endLine": None}}]}
    outcomes = {}
    for api in APIS:
        project = make_demo_project(tmp_path / api)
        snap, _, activity, _ = await _run_job(project, api, [first, turn], monkeypatch)
        outcomes[api] = (snap.status, snap.error.code if snap.error else None, activity)
    assert outcomes["chat"] == outcomes["responses"] == ("failed", code, [("read_file", "call_read_1", 1, True)])


async def test_the_explicit_probe_passes_with_both_apis(tmp_path, monkeypatch):
    from spotpatch_agent.protocol.models import ProviderProbeParams

    monkeypatch.setenv(KEY_ENV, CANARY_KEY)
    probe_turns = [{"toolCalls": [{"id": "p1", "name": "report_ready", "arguments": {"ready": True}}]},
                   {"text": "OK", "finishReason": "stop"}]
    for api in APIS:
        project = make_demo_project(tmp_path / api)
        with ScriptedProviderServer(probe_turns) as server:
            service = EngineService(send_event=lambda _event: None)
            async with service.running():
                await service.configure(project, _config(server, api))
                result = await service.provider_probe(ProviderProbeParams(model_profile_id="m"))
        assert result.ok and result.tool_calling, (api, result.message)
        assert [api_of(body) for body in server.requests] == [api, api]
        assert [call_id for call_id, _ in tool_results(server.requests[1])] == ["p1"]  # the original id
