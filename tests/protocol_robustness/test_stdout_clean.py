"""Nothing but frames reaches the protocol stream (docs/design.md §3, invariant 6), whatever writes to "stdout".

No production hook: the engine is started as ``python -c <code>`` where ``code`` wraps
``EngineService.health`` so that, while a request is being served, the engine's own process writes to
stdout in every way there is — ``print()``, ``sys.__stdout__``, a C-level ``os.write(1, …)``, C stdio
(``puts`` + ``fflush``), a child process that inherits fd 1 (``echo``) and a thread that keeps writing to
fd 1 while other frames are being sent — and then returns the real result. ``serve`` moved fd 1 to
stderr before anything ran, so the client must parse a clean stream, get every reply, and find the
noise on stderr only.
"""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import make_repo
from tests.protocol_robustness._support import Engine

pytestmark = pytest.mark.skipif(os.name != "posix", reason="uses echo and the C library")

NOISE = ["NOISE-print", "NOISE-dunder-stdout", "NOISE-os-write", "NOISE-libc-puts", "NOISE-child-echo", "NOISE-thread"]

CODE = textwrap.dedent("""
    import ctypes, os, subprocess, sys, threading, time
    import spotpatch_agent.cli
    from spotpatch_agent.engine.service import EngineService

    real_health = EngineService.health
    libc = ctypes.CDLL(None)

    def chatter():
        for i in range(300):
            os.write(1, b"NOISE-thread %d\\n" % i)
            time.sleep(0.001)

    async def noisy_health(self, params=None):
        print("NOISE-print", flush=True)
        sys.__stdout__.write("NOISE-dunder-stdout\\n")
        sys.__stdout__.flush()
        os.write(1, b"NOISE-os-write\\n")
        libc.puts(b"NOISE-libc-puts")
        libc.fflush(None)
        subprocess.run(["echo", "NOISE-child-echo"], check=True)
        threading.Thread(target=chatter, daemon=True).start()
        return await real_health(self, params)

    EngineService.health = noisy_health
    sys.exit(spotpatch_agent.cli.main(["serve"]))
""")


def test_print_os_write_and_child_output_never_reach_the_protocol_stream(tmp_path: Path) -> None:
    root = make_repo(tmp_path / "repo", {"a.txt": "a\n"})
    eng = Engine(command=[sys.executable, "-c", CODE])
    try:
        eng.initialize(root)
        for _ in range(3):  # three noisy requests, with frames of every size flowing while the thread chatters
            assert eng.call("health/get", {})["state"] == "clean"
            for i in range(50):
                assert eng.call("prompt/render", {"annotation": {"annotationId": f"a{i}", "pageUrl": "/", "targets": [
                    {"index": 1, "instruction": "x" * (1 + i * 40), "element": {"tagName": "div"}}]}})["text"]
        assert eng.close() == 0
    finally:
        eng.kill()
    assert eng.stdout_faults == [], "stdout carried bytes that are not a frame"
    stdout = bytes(eng.stdout_bytes)
    stderr = eng.stderr_text()
    for marker in NOISE:
        assert marker.encode() not in stdout, f"{marker} reached the protocol stream"
        assert marker in stderr, f"{marker} was not written at all (the test would prove nothing)"
    assert stderr.count("NOISE-print") == 3 and stderr.count("NOISE-child-echo") == 3
    replies = [m for m in eng.messages if "id" in m]
    assert len(replies) == 1 + 3 * 51 + 1 and all("result" in m for m in replies)  # initialize, requests, shutdown
