"""How a job's turn ends and how a stuck model is stopped (issue 16 parts 3 and 4), through the real
engine service, the real Chat adapter and a real local server: endless text in the first and a later
turn, a first answer cut at the output limit (a recorded llama.cpp stream), the stuck-call guard, the
recorded in-stream server error (asked again, its call run once), and the first-turn message of a model
that has proven it can call tools."""

from __future__ import annotations

import secrets
import time
from pathlib import Path
from typing import Any

import pytest

from spotpatch_agent.engine.job import limit_name
from spotpatch_agent.engine.service import EngineService
from spotpatch_agent.protocol.models import DEFAULT_MAX_OUTPUT_TOKENS, JobCreateParams, JobIdParams, TrustedConfig
from spotpatch_agent.provider.scripted import ScriptedProviderServer
from tests.conftest import make_repo
from tests.engine._service_support import run_service_job
from tests.support.annotations import annotation, target

KEY_ENV = "SPOTPATCH_TURN_ENDINGS_TEST_KEY"
APP = 'export const App = () => <button className="a">Go</button>;\n'
FILES = {"src/App.tsx": APP, "src/a.ts": "export const a = 1;\n", ".gitignore": "node_modules\n"}
TARGET = annotation(target())
EDIT = {"path": "src/App.tsx", "oldText": ">Go<", "newText": ">Start<"}
BAD_EDIT = {"path": "src/App.tsx", "oldText": ">$19.5<", "newText": ">Start<"}  # the page's text, not the source's
READ_APP = {"path": "src/App.tsx", "startLine": None, "endLine": None}
DONE = {"text": "Done.", "finishReason": "stop"}
FOREVER = {"textForever": "Let me think about this button. " * 2}
LLAMACPP = Path(__file__).parents[1] / "provider" / "fixtures" / "llamacpp" / "chat"


def call(cid: str, name: str, args: Any) -> dict:
    return {"id": cid, "name": name, "arguments": args}


async def run_job(root: Path, turns: list, monkeypatch: pytest.MonkeyPatch, **limits: int):
    return await run_service_job(root, turns, monkeypatch, key_env=KEY_ENV, annotation=TARGET, **limits)


def finished(events: list[dict]) -> list[tuple[str, str, bool, str | None]]:
    return [(e["toolCallId"], e["tool"], e["ok"], e.get("errorCode")) for e in events
            if e["kind"] == "activity" and e["phase"] == "finished"]


def tool_output(server: ScriptedProviderServer, request_no: int, call_id: str) -> str:
    return next(m["content"] for m in server.requests[request_no]["messages"]
                if m["role"] == "tool" and m["tool_call_id"] == call_id)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo", FILES)


# ---------------------------------------------------------------- part 3: a turn always ends


@pytest.mark.anyio
async def test_a_first_turn_of_endless_text_fails_within_seconds_as_no_tool_calling(root, monkeypatch) -> None:
    started = time.monotonic()
    snap, diff, _, server, _ = await run_job(root, [FOREVER], monkeypatch)
    assert time.monotonic() - started < 10  # the job's own setup included; the turn itself ends at 16 KiB
    assert snap.status == "failed" and snap.error is not None
    assert snap.error.code == "MODEL_TOOL_CALL_UNSUPPORTED"
    assert "answered without calling a tool" in snap.error.message and "stopped reading" in snap.error.message
    assert server.disconnected.is_set()  # the engine closed the stream; the server saw it
    assert server.requests[0]["max_completion_tokens"] == DEFAULT_MAX_OUTPUT_TOKENS
    assert diff.diff == ""


@pytest.mark.anyio
async def test_endless_text_in_a_later_turn_is_a_bounded_failure_of_its_own(root, monkeypatch) -> None:
    snap, _, _, server, _ = await run_job(root, [{"toolCalls": [call("r", "read_file", READ_APP)]}, FOREVER],
                                          monkeypatch)
    assert snap.status == "failed" and snap.error is not None and snap.error.code == "LIMIT_EXCEEDED"
    assert "more than 16 KiB of text in one turn without calling a tool" in snap.error.message
    assert server.disconnected.is_set() and len(server.requests) == 2


