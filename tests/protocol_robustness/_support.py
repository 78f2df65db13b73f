"""Helpers of the protocol robustness tests (POSIX; the /proc and subreaper parts Linux only): engine clients,
/proc inspection, a subreaper, a slow ``git``.

- :class:`Engine` is :class:`tests.engine_client.EngineProcess` (same strict stdout parsing, same
  ``stdout_faults``) started with extra ``serve`` arguments or another command, plus an id index of replies
  so that thousands of requests are looked up in O(1).
- :class:`RawEngine` spawns ``serve`` with raw pipes and reads stdout only when asked: a client that stops
  reading creates real backpressure (the engine's stdout pipe fills up).
- :func:`descendants`, :class:`Subreaper`: which processes the engine started, and which survived it.
- :func:`slow_git_path`: a ``git`` wrapper first on ``PATH`` that turns one marked command into a long
  ``sleep`` (a stand-in for a slow ``git grep``), so a job has a live subprocess to kill.
"""

from __future__ import annotations

import ctypes
import json
import os
import select
import shutil
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, Self
from unittest import mock

from spotpatch_agent.rpc.framing import Frame, FrameDecoder, encode_frame
from tests import engine_client
from tests.engine_client import EngineProcess, engine_command


def id_key(value: Any) -> str:
    """A hashable key that tells ``1``, ``"1"``, ``true`` and ``1.0`` apart."""
    return json.dumps(value, sort_keys=True)


class Engine(EngineProcess):
    """``EngineProcess`` with ``serve`` arguments (``Engine("--max-frame-bytes", "65536")``) or a whole
    ``command``; ``response``/``replies`` use an incrementally built id index."""

    def __init__(self, *args: str, command: list[str] | None = None, env: dict[str, str] | None = None,
                 cwd: Path | None = None) -> None:
        self._by_id: dict[str, list[dict[str, Any]]] = {}
        self._indexed = 0
        self._null_codes: Counter[int] = Counter()
        argv = command if command is not None else [*engine_command(), *args]
        with mock.patch.object(engine_client, "engine_command", lambda: argv):
            super().__init__(env=env, cwd=cwd)

    def _index(self) -> None:  # with self._cond held
        for m in self.messages[self._indexed:]:
            if "id" in m and ("result" in m or "error" in m):
                self._by_id.setdefault(id_key(m["id"]), []).append(m)
                if m["id"] is None and "error" in m:
                    self._null_codes[m["error"].get("code")] += 1
        self._indexed = len(self.messages)

    def response(self, rid: Any, timeout: float = 15) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        key = id_key(rid)
        with self._cond:
            while True:
                self._index()
                if self._by_id.get(key):
                    return self._by_id[key][0]
                left = deadline - time.monotonic()
                if left <= 0 or self.proc.poll() is not None:
                    raise TimeoutError(f"no reply to {rid!r} (engine exit code {self.proc.poll()}); stderr:\n"
                                       + bytes(self.stderr_bytes).decode(errors="replace")[-3000:])
                self._cond.wait(min(left, 0.2))

    def replies(self, rid: Any) -> list[dict[str, Any]]:
        with self._cond:
            self._index()
            return list(self._by_id.get(id_key(rid), []))

    def reply_id_counts(self) -> Counter[str]:
        """How many replies each id got (keys from :func:`id_key`; ``"null"`` for id-less errors)."""
        with self._cond:
            self._index()
            return Counter({k: len(v) for k, v in self._by_id.items()})

    def null_id_error_codes(self) -> Counter[int]:
        with self._cond:
            self._index()
            return Counter(self._null_codes)

    def stderr_text(self) -> str:
        return bytes(self.stderr_bytes).decode("utf-8", "replace")


