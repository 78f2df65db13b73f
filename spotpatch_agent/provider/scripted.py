"""A real local OpenAI-compatible HTTP server that plays a script (tests and the offline demo).

It speaks HTTP/1.1 on ``127.0.0.1`` (an ephemeral port) from a background thread, so a
:class:`~spotpatch_agent.provider.chat.ChatCompletionsAdapter` or
:class:`~spotpatch_agent.provider.responses.ResponsesAdapter` pointed at :attr:`ScriptedProviderServer.base_url`
runs exactly its production code path (docs/design.md §11). Endpoints:

- ``POST /v1/chat/completions`` (also ``/chat/completions``) and ``POST /v1/responses`` (also
  ``/responses``): consume the next turn of the one script and answer it as ``text/event-stream`` in that
  endpoint's wire format (chunked transfer encoding, one chunk per SSE event);
- ``GET /v1/models`` (also ``/models``): ``{"object": "list", "data": [{"id": …}, …]}`` of the model ids.

A **turn** is a dict (or a callable ``fn(request_body) -> dict`` evaluated when its request arrives):

- ``{"text": str, "toolCalls": [{"id", "name", "arguments": dict | str}], "finishReason": str | None,
  "argumentChunks": int = 3, "textChunks": int = 3, "usage": dict | None}`` — rendered like OpenAI does.
  Chat (:func:`render_chat_turn`): a role chunk, the text in pieces, per call a first delta ``{index, id,
  type, function: {name, arguments: ""}}`` then the arguments in ``argumentChunks`` pieces, a final chunk
  with ``finish_reason`` (None or absent: ``tool_calls`` when there are calls, else ``stop``), a
  ``choices: []`` usage chunk when the request asked for ``stream_options.include_usage``, then
  ``data: [DONE]``. Responses (:func:`render_responses_turn`): ``response.created``/``in_progress``, a
  message item with ``output_text`` deltas, per call a ``function_call`` item (``call_id`` = the call's
  id) with argument deltas, ``.done`` and ``output_item.done``, then ``response.completed`` with the output
  and usage (``finishReason`` ``length`` / ``content_filter``: ``response.incomplete`` with reason
  ``max_output_tokens`` / ``content_filter``). ``usage`` is given in Chat terms and translated.
- ``{"raw": [str | bytes, …]}`` — exactly these bytes, one transfer chunk each (quirk tests, fixtures).
- ``{"status": int, "body": dict | str, "headers": dict}`` — a non-streamed answer (errors, retries).
- ``{"stall": True}`` — headers only, then silence until the client disconnects (recorded with its
  ``time.monotonic()``); with ``"stallAfterChunks": n`` (``stall`` implied) the first ``n`` rendered or raw
  events are sent first; ``{"raw": [...], "stall": True}`` sends all the raw events, then stalls.
  ``"stallAfterText": True`` stalls right after the last text event of either format.
- ``"endAfterChunks": n`` / ``"endAfterText": True`` — send the first ``n`` events (or up to the last text
  event) and end the body normally: EOF before the turn's end, in either format.
- ``"abort": True`` on a streamed turn — drop the connection after the events, without ending the body.
- ``"headers": dict`` on a streamed turn — extra response headers (e.g. another ``Content-Type``).
- ``{"textForever": str}`` — a model that never stops talking: that text as a text delta of either format,
  again and again, until the client disconnects (recorded) or the server stops.

An exhausted script answers HTTP 500 ``{"error": {"message": "script exhausted"}}``. The server logs to
the ``logging`` module only (never stdout).
"""

from __future__ import annotations

import collections
import json
import logging
import select
import socket
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

_log = logging.getLogger(__name__)

Turn = dict[str, Any] | Callable[[dict[str, Any]], dict[str, Any]]
_CHAT_PATHS = ("/v1/chat/completions", "/chat/completions")
_RESPONSES_PATHS = ("/v1/responses", "/responses")
_MODEL_PATHS = ("/v1/models", "/models")