@pytest.mark.anyio
async def test_a_first_answer_cut_at_the_output_limit_says_so(root, monkeypatch) -> None:
    recorded = {"raw": [(LLAMACPP / "llamacpp-qwen05b-text-instead-of-call.sse").read_bytes()]}
    snap, _, _, _, _ = await run_job(root, [recorded], monkeypatch)
    assert snap.error is not None and snap.error.code == "MODEL_TOOL_CALL_UNSUPPORTED"
    assert "cut off at the output limit" in snap.error.message and "maxOutputTokens" in snap.error.message


@pytest.mark.anyio
async def test_a_later_answer_cut_at_the_output_limit_without_a_call_says_so(root, monkeypatch) -> None:
    turns = [{"toolCalls": [call("r", "read_file", READ_APP)]}, {"text": "The change is", "finishReason": "length"}]
    snap, _, _, _, _ = await run_job(root, turns, monkeypatch)
    assert snap.error is not None and snap.error.code == "LIMIT_EXCEEDED"
    assert "cut off at the output limit" in snap.error.message


# ---------------------------------------------------------------- part 4: the stuck-call guard


@pytest.mark.anyio
async def test_a_repeated_failing_call_is_told_then_stops_the_job_while_other_calls_work(root, monkeypatch) -> None:
    turns = [{"toolCalls": [call("b1", "replace_text", BAD_EDIT)]},
             {"toolCalls": [call("b2", "replace_text", BAD_EDIT)]},           # repeat → told, not run
             {"toolCalls": [call("r1", "read_file", READ_APP),                # other calls keep working
                            call("b3", "replace_text", {**BAD_EDIT, "oldText": ">$19.50<"})]},
             {"toolCalls": [call("b4", "replace_text", BAD_EDIT)]},           # repeat again → the job ends
             DONE]
    snap, diff, events, server, _ = await run_job(root, turns, monkeypatch)
    assert snap.status == "failed" and snap.error is not None and snap.error.code == "LIMIT_EXCEEDED"
    assert "same failing replace_text call 3 times" in snap.error.message
    assert "maxRepeatedFailedCalls" in snap.error.message
    first = tool_output(server, 1, "b1")
    told = tool_output(server, 2, "b2")
    assert first.startswith("ERROR PATCH_REJECTED") and "Not run" not in first
    assert told.startswith("ERROR PATCH_REJECTED: Not run: you already made this exact replace_text call")
    assert "copy oldText exactly" in told and "read_file" in told
    assert ">Go<" in tool_output(server, 3, "r1")  # the read ran
    assert "Not run" not in tool_output(server, 3, "b3")  # other arguments: really run (and failed on its own)
    assert [f[0] for f in finished(events)] == ["b1", "b2", "r1", "b3"]  # b4 ended the job before it started
    assert "b4" not in {e["toolCallId"] for e in events if e["kind"] == "activity"}
    assert len(server.requests) == 4 and diff.diff == ""


@pytest.mark.anyio
async def test_the_same_call_after_the_files_changed_runs_again(root, monkeypatch) -> None:
    turns = [{"toolCalls": [call("b1", "replace_text", {**EDIT, "oldText": ">Start<", "newText": ">Begin<"})]},
             {"toolCalls": [call("w", "replace_text", EDIT)]},
             {"toolCalls": [call("b2", "replace_text", {**EDIT, "oldText": ">Start<", "newText": ">Begin<"})]},
             DONE]
    snap, diff, _, server, _ = await run_job(root, turns, monkeypatch)
    assert snap.status == "awaiting-review", snap.error
    assert "Not run" not in tool_output(server, 3, "b2")  # the worktree changed: a new attempt
    assert ">Begin<" in diff.diff


@pytest.mark.anyio
async def test_the_repeat_bound_is_a_limit(root, monkeypatch) -> None:
    turns = [{"toolCalls": [call(f"b{i}", "replace_text", BAD_EDIT)]} for i in range(4)] + [
        {"toolCalls": [call("w", "replace_text", EDIT)]}, DONE]
    snap, _, _, server, _ = await run_job(root, turns, monkeypatch, maxRepeatedFailedCalls=3)
    assert snap.status == "awaiting-review", snap.error  # three repeats told, then the model changed course
    assert all("Not run" in tool_output(server, i + 1, f"b{i}") for i in (1, 2, 3))