class RawEngine:
    """``spotpatch-agent serve`` on raw pipes; stdout is read only by :meth:`read_until` / :meth:`drain`."""

    def __init__(self, env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(engine_command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, bufsize=0, env={**os.environ, **(env or {})})
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._in = self.proc.stdin.fileno()
        self.out_fd = self.proc.stdout.fileno()
        self.decoder = FrameDecoder(max_body_bytes=64 * 1024 * 1024)
        self.messages: list[dict[str, Any]] = []
        self.faults: list[Any] = []
        self.stdout_bytes = 0
        self.bytes_sent = 0
        self.stderr = bytearray()
        self._next = 0
        threading.Thread(target=self._drain_stderr, daemon=True).start()

    def _drain_stderr(self) -> None:
        assert self.proc.stderr is not None
        while chunk := self.proc.stderr.read(65536):
            self.stderr += chunk

    def send(self, message: dict[str, Any]) -> None:
        data = memoryview(encode_frame(message))
        self.bytes_sent += len(data)
        while data:
            data = data[os.write(self._in, data):]

    def request(self, method: str, params: dict[str, Any] | None = None) -> str:
        self._next += 1
        rid = f"raw-{self._next}"
        self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params or {}})
        return rid

    def pipe_fill(self) -> int:
        """Bytes the engine wrote to stdout that this client has not read yet."""
        import fcntl
        import termios

        buf = bytearray(4)
        fcntl.ioctl(self.out_fd, termios.FIONREAD, buf)
        return int.from_bytes(buf, sys.byteorder)


    def stdout_is_blocked(self) -> bool:
        """Whether the pipe is full: unread bytes are waiting and a thread of the engine sleeps in a pipe
        write (``wchan``; a full pipe may hold fewer bytes than its capacity, so FIONREAD alone can't
        tell). Where the kernel hides ``wchan``: the unread byte count stays the same for 0.3 s."""
        fill = self.pipe_fill()
        if fill == 0:
            return False
        wchans = []
        for task in Path(f"/proc/{self.proc.pid}/task").iterdir():
            try:
                wchans.append((task / "wchan").read_text())
            except OSError:
                pass
        if any("pipe_write" in w for w in wchans):
            return True
        if any(w not in ("", "0") for w in wchans):
            return False  # wchan works and no thread is blocked writing
        time.sleep(0.3)
        return self.pipe_fill() == fill

    def _read_once(self, wait: float) -> bool:
        ready, _, _ = select.select([self.out_fd], [], [], wait)
        if not ready:
            return False
        chunk = os.read(self.out_fd, 1 << 20)
        if not chunk:
            return False
        self.stdout_bytes += len(chunk)
        for item in self.decoder.feed(chunk):
            if isinstance(item, Frame) and isinstance(item.value, dict):
                self.messages.append(item.value)
            else:
                self.faults.append(item)
        return True

    def read_until(self, done: Callable[[], bool], timeout: float = 20) -> None:
        deadline = time.monotonic() + timeout
        while not done():
            if time.monotonic() > deadline:
                raise TimeoutError("the engine did not send what was expected; stderr:\n"
                                   + self.stderr.decode(errors="replace")[-3000:])
            self._read_once(0.1)

    def replies(self, rid: Any) -> list[dict[str, Any]]:
        return [m for m in self.messages if m.get("id") == rid and ("result" in m or "error" in m)]

    def call(self, method: str, params: dict[str, Any] | None = None, timeout: float = 20) -> Any:
        rid = self.request(method, params)
        self.read_until(lambda: bool(self.replies(rid)), timeout)
        reply = self.replies(rid)[0]
        assert "result" in reply, reply
        return reply["result"]

    def events(self, job_id: str) -> list[dict[str, Any]]:
        return [m["params"] for m in self.messages if m.get("method") == "job/event" and m["params"]["jobId"] == job_id]

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                self.send({"jsonrpc": "2.0", "id": "raw-shutdown", "method": "shutdown"})
                self.read_until(lambda: bool(self.replies("raw-shutdown")), 10)
                self.send({"jsonrpc": "2.0", "method": "exit"})
                self.proc.wait(10)
            except Exception:  # noqa: BLE001 - best effort, then kill
                self.proc.kill()
                self.proc.wait()


# ---------------------------------------------------------------------------------------------- processes


