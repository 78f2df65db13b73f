"""Bad frames never kill or hang the engine: each gets the error it deserves (or is ignored where
JSON-RPC says so) and the next valid request is answered (issue 2, acceptance 4 and 8)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import make_repo
from tests.engine_client import EngineProcess, dumps


@pytest.fixture
def engine(tmp_path: Path):
    root = make_repo(tmp_path / "repo", {"a.txt": "a\n"})
    eng = EngineProcess()
    eng.initialize(root)
    yield eng
    eng.stop()
    assert eng.stdout_faults == [], "stdout carried something that is not a frame"


def body_frame(body: bytes, header: bytes | None = None) -> bytes:
    return (header if header is not None else b"Content-Length: %d\r\n\r\n" % len(body)) + body


def assert_still_serves(engine: EngineProcess) -> None:
    reply = engine.request("health/get", {}, timeout=10)
    assert reply["result"]["state"] == "clean"


def last_null_id_error(engine: EngineProcess, code: int) -> dict:
    return engine.wait_for(lambda m: m.get("id") is None and m.get("error", {}).get("code") == code, 10)


@pytest.mark.parametrize(
    "raw, code",
    [
        (b"Content-Length: abc\r\n\r\n{}", -32700),
        (b"\r\n\r\n{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"health/get\"}", -32700),  # missing Content-Length
        (b"Content-Length: 2\r\n\r\n42", -32600),  # a JSON number
        (b"Content-Length: 2\r\n\r\n[]", -32600),  # an (empty) batch
        (body_frame(b'[{"jsonrpc":"2.0","id":9,"method":"health/get"}]'), -32600),  # a batch array
        (body_frame(b'{"jsonrpc":"2.0","params":{}}'), -32600),  # a notification without method
        (body_frame(b"{not json"), -32700),
        (body_frame(b'{"foo":1}'), -32600),  # no jsonrpc, id or method
        (body_frame(b'{"jsonrpc":"1.0","method":"health/get"}'), -32600),
        (body_frame(b'"\xff\xfe"'), -32700),  # invalid UTF-8
    ],
    ids=["bad-length", "missing-length", "json-number", "empty-batch", "batch", "no-method", "bad-json", "no-members",
         "wrong-version", "bad-utf8"],
)
def test_bad_frame_gets_error_and_engine_keeps_serving(engine: EngineProcess, raw: bytes, code: int) -> None:
    engine.send_raw(raw)
    assert_still_serves(engine)  # a missing Content-Length is only detectable once the next frame arrives
    assert last_null_id_error(engine, code)["error"]["message"]


def test_lowercase_and_content_type_first_headers_work(engine: EngineProcess) -> None:
    body = b'{"jsonrpc":"2.0","id":"lc","method":"health/get","params":{}}'
    header = b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\ncontent-length: %d\r\n\r\n" % len(body)
    engine.send_raw(header + body)
    assert engine.response("lc")["result"]["state"] == "clean"


def test_cancel_request_without_id_is_ignored(engine: EngineProcess) -> None:
    engine.notify("$/cancelRequest", {})
    engine.notify("$/cancelRequest", None)
    engine.notify("$/cancelRequest", {"id": "never-sent"})
    assert_still_serves(engine)


def test_unknown_method_and_unknown_notification(engine: EngineProcess) -> None:
    assert engine.request("no/such/method", {})["error"]["code"] == -32601
    engine.notify("no/such/notification", {})
    assert_still_serves(engine)


def test_invalid_params_do_not_echo_input(engine: EngineProcess) -> None:
    reply = engine.request("job/get", {"jobId": "x", "extra": "/etc/secret-path"})
    assert reply["error"]["code"] == -32602
    assert "/etc/secret-path" not in json.dumps(reply)
    reply = engine.request("job/get", [1, 2])  # positional params are not supported
    assert reply["error"]["code"] == -32602


def test_response_dict_with_result_key_is_not_merged(engine: EngineProcess) -> None:
    reply = engine.request("prompt/render", {"annotation": {"annotationId": "a", "pageUrl": "/", "targets": [
        {"index": 1, "instruction": "make it {\"result\": 1, \"error\": 2}", "element": {"tagName": "div"}}]}})
    assert set(reply) == {"jsonrpc", "id", "result"}


def test_multibyte_body_round_trips(engine: EngineProcess) -> None:
    instruction = "価格を小数点以下二桁で表示 🎉 — café"
    params = {"annotation": {"annotationId": "多", "pageUrl": "/商品?x=1", "targets": [
        {"index": 1, "instruction": instruction, "element": {"tagName": "span", "text": "¥1,980 🎁"}}]}}
    body = dumps({"jsonrpc": "2.0", "id": "mb", "method": "prompt/render", "params": params})
    assert len(body) != len(body.decode("utf-8"))
    engine.send_raw(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    text = engine.response("mb")["result"]["text"]
    assert instruction in text and "¥1,980 🎁" in text
    raw = bytes(engine.stdout_bytes)
    assert instruction.encode("utf-8") in raw  # sent as UTF-8, not \\u-escaped


def test_length_too_long_swallows_then_recovers(engine: EngineProcess) -> None:
    engine.send_raw(b"Content-Length: 40\r\n\r\n{}")
    # The next frame's bytes complete the bogus body; a later valid request is answered.
    engine.send_raw(body_frame(b'{"jsonrpc":"2.0","id":"sw1","method":"health/get","params":{}}'))
    engine.send_raw(body_frame(b'{"jsonrpc":"2.0","id":"sw2","method":"health/get","params":{}}'))
    assert engine.response("sw2")["result"]["state"] == "clean"


def test_requests_before_initialize_and_after_shutdown(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "r", {"a": "a\n"})
    eng = EngineProcess()
    try:
        assert eng.request("health/get", {})["error"]["code"] == -32002
        eng.initialize(root)
        again = eng.request("initialize", {"protocolVersion": "0.1", "projectRoot": str(root)})
        assert again["error"]["code"] == -32600
        assert eng.call("shutdown") is None
        assert eng.request("health/get", {})["error"]["code"] == -32600
        eng.notify("exit")
        assert eng.proc.wait(5) == 0
    finally:
        eng.kill()


def test_exit_without_shutdown_is_code_1_and_eof_exits(tmp_path: Path) -> None:
    eng = EngineProcess()
    eng.notify("exit")
    assert eng.proc.wait(5) == 1
    eng2 = EngineProcess()
    assert eng2.proc.stdin is not None
    eng2.proc.stdin.close()
    assert eng2.proc.wait(5) in (0, 1)


def test_protocol_version_mismatch_names_both(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "r", {"a": "a\n"})
    eng = EngineProcess()
    try:
        reply = eng.request("initialize", {"protocolVersion": "9.9", "projectRoot": str(root)})
        err = reply["error"]
        assert err["code"] == -32000 and err["data"]["code"] == "INVALID_REQUEST"
        assert "9.9" in err["message"] and "0.1" in err["message"]
    finally:
        eng.kill()
