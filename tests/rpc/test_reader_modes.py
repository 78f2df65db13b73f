"""The reader runs in the event loop where stdin can be polled (a pipe) and in the main thread where it
cannot (a regular file): both answer the same input with the same frames and exit code (issue 3)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from spotpatch_agent.rpc.framing import Frame, FrameDecoder, encode_frame
from tests.engine_client import engine_command

INPUT = b"".join([
    encode_frame({"jsonrpc": "2.0", "id": 1, "method": "job/list", "params": {}}),  # before initialize
    b"Content-Length: abc\r\n\r\n{}",  # a bad frame: an id-less error, then resync
    encode_frame({"jsonrpc": "2.0", "id": 2, "method": "health/get", "params": {}}),
    encode_frame({"jsonrpc": "2.0", "method": "exit"}),
    encode_frame({"jsonrpc": "2.0", "id": 3, "method": "job/list", "params": {}}),  # after exit: never read
])


def replies(out: bytes) -> list[tuple[object, int]]:
    items = FrameDecoder(max_body_bytes=1 << 20).feed(out)
    assert all(isinstance(i, Frame) for i in items), out
    return [(i.value.get("id"), i.value["error"]["code"]) for i in items]


def test_pipe_and_regular_file_stdin_get_the_same_answers(tmp_path: Path) -> None:
    expected = [(1, -32002), (None, -32700), (2, -32002)]
    piped = subprocess.run(engine_command(), input=INPUT, capture_output=True, timeout=30, check=False)
    assert (piped.returncode, replies(piped.stdout)) == (1, expected), piped.stderr.decode()[-2000:]
    stdin_file = tmp_path / "input.bin"
    stdin_file.write_bytes(INPUT)
    with stdin_file.open("rb") as stdin:
        from_file = subprocess.run(engine_command(), stdin=stdin, capture_output=True, timeout=30, check=False)
    assert (from_file.returncode, replies(from_file.stdout)) == (1, expected), from_file.stderr.decode()[-2000:]
