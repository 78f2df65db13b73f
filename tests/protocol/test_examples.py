"""Every example of protocol/README.md, and real frames of a live ``serve`` run, validate against the
committed schema (so the schema provably describes what the engine sends and accepts)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from spotpatch_agent.demo.runner import make_demo_project
from spotpatch_agent.demo.script import demo_turns
from spotpatch_agent.protocol.catalog import CATALOG, METHODS
from spotpatch_agent.provider.scripted import ScriptedProviderServer
from tests.engine_client import EngineProcess
from tests.protocol._schema import README_PATH, Example, errors_of, load_schema, readme_examples
from tests.support.annotations import demo_annotation

SCHEMA = load_schema()
EXAMPLES = readme_examples(README_PATH.read_text("utf-8"))
KEY_ENV = "SPOTPATCH_TEST_PROVIDER_KEY"


def check_message(method: str, label: str, message: dict[str, Any]) -> list[str]:
    """Validate one JSON-RPC message of ``method`` (request, response, notification or -32000 error)."""
    entry = SCHEMA["x-methods"][method]
    problems: list[str] = []
    if message.get("jsonrpc") != "2.0":
        problems.append('"jsonrpc" must be "2.0"')
    if label in ("request", "notification"):
        if message.get("method") != method:
            problems.append(f"method is {message.get('method')!r}, expected {method!r}")
        if (label == "request") != ("id" in message) or entry["kind"] != label:
            problems.append(f"{method} is a {entry['kind']}, not a {label}")
        if "params" in message:
            if entry["params"] is None:
                problems.append(f"{method} takes no params")
            else:
                problems += errors_of(SCHEMA, entry["params"], message["params"])
        elif entry["params"] is not None and "required" in SCHEMA["$defs"][entry["params"]["$ref"].split("/")[-1]]:
            problems.append(f"{method} needs params")
    elif label == "response":
        if "result" not in message or entry["kind"] != "request":
            problems.append("a response needs a result and a request method")
        else:
            problems += errors_of(SCHEMA, entry["result"], message["result"])
    elif label == "error":
        error = message.get("error", {})
        if error.get("code") != SCHEMA["x-errors"]["application"]["code"]:
            problems.append("an error example must be an application error (-32000)")
        problems += errors_of(SCHEMA, SCHEMA["x-errors"]["application"]["data"], error.get("data"))
        if error.get("data", {}).get("code") not in entry["errors"]:
            problems.append(f"{method} does not list {error.get('data', {}).get('code')} among its errors")
        if error.get("message") != error.get("data", {}).get("message"):
            problems.append("error.message must equal data.message")
    return problems


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda e: f"{e.method}-{e.label}-L{e.line}")
def test_readme_example_validates(example: Example) -> None:
    assert example.method in METHODS, f"README line {example.line}: {example.method} is not in the catalog"
    problems = check_message(example.method, example.label, example.message)
    assert not problems, f"protocol/README.md line {example.line}: " + "; ".join(problems)


def test_every_catalog_method_has_examples() -> None:
    labels: dict[str, set[str]] = {}
    for example in EXAMPLES:
        labels.setdefault(example.method, set()).add(example.label)
    for spec in CATALOG:
        need = {"request", "response"} if spec.kind == "request" else {"notification"}
        assert need <= labels.get(spec.method, set()), f"protocol/README.md lacks a {need} example for {spec.method}"
    kinds = {e.message["params"]["kind"] for e in EXAMPLES if e.method == "job/event"}
    assert kinds == {"status", "activity", "message", "check", "diff", "error"}


def test_bad_examples_are_caught() -> None:
    """The checker itself rejects drift: a renamed field, a null, a wrong event field, an unlisted code."""
    good = {"jsonrpc": "2.0", "id": 1, "method": "job/get", "params": {"jobId": "job_1"}}
    assert check_message("job/get", "request", good) == []
    assert check_message("job/get", "request", {**good, "params": {"job_id": "job_1"}})
    event = {"jobId": "j", "seq": 1, "at": "t", "kind": "status", "status": "running"}
    note = {"jsonrpc": "2.0", "method": "job/event", "params": event}
    assert check_message("job/event", "notification", note) == []
    assert check_message("job/event", "notification", {**note, "params": {**event, "message": None}})
    assert check_message("job/event", "notification", {**note, "params": {**event, "tool": "read_file"}})
    assert check_message("job/event", "notification", {**note, "params": {**event, "kind": "progress"}})
    data = {"code": "APPLY_CONFLICT", "message": "m", "retryable": False}
    assert check_message("job/get", "error",
                         {"jsonrpc": "2.0", "id": 1, "error": {"code": -32000, "message": "m", "data": data}})


# ---------------------------------------------------------------- live frames


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_demo_project(tmp_path / "demo-app")


def _config(server: ScriptedProviderServer) -> dict[str, Any]:
    return {"providers": [{"id": "scripted", "displayName": "Scripted", "api": "chat", "baseUrl": server.base_url,
                           "apiKeyEnv": KEY_ENV,
                           "models": [{"id": "m1", "model": "scripted-model", "displayName": "Scripted model"}]}]}


#: A second job: a denied read (a failed activity), then the model stops without a change (error event).
FAILING_TURNS = [
    {"toolCalls": [{"id": "call_read_9", "name": "read_file",
                    "arguments": {"path": ".env", "startLine": None, "endLine": None}}]},
    {"text": "I could not read the file.", "finishReason": "stop"},
]


def test_live_frames_validate_against_the_schema(project: Path) -> None:
    annotation = demo_annotation()
    sent: dict[int, dict[str, Any]] = {}
    with ScriptedProviderServer(demo_turns() + FAILING_TURNS) as server:
        eng = EngineProcess(env={KEY_ENV: "sk-live-frames-test"})

        def call(method: str, params: dict[str, Any] | None = None) -> Any:
            rid = eng.start_request(method, params)
            sent[rid] = {"jsonrpc": "2.0", "id": rid, "method": method,
                         **({} if params is None else {"params": params})}
            reply = eng.response(rid, timeout=60)
            assert "result" in reply, f"{method}: {reply}"
            return reply["result"]

        try:
            call("initialize", {"protocolVersion": "0.1", "processId": os.getpid(), "clientInfo": {"name": "pytest"},
                                "projectRoot": str(project), "config": _config(server)})
            eng.notify("initialized", {})
            call("health/get", {})
            call("prompt/render", {"annotation": annotation})
            call("provider/list", {})
            job_id = call("job/create",
                          {"annotation": annotation, "modelProfileId": "m1", "applyMode": "review"})["jobId"]
            assert eng.wait_status(job_id, {"awaiting-review", "failed"}, timeout=60)["status"] == "awaiting-review"
            for method in ("job/get", "job/diff", "job/audit", "job/apply", "job/revert", "job/close"):
                call(method, {"jobId": job_id})
            call("job/list", {})
            call("job/events", {"jobId": job_id, "afterSeq": 3})
            failing = call("job/create",
                           {"annotation": {**annotation, "annotationId": "ann-2"}, "modelProfileId": "m1"})
            assert eng.wait_status(failing["jobId"], {"awaiting-review", "failed"}, timeout=60)["status"] == "failed"
            call("job/cancel", {"jobId": failing["jobId"]})
            call("job/events", {"jobId": failing["jobId"]})
            assert call("shutdown") is None
            eng.notify("exit")
            assert eng.proc.wait(10) == 0
        finally:
            eng.stop()

    problems: list[str] = []
    for request in sent.values():
        problems += [f"sent {request['method']}: {p}" for p in check_message(request["method"], "request", request)]
    kinds: set[str] = set()
    failed_activity = False
    for message in eng.messages:
        if "id" in message:
            method = sent[message["id"]]["method"]
            problems += [f"reply to {method}: {p}" for p in check_message(method, "response", message)]
        else:
            problems += [f"{message['method']}: {p}" for p in check_message(message["method"], "notification", message)]
            kinds.add(message["params"]["kind"])
            failed_activity |= message["params"].get("errorCode") == "TOOL_PATH_DENIED"
    assert not problems, "\n".join(problems)
    assert kinds == {"status", "activity", "message", "diff", "error"}  # every kind the engine emits today
    assert failed_activity
    assert eng.stdout_faults == []
