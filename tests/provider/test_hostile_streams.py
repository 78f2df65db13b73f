"""Breaker regressions for the provider adapters (issue 7): hostile or odd streams over a real local socket.

Each test names the attack; a raw socket server writes exactly the bytes given (charsets, BOMs, line ends
split across chunks, trickling, redirects), so httpx and our SSE reader run their production code paths.
"""

from __future__ import annotations

import gzip
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import aclosing
from typing import Any

import pytest

from spotpatch_agent.errors import ProviderError
from spotpatch_agent.protocol.errors import ErrorCode
from spotpatch_agent.provider.base import (
    ToolCallEvent,
    ToolSpec,
    TurnEnd,
    TurnRequest,
    UserMessage,
)
from spotpatch_agent.provider.calls import MAX_CALLS_PER_TURN
from spotpatch_agent.provider.chat import ChatCompletionsAdapter, ChatStreamAssembler
from spotpatch_agent.provider.http import MAX_EVENT_CHARS
from spotpatch_agent.provider.probe import list_models, run_probe
from spotpatch_agent.provider.responses import ResponsesAdapter
from spotpatch_agent.provider.responses_convert import ResponsesStreamAssembler

pytestmark = pytest.mark.anyio

KEY = "sk-canary-breaker-Q7mZ2xV9"
REQUEST = TurnRequest(system="s", items=(UserMessage("u"),), model="m",
                      tools=(ToolSpec("write", "d", {"type": "object", "properties": {}}),))
Handler = Callable[[socket.socket, bytes], None]


class RawServer:
    """A socket server on 127.0.0.1: ``handler(conn, request_head)`` writes whatever bytes it likes."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.heads: list[bytes] = []
        self._sock = socket.create_server(("127.0.0.1", 0))
        self._stop = threading.Event()
        self._acceptor = threading.Thread(target=self._accept, daemon=True)
        self._acceptor.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._sock.getsockname()[1]}/v1"

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            data = b""
            while b"\r\n\r\n" not in data:
                more = conn.recv(65536)
                if not more:
                    return
                data += more
            head, _, body = data.partition(b"\r\n\r\n")
            length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                           if line.lower().startswith(b"content-length:")), 0)
            while len(body) < length:
                body += conn.recv(65536)
            self.heads.append(head)
            self.handler(conn, head)
        except OSError:
            pass
        finally:
            conn.close()

    def close(self) -> None:
        """Stop accepting before the descriptor is freed: a thread still blocked in ``accept()`` on a closed
        descriptor number would otherwise accept on whatever socket reuses it (the next test's server)."""
        self._stop.set()
        try:
            self._sock.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept() with an error
        except OSError:
            pass
        self._acceptor.join(5)
        self._sock.close()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def serve() -> Iterator[Callable[[Handler], RawServer]]:
    servers: list[RawServer] = []

    def start(handler: Handler) -> RawServer:
        servers.append(RawServer(handler))
        return servers[-1]

    yield start
    for srv in servers:
        srv.close()


def head(ctype: bytes = b"text/event-stream", extra: bytes = b"", status: bytes = b"200 OK") -> bytes:
    return b"HTTP/1.1 " + status + b"\r\nContent-Type: " + ctype + b"\r\nConnection: close\r\n" + extra + b"\r\n"


def data(obj: Any, end: bytes = b"\n\n") -> bytes:
    return b"data: " + json.dumps(obj, ensure_ascii=False).encode() + end


def chat_call(args: str, *, call_id: str = "c1", index: int = 0) -> dict[str, Any]:
    return {"choices": [{"index": 0, "finish_reason": None, "delta": {"tool_calls": [
        {"index": index, "id": call_id, "type": "function", "function": {"name": "write", "arguments": args}}]}}]}


CHAT_FINISH = {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}


def responses_call(args: str) -> list[dict[str, Any]]:
    item = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "write", "arguments": ""}
    done = {**item, "arguments": args, "status": "completed"}
    return [{"type": "response.output_item.added", "output_index": 0, "item": item},
            {"type": "response.function_call_arguments.delta", "item_id": "fc_1", "output_index": 0, "delta": args},
            {"type": "response.output_item.done", "output_index": 0, "item": done},
            {"type": "response.completed", "response": {"status": "completed", "output": [done]}}]