def _split(text: str, parts: int) -> list[str]:
    """``text`` cut into at most ``parts`` non-empty pieces of near-equal length (``[]`` for ``""``)."""
    if not text:
        return []
    parts = max(1, min(int(parts), len(text)))
    size = -(-len(text) // parts)
    return [text[i : i + size] for i in range(0, len(text), size)]


def sse(payload: dict[str, Any] | str) -> str:
    """One SSE event: ``data: <json>\\n\\n`` (a ``str`` payload is sent as is, e.g. ``[DONE]``)."""
    data = payload if isinstance(payload, str) else json.dumps(payload, ensure_ascii=False)
    return f"data: {data}\n\n"


def render_chat_turn(turn: dict[str, Any], *, model: str, include_usage: bool = True, turn_no: int = 1) -> list[str]:
    """The SSE events (``data: …\\n\\n`` strings) of a scripted text/tool-call turn, in order."""
    base = {"id": f"chatcmpl-scripted-{turn_no}", "object": "chat.completion.chunk", "created": int(time.time()),
            "model": model}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        return sse({**base, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]})

    events = [chunk({"role": "assistant", "content": ""})]
    for piece in _split(turn.get("text") or "", turn.get("textChunks", 3)):
        events.append(chunk({"content": piece}))
    calls = turn.get("toolCalls") or []
    for i, call in enumerate(calls):
        arguments = call.get("arguments", {})
        text = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
        first = {"index": i, "id": call.get("id") or f"call_{turn_no}_{i}", "type": "function",
                 "function": {"name": call["name"], "arguments": ""}}
        events.append(chunk({"tool_calls": [first]}))
        for piece in _split(text, turn.get("argumentChunks", 3)):
            events.append(chunk({"tool_calls": [{"index": i, "function": {"arguments": piece}}]}))
    finish = turn.get("finishReason") or ("tool_calls" if calls else "stop")
    events.append(chunk({}, finish))
    if include_usage:
        usage = turn.get("usage") or {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}
        events.append(sse({**base, "choices": [], "usage": usage}))
    events.append(sse("[DONE]"))
    return events


def _responses_usage(usage: dict[str, Any] | None) -> dict[str, Any]:
    """A Chat-style usage object in Responses terms (one already in Responses terms is kept)."""
    usage = usage or {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}
    if "input_tokens" in usage:
        return usage
    prompt, completion = int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
    return {"input_tokens": prompt, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": completion,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": int(usage.get("total_tokens") or prompt + completion)}


def render_responses_turn(turn: dict[str, Any], *, model: str, turn_no: int = 1) -> list[str]:
    """The SSE events (``event: …\\ndata: …\\n\\n`` strings) of a scripted turn in the Responses format, in
    the order OpenAI sends them; ids are ``resp_/msg_/fc_scripted_…`` and each call's ``call_id`` is its id."""
    sequence = iter(range(1_000_000))
    response = {"id": f"resp_scripted_{turn_no}", "object": "response", "created_at": int(time.time()),
                "status": "in_progress", "model": model, "output": [], "usage": None, "store": False,
                "error": None, "incomplete_details": None}

    def event(kind: str, **fields: Any) -> str:
        payload = {"type": kind, "sequence_number": next(sequence), **fields}
        return f"event: {kind}\ndata: {json.dumps(payload, ensure_ascii=False)}\n\n"

    events = [event("response.created", response=response), event("response.in_progress", response=response)]
    output: list[dict[str, Any]] = []
    text = turn.get("text") or ""
    if text:
        at, item_id = len(output), f"msg_scripted_{turn_no}"
        where = {"item_id": item_id, "output_index": at, "content_index": 0}
        part = {"type": "output_text", "text": "", "annotations": []}
        events.append(event("response.output_item.added", output_index=at, item={
            "id": item_id, "type": "message", "status": "in_progress", "role": "assistant", "content": []}))
        events.append(event("response.content_part.added", **where, part=part))
        for piece in _split(text, turn.get("textChunks", 3)):
            events.append(event("response.output_text.delta", **where, delta=piece))
        events.append(event("response.output_text.done", **where, text=text))
        part = {**part, "text": text}
        events.append(event("response.content_part.done", **where, part=part))
        item = {"id": item_id, "type": "message", "status": "completed", "role": "assistant", "content": [part]}
        events.append(event("response.output_item.done", output_index=at, item=item))
        output.append(item)
    for i, call in enumerate(turn.get("toolCalls") or []):
        arguments = call.get("arguments", {})
        args = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
        at, item_id = len(output), f"fc_scripted_{turn_no}_{i}"
        item = {"id": item_id, "type": "function_call", "status": "in_progress", "arguments": "",
                "call_id": call.get("id") or f"call_{turn_no}_{i}", "name": call["name"]}
        events.append(event("response.output_item.added", output_index=at, item=item))
        for piece in _split(args, turn.get("argumentChunks", 3)):
            events.append(event("response.function_call_arguments.delta", item_id=item_id, output_index=at,
                                delta=piece))
        events.append(event("response.function_call_arguments.done", item_id=item_id, output_index=at,
                            arguments=args))
        item = {**item, "status": "completed", "arguments": args}
        events.append(event("response.output_item.done", output_index=at, item=item))
        output.append(item)
    reason = {"length": "max_output_tokens", "content_filter": "content_filter"}.get(turn.get("finishReason") or "")
    final = {**response, "status": "incomplete" if reason else "completed", "output": output,
             "usage": _responses_usage(turn.get("usage")),
             "incomplete_details": {"reason": reason} if reason else None}
    events.append(event("response.incomplete" if reason else "response.completed", response=final))
    return events


