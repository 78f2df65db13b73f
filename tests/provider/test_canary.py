"""A canary API key never leaves the engine (issue 7 acceptance 4, docs/design.md §11, invariant 3).

The real ``spotpatch-agent serve`` runs at ``SPOTPATCH_LOG=DEBUG`` against the real local scripted server;
every byte it writes (stdout frames: results, events, errors, probe results; stderr: logs and tracebacks) and
everything the provider receives besides the ``Authorization`` header is searched for the key and for the
secret extra header. One test forces an unexpected exception inside the adapter's HTTP call whose message,
args and cause hold the key and the whole header set, so its traceback is logged with ``exc_info``.
"""

from __future__ import annotations

import json
import os
import secrets
import sys
from pathlib import Path

import pytest

from spotpatch_agent.demo.runner import TOUCHED, make_demo_project
from spotpatch_agent.provider.scripted import ScriptedProviderServer
from tests.engine_client import EngineProcess
from tests.support.annotations import demo_annotation
from tests.support.serve import KEY_ENV, config_for

PROBE_OK = [{"toolCalls": [{"id": "p1", "name": "report_ready", "arguments": {"ready": True}}]},
            {"text": "OK", "finishReason": "stop"}]
ENV_DUMP = "import os; print(sorted(os.environ.items()))"

#: Imported by the engine's interpreter (PYTHONPATH) when SPOTPATCH_TEST_EXPLODE=1: the adapter's HTTP call
#: raises an exception carrying the key in its message, its args (all request headers) and its cause.
SITECUSTOMIZE = '''
import os

if os.environ.get("SPOTPATCH_TEST_EXPLODE") == "1":
    import httpx

    class ProxyExploded(RuntimeError):
        pass

    async def send(self, request, *args, **kwargs):
        auth = request.headers.get("authorization", "")
        try:
            raise LookupError(f"no route for credential {auth}")
        except LookupError as cause:
            raise ProxyExploded(f"proxy exploded with Authorization: {auth}", dict(request.headers)) from cause

    httpx.AsyncClient.send = send
'''


@pytest.fixture
def canary() -> str:
    return "sk-canary-" + secrets.token_hex(16)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_demo_project(tmp_path / "demo-app")


def start(key: str, **env: str) -> EngineProcess:
    return EngineProcess(env={KEY_ENV: key, "SPOTPATCH_LOG": "DEBUG", **env})


def config(server: ScriptedProviderServer, header_secret: str) -> dict:
    cfg = config_for(server)
    cfg["providers"][0]["headers"] = {"api-key": header_secret, "X-Title": "SpotPatch canary test"}
    cfg["providers"][0]["models"].append({"id": "m2", "model": "scripted-model", "displayName": "Second"})
    cfg["checks"] = [{"id": "env", "name": "Env", "command": sys.executable, "args": ["-c", ENV_DUMP]}]
    return cfg


def assert_nowhere(secret: str, *texts: str) -> None:
    for text in texts:
        assert secret not in text
        assert secret[len("sk-canary-"):] not in text if secret.startswith("sk-canary-") else True


def test_canary_key_and_secret_header_never_leave_the_engine(project: Path, canary: str) -> None:
    header_secret = "azkey-" + secrets.token_hex(16)
    echo = f"Incorrect API key provided: {canary}; api-key {header_secret}; Authorization: Bearer {canary}"
    turns = [
        {"toolCalls": [{"id": "c1", "name": "run_check", "arguments": {"checkId": "env"}},
                       {"id": "r1", "name": "read_file", "arguments": {"path": TOUCHED, "startLine": None,
                                                                        "endLine": None}}]},
        {"text": "I saw nothing secret.", "finishReason": "stop"},
        {"status": 401, "body": {"error": {"message": echo}}},
        *PROBE_OK,
    ]
    with ScriptedProviderServer(turns) as server:
        eng = start(canary)
        try:
            eng.initialize(project, config(server, header_secret))
            first = eng.call("job/create", {"annotation": demo_annotation(), "modelProfileId": "m1"})["jobId"]
            eng.wait_status(first, {"failed"}, timeout=60)  # no file changed: CHANGESET_REJECTED
            second = eng.call("job/create", {"annotation": demo_annotation(), "modelProfileId": "m2"})["jobId"]
            assert eng.wait_status(second, {"failed"}, timeout=60)
            assert eng.call("job/get", {"jobId": second})["error"]["code"] == "PROVIDER_AUTH"
            proved = eng.call("provider/probe", {"modelProfileId": "m1"})  # inline proof from the first job
            assert proved["source"] == "inline" and proved["cached"] is True
            server.models_answer = (403, {"error": {"message": echo}})
            refused = eng.call("provider/probe", {"modelProfileId": "m2"})
            assert refused["ok"] is False and refused["error"]["code"] == "PROVIDER_AUTH"
            server.models_answer = None
            probed = eng.call("provider/probe", {"modelProfileId": "m2"})
            assert probed["ok"] is True and probed["models"] == ["scripted-model"]
            texts = [json.dumps(eng.call("job/audit", {"jobId": j})) for j in (first, second)]
            texts += [json.dumps(eng.call("job/events", {"jobId": j, "afterSeq": 0})) for j in (first, second)]
        finally:
            eng.stop()
    # The key and the secret header went only where they belong: the provider's request headers.
    assert server.headers[0]["authorization"] == f"Bearer {canary}"
    assert server.headers[0]["api-key"] == header_secret and server.headers[0]["x-title"] == "SpotPatch canary test"
    check_output = next(m["content"] for m in server.requests[1]["messages"] if m.get("tool_call_id") == "c1")
    assert "PATH" in check_output and KEY_ENV not in check_output  # the check ran, without the key variable
    provider_saw = json.dumps(server.requests)
    for secret in (canary, header_secret):
        assert_nowhere(secret, eng.all_output(), provider_saw, *texts)
    assert eng.stdout_faults == []


def test_canary_key_not_in_tracebacks_of_unexpected_adapter_errors(project: Path, canary: str, tmp_path: Path) -> None:
    header_secret = "azkey-" + secrets.token_hex(16)
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(SITECUSTOMIZE)
    pythonpath = os.pathsep.join(p for p in (str(tmp_path / "site"), os.environ.get("PYTHONPATH")) if p)
    with ScriptedProviderServer(PROBE_OK) as server:
        eng = start(canary, PYTHONPATH=pythonpath, SPOTPATCH_TEST_EXPLODE="1")
        try:
            eng.initialize(project, config(server, header_secret))
            job_id = eng.call("job/create", {"annotation": demo_annotation(), "modelProfileId": "m1"})["jobId"]
            eng.wait_status(job_id, {"failed"}, timeout=60)
            assert eng.call("job/get", {"jobId": job_id})["error"]["code"] == "INTERNAL"
            probe = eng.request("provider/probe", {"modelProfileId": "m1"})
            assert "error" in probe  # an engine bug answers INTERNAL, and the engine keeps serving
            assert eng.call("health/get", {})["state"] == "clean"
        finally:
            eng.stop()
    stderr = bytes(eng.stderr_bytes).decode("utf-8", "replace")
    assert "Traceback" in stderr and "ProxyExploded" in stderr and "LookupError" in stderr  # it was logged
    assert "Bearer [REDACTED]" in stderr
    assert server.requests == []  # the forced failure happened before any byte reached the provider
    for secret in (canary, header_secret):
        assert_nowhere(secret, eng.all_output())
    assert eng.stdout_faults == []