async def turn(api: str, srv: RawServer, **options: Any) -> list[Any]:
    cls = ChatCompletionsAdapter if api == "chat" else ResponsesAdapter
    adapter = cls(base_url=srv.base_url, api_key=KEY, **{"timeout": 5, "idle_timeout": 5, **options})
    try:
        async with aclosing(adapter.stream_turn(REQUEST)) as events:
            return [event async for event in events]
    finally:
        await adapter.aclose()


def body_of(api: str, args: str) -> list[bytes]:
    if api == "chat":
        return [data(chat_call(args)), data(CHAT_FINISH), b"data: [DONE]\n\n"]
    return [data(event) for event in responses_call(args)]


ARGS = json.dumps({"text": "café ü — 日本"}, ensure_ascii=False)


# ---------------------------------------------------------------- decoding


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_declared_latin1_charset_does_not_mangle_arguments(api: str, serve: Any) -> None:
    """A relay declaring ``charset=iso-8859-1`` made httpx decode UTF-8 arguments as Latin-1: the tool ran
    with mojibake (``cafÃ©``). Event streams are always UTF-8."""
    srv = serve(lambda c, h: c.sendall(head(b"text/event-stream; charset=iso-8859-1") + b"".join(body_of(api, ARGS))))
    calls = [e for e in await turn(api, srv) if isinstance(e, ToolCallEvent)]
    assert [(c.arguments_json, c.invalid) for c in calls] == [(ARGS, None)]


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_bom_before_first_event_keeps_the_first_event(api: str, serve: Any) -> None:
    """A UTF-8 BOM made the first line ``\\ufeffdata: …``, an unknown field: the first chunk — here the
    whole tool call — vanished silently and the turn ended with ``tool_calls`` and no call."""
    srv = serve(lambda c, h: c.sendall(head() + b"\xef\xbb\xbf" + b"".join(body_of(api, ARGS))))
    calls = [e for e in await turn(api, srv) if isinstance(e, ToolCallEvent)]
    assert [(c.name, c.arguments_json) for c in calls] == [("write", ARGS)]


def _trickle(pieces: list[bytes], pause: float = 0.01) -> Handler:
    def handler(conn: socket.socket, _head: bytes) -> None:
        conn.sendall(head())
        for piece in pieces:
            conn.sendall(piece)
            time.sleep(pause)
    return handler


@pytest.mark.parametrize("api", ["chat", "responses"])
@pytest.mark.parametrize("ending", [b"\r\n", b"\r", b"\n"])
async def test_line_endings_split_across_chunks(api: str, ending: bytes, serve: Any) -> None:
    """CRLF, CR-only and LF streams, cut at every byte (a CRLF split between two TCP writes, a multi-byte
    character split in two) parse to the same call."""
    raw = b"".join(body_of(api, ARGS)).replace(b"\n", ending)
    srv = serve(_trickle([raw[i:i + 1] for i in range(len(raw))], pause=0))
    calls = [e for e in await turn(api, srv) if isinstance(e, ToolCallEvent)]
    assert [(c.name, c.arguments_json, c.invalid) for c in calls] == [("write", ARGS, None)]


async def test_multiline_data_no_space_and_gzip(serve: Any) -> None:
    """``data:`` without a space, one JSON chunk spread over several ``data`` lines, and a gzip body."""
    chunk = json.dumps(chat_call(ARGS), ensure_ascii=False, indent=1).encode()
    raw = b"".join(b"data:" + line + b"\n" for line in chunk.split(b"\n")) + b"\n"
    raw += b": keep-alive\n\nevent: message\ndata:" + json.dumps(CHAT_FINISH).encode() + b"\n\ndata:[DONE]\n\n"
    zipped = gzip.compress(raw)
    srv = serve(lambda c, h: c.sendall(head(extra=b"Content-Encoding: gzip\r\n") + zipped))
    calls = [e for e in await turn("chat", srv) if isinstance(e, ToolCallEvent)]
    assert [(c.arguments_json, c.invalid) for c in calls] == [(ARGS, None)]


# ---------------------------------------------------------------- memory bounds


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_huge_single_line_is_a_protocol_error(api: str, serve: Any) -> None:
    """A line larger than MAX_EVENT_CHARS (never ended) fails the turn instead of growing memory."""
    blob = b"data: {\"x\": \"" + b"a" * (MAX_EVENT_CHARS + 1024)

    def handler(conn: socket.socket, _head: bytes) -> None:
        conn.sendall(head())
        for i in range(0, len(blob), 1 << 20):
            conn.sendall(blob[i:i + (1 << 20)])

    with pytest.raises(ProviderError) as info:
        await turn(api, serve(handler))
    assert info.value.code == ErrorCode.PROVIDER_PROTOCOL and "over" in info.value.message