def _stat(pid: int) -> tuple[int, str, int, str] | None:
    """``(ppid, state, starttime, comm)`` of ``pid`` from ``/proc``, or None when it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    comm = raw[raw.index("(") + 1: raw.rindex(")")]
    fields = raw[raw.rindex(")") + 2:].split()
    return int(fields[1]), fields[0], int(fields[19]), comm


def _all_pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def descendants(pid: int) -> dict[int, tuple[int, str]]:
    """Every live process below ``pid``: ``{pid: (starttime, comm)}``."""
    children: dict[int, list[int]] = {}
    info: dict[int, tuple[int, str, int, str]] = {}
    for p in _all_pids():
        st = _stat(p)
        if st is not None:
            info[p] = st
            children.setdefault(st[0], []).append(p)
    out: dict[int, tuple[int, str]] = {}
    todo = list(children.get(pid, []))
    while todo:
        p = todo.pop()
        if info[p][1] != "Z":
            out[p] = (info[p][2], info[p][3])
        todo.extend(children.get(p, []))
    return out


def still_alive(procs: dict[int, tuple[int, str]]) -> dict[int, tuple[int, str]]:
    """Those of ``procs`` (from :func:`descendants`) that still run (same pid and start time, not a zombie)."""
    out = {}
    for pid, (start, comm) in procs.items():
        st = _stat(pid)
        if st is not None and st[2] == start and st[1] != "Z":
            out[pid] = (start, comm)
    return out


def wait_for_descendant(pid: int, comm: str, timeout: float = 10) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for child, (_start, name) in descendants(pid).items():
            if name == comm:
                return child
        time.sleep(0.02)
    raise AssertionError(f"no {comm!r} process appeared below the engine within {timeout} s")


class Subreaper:
    """Make this (pytest) process a child subreaper (Linux ``PR_SET_CHILD_SUBREAPER``) for a block: a
    process the engine started and left behind is re-parented here instead of to init, so it cannot hide.
    :meth:`orphans` lists the adopted processes still running; leftovers are killed and reaped on exit."""

    PR_SET_CHILD_SUBREAPER = 36

    def __init__(self) -> None:
        self._libc = ctypes.CDLL(None, use_errno=True)

    def __enter__(self) -> Self:
        self._known = {p for p in _all_pids() if (_stat(p) or (0,))[0] == os.getpid()}
        if self._libc.prctl(self.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER) failed")
        return self

    def adopt_known(self, *pids: int) -> None:
        """Processes this test started itself (the engine, a throwaway parent): not orphans."""
        self._known.update(pids)

    def _adopted(self) -> dict[int, tuple[int, str, int, str]]:
        out = {}
        for p in _all_pids():
            st = _stat(p)
            if st is not None and st[0] == os.getpid() and p not in self._known:
                out[p] = st
        return out

    def orphans(self, grace: float = 0.5) -> dict[int, str]:
        """Adopted processes still running after ``grace`` seconds (a SIGKILL needs a moment to land)."""
        deadline = time.monotonic() + grace
        while True:
            live = {p: st[3] for p, st in self._adopted().items() if st[1] != "Z"}
            if not live or time.monotonic() > deadline:
                return live
            time.sleep(0.02)

    def __exit__(self, *exc: object) -> None:
        self._libc.prctl(self.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
        for pid in self._adopted():
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass


# ---------------------------------------------------------------------------------------------- slow git

#: A ``search_text`` query that makes the wrapper below sleep instead of running ``git grep``.
SLOW_GIT_MARKER = "SPOTPATCH_SLOW_GIT_MARKER"


def slow_git_path(directory: Path) -> str:
    """A ``PATH`` whose first entry holds a ``git`` that runs the real git, except that a command naming
    :data:`SLOW_GIT_MARKER` — and, while the file ``directory/slow-status`` exists, ``git status`` —
    becomes ``sleep 60`` (the same process: ``exec``)."""
    real = shutil.which("git")
    assert real, "git is not installed"
    directory.mkdir(parents=True, exist_ok=True)
    wrapper = directory / "git"
    wrapper.write_text(
        "#!/bin/sh\n"
        f'case "$*" in *{SLOW_GIT_MARKER}*) exec sleep 60 ;; esac\n'
        f'if [ -e "{directory}/slow-status" ]; then case " $* " in *" status "*) exec sleep 60 ;; esac; fi\n'
        f'exec {real} "$@"\n'
    )
    wrapper.chmod(0o755)
    return f"{directory}{os.pathsep}{os.environ.get('PATH', '')}"


def slow_search_turn(call_id: str = "slow-1") -> dict[str, Any]:
    """A model turn whose only tool call runs the slow ``git`` (``search_text`` → ``git grep``)."""
    return {"toolCalls": [{"id": call_id, "name": "search_text",
                           "arguments": {"query": SLOW_GIT_MARKER, "glob": None, "maxResults": 5}}]}
