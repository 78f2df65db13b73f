"""``spotpatch-agent serve --max-frame-bytes N`` (issue 3): a body over the maximum is answered with
``-32600`` (``id: null``: the id is inside the body that was never read), skipped without being buffered,
and the next request is answered. The default is ``protocol/limits.py`` ``MAX_FRAME_BYTES``."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from spotpatch_agent.protocol.limits import MAX_FRAME_BYTES
from tests.conftest import make_repo
from tests.engine_client import engine_command
from tests.protocol_robustness._support import Engine

SMALL = 64 * 1024


def padded_request(rid: str, size: int, method: str = "job/list") -> bytes:
    """A valid request whose body is exactly ``size`` bytes (JSON allows trailing whitespace)."""
    body = json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": {}}).encode()
    assert len(body) <= size
    return body + b" " * (size - len(body))


def frame(body: bytes) -> bytes:
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def vm_hwm_kib(pid: int) -> int:
    """Peak resident set size of ``pid`` in KiB (Linux)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


@pytest.fixture
def small_engine(tmp_path: Path):
    eng = Engine("--max-frame-bytes", str(SMALL))
    eng.initialize(make_repo(tmp_path / "repo", {"a.txt": "a\n"}))
    yield eng
    eng.stop()
    assert eng.stdout_faults == []


def test_body_at_the_maximum_is_served_one_byte_more_is_refused(small_engine: Engine) -> None:
    small_engine.send_raw(frame(padded_request("at-max", SMALL)))
    assert small_engine.response("at-max")["result"] == {"jobs": []}

    small_engine.send_raw(frame(padded_request("over-max", SMALL + 1)) + frame(padded_request("next", 100)))
    assert small_engine.response("next")["result"] == {"jobs": []}  # the next request is answered
    [refusal] = [m for m in small_engine.messages if m.get("id") is None]
    assert refusal["error"]["code"] == -32600
    assert str(SMALL + 1) in refusal["error"]["message"] and str(SMALL) in refusal["error"]["message"]
    assert small_engine.replies("over-max") == []  # its id was never read


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads the peak RSS from Linux /proc")
def test_oversized_body_is_skipped_without_buffering(small_engine: Engine) -> None:
    """96 MiB declared and sent: the engine's peak RSS must not grow by anything like the body."""
    before = vm_hwm_kib(small_engine.proc.pid)
    size = 96 * 1024 * 1024
    chunk = b" " * (1024 * 1024)
    small_engine.send_raw(b"Content-Length: %d\r\n\r\n" % size)
    for _ in range(size // len(chunk)):
        small_engine.send_raw(chunk)
    small_engine.send_raw(frame(padded_request("after-huge", 200)))
    assert small_engine.response("after-huge", timeout=30)["result"] == {"jobs": []}
    grown_mib = (vm_hwm_kib(small_engine.proc.pid) - before) / 1024
    assert grown_mib < 16, f"the engine's peak RSS grew by {grown_mib:.0f} MiB while skipping a 96 MiB body"
    errors = [m["error"] for m in small_engine.messages if m.get("id") is None]
    assert [e["code"] for e in errors] == [-32600]


def test_oversized_body_sent_slowly_in_pieces(small_engine: Engine) -> None:
    """The skip spans many reads: pieces smaller than a read, and a next frame glued to the last piece."""
    body = padded_request("slow-big", SMALL * 3)
    data = frame(body) + frame(padded_request("slow-next", 120))
    for i in range(0, len(data), 7001):
        small_engine.send_raw(data[i:i + 7001])
        time.sleep(0.001)
    assert small_engine.response("slow-next")["result"] == {"jobs": []}
    assert small_engine.replies("slow-big") == []


def test_default_maximum_is_max_frame_bytes(tmp_path: Path) -> None:
    eng = Engine()
    try:
        eng.initialize(make_repo(tmp_path / "repo", {"a.txt": "a\n"}))
        eng.send_raw(frame(padded_request("default-over", MAX_FRAME_BYTES + 1))
                     + frame(padded_request("default-next", 90)))
        assert eng.response("default-next", timeout=30)["result"] == {"jobs": []}
        [refusal] = [m for m in eng.messages if m.get("id") is None]
        assert refusal["error"]["code"] == -32600 and str(MAX_FRAME_BYTES) in refusal["error"]["message"]
        eng.send_raw(frame(padded_request("default-at", MAX_FRAME_BYTES)))
        assert eng.response("default-at", timeout=30)["result"] == {"jobs": []}
    finally:
        eng.stop()
    assert eng.stdout_faults == []


@pytest.mark.parametrize("value", ["0", "-1", "abc", "1e6", "", "٣"])
def test_invalid_max_frame_bytes_is_a_usage_error(value: str) -> None:
    res = subprocess.run([*engine_command(), "--max-frame-bytes", value], capture_output=True, text=True, check=False,
                         stdin=subprocess.DEVNULL, timeout=30)
    assert res.returncode == 2
    assert res.stdout == "" and "--max-frame-bytes" in res.stderr