async def test_endless_data_lines_of_one_event_are_bounded(serve: Any) -> None:
    """Many short ``data:`` lines with no blank line: one event, bounded like a single line."""
    line = b"data: " + b"b" * 1000 + b"\n"
    count = MAX_EVENT_CHARS // 1000 + 10

    def handler(conn: socket.socket, _head: bytes) -> None:
        conn.sendall(head())
        for _ in range(0, count, 1000):
            conn.sendall(line * 1000)

    with pytest.raises(ProviderError) as info:
        await turn("chat", serve(handler))
    assert info.value.code == ErrorCode.PROVIDER_PROTOCOL and "over" in info.value.message


def test_chat_more_calls_than_the_turn_cap_is_limit_exceeded() -> None:
    """A million tool calls in one stream: stop at MAX_CALLS_PER_TURN (above maxToolCalls' hard cap)."""
    assembler = ChatStreamAssembler()
    with pytest.raises(ProviderError) as info:
        for i in range(MAX_CALLS_PER_TURN + 1):
            assembler.feed(chat_call("{}", call_id=f"c{i}", index=i))
    assert info.value.code == ErrorCode.LIMIT_EXCEEDED


def test_responses_more_calls_than_the_turn_cap_is_limit_exceeded() -> None:
    assembler = ResponsesStreamAssembler()
    with pytest.raises(ProviderError) as info:
        for i in range(MAX_CALLS_PER_TURN + 1):
            assembler.feed({"type": "response.output_item.added", "output_index": i,
                            "item": {"type": "function_call", "id": f"fc_{i}", "call_id": f"c{i}", "name": "write"}})
    assert info.value.code == ErrorCode.LIMIT_EXCEEDED


# ---------------------------------------------------------------- truncation


async def test_responses_completed_with_status_incomplete_is_not_a_finished_answer(serve: Any) -> None:
    """``response.completed`` whose response says ``status: incomplete`` (output limit) ended the turn as
    ``stop``: a cut final answer was accepted as success. It is ``length`` now (the loop fails the job)."""
    events = [{"type": "response.output_text.delta", "item_id": "m1", "delta": "half an ans"},
              {"type": "response.completed", "response": {"status": "incomplete", "output": [],
                                                          "incomplete_details": {"reason": "max_output_tokens"}}}]
    srv = serve(lambda c, h: c.sendall(head() + b"".join(data(e) for e in events)))
    result = await turn("responses", srv)
    assert result[-1] == TurnEnd(stop_reason="length", usage=None)


async def test_responses_completed_with_status_failed_raises(serve: Any) -> None:
    events = [{"type": "response.completed", "response": {"status": "failed", "output": [],
                                                          "error": {"code": "server_error", "message": "boom"}}}]
    srv = serve(lambda c, h: c.sendall(head() + b"".join(data(e) for e in events)))
    with pytest.raises(ProviderError) as info:
        await turn("responses", srv)
    assert info.value.code == ErrorCode.PROVIDER_UNAVAILABLE


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_chunked_body_cut_mid_line_is_truncated_not_success(api: str, serve: Any) -> None:
    raw = b"".join(body_of(api, ARGS))[:-30]

    def handler(conn: socket.socket, _head: bytes) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
                     + f"{len(raw) + 100:x}\r\n".encode() + raw)

    with pytest.raises(ProviderError) as info:
        await turn(api, serve(handler))
    assert info.value.code == ErrorCode.PROVIDER_PROTOCOL


# ---------------------------------------------------------------- redirects, retries, keys


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_redirect_to_another_host_is_not_followed_and_key_not_sent(api: str, serve: Any) -> None:
    thief = serve(lambda c, h: c.sendall(head(ctype=b"application/json") + b"{}"))
    location = f"{thief.base_url}/steal?k={KEY}".encode()
    srv = serve(lambda c, h: c.sendall(head(status=b"307 Temporary Redirect", extra=b"Location: " + location
                                             + b"\r\nContent-Length: 0\r\n")))
    with pytest.raises(ProviderError) as info:
        await turn(api, srv)
    assert thief.heads == [] and KEY not in str(info.value) and "steal" not in str(info.value)


