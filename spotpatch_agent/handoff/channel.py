"""The local channel between a project's engine and ``spotpatch-agent mcp`` (docs/security.md, *Agent channel*).

Where: one Unix-domain socket per git repository, ``<dir>/<key>.sock``, where ``<dir>`` is
``$XDG_RUNTIME_DIR/spotpatch`` (when that variable names a directory of ours, mode 0700) or
``/tmp/spotpatch-<uid>``, and ``<key>`` the first 16 hex digits of the SHA-256 of the repository's top-level
directory (``git rev-parse --show-toplevel``, resolved). Never a TCP port: no browser page, no other machine and
no other user can reach it.

Checks, both ends: the directory is created 0700 and must be a real directory (not a symlink) owned by this
user with no group or other permission bits, else nothing listens or connects; the socket is 0600; on Linux
the engine also checks the connecting process's uid (``SO_PEERCRED``) and closes any other. A socket file left
by a dead engine is removed only when nothing answers on it; a live one means another engine serves this
repository, and the second engine offers no agent channel (its page says so).

What: JSON-RPC 2.0 in ``Content-Length`` frames (rpc/framing.py), requests from the MCP side only:
``agent/hello``, ``agent/pending``, ``agent/take``, ``agent/call``, ``agent/submit``, ``agent/status``
(handoff/hub.py answers them).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import socket
import stat
import struct
import sys
from pathlib import Path
from typing import Any

import anyio
import anyio.abc

from spotpatch_agent.rpc.framing import Frame, FrameDecoder, encode_frame

#: Largest frame either end accepts (a job's first message plus the tool schemas fit many times over).
MAX_CHANNEL_FRAME = 8 * 1024 * 1024


class ChannelUnavailable(Exception):
    """No agent channel for this project; ``str()`` says why in one line (no absolute path)."""


def supported() -> bool:
    return hasattr(socket, "AF_UNIX") and sys.platform != "win32"


def _private_dir() -> Path:
    """The socket directory, created 0700 when missing; raises :class:`ChannelUnavailable` when it is unsafe."""
    uid = os.getuid()
    runtime = os.environ.get("XDG_RUNTIME_DIR", "")
    base: Path | None = None
    if runtime and os.path.isabs(runtime):
        try:
            st = os.lstat(runtime)
            if stat.S_ISDIR(st.st_mode) and st.st_uid == uid and not st.st_mode & 0o077:
                base = Path(runtime) / "spotpatch"
        except OSError:
            base = None
    path = base or Path(f"/tmp/spotpatch-{uid}")
    try:
        path.mkdir(mode=0o700, exist_ok=True)
        st = os.lstat(path)
    except OSError as exc:
        raise ChannelUnavailable(f"the agent channel's directory cannot be created ({exc.strerror}).") from None
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != uid or st.st_mode & 0o077:
        raise ChannelUnavailable("the agent channel's directory is not a private directory of this user "
                                 "(a symlink, another owner, or group/other permissions): nothing listens there.")
    return path


def socket_path(toplevel: Path) -> Path:
    """The socket of the repository whose top-level directory is ``toplevel`` (resolved by the caller)."""
    key = hashlib.sha256(os.fsencode(toplevel)).hexdigest()[:16]
    path = _private_dir() / f"{key}.sock"
    if len(os.fsencode(path)) >= 104:  # sun_path holds 104 (macOS) to 108 (Linux) bytes with its NUL
        raise ChannelUnavailable("the agent channel's directory path is too long for a socket (XDG_RUNTIME_DIR).")
    return path


async def repository_toplevel(directory: Path) -> Path:
    """The resolved top-level directory of the git repository holding ``directory`` (hardened git, read-only)."""
    from spotpatch_agent.worktree.git import run_git

    if not directory.is_dir():
        raise ChannelUnavailable("the project directory does not exist.")
    result = await run_git(["rev-parse", "--path-format=absolute", "--show-toplevel"], cwd=directory,
                           check=False, read_only=True, timeout=15)
    if result.returncode != 0:
        raise ChannelUnavailable("the project is not in a git repository (SpotPatch jobs need one).")
    return Path(os.fsdecode(result.stdout.strip())).resolve()


def peer_uid(stream: anyio.abc.SocketStream) -> int | None:
    """The uid of the process at the other end (Linux ``SO_PEERCRED``), or None where the system has no such query
    (the 0700 directory is then the only gate)."""
    if not hasattr(socket, "SO_PEERCRED"):
        return None
    raw: socket.socket = stream.extra(anyio.abc.SocketAttribute.raw_socket)
    creds = raw.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    return int(uid)


async def listen(path: Path) -> anyio.abc.SocketListener:
    """Listen on ``path`` (0600); a stale socket file of a dead engine is replaced. Raises
    :class:`ChannelUnavailable` when a live engine already listens there, or the path is not a socket."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    if st is not None:
        if not stat.S_ISSOCK(st.st_mode):
            raise ChannelUnavailable("the agent channel's socket path holds something else; nothing listens.")
        try:
            probe = await anyio.connect_unix(path)
        except OSError:
            path.unlink(missing_ok=True)  # nobody answers: a dead engine's socket
        else:
            await probe.aclose()
            raise ChannelUnavailable("another SpotPatch engine already serves agents for this repository "
                                     "(a second `vite dev` of it?); this one offers no agent channel.")
    try:
        return await anyio.create_unix_listener(path, mode=0o600)
    except OSError as exc:  # a path too long for AF_UNIX (108 bytes), a full disk…: no channel, said why
        raise ChannelUnavailable(f"the agent channel's socket cannot be created ({exc.strerror or 'error'}).") from None


