"""A framed JSON-RPC client for a real ``spotpatch-agent serve`` subprocess (test helper).

Every byte the engine writes to stdout is parsed with a strict decoder: any framing fault is recorded in
``stdout_faults`` (stdout must carry protocol frames only — invariant 6).
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from spotpatch_agent.rpc.framing import Frame, FrameDecoder, encode_frame


def engine_command() -> list[str]:
    script = Path(sys.executable).with_name("spotpatch-agent")
    if script.exists():
        return [str(script), "serve"]
    found = shutil.which("spotpatch-agent")
    return [found, "serve"] if found else [sys.executable, "-m", "spotpatch_agent", "serve"]


class EngineProcess:
    def __init__(self, *, env: dict[str, str] | None = None, cwd: Path | None = None) -> None:
        self.proc = subprocess.Popen(
            engine_command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env={**os.environ, **(env or {})}, cwd=cwd,
        )
        self.stdout_bytes = bytearray()
        self.stderr_bytes = bytearray()
        self.messages: list[dict[str, Any]] = []
        self.stdout_faults: list[Any] = []
        self._cond = threading.Condition()
        self._ids = itertools.count(1)
        threading.Thread(target=self._read_stdout, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    # ---------------------------------------------------------------- io

    def _read_stdout(self) -> None:
        decoder = FrameDecoder(max_body_bytes=64 * 1024 * 1024)
        assert self.proc.stdout is not None
        while chunk := self.proc.stdout.read1(65536):
            with self._cond:
                self.stdout_bytes += chunk
                for item in decoder.feed(chunk):
                    if isinstance(item, Frame) and isinstance(item.value, dict):
                        self.messages.append(item.value)
                    else:
                        self.stdout_faults.append(item)
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        while chunk := self.proc.stderr.read1(65536):
            self.stderr_bytes += chunk

    def send_raw(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, message: dict[str, Any]) -> None:
        self.send_raw(encode_frame(message))

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)

    def start_request(self, method: str, params: dict[str, Any] | None = None) -> int:
        rid = next(self._ids) + 1000
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)
        return rid

    def request(self, method: str, params: dict[str, Any] | None = None, timeout: float = 15) -> dict[str, Any]:
        """Send a request and return its response message (``result`` or ``error``)."""
        return self.response(self.start_request(method, params), timeout)

    def call(self, method: str, params: dict[str, Any] | None = None, timeout: float = 15) -> Any:
        reply = self.request(method, params, timeout)
        assert "error" not in reply, f"{method} failed: {reply['error']}"
        return reply["result"]

    # ---------------------------------------------------------------- waiting

    def wait_for(self, predicate: Callable[[dict[str, Any]], bool], timeout: float = 15) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for m in self.messages:
                    if predicate(m):
                        return m
                left = deadline - time.monotonic()
                if left <= 0 or self.proc.poll() is not None and not self._pending_stdout():
                    stderr = self.stderr_bytes.decode(errors="replace")[-3000:]
                    raise TimeoutError(f"no matching message; stderr:\n{stderr}")
                self._cond.wait(min(left, 0.2))

    def _pending_stdout(self) -> bool:
        return False

    def response(self, rid: Any, timeout: float = 15) -> dict[str, Any]:
        return self.wait_for(lambda m: m.get("id") == rid and ("result" in m or "error" in m), timeout)

    def responses_to(self, rid: Any) -> list[dict[str, Any]]:
        with self._cond:
            return [m for m in self.messages if m.get("id") == rid and ("result" in m or "error" in m)]

    def events(self, job_id: str | None = None) -> list[dict[str, Any]]:
        with self._cond:
            return [m["params"] for m in self.messages if m.get("method") == "job/event"
                    and (job_id is None or m["params"]["jobId"] == job_id)]

    def barrier(self, timeout: float = 15) -> None:
        """Send a sentinel request (``job/list``: the engine must be initialized) and wait for its answer.

        The engine reads frames in order and handles a notification (``$/cancelRequest``) while reading it,
        so when the sentinel is answered every frame sent before it was handled and the work those frames
        started was under way first: a reply or event they would cause at once is already here. Use it
        instead of a sleep before asserting that something did not happen."""
        reply = self.request("job/list", {}, timeout)
        assert "result" in reply, f"the sentinel job/list failed: {reply}"

    def wait_status(self, job_id: str, statuses: set[str], timeout: float = 30) -> dict[str, Any]:
        return self.wait_for(lambda m: m.get("method") == "job/event" and m["params"]["jobId"] == job_id
                             and m["params"]["kind"] == "status" and m["params"]["status"] in statuses,
                             timeout)["params"]

    # ---------------------------------------------------------------- lifecycle

    def initialize(self, root: Path, config: dict[str, Any] | None = None) -> dict[str, Any]:
        return self.call("initialize", {"protocolVersion": "0.1", "processId": os.getpid(),
                                        "clientInfo": {"name": "pytest"}, "projectRoot": str(root),
                                        "config": config or {}})

    def close(self, timeout: float = 10) -> int:
        """shutdown → exit; returns the exit code (kills the process if it hangs)."""
        if self.proc.poll() is None:
            try:
                self.request("shutdown", timeout=timeout)
                self.notify("exit")
            except (TimeoutError, BrokenPipeError, OSError):
                pass
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise

    def stop(self) -> None:
        """End the engine the clean way when possible (shutdown → exit: jobs cancelled, worktrees removed),
        else kill it. Use in ``finally`` so a failing test leaves no worktree behind."""
        try:
            self.close(timeout=10)
        except Exception:  # noqa: BLE001 - best effort, then kill
            self.kill()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def all_output(self) -> str:
        return bytes(self.stdout_bytes).decode("utf-8", "replace") + bytes(self.stderr_bytes).decode("utf-8", "replace")


def dumps(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode("utf-8")
