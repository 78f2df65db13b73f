"""The protocol stream's writer (docs/design.md §3): frames leave in the order they were sent, from any thread.

A small frame is written by the sending thread itself when nothing is queued and the pipe has room (such
a write cannot block); any other frame goes through one writer thread, which writes whatever is queued in
one batch (issue 3). A client that stops reading stalls only that thread.
"""

from __future__ import annotations

import collections
import logging
import os
import select
import stat
import threading
from typing import Any

from spotpatch_agent.rpc.errors import InternalError
from spotpatch_agent.rpc.framing import encode_frame

__all__ = ["FrameWriter"]

log = logging.getLogger("spotpatch.rpc")

#: A write of at most this many bytes to a pipe that polls writable cannot block (POSIX atomic writes).
_PIPE_BUF = getattr(select, "PIPE_BUF", 512)
#: The writer thread joins queued frames into writes of about this size.
_BATCH_BYTES = 256 * 1024


class FrameWriter:
    """Writes frames in the order ``send`` was called (from any thread) and never blocks the caller.

    A frame of at most ``PIPE_BUF`` bytes is written by the calling thread when nothing is queued or being
    written and the fd polls writable; any other frame is queued for the writer thread, which writes all
    queued frames in batches. A client that stops reading therefore stalls only the writer thread.
    ``close()`` flushes and stops.
    """

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._cond = threading.Condition()
        self._pending: collections.deque[bytes] = collections.deque()
        self._busy = False  # the writer thread holds frames it has not finished writing
        self._closing = False
        self._broken = False  # the client went away: frames are dropped
        self._poll: Any = None
        if _direct_writes_safe(fd):
            self._poll = select.poll()
            self._poll.register(fd, select.POLLOUT)
        self._thread = threading.Thread(target=self._run, name="spotpatch-writer", daemon=True)
        self._thread.start()

    def send(self, message: dict[str, Any]) -> None:
        try:
            frame = encode_frame(message)
        except (TypeError, ValueError):
            log.error("a message could not be serialised; answering with an internal error instead")
            if "id" not in message:
                return
            failure = {"code": InternalError.CODE, "message": "Internal error: unserialisable result"}
            frame = encode_frame({"jsonrpc": "2.0", "id": message["id"], "error": failure})
        with self._cond:
            if self._broken or self._closing:
                return
            if (self._poll is not None and not self._pending and not self._busy and len(frame) <= _PIPE_BUF
                    and self._poll.poll(0)):
                try:
                    written = os.write(self._fd, frame)
                except BlockingIOError:  # a non-blocking fd (the parent's choice) that is full after all
                    written = 0
                except OSError:
                    self._broken = True  # the client went away; the reader sees EOF and shuts down
                    return
                if written == len(frame):
                    return
                frame = frame[written:]  # a socket may take less: the writer thread sends the rest, in order
            self._pending.append(frame)
            self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._closing:
                    self._cond.wait()
                if not self._pending:
                    return
                batch, size = [], 0
                while self._pending and size < _BATCH_BYTES:
                    batch.append(self._pending.popleft())
                    size += len(batch[-1])
                self._busy = True
            view = memoryview(batch[0] if len(batch) == 1 else b"".join(batch))
            try:
                while view:
                    try:
                        view = view[os.write(self._fd, view):]
                    except BlockingIOError:  # a non-blocking fd: wait until the client drained some
                        _wait_writable(self._fd)
            except OSError:
                with self._cond:
                    self._broken, self._busy = True, False
                    self._pending.clear()
                return  # the client went away; the reader sees EOF and shuts down
            with self._cond:
                self._busy = False

    def close(self, timeout: float = 2.0) -> None:
        with self._cond:
            self._closing = True
            self._cond.notify()
        self._thread.join(timeout)


def _wait_writable(fd: int) -> None:
    if os.name == "nt" or not hasattr(select, "poll"):
        threading.Event().wait(0.01)
    else:
        poll = select.poll()
        poll.register(fd, select.POLLOUT)
        poll.poll(1000)


def _direct_writes_safe(fd: int) -> bool:
    """Whether a small write to ``fd`` that polls writable cannot block: pipes, sockets, regular files.
    Not on Windows (pipes cannot be polled) nor for terminals and other devices: there every frame is
    written by the writer thread."""
    if os.name == "nt" or not hasattr(select, "poll"):
        return False
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISREG(mode)