@pytest.mark.anyio
async def test_a_repeated_read_is_answered_without_running_then_stops_the_job(root, monkeypatch) -> None:
    # Issue 27: Qwen2.5-Coder-1.5B at temperature 0 sent this search_text in 11 turns running.
    search = {"query": "Go", "glob": "src/App.tsx", "maxResults": 1}
    turns = [{"toolCalls": [call("s1", "search_text", search)]},
             {"toolCalls": [call("s2", "search_text", search)]},              # repeat → told, not run
             {"toolCalls": [call("r1", "read_file", READ_APP)]},               # another read runs
             {"toolCalls": [call("s3", "search_text", search)]},              # repeat again → the job ends
             DONE]
    snap, diff, events, server, ledger = await run_job(root, turns, monkeypatch)
    assert snap.status == "failed" and snap.error is not None and snap.error.code == "LIMIT_EXCEEDED"
    assert "same search_text call 3 times" in snap.error.message
    assert "without acting on its result" in snap.error.message and "maxRepeatedFailedCalls" in snap.error.message
    assert limit_name(snap.error.message) == "maxRepeatedFailedCalls"  # the ledger's `limit` record
    assert "src/App.tsx:1:" in tool_output(server, 1, "s1")
    told = tool_output(server, 2, "s2")
    assert told.startswith("Not run again: you already made this exact search_text call (same arguments) in turn 1")
    assert "src/App.tsx:1:" not in told and "edit the file" in told
    assert ">Go<" in tool_output(server, 3, "r1")
    assert [f[:3] for f in finished(events)] == [("s1", "search_text", True), ("s2", "search_text", True),
                                                ("r1", "read_file", True)]
    assert len(server.requests) == 4 and diff.diff == ""


@pytest.mark.anyio
async def test_a_read_repeated_after_a_write_runs_again_and_a_told_model_can_go_on(root, monkeypatch) -> None:
    turns = [{"toolCalls": [call("r1", "read_file", READ_APP)]},
             {"toolCalls": [call("r2", "read_file", READ_APP)]},               # told: already read
             {"toolCalls": [call("w", "replace_text", EDIT)]},
             {"toolCalls": [call("r3", "read_file", READ_APP)]},               # the file changed: read again
             DONE]
    snap, diff, _, server, _ = await run_job(root, turns, monkeypatch)
    assert snap.status == "awaiting-review", snap.error
    assert tool_output(server, 2, "r2").startswith("Not run again")
    assert ">Start<" in tool_output(server, 4, "r3")
    assert ">Start<" in diff.diff


# ---------------------------------------------------------------- part 4: an in-stream server error


@pytest.mark.anyio
async def test_the_recorded_server_error_is_asked_again_and_its_call_runs_once(root, monkeypatch) -> None:
    recorded = (LLAMACPP / "llamacpp-qwen15b-server-error-after-call.sse").read_bytes()
    same_call = call("uvUWyVBn9DkMY6bk4sy8ZS7vLjFkKtLP", "list_files", {"glob": "**/*.tsx", "maxResults": 2})
    turns = [{"raw": [recorded]}, {"toolCalls": [same_call]}, {"toolCalls": [call("w", "replace_text", EDIT)]}, DONE]
    snap, diff, events, server, _ = await run_job(root, turns, monkeypatch)
    assert snap.status == "awaiting-review", snap.error
    assert [f[:3] for f in finished(events)] == [(same_call["id"], "list_files", True), ("w", "replace_text", True)]
    assert len(server.requests) == 4 and server.requests[0] == server.requests[1]  # turn 1 was asked again
    assert snap.turns == 3