async def test_x_should_retry_false_on_500_is_one_attempt(serve: Any) -> None:
    srv = serve(lambda c, h: c.sendall(head(status=b"500 Internal Server Error", ctype=b"application/json",
                                            extra=b"x-should-retry: false\r\n") + b"{}"))
    with pytest.raises(ProviderError) as info:
        await turn("chat", srv)
    assert info.value.code == ErrorCode.PROVIDER_UNAVAILABLE and len(srv.heads) == 1


async def test_no_retry_after_the_first_streamed_byte(serve: Any) -> None:
    """A 200 stream cut after a first chunk is a truncated turn, never re-requested."""
    srv = serve(lambda c, h: c.sendall(head() + data(chat_call('{"te'), end=b"\n\n")))
    with pytest.raises(ProviderError):
        await turn("chat", srv)
    assert len(srv.heads) == 1


async def test_key_in_error_body_and_headers_is_redacted(serve: Any) -> None:
    body = json.dumps({"error": {"message": f"bad key {KEY} (Bearer {KEY})"}}).encode()
    srv = serve(lambda c, h: c.sendall(head(status=b"401 Unauthorized", ctype=b"application/json",
                                            extra=f"WWW-Authenticate: Bearer {KEY}\r\n".encode()) + body))
    with pytest.raises(ProviderError) as info:
        await turn("responses", srv)
    assert info.value.code == ErrorCode.PROVIDER_AUTH and KEY not in repr(info.value) + str(info.value)


# ---------------------------------------------------------------- probe deadlines


def _slowloris(first: bytes, drip: bytes, pause: float) -> Handler:
    def handler(conn: socket.socket, _head: bytes) -> None:
        conn.sendall(first)
        for _ in range(200):
            conn.sendall(drip)
            time.sleep(pause)
    return handler


async def test_models_listing_slowloris_is_bounded_by_the_listing_timeout(serve: Any) -> None:
    """``LISTING_TIMEOUT`` said "the whole exchange" but was httpx's per-read timeout: a listing trickling
    one byte every 0.2 s under a 1 s timeout never ended."""
    srv = serve(_slowloris(head(ctype=b"application/json") + b'{"data": [', b" ", 0.2))
    started = time.monotonic()
    with pytest.raises(ProviderError) as info:
        await list_models(base_url=srv.base_url, api_key=KEY, timeout=1.0)
    assert info.value.code == ErrorCode.PROVIDER_UNAVAILABLE and time.monotonic() - started < 4


async def test_probe_has_a_total_deadline_against_keepalive_trickle(serve: Any) -> None:
    """SSE comments every 0.2 s under a 5 s idle timeout kept ``provider/probe`` open for ever."""
    def handler(conn: socket.socket, request_head: bytes) -> None:
        if request_head.startswith(b"GET"):
            conn.sendall(head(ctype=b"application/json") + b'{"data": [{"id": "m"}]}')
        else:
            _slowloris(head(), b": keep-alive\n\n", 0.2)(conn, request_head)

    srv = serve(handler)
    adapter = ChatCompletionsAdapter(base_url=srv.base_url, api_key=KEY, timeout=5, idle_timeout=5)
    started = time.monotonic()
    try:
        with pytest.raises(ProviderError) as info:
            await run_probe(adapter, model="m", base_url=srv.base_url, api_key=KEY, timeout=1.5)
    finally:
        await adapter.aclose()
    assert info.value.code == ErrorCode.PROVIDER_UNAVAILABLE and time.monotonic() - started < 5


async def test_probe_listing_with_control_characters_never_switches_models(serve: Any) -> None:
    listing = {"data": [{"id": f"m{i}\x1b[31m"} for i in range(100_000)]}
    srv = serve(lambda c, h: c.sendall(head(ctype=b"application/json") + json.dumps(listing).encode()))
    result = await list_models(base_url=srv.base_url, api_key=KEY)
    # 100k ids fit in the 2 MB listing bound? Either "cannot list" or a bounded listing — never a switch.
    assert result.ids is None or len(result.ids) <= 10_000


# ---------------------------------------------------------------- review findings (stop reasons, orphans, escapes,
# encoded keys, reasoning replay)


def _events_of(*objs: dict[str, Any], done: bool = False) -> Handler:
    body = b"".join(data(o) for o in objs) + (b"data: [DONE]\n\n" if done else b"")
    return lambda c, h: c.sendall(head() + body)


