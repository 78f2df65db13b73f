"""The stdio JSON-RPC server: a guard in front of python-lsp-jsonrpc's ``Endpoint`` (docs/design.md §3).

Threads::

    reader                os.read(stdin) → FrameDecoder → guard → Endpoint.consume → handler → Future
    event loop (portal)   asyncio tasks run handlers, anyio tasks run jobs; each request resolves its Future
    writer                one thread drains a queue and writes frames to the protocol fd (writer.py)

The reader is a callback of the event loop (``add_reader`` on stdin) on POSIX, so a request's task starts
without a thread hop; on Windows, or when stdin cannot be polled (a regular file), it is the main thread,
which hands each request to the loop with one ``call_soon_threadsafe`` (without waiting for the loop).
Hot path (issue 3): request tasks are plain asyncio tasks with an anyio ``CancelScope`` each (cheaper than
an anyio task group), the task answers without an extra checkpoint, and a small frame is written by the
sending thread itself when nothing is queued and the pipe has room (such a write cannot block);
otherwise frames go through the writer thread, which writes whatever is queued in one batch.

The guard answers every fault python-lsp-jsonrpc 1.1.2 mishandles (bad framing, non-object JSON, batches,
notifications without ``method``, ``$/cancelRequest`` without ``id``), enforces the LSP lifecycle
(``-32002`` before ``initialize``, ``-32600`` after ``shutdown``) and owns cancellation: every in-flight
request has an anyio ``CancelScope``; cancelling it resolves the request with ``-32800``. Every request
gets exactly one reply. A request whose method is in ``finish_on_stop`` (the engine's Apply and Revert, which
write the user's working tree) is finished when the server stops — stdin EOF, ``exit``, the parent's death —
before anything is cancelled, and its real reply is written if the client still reads (issue 25). Handler
results are always wrapped in ``result`` (the library would merge a dict holding ``result``/``error`` keys
into the envelope). Params are validated by their model in params.py.
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
import logging
import os
import select
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from typing import Any

import anyio
import anyio.abc
import anyio.from_thread
from pydantic import BaseModel
from pylsp_jsonrpc.endpoint import Endpoint

from spotpatch_agent.protocol.session import EmptyParams
from spotpatch_agent.rpc.errors import (
    InternalError,
    InvalidParams,
    InvalidRequest,
    MethodNotFound,
    RequestCancelled,
    ServerNotInitialized,
    sanitize_message,
    to_rpc_error,
)
from spotpatch_agent.rpc.framing import Frame, FrameDecoder
from spotpatch_agent.rpc.params import parse_params
from spotpatch_agent.rpc.writer import FrameWriter

log = logging.getLogger("spotpatch.rpc")

#: Longest the server waits at its stop for the ``finish_on_stop`` requests it received, in seconds. An Apply
#: is bounded by its own git timeouts; past this it is cancelled like any request (its write stays shielded).
FINISH_ON_STOP_SEC = 120.0
logging.getLogger("pylsp_jsonrpc").setLevel(logging.CRITICAL)

Handler = Callable[[Any], Awaitable[Any]]

#: The JSON-RPC id of the request whose handler is running (for handlers that tie work to their request).
REQUEST_ID: contextvars.ContextVar[Any] = contextvars.ContextVar("spotpatch_request_id", default=None)


class _InFlight:
    """A request being handled: its cancel scope once the task started, and whether a cancel arrived."""

    __slots__ = ("scope", "cancelled", "answered")

    def __init__(self) -> None:
        self.scope: anyio.CancelScope | None = None
        self.cancelled = False
        self.answered = False


class _Endpoint(Endpoint):
    @staticmethod
    def _make_response_payload(header: dict[str, Any], result: Any) -> dict[str, Any]:
        return {**header, "result": result}


class RpcServer:
    """Serve ``handlers`` on ``in_fd``/``out_fd`` until ``exit``, EOF or ``stop()``.

    ``handlers`` maps method → ``(params_model | None, async fn(params) -> result)``; a pydantic model
    result is dumped to its wire form. ``main`` (async) runs in the event loop for the server's life (the
    engine's task group); ``on_stop`` (async) runs when the server stops (cancel jobs, remove worktrees).
    """

    def __init__(
        self,
        *,
        in_fd: int,
        out_fd: int,
        handlers: dict[str, tuple[type[BaseModel] | None, Handler]],
        on_stop: Callable[[], Awaitable[None]],
        max_body_bytes: int,
        main: Callable[[], Awaitable[None]] | None = None,
        late_cancel: Callable[[Any, str], Awaitable[None]] | None = None,
        finish_on_stop: frozenset[str] = frozenset(),
    ) -> None:
        self._main = main
        self._finish_on_stop = finish_on_stop
        #: Ids of received ``finish_on_stop`` requests not answered yet (the stop waits for them).
        self._finishing: set[Any] = set()
        self._late_cancel = late_cancel
        #: request id → method of the latest request with that id (bounded), for a late $/cancelRequest.
        self._methods: collections.OrderedDict[Any, str] = collections.OrderedDict()
        self._in_fd = in_fd
        self._writer = FrameWriter(out_fd)
        self._decoder = FrameDecoder(max_body_bytes=max_body_bytes)
        self._on_stop = on_stop
        self._inflight: dict[Any, _InFlight] = {}
        self._lock = threading.Lock()
        self._current_id: Any = None
        self._state = "uninitialized"  # → initialized → shutdown
        self._stopping = threading.Event()
        #: stop() writes here to wake the reader's select() at once (parent death: exit within ~0.25 s).
        self._wake_r, self._wake_w = os.pipe() if os.name != "nt" else (-1, -1)
        self.exit_code = 1
        self._portal: anyio.from_thread.BlockingPortal | None = None
        #: The loop requests run in (set by ``_host`` once the portal runs) and their running tasks.
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._reading_in_loop = False
        self._reader_error: BaseException | None = None
        dispatcher = {m: self._wrap(m, model, fn) for m, (model, fn) in handlers.items()}
        dispatcher["shutdown"] = self._wrap("shutdown", EmptyParams, self._shutdown)
        self._methods_served = frozenset(dispatcher)
        self._endpoint = _Endpoint(dispatcher, self._writer.send, max_workers=1)

    # ------------------------------------------------------------------ public

    def notify(self, method: str, params: dict[str, Any]) -> None:
        """Send a notification (thread-safe; ordered with every other frame)."""
        self._writer.send({"jsonrpc": "2.0", "method": method, "params": params})

    def stop(self) -> None:
        """Ask the server to stop (thread-safe): used for parent death."""
        self._stopping.set()
        with self._lock:
            if self._wake_w >= 0:
                try:
                    os.write(self._wake_w, b"\0")
                except OSError:
                    pass

    def serve(self) -> int:
        """Run until EOF/exit/stop; returns the process exit code (0 only after ``shutdown``)."""
        with anyio.from_thread.start_blocking_portal(backend="asyncio") as portal:
            self._portal = portal
            portal.start_task(self._host)
            if self._main is not None:
                portal.start_task_soon(self._main)
            try:
                if portal.call(self._read_in_loop):
                    assert self._loop is not None
                    while not self._stopping.wait(0.5) and self._loop.is_running():
                        pass
                    if self._reader_error is not None:
                        raise self._reader_error
                else:
                    self._read_loop()
            finally:
                try:
                    portal.call(self._stop_reading)  # no more input while cleaning up
                    portal.call(self._finish_writes)
                    portal.call(self._run_on_stop)
                except Exception:  # noqa: BLE001 - cleanup must not mask the exit
                    log.exception("cleanup at stop failed")
                portal.call(portal.stop, True)  # cancel the engine's long-lived tasks
        self._writer.close()
        with self._lock:
            for fd in (self._wake_r, self._wake_w):
                if fd >= 0:
                    os.close(fd)
            self._wake_r = self._wake_w = -1
        return self.exit_code

    async def _host(self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Owns the request tasks: it runs in the portal's task group, so stopping the portal cancels it,
        and it then cancels every request task (each answers ``-32800``) and waits for them."""
        self._loop, self._loop_thread = asyncio.get_running_loop(), threading.get_ident()
        task_status.started()
        try:
            await anyio.sleep_forever()
        finally:
            with anyio.CancelScope(shield=True):
                while self._tasks:
                    for task in self._tasks:
                        task.cancel()
                    await asyncio.wait(list(self._tasks))

    def _spawn(self, fn: Callable[..., Awaitable[Any]], *args: Any) -> None:
        """Start ``fn(*args)`` as a request task from the reader (in the loop, or the main thread: then
        without waiting for the loop). Plain asyncio tasks (``_host`` cancels them at stop): an anyio task
        group costs ~15 µs more per request; anyio cancel scopes work in them as in any asyncio task."""
        assert self._loop is not None
        if threading.get_ident() == self._loop_thread:
            self._start_task(fn, args)
        else:
            self._loop.call_soon_threadsafe(self._start_task, fn, args)

    def _start_task(self, fn: Callable[..., Awaitable[Any]], args: tuple[Any, ...]) -> None:
        task = asyncio.ensure_future(fn(*args))
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and (exc := task.exception()) is not None:
            log.error("a request task failed", exc_info=exc)

    async def _run_late_cancel(self, request_id: Any, method: str) -> None:
        assert self._late_cancel is not None
        try:
            await self._late_cancel(request_id, method)
        except Exception:  # a failed late cancel must not take the other requests down
            log.exception("cancelling the work of an answered request failed")

    async def _finish_writes(self) -> None:
        """Wait (at most :data:`FINISH_ON_STOP_SEC`) until every received ``finish_on_stop`` request answered."""
        with anyio.move_on_after(FINISH_ON_STOP_SEC) as scope:
            while True:
                with self._lock:
                    if not self._finishing:
                        return
                await anyio.sleep(0.01)
        if scope.cancel_called:
            log.warning("stopping with an Apply or Revert still running after %.0f s", FINISH_ON_STOP_SEC)

    async def _run_on_stop(self) -> None:
        with anyio.move_on_after(10):
            await self._on_stop()

    # ------------------------------------------------------------------ reader + guard

    def _read_in_loop(self) -> bool:
        """Read stdin in the event loop (runs in it); False where the loop cannot poll stdin."""
        assert self._loop is not None
        if os.name == "nt":
            return False
        try:
            self._loop.add_reader(self._in_fd, self._on_readable)
        except (OSError, ValueError, NotImplementedError):  # e.g. a regular file: epoll refuses it
            return False
        self._reading_in_loop = True
        return True

    def _stop_reading(self) -> None:
        if self._reading_in_loop:
            self._reading_in_loop = False
            assert self._loop is not None
            self._loop.remove_reader(self._in_fd)

    def _on_readable(self) -> None:
        if self._stopping.is_set():
            self._stop_reading()
            return
        try:
            data = os.read(self._in_fd, 65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        try:
            more = self._consume(data)
        except BaseException as exc:  # noqa: BLE001 - a reader bug stops the server, as in the reader thread
            self._reader_error, more = exc, False
        if not more:
            self._stop_reading()
            self._stopping.set()

    def _read_loop(self) -> None:
        while not self._stopping.is_set():
            try:
                if os.name != "nt":  # Windows pipes cannot be select()ed: there the read blocks until EOF
                    ready, _, _ = select.select([self._in_fd, self._wake_r], [], [], 0.25)
                    if self._in_fd not in ready:
                        continue  # a timeout or stop(): the loop condition decides
                data = os.read(self._in_fd, 65536)
            except OSError:
                data = b""
            if not self._consume(data):
                return

    def _consume(self, data: bytes) -> bool:
        """Decode and guard ``data`` (``b""``: EOF); False once reading must stop (EOF, ``exit``, stop())."""
        if not data:
            state, size = self._decoder.pending()
            if state != "idle":
                log.warning("stdin closed in the middle of a frame (%s, %d bytes)", state, size)
            return False
        for item in self._decoder.feed(data):
            if isinstance(item, Frame):
                self._guard(item.value)
            else:
                self._send_error(None, item.code, item.message)
            if self._stopping.is_set():
                return False
        return True

    def _send_error(self, msg_id: Any, code: int, message: str) -> None:
        self._writer.send({"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": message}})

    def _guard(self, msg: Any) -> None:
        if isinstance(msg, list):
            self._send_error(None, InvalidRequest.CODE, "Batch requests are not supported")
            return
        if not isinstance(msg, dict):
            self._send_error(None, InvalidRequest.CODE, "A message must be a JSON object")
            return
        has_id = "id" in msg
        msg_id = msg.get("id")
        id_ok = not has_id or (isinstance(msg_id, (str, int)) and not isinstance(msg_id, bool))
        reply_id = msg_id if has_id and id_ok else None
        if has_id and "method" not in msg and ("result" in msg or "error" in msg):
            log.warning("ignored a response to a request the engine never sent")
            return
        if msg.get("jsonrpc") != "2.0":
            self._send_error(reply_id, InvalidRequest.CODE, 'Missing or wrong "jsonrpc": "2.0"')
            return
        method = msg.get("method")
        if "method" not in msg:
            self._send_error(reply_id, InvalidRequest.CODE, 'Missing "method"')
            return
        if not isinstance(method, str) or not id_ok:
            self._send_error(reply_id, InvalidRequest.CODE, '"method" must be a string and "id" a string or integer')
            return
        params = msg.get("params")
        if not has_id:
            self._notification(method, params)
            return
        if params is not None and not isinstance(params, dict):
            self._send_error(msg_id, InvalidParams.CODE, '"params" must be an object')
            return
        if self._state == "uninitialized" and method != "initialize":
            self._send_error(msg_id, ServerNotInitialized.CODE, "The engine is not initialized: send initialize first")
            return
        if self._state == "shutdown":
            self._send_error(msg_id, InvalidRequest.CODE, "The engine is shutting down: only exit is accepted")
            return
        if self._state == "initialized" and method == "initialize":
            self._send_error(msg_id, InvalidRequest.CODE, "initialize was already received")
            return
        if method not in self._methods_served:
            # Answered here, not by python-lsp-jsonrpc, whose message echoes the whole (unbounded) name.
            self._send_error(msg_id, MethodNotFound.CODE, f"Method not found: {sanitize_message(method)[:100]}")
            return
        with self._lock:
            duplicate = msg_id in self._inflight
        if duplicate:
            self._send_error(msg_id, InvalidRequest.CODE, "A request with this id is still in progress")
            return
        self._current_id = msg_id
        self._methods.pop(msg_id, None)
        self._methods[msg_id] = method
        if len(self._methods) > 4096:
            self._methods.popitem(last=False)
        self._endpoint.consume({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params or {}})

    def _notification(self, method: str, params: Any) -> None:
        if method == "$/cancelRequest":
            target = params.get("id") if isinstance(params, dict) else None
            if self._portal is None or not isinstance(target, (str, int)) or isinstance(target, bool):
                return
            with self._lock:
                entry = self._inflight.get(target)
                scope: anyio.CancelScope | None = None
                if entry is not None:
                    entry.cancelled = True
                    scope = entry.scope
            if entry is not None and not entry.answered:
                if scope is not None:
                    assert self._loop is not None
                    if threading.get_ident() == self._loop_thread:
                        scope.cancel()
                    else:
                        self._loop.call_soon_threadsafe(scope.cancel)
            elif self._late_cancel is not None and target in self._methods:
                # Already answered (exactly one reply stands): let the engine cancel work it started.
                self._spawn(self._run_late_cancel, target, self._methods[target])
            return
        if method == "exit":
            self.exit_code = 0 if self._state == "shutdown" else 1
            self._stopping.set()
            return
        if method == "initialized" or method.startswith("$/"):
            return
        log.info("ignored unknown notification %.80s", method)

    # ------------------------------------------------------------------ handlers

    async def _shutdown(self, _params: Any) -> None:
        self._state = "shutdown"
        await self._on_stop()
        return None

    def _wrap(self, method: str, model: type[BaseModel] | None, fn: Handler) -> Callable[[Any], Future[Any]]:
        def handler(params: Any) -> Future[Any]:
            msg_id = self._current_id
            future: Future[Any] = Future()
            entry = _InFlight()
            with self._lock:
                self._inflight[msg_id] = entry
                if method in self._finish_on_stop:
                    self._finishing.add(msg_id)
            self._spawn(self._run, method, msg_id, model, fn, params, entry, future)
            return future

        return handler

    async def _run(
        self, method: str, msg_id: Any, model: type[BaseModel] | None, fn: Handler,
        params: Any, entry: _InFlight, future: Future[Any],
    ) -> None:
        # The reply is sent last, after the scope and the in-flight entry are gone: a client that answers a
        # reply at once never finds its id still in flight, and a client on the same CPU as the loop waits
        # for less work after its reply was written.
        value: Any = None
        failure: BaseException | None = RequestCancelled()  # unless the handler returns or raises
        try:
            with anyio.CancelScope() as scope:
                with self._lock:
                    entry.scope = scope
                    if entry.cancelled:  # the cancel arrived before the task started: -32800 (finally)
                        return
                REQUEST_ID.set(msg_id)
                try:
                    parsed = parse_params(model, params)
                    result = await fn(parsed)
                    if method == "initialize" and self._state == "uninitialized":
                        self._state = "initialized"
                    value = result.dump() if hasattr(result, "dump") else result
                    with self._lock:
                        entry.answered = True
                    failure = None
                except Exception as exc:  # noqa: BLE001 - every failure becomes exactly one error reply
                    rpc = to_rpc_error(exc)
                    if isinstance(rpc, InternalError) and not isinstance(exc, InternalError):
                        log.error("%s failed", method, exc_info=exc)
                    failure = rpc
        finally:
            with self._lock:
                self._inflight.pop(msg_id, None)
                self._finishing.discard(msg_id)
            if failure is None:
                future.set_result(value)  # the reply is handed to the writer here
                if method == "initialize":
                    log.debug("initialize answered")  # the end of the cold start (tests/rpc/test_cold_start.py)
            else:
                future.set_exception(failure)
