"""The stdio JSON-RPC server: a guard in front of python-lsp-jsonrpc's ``Endpoint`` (DESIGN.md §3).

Threads::

    reader (main thread)  os.read(stdin) → FrameDecoder → guard → Endpoint.consume → handler → Future
    event loop (portal)   anyio tasks run handlers and jobs; each resolves its own Future
    writer                one thread drains a queue and writes frames to the protocol fd

The guard answers every fault python-lsp-jsonrpc 1.1.2 mishandles (bad framing, non-object JSON, batches,
notifications without ``method``, ``$/cancelRequest`` without ``id``), enforces the LSP lifecycle
(``-32002`` before ``initialize``, ``-32600`` after ``shutdown``) and owns cancellation: every in-flight
request has an anyio ``CancelScope``; cancelling it resolves the request with ``-32800``. Every request
gets exactly one reply. Handler results are always wrapped in ``result`` (the library would merge a dict
holding ``result``/``error`` keys into the envelope).
"""

from __future__ import annotations

import collections
import contextvars
import logging
import os
import queue
import select
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel
from pydantic import BaseModel, ValidationError
from pylsp_jsonrpc.endpoint import Endpoint

from spotpatch_agent.rpc.errors import (
    InternalError,
    InvalidParams,
    InvalidRequest,
    RequestCancelled,
    ServerNotInitialized,
    to_rpc_error,
)
from spotpatch_agent.rpc.framing import Frame, FrameDecoder, encode_frame

log = logging.getLogger("spotpatch.rpc")
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


class FrameWriter:
    """Writes frames from one thread, in the order they were queued. ``close()`` flushes and stops."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._queue: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="spotpatch-writer", daemon=True)
        self._thread.start()

    def send(self, message: dict[str, Any]) -> None:
        try:
            frame = encode_frame(message)
        except (TypeError, ValueError):
            log.error("a message could not be serialised; answering with an internal error instead")
            if "id" not in message:
                return
            frame = encode_frame({"jsonrpc": "2.0", "id": message["id"],
                                  "error": {"code": InternalError.CODE, "message": "Internal error: unserialisable result"}})
        self._queue.put(frame)

    def _run(self) -> None:
        while (data := self._queue.get()) is not None:
            view = memoryview(data)
            try:
                while view:
                    view = view[os.write(self._fd, view):]
            except OSError:
                return  # the client went away; the reader sees EOF and shuts down

    def close(self, timeout: float = 2.0) -> None:
        self._queue.put(None)
        self._thread.join(timeout)


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
    ) -> None:
        self._main = main
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
        self.exit_code = 1
        self._portal: anyio.from_thread.BlockingPortal | None = None
        dispatcher = {m: self._wrap(m, model, fn) for m, (model, fn) in handlers.items()}
        dispatcher["shutdown"] = self._wrap("shutdown", None, self._shutdown)
        self._endpoint = _Endpoint(dispatcher, self._writer.send, max_workers=1)

    # ------------------------------------------------------------------ public

    def notify(self, method: str, params: dict[str, Any]) -> None:
        """Send a notification (thread-safe; ordered with every other frame)."""
        self._writer.send({"jsonrpc": "2.0", "method": method, "params": params})

    def stop(self) -> None:
        """Ask the server to stop (thread-safe): used for parent death."""
        self._stopping.set()

    def serve(self) -> int:
        """Run until EOF/exit/stop; returns the process exit code (0 only after ``shutdown``)."""
        with anyio.from_thread.start_blocking_portal(backend="asyncio") as portal:
            self._portal = portal
            if self._main is not None:
                portal.start_task_soon(self._main)
            try:
                self._read_loop()
            finally:
                try:
                    portal.call(self._run_on_stop)
                except Exception:  # noqa: BLE001 - cleanup must not mask the exit
                    log.exception("cleanup at stop failed")
                portal.call(portal.stop, True)  # cancel the engine's long-lived tasks
        self._writer.close()
        return self.exit_code

    async def _run_on_stop(self) -> None:
        with anyio.move_on_after(10):
            await self._on_stop()

    # ------------------------------------------------------------------ reader + guard

    def _read_loop(self) -> None:
        while not self._stopping.is_set():
            try:
                if os.name != "nt":  # Windows pipes cannot be select()ed: there the read blocks until EOF
                    ready, _, _ = select.select([self._in_fd], [], [], 0.25)
                    if not ready:
                        continue
                data = os.read(self._in_fd, 65536)
            except OSError:
                data = b""
            if not data:
                return
            for item in self._decoder.feed(data):
                if isinstance(item, Frame):
                    self._guard(item.value)
                else:
                    self._send_error(None, item.code, item.message)
                if self._stopping.is_set():
                    return

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
                if entry is not None:
                    entry.cancelled = True
                    scope = entry.scope
            if entry is not None and not entry.answered:
                if scope is not None:
                    self._portal.start_task_soon(_cancel, scope)
            elif self._late_cancel is not None and target in self._methods:
                # Already answered (exactly one reply stands): let the engine cancel work it started.
                self._portal.start_task_soon(self._late_cancel, target, self._methods[target])
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
            assert self._portal is not None
            self._portal.start_task_soon(self._run, method, msg_id, model, fn, params, entry, future)
            return future

        return handler

    async def _run(
        self, method: str, msg_id: Any, model: type[BaseModel] | None, fn: Handler,
        params: Any, entry: _InFlight, future: Future[Any],
    ) -> None:
        try:
            with anyio.CancelScope() as scope:
                with self._lock:
                    entry.scope = scope
                    if entry.cancelled:
                        scope.cancel()  # the cancel arrived before the task started
                await anyio.lowlevel.checkpoint()
                REQUEST_ID.set(msg_id)
                try:
                    parsed = _parse(model, params)
                    result = await fn(parsed)
                    if method == "initialize" and self._state == "uninitialized":
                        self._state = "initialized"
                    with self._lock:
                        entry.answered = True
                    future.set_result(result.dump() if hasattr(result, "dump") else result)
                except Exception as exc:  # noqa: BLE001 - every failure becomes exactly one error reply
                    rpc = to_rpc_error(exc)
                    if isinstance(rpc, InternalError) and not isinstance(exc, InternalError):
                        log.error("%s failed", method, exc_info=exc)
                    future.set_exception(rpc)
        finally:
            with self._lock:
                self._inflight.pop(msg_id, None)
            if not future.done():
                future.set_exception(RequestCancelled())


async def _cancel(scope: anyio.CancelScope) -> None:
    scope.cancel()


def _parse(model: type[BaseModel] | None, params: Any) -> Any:
    if model is None:
        return params
    try:
        return model.model_validate(params)
    except ValidationError as exc:
        raise InvalidParams(_summarise(exc)) from None


def _summarise(exc: ValidationError, limit: int = 5) -> str:
    """Field locations and messages only; never the offending input (it may hold paths or secrets)."""
    parts = []
    for err in exc.errors(include_input=False, include_url=False)[:limit]:
        loc = ".".join(str(p)[:40] for p in err["loc"]) or "params"
        parts.append(f"{loc}: {err['msg']}")
    more = len(exc.errors()) - limit
    return "Invalid params: " + "; ".join(parts) + (f" (+{more} more)" if more > 0 else "")