class ChannelClient:
    """The MCP side of the channel: requests over one connection, answered in any order (by id)."""

    def __init__(self, stream: anyio.abc.SocketStream) -> None:
        self._stream = stream
        self._ids = itertools.count(1)
        self._waiting: dict[int, tuple[anyio.Event, list[dict[str, Any]]]] = {}
        self._lock = anyio.Lock()
        self.closed: str | None = None
        self._gone = anyio.Event()

    @classmethod
    async def connect(cls, path: Path) -> ChannelClient:
        try:
            stream = await anyio.connect_unix(path)
        except OSError:
            raise ChannelUnavailable("no SpotPatch engine is running for this project: start its dev server "
                                     "(`npm run dev`) and open the page.") from None
        return cls(stream)

    async def run(self) -> None:
        """Read answers until the engine closes the connection; then every waiting request fails."""
        decoder = FrameDecoder(max_body_bytes=MAX_CHANNEL_FRAME)
        try:
            async for chunk in self._stream:
                for item in decoder.feed(chunk):
                    if isinstance(item, Frame) and isinstance(item.value, dict):
                        waiting = self._waiting.get(item.value.get("id"))  # type: ignore[arg-type]
                        if waiting is not None:
                            waiting[1].append(item.value)
                            waiting[0].set()
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            pass
        finally:
            self.closed = "The SpotPatch engine went away (its dev server stopped or restarted)."
            for event, _ in self._waiting.values():
                event.set()
            self._gone.set()

    async def wait_closed(self) -> None:
        await self._gone.wait()

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """The ``result`` of ``method``; raises :class:`ChannelError` with the engine's error, or
        :class:`ChannelUnavailable` when the connection is gone."""
        if self.closed is not None:
            raise ChannelUnavailable(self.closed)
        rid = next(self._ids)
        frame = encode_frame({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        if len(frame) > MAX_CHANNEL_FRAME:  # the engine would skip it unanswered
            raise ChannelError("LIMIT_EXCEEDED", f"The call is larger than {MAX_CHANNEL_FRAME // (1024 * 1024)} MiB "
                                                 "and was not sent; send smaller edits.")
        event, box = anyio.Event(), list[dict[str, Any]]()
        self._waiting[rid] = (event, box)
        try:
            async with self._lock:
                await self._stream.send(frame)
            await event.wait()
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            raise ChannelUnavailable("The SpotPatch engine went away.") from None
        finally:
            self._waiting.pop(rid, None)
        if not box:
            raise ChannelUnavailable("The SpotPatch engine went away (its dev server stopped or restarted).")
        answer = box[0]
        if "error" in answer:
            error: dict[str, Any] = answer["error"] if isinstance(answer["error"], dict) else {}
            data: dict[str, Any] = error["data"] if isinstance(error.get("data"), dict) else {}
            raise ChannelError(str(data.get("code") or error.get("code")), str(error.get("message", "error")))
        result = answer.get("result")
        return result if isinstance(result, dict) else {}

    async def aclose(self) -> None:
        await self._stream.aclose()


class ChannelError(Exception):
    """The engine refused a request: ``code`` (an error code of docs/protocol.md) and its message."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
