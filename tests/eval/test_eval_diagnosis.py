"""Failures carry the engine's diagnosis (issue 27 part 1): a provider that breaks mid-stream is the
provider's fault; the recorded real llama.cpp streams (tests/provider/fixtures/llamacpp/) are diagnosed as
the engine reports them — a text answer instead of a call is the model's, an in-stream server error the
provider's, and a real llama.cpp call to an unknown tool is a failed call the job survives."""

from __future__ import annotations

import io
from dataclasses import replace
from pathlib import Path

import jsonschema
import pytest

from spotpatch_agent.eval.report import EVAL_JSON_SCHEMA, eval_document
from spotpatch_agent.eval.runner import EvalSettings, diagnose, run_suite

from .conftest import run_one, script, task
from .oracle import scripted

FIXTURES = Path(__file__).resolve().parent.parent / "provider" / "fixtures" / "llamacpp" / "chat"


def raw(name: str) -> dict:
    return {"raw": [(FIXTURES / name).read_bytes()]}


def test_a_stream_that_ends_mid_turn_is_diagnosed_as_the_provider(settings: EvalSettings):
    one = task("react/save-primary")
    read, edit, _ = script(one)
    broken = {**edit, "endAfterChunks": 3}
    row = run_one(one, settings, [read, broken, broken, broken])
    assert (row["status"], row["errorCode"], row["diagnosis"]) == ("failed", "PROVIDER_PROTOCOL", "provider")
    assert "ended before the turn finished" in row["message"]
    assert row["changedFiles"] == [] and not row["passed"]


def test_recorded_llamacpp_text_instead_of_a_call_is_diagnosed_as_the_model(settings: EvalSettings):
    one = task("vue/price-decimals")
    row = run_one(one, settings, [raw("llamacpp-qwen05b-text-instead-of-call.sse")])
    assert (row["errorCode"], row["diagnosis"]) == ("MODEL_TOOL_CALL_UNSUPPORTED", "model")
    assert "cut off at the output limit" in row["message"]
    assert row["tokensIn"] == 177 and row["tokensOut"] == 400  # llama.cpp's usage chunk, read through the meter


def test_recorded_llamacpp_server_error_after_a_call_is_diagnosed_as_the_provider(settings: EvalSettings):
    one = task("svelte/heading-text")
    row = run_one(one, settings, [raw("llamacpp-qwen15b-server-error-after-call.sse")] * 3)
    assert (row["errorCode"], row["diagnosis"]) == ("PROVIDER_UNAVAILABLE", "provider")
    assert "does not match the expected peg-native format" in row["message"]
    assert row["toolCalls"] == 0  # the call streamed before the error never ran


def test_a_recorded_llamacpp_call_to_an_unknown_tool_is_a_failed_call_the_job_survives(settings: EvalSettings):
    one = task("react/save-primary")
    row = run_one(one, settings, [raw("llamacpp-qwen15b-tool-call.sse"), *script(one)])
    assert row["passed"] and row["failedCalls"] == {"TOOL_ARGUMENTS_INVALID": 1}
    assert row["turns"] == 4 and row["tokensIn"] == 184 + 300


def test_a_provider_that_stalls_past_the_eval_timeout_is_cancelled_and_diagnosed_as_timeout(settings: EvalSettings):
    one = task("react/list-reorder")
    row = run_one(one, replace(settings, timeout=2), [{"stall": True}])
    assert (row["timedOut"], row["status"], row["diagnosis"]) == (True, "cancelled", "timeout")
    assert row["changedFiles"] == [] and row["wallMs"] >= 2000


def test_the_oracle_passes_over_the_responses_api_too(settings: EvalSettings):
    one = task("svelte/three-files")
    row = run_one(one, replace(settings, api="responses"), script)
    assert row["passed"] and row["tokensIn"] == 300 and row["tokensOut"] == 60  # Responses usage, translated


@pytest.mark.parametrize(("status", "code", "reasons", "timed_out", "want"), [
    ("awaiting-review", None, [], False, "pass"),
    ("awaiting-review", None, ["src/App.tsx: should contain …"], False, "model"),
    ("failed", "LIMIT_EXCEEDED", [], False, "model"),
    ("failed", "CHANGESET_REJECTED", [], False, "model"),
    ("failed", "PROVIDER_AUTH", [], False, "provider"),
    ("failed", "INTERNAL", [], False, "engine"),
    ("awaiting-review", "APPLY_CONFLICT", [], False, "engine"),
    ("cancelled", "CANCELLED", [], True, "timeout"),
])
def test_diagnosis_by_status_code_and_judge(status, code, reasons, timed_out, want):
    assert diagnose(status, code, reasons, timed_out) == want


def test_a_run_the_eval_cannot_set_up_is_an_engine_failure_and_the_suite_goes_on(settings: EvalSettings,
                                                                                 tmp_path: Path):
    good = task("react/save-primary")
    gone = replace(good, id="react/gone", app=replace(good.app, directory=tmp_path / "no-such-app"))
    rows = run_suite([gone, good], settings, lambda t, _r: scripted(script(t)), out=io.StringIO())
    assert (rows[0]["diagnosis"], rows[0]["errorCode"], rows[0]["status"]) == ("engine", "INTERNAL", "not-run")
    assert rows[0]["message"] == "FileNotFoundError: No such file or directory"  # the reason, not the path
    assert rows[1]["passed"]
    jsonschema.validate(eval_document(settings, ["react/gone", good.id], rows), EVAL_JSON_SCHEMA)