async def test_both_adapters_say_tool_calls_only_when_a_call_came(serve: Any) -> None:
    """The engine fails ``tool_calls`` without a call (PROVIDER_PROTOCOL), so the adapters must agree on it:
    Chat passes ``finish_reason: tool_calls`` through even without calls (the relay's claim, judged by the
    engine); a Chat ``[DONE]`` without any finish reason but with a call is ``tool_calls``; a Responses turn
    without calls is ``stop``, with calls ``tool_calls``."""
    empty = await turn("chat", serve(_events_of({"choices": [{"index": 0, "delta": {"content": ""}}]}, CHAT_FINISH,
                                                done=True)))
    assert empty == [TurnEnd("tool_calls")]
    no_reason = await turn("chat", serve(_events_of(chat_call(ARGS), done=True)))
    assert [type(e).__name__ for e in no_reason] == ["ToolCallEvent", "TurnEnd"]
    assert no_reason[-1].stop_reason == "tool_calls"
    text_only = await turn("chat", serve(_events_of({"choices": [{"index": 0, "delta": {"content": "hi"}}]},
                                                    done=True)))
    assert text_only[-1] == TurnEnd(None)  # accepted as a final answer (many relays omit finish_reason)
    completed = {"type": "response.completed", "response": {"status": "completed", "output": []}}
    assert (await turn("responses", serve(_events_of(completed))))[-1].stop_reason == "stop"
    calls = await turn("responses", serve(_events_of(*responses_call(ARGS))))
    assert calls[-1].stop_reason == "tool_calls"


async def test_responses_orphan_arguments_done_fails_instead_of_echoing_a_nameless_call(serve: Any) -> None:
    """``function_call_arguments.done`` for an ``item_id`` that no ``function_call`` item ever described made
    a call with no name (and the item id as call id); the engine then sent it back as
    ``{"type": "function_call", "name": ""}`` and OpenAI may answer 400. It is now PROVIDER_PROTOCOL: no
    tool runs, no broken request is sent."""
    orphan = {"type": "response.function_call_arguments.done", "item_id": "fc_ghost", "output_index": 1,
              "arguments": '{"text": "x"}'}
    good = responses_call(ARGS)
    srv = serve(_events_of(*good[:3], orphan, good[3]))
    with pytest.raises(ProviderError) as info:
        await turn("responses", srv)
    assert info.value.code == ErrorCode.PROVIDER_PROTOCOL
    assert "fc_ghost" in str(info.value) and "no tool name" in str(info.value)


async def test_responses_arguments_before_their_late_item_are_not_an_orphan(serve: Any) -> None:
    """Not every unknown ``item_id`` is an orphan: a relay that skips ``output_item.added`` describes the
    call in ``output_item.done`` after its arguments; that call runs normally."""
    item = {"type": "function_call", "id": "fc_late", "call_id": "call_late", "name": "write",
            "arguments": ARGS, "status": "completed"}
    srv = serve(_events_of(
        {"type": "response.function_call_arguments.delta", "item_id": "fc_late", "delta": ARGS},
        {"type": "response.function_call_arguments.done", "item_id": "fc_late", "arguments": ARGS},
        {"type": "response.output_item.done", "output_index": 0, "item": item},
        {"type": "response.completed", "response": {"status": "completed", "output": [item]}}))
    events = await turn("responses", srv)
    assert [(e.id, e.name, e.invalid) for e in events if isinstance(e, ToolCallEvent)] == [("call_late", "write", None)]


HOSTILE = ("\x1b[31mred\x1b[0m \x1b]0;pwned\x07\x1b]8;;https://evil.example\x1b\\link\x1b]8;;\x1b\\ "
           "\u202egnp.exe\u202c \x9b2J\x07\x00\x7f end")
_BIDI_CONTROLS = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f"


def _no_controls(text: str) -> bool:
    return not any(ord(ch) < 32 or 0x7f <= ord(ch) <= 0x9f or ch in _BIDI_CONTROLS for ch in text)


