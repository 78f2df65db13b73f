"""``provider/probe`` (docs/design.md §11, provider/probe.py): model listing, one forced tool round trip, the
session cache and the inline proof of a real job — through the real engine service, the real Chat adapter
and the real local scripted server."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from spotpatch_agent.engine.service import EngineService
from spotpatch_agent.protocol.models import (
    JobCreateParams,
    JobIdParams,
    ProbeResult,
    ProviderProbeParams,
    TrustedConfig,
)
from spotpatch_agent.provider.base import (
    ProviderEvent,
    TextDelta,
    ToolCallEvent,
    TurnEnd,
    TurnRequest,
)
from spotpatch_agent.provider.probe import (
    MAX_MODELS,
    MAX_SHOWN,
    PROBE_TOOL,
    ModelListing,
    is_listed,
    missing_model,
    model_ids,
    probe_tool_calling,
)
from spotpatch_agent.provider.scripted import ScriptedProviderServer
from tests.conftest import make_repo
from tests.support.annotations import annotation, target

from .conftest import CANARY_KEY

pytestmark = pytest.mark.anyio

KEY_ENV = "SPOTPATCH_PROBE_TEST_KEY"
PROBE_CALL = {"toolCalls": [{"id": "call_probe", "name": "report_ready", "arguments": {"ready": True}}]}
PROBE_OK = [PROBE_CALL, {"text": "OK", "finishReason": "stop"}]
FILES = {"src/App.tsx": 'export const App = () => <button className="a">Go</button>;\n', ".gitignore": "node_modules\n"}
TARGET = annotation(target())
READ = {"id": "r1", "name": "read_file", "arguments": {"path": "src/App.tsx", "startLine": None, "endLine": None}}
EDIT = {"id": "w1", "name": "replace_text",
        "arguments": {"path": "src/App.tsx", "oldText": ">Go<", "newText": ">Start<"}}


def config(server: ScriptedProviderServer, model: str = "scripted-model", api: str = "chat") -> TrustedConfig:
    return TrustedConfig.model_validate({"providers": [{
        "id": "p", "displayName": "P", "api": api, "baseUrl": server.base_url, "apiKeyEnv": KEY_ENV,
        "models": [{"id": "m", "model": model, "displayName": "M"},
                   {"id": "other", "model": model, "displayName": "Other"}]}]})


@asynccontextmanager
async def engine(tmp_path: Path, server: ScriptedProviderServer, monkeypatch: pytest.MonkeyPatch,
                 model: str = "scripted-model", api: str = "chat") -> AsyncIterator[EngineService]:
    monkeypatch.setenv(KEY_ENV, CANARY_KEY)
    service = EngineService(send_event=lambda _event: None)
    async with service.running():
        await service.configure(make_repo(tmp_path / "repo", FILES), config(server, model, api))
        yield service


async def probe(service: EngineService, profile: str = "m") -> ProbeResult:
    return await service.provider_probe(ProviderProbeParams(model_profile_id=profile))


# ---------------------------------------------------------------- listing, then one forced round trip


async def test_probe_lists_models_then_runs_one_forced_tool_round_trip(tmp_path, monkeypatch):
    with ScriptedProviderServer(PROBE_OK, models=("other-model", "scripted-model")) as server:
        async with engine(tmp_path, server, monkeypatch) as service:
            result = await probe(service)
    assert (result.ok, result.tool_calling, result.cached, result.source) == (True, True, False, "probe")
    assert result.error is None and result.models == ["other-model", "scripted-model"]
    assert result.message.startswith("The endpoint lists 2 model(s). Tool calling works")
    assert server.model_listings == 1 and len(server.requests) == 2
    first, second = server.requests
    assert first["tool_choice"] == "required" and [t["function"]["name"] for t in first["tools"]] == ["report_ready"]
    assert "max_tokens" not in first and "max_tokens" not in second
    assert second["tool_choice"] == "none"
    assert [m for m in second["messages"] if m["role"] == "tool"] == [
        {"role": "tool", "tool_call_id": "call_probe", "content": "ok"}]
    assert {r["model"] for r in server.requests} == {"scripted-model"}  # never another model
    assert server.headers[0]["authorization"] == f"Bearer {CANARY_KEY}"


async def test_probe_runs_the_same_over_the_responses_api(tmp_path, monkeypatch):
    with ScriptedProviderServer(PROBE_OK) as server:
        async with engine(tmp_path, server, monkeypatch, api="responses") as service:
            result = await probe(service)
    assert (result.ok, result.tool_calling, result.source, result.models) == (True, True, "probe", ["scripted-model"])
    assert server.model_listings == 1 and len(server.requests) == 2
    first, second = server.requests
    assert first["tool_choice"] == "required" and [t["name"] for t in first["tools"]] == ["report_ready"]
    outputs = [i for i in second["input"] if i.get("type") == "function_call_output"]
    assert [(o["call_id"], o["output"]) for o in outputs] == [("call_probe", "ok")]
    assert {r["model"] for r in server.requests} == {"scripted-model"}


async def test_probe_success_is_cached_for_the_session_per_model_profile(tmp_path, monkeypatch):
    with ScriptedProviderServer(PROBE_OK + PROBE_OK) as server:
        async with engine(tmp_path, server, monkeypatch) as service:
            first = await probe(service)
            again = await probe(service)
            assert (again.cached, again.ok, again.source) == (True, True, "probe")
            assert server.model_listings == 1 and len(server.requests) == 2  # no request for a cached answer
            other = await probe(service, "other")  # another profile is probed on its own
    assert first.cached is False and other.cached is False and other.model_profile_id == "other"
    assert server.model_listings == 2 and len(server.requests) == 4


async def test_missing_model_names_the_configured_and_available_models_and_never_switches(tmp_path, monkeypatch):
    listed = [f"vendor-model-{i:02d}" for i in range(20)] + ["gpt-4o-mini", "gpt-4o"]
    with ScriptedProviderServer(PROBE_OK, models=listed) as server:
        async with engine(tmp_path, server, monkeypatch, model="gpt-4o-mimi") as service:
            result = await probe(service)
            assert (await probe(service)).cached is False  # a failure is not cached
    assert (result.ok, result.tool_calling) == (False, False)
    assert result.error is not None and result.error.code == "PROVIDER_UNAVAILABLE" and result.error.retryable is False
    message = result.message
    assert "'gpt-4o-mimi' is not offered by this endpoint" in message and "never switches models" in message
    shown = message.split("It lists: ")[1]
    assert shown.startswith("gpt-4o-mini")  # closest first
    assert f"(and {len(listed) - MAX_SHOWN} more)" in shown
    assert result.models == listed  # fewer than MAX_MODELS: all of them
    assert server.requests == []  # no model turn at all, with any model


async def test_listed_models_are_bounded(tmp_path, monkeypatch):
    listed = [f"m-{i:03d}" for i in range(120)] + ["scripted-model"]
    with ScriptedProviderServer(PROBE_OK, models=listed) as server:
        async with engine(tmp_path, server, monkeypatch) as service:
            result = await probe(service)
    assert result.ok and result.models == listed[:MAX_MODELS]
    assert "lists 121 model(s)" in result.message


@pytest.mark.parametrize("status", [404, 405])
async def test_model_listing_404_or_405_is_reported_and_the_round_trip_still_runs(tmp_path, monkeypatch, status):
    with ScriptedProviderServer(PROBE_OK) as server:
        server.models_answer = (status, {"error": {"message": "no such route"}})
        async with engine(tmp_path, server, monkeypatch) as service:
            result = await probe(service)
    assert result.ok and result.tool_calling and result.models is None
    assert result.message.startswith("Model listing unsupported by this endpoint.")
    assert len(server.requests) == 2


@pytest.mark.parametrize("answer", [(200, "<html>relay login</html>"), (200, {"object": "list"}), (503, None)],
                         ids=["html", "unknown-shape", "503"])
async def test_unusable_model_listing_is_tolerated_and_the_round_trip_decides(tmp_path, monkeypatch, answer):
    with ScriptedProviderServer(PROBE_OK) as server:
        server.models_answer = answer
        async with engine(tmp_path, server, monkeypatch) as service:
            result = await probe(service)
    assert result.ok and result.models is None and "the tool round trip decides" in result.message


async def test_ollama_native_listing_with_latest_tag_matches_the_untagged_model(tmp_path, monkeypatch):
    with ScriptedProviderServer(PROBE_OK) as server:
        server.models_answer = (200, {"models": [{"name": "llama3.1:latest", "model": "llama3.1:latest"}]})
        async with engine(tmp_path, server, monkeypatch, model="llama3.1") as service:
            result = await probe(service)
    assert result.ok and result.models == ["llama3.1:latest"]
    assert {r["model"] for r in server.requests} == {"llama3.1"}  # sent as configured


async def test_model_listing_401_is_provider_auth_and_no_round_trip(tmp_path, monkeypatch):
    with ScriptedProviderServer(PROBE_OK) as server:
        server.models_answer = (401, {"error": {"message": f"Incorrect API key provided: {CANARY_KEY}"}})
        async with engine(tmp_path, server, monkeypatch) as service:
            result = await probe(service)
    assert not result.ok and result.error is not None and result.error.code == "PROVIDER_AUTH"
    assert server.requests == [] and CANARY_KEY not in result.model_dump_json()


async def test_first_turn_without_a_tool_call_is_model_tool_call_unsupported(tmp_path, monkeypatch):
    with ScriptedProviderServer([{"text": "I cannot call tools.", "finishReason": "stop"}]) as server:
        async with engine(tmp_path, server, monkeypatch) as service:
            result = await probe(service)
    assert (result.ok, result.tool_calling) == (False, False)
    assert result.error is not None and result.error.code == "MODEL_TOOL_CALL_UNSUPPORTED"
    assert "no tool call" in result.message and len(server.requests) == 1


async def test_malformed_probe_call_is_unsupported_and_not_continued(tmp_path, monkeypatch):
    bad = {"toolCalls": [{"id": "c1", "name": "report_ready", "arguments": '{"ready": tru'}]}
    with ScriptedProviderServer([bad]) as server:
        async with engine(tmp_path, server, monkeypatch) as service:
            result = await probe(service)
    assert result.error is not None and result.error.code == "MODEL_TOOL_CALL_UNSUPPORTED"
    assert "malformed or unexpected tool call" in result.message and len(server.requests) == 1


async def test_failed_continuation_is_a_failed_probe(tmp_path, monkeypatch):
    turns = [PROBE_CALL, {"status": 400, "body": {"error": {"message": "tool_call_id missing"}}}]
    with ScriptedProviderServer(turns) as server:
        async with engine(tmp_path, server, monkeypatch) as service:
            result = await probe(service)
            assert (await probe(service)).cached is False
    assert not result.ok and result.error is not None and result.error.code == "PROVIDER_PROTOCOL"


# ---------------------------------------------------------------- pure parts


def test_model_ids_reads_the_usual_listing_shapes():
    assert model_ids({"object": "list", "data": [{"id": "gpt-4o"}, {"id": "o3"}]}) == ["gpt-4o", "o3"]
    assert model_ids({"models": [{"name": "qwen2.5:7b"}, {"model": "phi3"}]}) == ["qwen2.5:7b", "phi3"]
    assert model_ids(["a", {"id": "b"}, {"id": 3}, "", "a"]) == ["a", "b"]
    assert model_ids({"data": None}) is None and model_ids("text") is None and model_ids(None) is None


def test_is_listed_is_exact_apart_from_known_spellings():
    assert is_listed("llama3.1", ["llama3.1:latest"]) and is_listed("gemini-2.0-flash", ["models/gemini-2.0-flash"])
    assert not is_listed("gpt-4o", ["gpt-4o-mini", "gpt-4o-2024-08-06"])  # never fuzzy
    assert not is_listed("llama3.1:8b", ["llama3.1:latest"])


def test_azure_listing_of_base_models_does_not_fail_a_deployment_name():
    listing = ModelListing(("gpt-4o-2024-08-06",), "The endpoint lists 1 model(s).")
    azure = "https://my-resource.openai.azure.com/openai/v1"
    assert missing_model("my-gpt4o-deployment", listing, base_url=azure) is None
    assert missing_model("my-gpt4o-deployment", listing, base_url="https://api.openai.com/v1") is not None


class _InterfaceOnlyAdapter:
    """Any wire format: only ``stream_turn`` / ``aclose`` of provider/base.py (e.g. the Responses adapter)."""

    def __init__(self, turns: list[list[ProviderEvent]]) -> None:
        self.turns, self.requests = list(turns), []

    async def stream_turn(self, request: TurnRequest) -> AsyncIterator[ProviderEvent]:
        self.requests.append(request)
        for event in self.turns.pop(0):
            yield event

    async def aclose(self) -> None:
        pass


async def test_round_trip_uses_only_the_adapter_interface_and_answers_every_call():
    adapter = _InterfaceOnlyAdapter([
        [TextDelta("calling"), ToolCallEvent("fc_1", "report_ready", '{"ready": true}'),
         ToolCallEvent("fc_2", "list_files", "{}"), TurnEnd("tool_calls")],
        [TextDelta("OK"), TurnEnd("stop")],
    ])
    outcome = await probe_tool_calling(adapter, "any-model")
    assert outcome.tool_calling and outcome.code is None
    first, second = adapter.requests
    assert (first.tool_choice, first.tools, first.model) == ("required", (PROBE_TOOL,), "any-model")
    answered = [(i.call_id, i.output) for i in second.items if hasattr(i, "call_id")]
    assert answered == [("fc_1", "ok"), ("fc_2", "ERROR: not offered")]


# ---------------------------------------------------------------- inline proof


async def _run_job(service: EngineService) -> str:
    snap = await service.job_create(JobCreateParams.model_validate({"annotation": TARGET, "modelProfileId": "m"}))
    await service.wait_job(snap.job_id)
    return (await service.job_get(JobIdParams(job_id=snap.job_id))).status


async def test_a_jobs_first_tool_round_trip_proves_tool_calling_inline_without_extra_requests(tmp_path, monkeypatch):
    turns = [{"toolCalls": [READ]}, {"toolCalls": [EDIT]}, {"text": "Done.", "finishReason": "stop"}]
    # The listing lacks the model: a real probe would fail, so a cached success can only be the inline proof.
    with ScriptedProviderServer(turns, models=("not-this-one",)) as server:
        async with engine(tmp_path, server, monkeypatch) as service:
            assert await _run_job(service) == "awaiting-review"
            sent = len(server.requests)
            result = await probe(service)
            other = await probe(service, "other")  # the proof is per model profile
    assert (result.ok, result.tool_calling, result.cached, result.source) == (True, True, True, "inline")
    assert result.models is None and result.duration_ms == 0
    assert sent == 3 and server.model_listings == 1  # the one listing is the other profile's probe
    assert other.ok is False and other.source == "probe" and other.error is not None
    assert len(server.requests) == sent


async def test_a_job_without_a_continuation_proves_nothing(tmp_path, monkeypatch):
    turns = [{"text": "No tools here.", "finishReason": "stop"}, *PROBE_OK]
    with ScriptedProviderServer(turns) as server:
        async with engine(tmp_path, server, monkeypatch) as service:
            assert await _run_job(service) == "failed"
            result = await probe(service)
    assert (result.ok, result.cached, result.source) == (True, False, "probe")
    assert server.model_listings == 1 and len(server.requests) == 3


async def test_probe_result_serialises_with_source_and_models():
    wire = ProbeResult(model_profile_id="m", ok=True, tool_calling=True, cached=False, duration_ms=3, message="x",
                       models=["a"]).dump()
    assert wire["source"] == "probe" and wire["models"] == ["a"]
    assert "models" not in ProbeResult(model_profile_id="m", ok=True, tool_calling=True, cached=True, duration_ms=0,
                                       message="x", source="inline").dump()
    assert json.dumps(wire)