@pytest.mark.anyio
async def test_a_server_error_every_time_ends_the_job_as_unavailable(root, monkeypatch) -> None:
    recorded = (LLAMACPP / "llamacpp-qwen15b-server-error-after-call.sse").read_bytes()
    snap, _, events, server, _ = await run_job(root, [{"raw": [recorded]}] * 3, monkeypatch)
    assert snap.error is not None and snap.error.code == "PROVIDER_UNAVAILABLE" and snap.error.retryable
    assert finished(events) == [] and len(server.requests) == 3


# ---------------------------------------------------------------- part 4: prose after a passed probe


@pytest.mark.anyio
async def test_prose_from_a_model_that_passed_the_probe_is_worded_as_its_choice(root, monkeypatch) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-canary-" + secrets.token_hex(12))
    probe_turns = [{"toolCalls": [call("p1", "report_ready", {"ready": True})]}, {"text": "OK"}]
    prose = {"text": "To change the button, open src/App.tsx and replace Go with Start.", "finishReason": "stop"}
    events: list[dict] = []
    with ScriptedProviderServer([*probe_turns, prose, prose]) as server:
        config = TrustedConfig.model_validate({"providers": [{
            "id": "p", "displayName": "P", "baseUrl": server.base_url, "apiKeyEnv": KEY_ENV,
            "models": [{"id": "m", "model": "scripted-model", "displayName": "M", "maxOutputTokens": 2048}]}]})
        service = EngineService(send_event=events.append)
        async with service.running():
            await service.configure(root, config)
            from spotpatch_agent.protocol.models import ProviderProbeParams

            probe = await service.provider_probe(ProviderProbeParams(model_profile_id="m"))
            assert probe.ok
            create = JobCreateParams.model_validate({"annotation": TARGET, "modelProfileId": "m"})
            snap = await service.job_create(create)
            await service.wait_job(snap.job_id)
            snap = await service.job_get(JobIdParams(job_id=snap.job_id))
    assert snap.error is not None and snap.error.code == "MODEL_TOOL_CALL_UNSUPPORTED"
    message = snap.error.message
    assert "It can call tools" in message and "chose not to this time" in message
    assert "cannot edit code" not in message and "Choose a model with tool calling" not in message
    # The profile's cap went with the probe's turns and the job's turn.
    assert [r["max_completion_tokens"] for r in server.requests] == [2048, 2048, 2048]


@pytest.mark.anyio
async def test_prose_from_an_unproven_model_keeps_the_no_tool_calling_message(root, monkeypatch) -> None:
    snap, _, _, _, _ = await run_job(root, [{"text": "Open src/App.tsx.", "finishReason": "stop"}], monkeypatch)
    assert snap.error is not None and snap.error.code == "MODEL_TOOL_CALL_UNSUPPORTED"
    assert "cannot edit code through SpotPatch" in snap.error.message and "chose not to" not in snap.error.message


# ---------------------------------------------------------------- part 4: reading the target's file


@pytest.mark.anyio
async def test_a_rangeless_read_of_the_target_file_in_a_job_shows_the_target_line(tmp_path, monkeypatch) -> None:
    long_file = "".join(f"const row{n} = {n};\n" for n in range(1, 1501))
    root = make_repo(tmp_path / "repo", {"src/Rows.tsx": long_file, ".gitignore": "node_modules\n"})
    target = {"annotationId": "a2", "pageUrl": "/", "targets": [
        {"index": 1, "instruction": "Make row 1200 say 0", "source": {"file": "src/Rows.tsx", "line": 1200},
         "element": {"tagName": "td", "text": "1200"}}]}
    edit = {"path": "src/Rows.tsx", "oldText": "const row1200 = 1200;", "newText": "const row1200 = 0;"}
    turns = [{"toolCalls": [call("r", "read_file", {"path": "src/Rows.tsx", "startLine": None, "endLine": None})]},
             {"toolCalls": [call("w", "replace_text", edit)]}, DONE]
    snap, _, _, server, _ = await run_service_job(root, turns, monkeypatch, key_env=KEY_ENV, annotation=target)
    assert snap.status == "awaiting-review", snap.error
    output = tool_output(server, 1, "r")
    assert " 1200| const row1200 = 1200;" in output and output.startswith("src/Rows.tsx (lines 1140-1500 of 1500)")