def _is_text_event(piece: str | bytes) -> bool:
    """Whether a rendered event carries assistant text (either format)."""
    text = piece.decode(errors="replace") if isinstance(piece, bytes) else piece
    if text.startswith("event: response.output_text.delta"):
        return True
    try:
        choices = json.loads(text.removeprefix("data: "))["choices"]
        return bool(choices and choices[0]["delta"].get("content"))
    except (ValueError, KeyError, TypeError, AttributeError, IndexError):
        return False


def _endless_text(text: str, model: str, responses: bool) -> Iterable[str]:
    """The events of a turn that streams ``text`` for ever (the caller stops when the client leaves)."""
    if responses:
        yield ("event: response.created\ndata: " + json.dumps({"type": "response.created", "response": {
            "id": "resp_forever", "object": "response", "status": "in_progress", "model": model, "output": []}})
            + "\n\n")
        delta = json.dumps({"type": "response.output_text.delta", "item_id": "msg_forever", "output_index": 0,
                            "content_index": 0, "delta": text})
        event = f"event: response.output_text.delta\ndata: {delta}\n\n"
    else:
        event = sse({"id": "chatcmpl-forever", "object": "chat.completion.chunk", "created": 0, "model": model,
                     "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]})
    while True:
        yield event


class _ClientGone(Exception):
    pass


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 10  # an idle keep-alive connection is dropped after this many seconds
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        _log.debug("scripted provider: " + format, *args)

    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        owner = self.server.owner
        listing = urlsplit(self.path).path.rstrip("/") in _MODEL_PATHS
        owner.model_listings += listing
        if listing and owner.models_answer is not None:
            self._json(*owner.models_answer)  # (status, body): probe tests of odd listings
        elif listing:
            data = [{"id": m, "object": "model", "created": 0, "owned_by": "spotpatch-scripted"}
                    for m in self.server.owner.models]
            self._json(200, {"object": "list", "data": data})
        else:
            self._json(404, {"error": {"message": "not found", "type": "invalid_request_error"}})

    def do_POST(self) -> None:  # noqa: N802 - stdlib naming
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        path = urlsplit(self.path).path.rstrip("/")
        if path not in _CHAT_PATHS and path not in _RESPONSES_PATHS:
            self._json(404, {"error": {"message": "not found", "type": "invalid_request_error"}})
            return
        body = body if isinstance(body, dict) else {}
        headers = {k.lower(): v for k, v in self.headers.items()}
        turn, turn_no = self.server.owner._take(body, headers)
        if turn is None:
            self._json(500, {"error": {"message": "script exhausted", "type": "server_error"}})
        elif "status" in turn:
            self._json(int(turn["status"]), turn.get("body"), turn.get("headers") or {})
        else:
            self._stream(turn, turn_no, body, responses=path in _RESPONSES_PATHS)

    def _json(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        if body is None:
            body = {"error": {"message": f"scripted HTTP {status}", "type": "scripted"}}
        payload = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        self.send_response(status)
        names = {k.lower() for k in headers or {}}
        if "content-type" not in names:
            self.send_header("Content-Type", "text/plain" if isinstance(body, str) else "application/json")
        for key, value in (headers or {}).items():
            self.send_header(key, str(value))
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _stream(self, turn: dict[str, Any], turn_no: int, body: dict[str, Any], *, responses: bool = False) -> None:
        owner = self.server.owner
        model = str(body.get("model") or "scripted-model")
        if turn.get("textForever"):
            pieces: Iterable[str | bytes] = _endless_text(str(turn["textForever"]), model, responses)
        elif "raw" in turn:
            pieces = list(turn["raw"])
        elif turn.get("stall") and not {"stallAfterChunks", "stallAfterText"} & turn.keys():
            pieces = []
        elif responses:
            pieces = list(render_responses_turn(turn, model=model, turn_no=turn_no))
        else:
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            pieces = list(render_chat_turn(turn, model=model, include_usage=include_usage, turn_no=turn_no))
        stall = bool(turn.get("stall")) or "stallAfterChunks" in turn or bool(turn.get("stallAfterText"))
        cut = turn.get("stallAfterChunks", turn.get("endAfterChunks"))
        if turn.get("stallAfterText") or turn.get("endAfterText"):
            cut = max((i + 1 for i, piece in enumerate(pieces) if _is_text_event(piece)), default=0)
        if cut is not None:
            pieces = list(pieces)[: int(cut)]
        self.send_response(200)
        headers = {"Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-cache",
                   **(turn.get("headers") or {})}
        for key, value in headers.items():
            self.send_header(key, str(value))
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            self.wfile.flush()
            for i, piece in enumerate(pieces):
                if i and owner.chunk_delay:
                    time.sleep(owner.chunk_delay)
                if owner._stopping.is_set():
                    raise _ClientGone
                data = piece.encode() if isinstance(piece, str) else bytes(piece)
                if data:
                    self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                    self.wfile.flush()
            if stall:
                self._wait_for_disconnect()
                raise _ClientGone
        except (_ClientGone, OSError) as exc:
            if not isinstance(exc, _ClientGone):
                owner._record_disconnect()
            self.close_connection = True
            return
        if turn.get("abort"):
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        try:
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except OSError:  # the client left after [DONE]: not an early disconnect
            self.close_connection = True

    def _wait_for_disconnect(self) -> None:
        """Block until the peer closes the socket (recorded) or the server stops (not recorded)."""
        owner = self.server.owner
        sock = self.connection
        while not owner._stopping.is_set():
            readable, _, _ = select.select([sock], [], [], 0.02)
            if not readable:
                continue
            try:
                data = sock.recv(4096)
            except OSError:
                data = b""
            if not data:
                owner._record_disconnect()
                return


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    owner: ScriptedProviderServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        _log.debug("scripted provider: connection error", exc_info=True)  # resets by clients are normal


class ScriptedProviderServer:
    """A scripted OpenAI-compatible server on ``127.0.0.1`` (see the module docstring for the script).

    Use as a context manager or call :meth:`start` / :meth:`stop`. Observable state (all thread-safe to
    read): :attr:`requests` (JSON bodies received, in order), :attr:`headers` (their headers, lower-cased
    names), :attr:`disconnect_times` (``time.monotonic()`` of each early client disconnect),
    :attr:`disconnects` (their count) and :attr:`disconnected` (a ``threading.Event`` set at the first).
    """

    def __init__(self, script: Iterable[Turn] = (), *, models: Sequence[str] = ("scripted-model",),
                 chunk_delay: float = 0.0) -> None:
        self.models = list(models)
        #: When set, ``(status, body)`` answered to ``GET /models`` instead of the list (404, other shapes).
        self.models_answer: tuple[int, Any] | None = None
        #: How many ``GET /models`` requests arrived.
        self.model_listings = 0
        #: Seconds slept between two streamed events.
        self.chunk_delay = chunk_delay
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.disconnect_times: list[float] = []
        self.disconnected = threading.Event()
        self._script: collections.deque[Turn] = collections.deque(script)
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None
        self._turns_served = 0

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1`` (the server must be started)."""
        if self._httpd is None:
            raise RuntimeError("the scripted provider server is not started")
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    @property
    def disconnects(self) -> int:
        """How many streams the client closed before the server finished them."""
        with self._lock:
            return len(self.disconnect_times)

    @property
    def remaining(self) -> int:
        """Turns not consumed yet."""
        with self._lock:
            return len(self._script)

    def add_turns(self, *turns: Turn) -> None:
        """Append turns to the script."""
        with self._lock:
            self._script.extend(turns)

    def wait_for_disconnect(self, timeout: float) -> bool:
        """Block up to ``timeout`` seconds for the first early disconnect; True when it happened."""
        return self.disconnected.wait(timeout)

    def start(self) -> ScriptedProviderServer:
        """Bind ``127.0.0.1:0`` and serve from a daemon thread. Returns ``self``."""
        if self._httpd is not None:
            return self
        self._stopping.clear()
        self._httpd = _Server(("127.0.0.1", 0), _Handler)
        self._httpd.owner = self
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.01},
                                        name="scripted-provider", daemon=True)
        self._thread.start()
        _log.debug("scripted provider listening on %s", self.base_url)
        return self

    def stop(self) -> None:
        """Stop serving, release stalled streams and close the socket (idempotent)."""
        if self._httpd is None:
            return
        self._stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._httpd = self._thread = None

    def __enter__(self) -> ScriptedProviderServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---------------------------------------------------------------- handler side

    def _take(self, body: dict[str, Any], headers: dict[str, str]) -> tuple[dict[str, Any] | None, int]:
        with self._lock:
            self.requests.append(body)
            self.headers.append(headers)
            if not self._script:
                return None, 0
            turn = self._script.popleft()
            self._turns_served += 1
            turn_no = self._turns_served
        if callable(turn):
            try:
                turn = turn(body)
            except Exception:  # noqa: BLE001 - reported to the client as a 500
                _log.exception("scripted provider: a callable turn failed")
                return {"status": 500, "body": {"error": {"message": "script turn failed"}}}, turn_no
        return turn, turn_no

    def _record_disconnect(self) -> None:
        with self._lock:
            self.disconnect_times.append(time.monotonic())
        self.disconnected.set()
