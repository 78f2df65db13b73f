"""Constrained tool calls where the server offers them (issue 27, part 4), through the real engine service, the
real adapters and the real local scripted server (its request log is what the provider received).

llama.cpp's ``llama-server`` (``--jinja``) turns the tool schemas into a grammar: lazily (once the model starts a
call) under ``tool_choice: "auto"``, from the first token under ``"required"``; it refuses a custom ``grammar``
next to tools. So a job of a profile with constrained tool calls sends ``"required"`` where a call is due — turn
1, and the turn after an answer ``TOOL_ARGUMENTS_INVALID`` — and ``"auto"`` elsewhere (the model must be able to
end with text). ``auto`` (the default) means: once this session knows the server is llama.cpp — from a passed
probe's model list (``owned_by: "llamacpp"``) or from a stream's ``system_fingerprint`` (llama-server's build,
``b0-unknown`` in the recorded stream), in which case it applies from the next turn and to later jobs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from spotpatch_agent.engine.service import EngineService
from spotpatch_agent.protocol.models import JobCreateParams, JobIdParams, ProviderProbeParams, TrustedConfig
from spotpatch_agent.provider.base import TurnEnd
from spotpatch_agent.provider.probe import list_models, listing_server
from spotpatch_agent.provider.scripted import ScriptedProviderServer
from tests.conftest import make_repo
from tests.support.annotations import annotation, target

from .apis import make_adapter
from .conftest import CANARY_KEY, run_turn

pytestmark = pytest.mark.anyio

FIXTURES = Path(__file__).parent / "fixtures"
#: A real llama-server stream (``system_fingerprint: "b0-unknown"``) calling the probe's ``report_ready``: in a
#: job, a call to an undeclared tool (``TOOL_ARGUMENTS_INVALID``).
LLAMACPP_CALL = {"raw": [(FIXTURES / "llamacpp/chat/llamacpp-qwen15b-tool-call.sse").read_bytes()]}
OPENAI_CALL = {"raw": [(FIXTURES / "chat/openai-gpt4o-call-with-usage-chunk.sse").read_bytes()]}

KEY_ENV = "SPOTPATCH_CONSTRAINED_TEST_KEY"
FILES = {"src/App.tsx": 'export const App = () => <button className="a">Go</button>;\n', ".gitignore": "node_modules\n"}
ANNOTATION = annotation(target())
#: What llama-server answers to GET /v1/models (tools/server/server.cpp: one item, ``owned_by: "llamacpp"``).
LLAMACPP_MODELS = {"object": "list", "data": [
    {"id": "scripted-model", "object": "model", "created": 0, "owned_by": "llamacpp", "meta": {"n_params": 1}}]}
PROBE_OK = [{"toolCalls": [{"id": "call_probe", "name": "report_ready", "arguments": {"ready": True}}]},
            {"text": "OK", "finishReason": "stop"}]
EDIT = {"path": "src/App.tsx", "oldText": ">Go<", "newText": ">Start<"}
JOB = [
    {"toolCalls": [{"id": "r1", "name": "read_file", "arguments": {"path": "src/App.tsx", "startLine": None,
                                                                   "endLine": None}}]},
    {"toolCalls": [{"id": "w1", "name": "replace_text", "arguments": {"path": "src/App.tsx", "oldText": ">Go<"}}]},
    {"toolCalls": [{"id": "w2", "name": "replace_text", "arguments": EDIT}]},
    {"text": "Done.", "finishReason": "stop"},
]


def config(server: ScriptedProviderServer, *, api: str = "chat", flag: str | None = None) -> TrustedConfig:
    model: dict[str, Any] = {"id": "m", "model": "scripted-model", "displayName": "M"}
    if flag is not None:
        model["constrainedToolCalls"] = flag
    return TrustedConfig.model_validate({"providers": [{
        "id": "p", "displayName": "P", "api": api, "baseUrl": server.base_url, "apiKeyEnv": KEY_ENV,
        "models": [model]}]})


async def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, server: ScriptedProviderServer, *,
              api: str = "chat", flag: str | None = None, probe: bool = False) -> list[dict[str, Any]]:
    """Optionally probe, then run :data:`JOB`; the job's request bodies, in order."""
    monkeypatch.setenv(KEY_ENV, CANARY_KEY)
    service = EngineService(send_event=lambda _event: None)
    async with service.running():
        await service.configure(make_repo(tmp_path / "repo", FILES), config(server, api=api, flag=flag))
        if probe:
            result = await service.provider_probe(ProviderProbeParams(model_profile_id="m"))
            assert result.ok, result.message
        before = len(server.requests)
        snap = await service.job_create(JobCreateParams.model_validate({"annotation": ANNOTATION,
                                                                        "modelProfileId": "m"}))
        await service.wait_job(snap.job_id)
        done = await service.job_get(JobIdParams(job_id=snap.job_id))
        assert done.status == "awaiting-review", done.error
    return server.requests[before:]