async def test_probe_model_listing_strips_terminal_escapes_and_bidi_overrides(serve: Any) -> None:
    """Model ids were only whitespace-collapsed: an id with ``\\x1b[31m`` (or an OSC title/hyperlink, a bidi
    override) reached the UI and logs as live terminal control. The listing and the missing-model error keep
    the visible text only."""
    from spotpatch_agent.provider.probe import missing_model

    listing = {"data": [{"id": "gpt-4o\x1b[31m"}, {"id": "evil" + HOSTILE}]}
    srv = serve(lambda c, h: c.sendall(head(ctype=b"application/json") + json.dumps(listing).encode()))
    result = await list_models(base_url=srv.base_url, api_key=KEY)
    assert result.ids is not None and result.ids[0] == "gpt-4o"
    assert all(_no_controls(i) for i in result.ids) and "red" in result.ids[1] and "gnp.exe" in result.ids[1]
    outcome = missing_model("m\x1b[2J", result, base_url=srv.base_url, api_key=KEY)
    assert outcome is not None and _no_controls(outcome.message) and "gpt-4o" in outcome.message


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_error_body_escapes_are_stripped_from_the_error(api: str, serve: Any) -> None:
    body = json.dumps({"error": {"message": "bad request " + HOSTILE}}).encode()
    srv = serve(lambda c, h: c.sendall(head(status=b"400 Bad Request", ctype=b"application/json") + body))
    with pytest.raises(ProviderError) as info:
        await turn(api, srv)
    shown = str(info.value)
    assert _no_controls(shown) and "bad request red" in shown and shown.rstrip().endswith("end")


ODD_KEY = "sk-canary/Q7+mZ2=xV9~k"  # characters that change under base64 and percent-encoding


def _encodings(key: str) -> dict[str, str]:
    import base64
    from urllib.parse import quote, quote_plus

    raw = key.encode()
    return {
        "base64": base64.b64encode(raw).decode(),
        "base64-nopad": base64.b64encode(raw).decode().rstrip("="),
        "urlsafe": base64.urlsafe_b64encode(raw).decode(),
        "urlsafe-nopad": base64.urlsafe_b64encode(raw).decode().rstrip("="),
        "basic": base64.b64encode(b"user:" + raw).decode(),
        "basic-1": base64.b64encode(b"u:" + raw).decode(),
        "basic-2": base64.b64encode(b"us:" + raw).decode(),
        "percent": quote(key, safe=""),
        "percent-lower": quote(key, safe="").replace("%2F", "%2f").replace("%2B", "%2b").replace("%3D", "%3d"),
        "percent-plus": quote_plus(key, safe=""),
    }


def _leaks(text: str, key: str) -> list[str]:
    """The encodings of ``key`` whose key-dependent part (all but the two edge characters) is in ``text``."""
    return [name for name, enc in _encodings(key).items() if enc.rstrip("=")[2:-2] in text] + (
        ["plain"] if key in text else [])


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_encoded_key_echoed_in_an_error_body_is_redacted(api: str, serve: Any) -> None:
    """A relay echoing the key base64-encoded (``Basic base64(user:key)``, URL-safe, unpadded) or
    percent-encoded put it in our error verbatim: only the raw key was redacted."""
    for name, enc in _encodings(ODD_KEY).items():
        message = f"invalid credentials Basic {enc} ({name})"
        body = json.dumps({"error": {"message": message}}).encode()
        srv = serve(lambda c, h, body=body: c.sendall(
            head(status=b"400 Bad Request", ctype=b"application/json") + body))
        adapter = (ChatCompletionsAdapter if api == "chat" else ResponsesAdapter)(
            base_url=srv.base_url, api_key=ODD_KEY, timeout=5, idle_timeout=5)
        try:
            with pytest.raises(ProviderError) as info:
                async with aclosing(adapter.stream_turn(REQUEST)) as events:
                    _ = [e async for e in events]
        finally:
            await adapter.aclose()
        shown = str(info.value) + repr(info.value)
        assert _leaks(shown, ODD_KEY) == [], (name, shown)
        assert "[REDACTED]" in shown and f"({name})" in shown


def test_redactor_registers_base64_and_percent_encodings_of_each_key() -> None:
    from spotpatch_agent.policy.redact import Redactor

    redactor = Redactor()
    redactor.add_secret(ODD_KEY)
    for name, enc in _encodings(ODD_KEY).items():
        out = redactor(f"echo: {enc} .")
        assert _leaks(out, ODD_KEY) == [] and "[REDACTED]" in out, (name, out)
    short = Redactor()
    short.add_secret("abc123X")  # 7 characters: the key itself only (encodings that short would match noise)
    import base64
    assert short(base64.b64encode(b"abc123X").decode()) == base64.b64encode(b"abc123X").decode()
    assert short("abc123X") == "[REDACTED]"