def choices(bodies: list[dict[str, Any]]) -> list[str]:
    return [body["tool_choice"] for body in bodies]


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_a_constrained_profile_requires_a_call_on_turn_1_and_after_invalid_arguments(tmp_path, monkeypatch,
                                                                                          api) -> None:
    with ScriptedProviderServer(JOB) as server:
        bodies = await run(tmp_path, monkeypatch, server, api=api, flag="on")
    # turn 1: a call is due; turn 2 after a good read: free; turn 3 corrects w1's missing newText; turn 4: free.
    assert choices(bodies) == ["required", "auto", "required", "auto"]
    assert all(body["parallel_tool_calls"] is True and "grammar" not in body for body in bodies)


async def test_the_default_sends_auto_without_a_probe_that_found_llamacpp(tmp_path, monkeypatch) -> None:
    with ScriptedProviderServer(PROBE_OK + JOB) as server:  # the scripted server lists its models as its own
        bodies = await run(tmp_path, monkeypatch, server, probe=True)
    assert choices(bodies) == ["auto"] * 4


async def test_a_probe_that_finds_llamacpp_constrains_the_jobs_of_an_auto_profile(tmp_path, monkeypatch) -> None:
    with ScriptedProviderServer(PROBE_OK + JOB) as server:
        server.models_answer = (200, LLAMACPP_MODELS)
        bodies = await run(tmp_path, monkeypatch, server, probe=True)
    assert choices(bodies) == ["required", "auto", "required", "auto"]


async def test_off_wins_over_a_llamacpp_probe(tmp_path, monkeypatch) -> None:
    with ScriptedProviderServer(PROBE_OK + JOB) as server:
        server.models_answer = (200, LLAMACPP_MODELS)
        bodies = await run(tmp_path, monkeypatch, server, flag="off", probe=True)
    assert choices(bodies) == ["auto"] * 4


async def test_the_model_listing_names_a_llamacpp_server() -> None:
    with ScriptedProviderServer() as server:
        server.models_answer = (200, LLAMACPP_MODELS)
        listing = await list_models(base_url=server.base_url, api_key=CANARY_KEY)
    assert (listing.ids, listing.server) == (("scripted-model",), "llama.cpp")
    assert "a llama.cpp server" in listing.note
    assert listing_server({"data": [{"id": "gpt-4o", "owned_by": "openai"}]}) is None
    assert listing_server({"models": [{"name": "x", "owned_by": "llamacpp"}]}) is None  # not llama-server's shape
    assert listing_server(["llamacpp"]) is None


def test_the_flag_is_in_the_config_model() -> None:
    def profile(value: str) -> dict[str, Any]:
        model = {"id": "m", "model": "x", "displayName": "M", "constrainedToolCalls": value}
        return {"providers": [{"id": "p", "displayName": "P", "baseUrl": "http://127.0.0.1:1", "apiKeyEnv": KEY_ENV,
                               "models": [model]}]}

    assert [TrustedConfig.model_validate(profile(v)).providers[0].models[0].constrained_tool_calls
            for v in ("auto", "on", "off")] == ["auto", "on", "off"]
    with pytest.raises(ValueError, match="constrainedToolCalls"):
        TrustedConfig.model_validate(profile("always"))


async def test_a_recorded_llamacpp_stream_names_its_server_and_openais_does_not() -> None:
    with ScriptedProviderServer([LLAMACPP_CALL, OPENAI_CALL]) as server:
        adapter = make_adapter("chat", server)
        try:
            llama, openai = await run_turn(adapter), await run_turn(adapter)
        finally:
            await adapter.aclose()
    assert isinstance(llama[-1], TurnEnd) and llama[-1].server == "llama.cpp"
    assert isinstance(openai[-1], TurnEnd) and openai[-1].server is None


async def test_without_a_probe_the_stream_reveals_llamacpp_and_constrains_from_then_on(tmp_path, monkeypatch) -> None:
    edit = {"toolCalls": [{"id": "w1", "name": "replace_text", "arguments": EDIT}]}
    done = {"text": "Done.", "finishReason": "stop"}
    with ScriptedProviderServer([LLAMACPP_CALL, edit, done, edit, done]) as server:
        monkeypatch.setenv(KEY_ENV, CANARY_KEY)
        service = EngineService(send_event=lambda _event: None)
        async with service.running():
            await service.configure(make_repo(tmp_path / "repo", FILES), config(server))
            for _ in range(2):
                snap = await service.job_create(JobCreateParams.model_validate(
                    {"annotation": ANNOTATION, "modelProfileId": "m"}))
                await service.wait_job(snap.job_id)
                done_snap = await service.job_get(JobIdParams(job_id=snap.job_id))
                assert done_snap.status == "awaiting-review", done_snap.error
    # Job 1: turn 1 not known yet; its stream says llama.cpp and its call names an undeclared tool, so the
    # correcting turn is required. Job 2 (same session): known from job 1, its first turn is required.
    assert choices(server.requests) == ["auto", "required", "auto", "required", "auto"]
