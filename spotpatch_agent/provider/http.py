"""The HTTP boundary shared by the provider adapters (docs/design.md §11): one streaming POST with bounded
retries, status mapping, idle timeout, cancellation, and the one place where httpx errors become ours.

::

    EndpointAdapter.stream_turn(request)  →  POST {baseUrl}{path} with the adapter's body
     ├── 2xx            → the adapter's StreamAssembler turns the events into ours (its own wire format)
     ├── 408/409/429/5xx → wait (``retry-after-ms`` / ``retry-after`` / backoff), retry ≤ MAX_RETRIES times
     ├── 2xx whose stream reports a server-side error before the turn finished (TransientStreamError)
     │                  → TurnRestart, wait, ask again — from the same MAX_RETRIES budget
     ├── other status   → ProviderError (PROVIDER_AUTH, PROVIDER_UNAVAILABLE, LIMIT_EXCEEDED, PROVIDER_PROTOCOL)
     └── httpx error    → ProviderError (fixed wording; the foreign exception is not chained)

A retry never follows a side effect: status retries happen before the first event of the turn, and a
stream is asked again only while no :class:`ToolCallEvent` of it was yielded (the adapters yield calls at
the turn's end), after a :class:`TurnRestart` that voids the text streamed so far. Every error
message is sanitized: status code plus at most :data:`MAX_EXCERPT` characters of the provider's own error
``message`` with the API key replaced by ``[REDACTED]``; never request headers or the URL.
"""

from __future__ import annotations

import codecs
import email.utils
import json
import math
import re
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, AsyncIterator, Iterator, Mapping
from contextlib import aclosing, contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import anyio

from spotpatch_agent.errors import ProviderError
from spotpatch_agent.protocol.errors import ErrorCode
from spotpatch_agent.provider.base import ProviderEvent, ToolCallEvent, TurnRequest, TurnRestart
from spotpatch_agent.provider.calls import MAX_ARGUMENT_CHARS, MAX_TEXT_BYTES

# The sanitizer lives in sanitize.py (calls.py needs it too); its names stay importable from here.
from spotpatch_agent.provider.sanitize import MAX_EXCERPT as MAX_EXCERPT
from spotpatch_agent.provider.sanitize import sanitize_excerpt as sanitize_excerpt
from spotpatch_agent.provider.sanitize import strip_controls as strip_controls

if TYPE_CHECKING:
    import httpx

#: Retries (after the first attempt) for 408/409/429/5xx answered before any event of the turn.
MAX_RETRIES = 2
#: Default waits, in seconds, before retry 1 and 2 when the provider gives no usable hint.
DEFAULT_BACKOFF = (0.5, 1.0)
#: Upper bound, in seconds, of any single wait, whatever ``retry-after`` says.
MAX_RETRY_WAIT = 10.0
#: Bytes of an error body (or of a non-streamed JSON answer's error) read at most.
ERROR_BODY_BYTES = 64 * 1024
#: Longest server-sent event (or unterminated line) accepted, in characters; a longer one is a protocol
#: error, so a provider cannot grow the engine's memory without bound (a 200 MB line, endless ``data:``).
MAX_EVENT_CHARS = 16 * 1024 * 1024

_CONTEXT_WORDING = re.compile(
    r"context[_ ]length|context[_ ]window|maximum context|prompt is too long|too many (?:input )?tokens"
    r"|reduce the length of the messages",
    re.IGNORECASE,
)
#: A refusal that names the output-cap field (a cap above the model's maximum, or a relay without the field).
_CAP_WORDING = re.compile(r"max_(?:completion_|output_)?tokens", re.IGNORECASE)

# ---------------------------------------------------------------- error wording (pure)


def error_fields(obj: Any) -> tuple[str | None, str]:
    """``(message, code/type text)`` from an OpenAI-style error object ``{"error": {...}}`` or its inside."""
    if isinstance(obj, dict) and "error" in obj:
        obj = obj["error"]
    if isinstance(obj, str):
        return obj, ""
    if not isinstance(obj, dict):
        return None, ""
    message = obj.get("message") or obj.get("detail")
    kinds = " ".join(str(obj.get(k)) for k in ("code", "type") if obj.get(k) is not None)
    return (message if isinstance(message, str) else None), kinds


def is_context_error(message: str | None, kinds: str) -> bool:
    """Whether an error's message or code says the conversation is longer than the model's context."""
    return bool(_CONTEXT_WORDING.search(f"{message or ''} {kinds}"))


class TransientStreamError(ProviderError):
    """A server-side error reported inside a 2xx stream before the turn finished (``PROVIDER_UNAVAILABLE``):
    :meth:`EndpointAdapter.stream_turn` asks again within its retry budget when no call of the turn was yielded."""


#: Words of an in-stream error's code or type that mark a server-side failure (transient), never a rate
#: limit (whose wait the provider gives only in headers) or a refusal of the request.
_SERVER_SIDE = re.compile(r"server_error|internal|overloaded|unavailable|timeout|\b5\d\d\b", re.IGNORECASE)


def is_server_side(kinds: str) -> bool:
    """Whether an error's code/type text (:func:`error_fields`) says the server failed (5xx, server_error…)."""
    return bool(_SERVER_SIDE.search(kinds))


def stream_error(error: Any, api_key: str | None) -> ProviderError:
    """The :class:`ProviderError` for an error object sent inside a 200 stream (``data: {"error": …}``):
    ``LIMIT_EXCEEDED`` when it is about context length, a :class:`TransientStreamError`
    (``PROVIDER_UNAVAILABLE``) when it is server-side (code 5xx, type ``server_error``…), else
    ``PROVIDER_PROTOCOL``."""
    message, kinds = error_fields(error)
    excerpt = sanitize_excerpt(message, api_key) if message else "no message"
    if is_context_error(message, kinds):
        return ProviderError(ErrorCode.LIMIT_EXCEEDED, f"the conversation exceeds the model's context: {excerpt}")
    if is_server_side(kinds):
        return TransientStreamError(ErrorCode.PROVIDER_UNAVAILABLE,
                                    f"the provider reported a server error before the turn finished: {excerpt}")
    return ProviderError(ErrorCode.PROVIDER_PROTOCOL, f"the provider reported an error in its answer: {excerpt}")


def loads(text: str) -> Any:
    """Parsed JSON, or None when ``text`` is not JSON (an HTML error page is never quoted)."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def request_headers(api_key: str | None, headers: Mapping[str, str] | None = None) -> dict[str, str]:
    """The headers of every request to a provider: ``User-Agent``, the profile's ``headers``, then
    ``Authorization: Bearer <api_key>`` when there is a key (the adapters and the model listing alike)."""
    sent = {"User-Agent": "spotpatch-agent", **(headers or {})}
    if api_key:
        sent["Authorization"] = f"Bearer {api_key}"
    return sent


# ---------------------------------------------------------------- retries (pure)


def retry_wait(headers: Any, attempt: int) -> float:
    """Seconds to wait before retry ``attempt + 1``: ``retry-after-ms``, then ``retry-after`` (seconds or
    HTTP date), else :data:`DEFAULT_BACKOFF`; capped at :data:`MAX_RETRY_WAIT`."""
    value = _header_seconds(headers.get("retry-after-ms"), 1000.0)
    value = _header_seconds(headers.get("retry-after"), 1.0) if value is None else value
    return min(DEFAULT_BACKOFF[min(attempt, len(DEFAULT_BACKOFF) - 1)] if value is None else value, MAX_RETRY_WAIT)


def _header_seconds(raw: str | None, per_second: float) -> float | None:
    """A non-negative wait from a header value (a number of units, or an HTTP date), or None."""
    if not raw:
        return None
    try:
        value = float(raw) / per_second
    except ValueError:
        try:
            value = email.utils.parsedate_to_datetime(raw).timestamp() - time.time()
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
    return None if math.isnan(value) or value < 0 else value


# ---------------------------------------------------------------- the exchange


@dataclass
class _Attempt:
    streaming: bool = False  # where the request is, so the one boundary can word its errors


@dataclass
class _Failure:
    error: ProviderError
    wait: float | None  # seconds before the next attempt, or None: raise now


#: Seconds to wait, after an in-stream error that a later event may make precise (the Responses ``error`` event,
#: usually followed by ``response.failed``), for that event; the pending error is raised when nothing comes.
ERROR_FOLLOW_UP_WAIT = 1.0


class StreamAssembler(Protocol):
    """One turn's wire format, pure: SSE events (or a whole non-streamed answer) in, :data:`ProviderEvent` s out
    (:class:`~spotpatch_agent.provider.chat.ChatStreamAssembler`,
    :class:`~spotpatch_agent.provider.responses_convert.ResponsesStreamAssembler`)."""

    #: The stream said the turn is over; the reader stops.
    done: bool
    #: An in-stream error waits for a follow-up event (at most :data:`ERROR_FOLLOW_UP_WAIT` s) before it is raised.
    pending_error: ProviderError | None

    @property
    def text_limited(self) -> bool:
        """The turn's text passed its budget before any call started: the reader stops at once."""
        ...

    def feed_sse(self, sse: SSE) -> list[ProviderEvent]:
        """The events due after one server-sent event."""
        ...

    def feed_answer(self, answer: dict[str, Any]) -> list[ProviderEvent]:
        """The events of a whole JSON answer (a relay that ignored ``stream: true``); it ends the turn."""
        ...

    def finish(self) -> list[ProviderEvent]:
        """The calls of the turn, then one :class:`~spotpatch_agent.provider.base.TurnEnd`."""
        ...


class EndpointAdapter(ABC):
    """The common part of the two adapters: ``POST`` to ``base_url`` + :attr:`path` with the wire format's body
    (:meth:`build_body`), answered as a server-sent event stream read by its :class:`StreamAssembler`
    (:meth:`new_assembler`).

    ``base_url`` is the profile's base (e.g. ``https://api.openai.com/v1``); ``api_key`` is sent as
    ``Authorization: Bearer …`` and never appears in an error; ``headers`` are the profile's extra headers.
    ``timeout`` (seconds) bounds connecting and sending; ``idle_timeout`` (seconds) is the longest silence
    (no bytes at all) tolerated while waiting for or reading the answer. ``transport`` replaces the network
    (tests, proxies).
    """

    #: The endpoint below ``base_url``, e.g. ``"/responses"``.
    path = ""

    def __init__(
        self,
        *,
        base_url: str,
        api_key: str | None,
        headers: dict[str, str] | None = None,
        timeout: float = 60,
        idle_timeout: float = 60,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        import httpx  # lazy: keeps engine cold start free of the HTTP stack

        self.url = base_url.rstrip("/") + self.path
        self._api_key = api_key or None
        self.idle_timeout = idle_timeout
        self._client = httpx.AsyncClient(
            headers=request_headers(self._api_key, headers),
            timeout=httpx.Timeout(timeout, read=idle_timeout),
            transport=transport,
            follow_redirects=False,
        )

    async def aclose(self) -> None:
        """Close the HTTP client and its connections."""
        await self._client.aclose()

    @abstractmethod
    def build_body(self, request: TurnRequest) -> dict[str, Any]:
        """The JSON body of one turn's request (pure)."""

    @abstractmethod
    def new_assembler(self, max_text_bytes: int) -> StreamAssembler:
        """A fresh assembler for one attempt of a turn, bounded to ``max_text_bytes`` of text."""

    async def stream_turn(self, request: TurnRequest) -> AsyncGenerator[ProviderEvent, None]:
        """Stream one model turn: :class:`~spotpatch_agent.provider.base.TextDelta` s as they arrive, then
        :class:`ToolCallEvent` s in the order of the turn, then :class:`~spotpatch_agent.provider.base.TurnEnd`.

        Raises :class:`ProviderError`: ``PROVIDER_AUTH`` (401/403); ``PROVIDER_UNAVAILABLE`` (404 — the
        model may be missing —, 408/409/429/5xx after up to :data:`MAX_RETRIES` retries, connect/DNS
        errors, timeouts, a stream silent for ``idle_timeout`` s); ``LIMIT_EXCEEDED`` (context length);
        ``PROVIDER_PROTOCOL`` (other 4xx, a connection cut mid-stream), plus the stream errors of the
        adapter's assembler. The answer is read inside ``async with``: cancelling the caller's scope closes
        the connection. Use ``contextlib.aclosing`` when abandoning the iterator early.
        """
        import httpx_sse

        body = self.build_body(request)
        text_budget = request.max_text_bytes or MAX_TEXT_BYTES
        state = _Attempt()
        with self._boundary(state):
            for attempt in range(MAX_RETRIES + 1):
                state.streaming = False
                restart = False
                async with httpx_sse.aconnect_sse(self._client, "POST", self.url, json=body) as source:
                    response = source.response
                    if 200 <= response.status_code < 300:
                        state.streaming = True
                        sent = called = False
                        try:
                            # a fresh assembler per attempt
                            async with aclosing(self._read(response, text_budget)) as events:
                                async for event in events:
                                    sent, called = True, called or isinstance(event, ToolCallEvent)
                                    yield event
                            return
                        except TransientStreamError as exc:
                            if called or attempt >= MAX_RETRIES:
                                if attempt:
                                    tries = "retry" if attempt == 1 else "retries"
                                    exc.message = f"{exc.message} (after {attempt} {tries})"
                                    exc.args = (exc.message,)
                                raise
                            failure, restart = _Failure(exc, retry_wait({}, attempt)), sent
                    else:
                        failure = await self._status_failure(response, attempt, request.model)
                if failure.wait is None:
                    raise failure.error
                if restart:
                    yield TurnRestart(failure.error.message)
                await anyio.sleep(failure.wait)

    async def _read(self, response: httpx.Response, text_budget: int) -> AsyncGenerator[ProviderEvent, None]:
        """The events of one 2xx answer: an event stream, or a whole JSON answer from a relay that ignored
        ``stream: true``. Leaving the ``async with`` block closes the stream at once (done, text limited)."""
        assembler = self.new_assembler(text_budget)
        if content_type(response) != "text/event-stream":
            answer = await read_json_answer(response, MAX_ARGUMENT_CHARS)
            for event in assembler.feed_answer(answer if isinstance(answer, dict) else {}):
                yield event
        else:
            async with aclosing(aiter_sse(response)) as sse_events:
                while not assembler.done and not assembler.text_limited:
                    if assembler.pending_error is None:
                        sse = await anext(sse_events, None)
                    else:
                        sse = None
                        with anyio.move_on_after(ERROR_FOLLOW_UP_WAIT):
                            sse = await anext(sse_events, None)
                    if sse is None:
                        break
                    for event in assembler.feed_sse(sse):
                        yield event
        for event in assembler.finish():
            yield event

    async def _status_failure(self, response: httpx.Response, attempt: int, model: str) -> _Failure:
        status = response.status_code
        message, kinds = error_fields(loads(await read_bounded(response, ERROR_BODY_BYTES)))
        detail = f" (HTTP {status})" + (f": {sanitize_excerpt(message, self._api_key)}" if message else "")
        transient = status in (408, 409, 429) or status >= 500
        retryable: bool | None = None
        if status in (401, 403):
            code, text = ErrorCode.PROVIDER_AUTH, "the provider refused the credentials"
        elif status == 404:
            name = sanitize_excerpt(model, self._api_key)[:100]
            code, text = ErrorCode.PROVIDER_UNAVAILABLE, f"the model {name!r} may be missing, or the base URL is wrong"
            retryable = False
        elif transient:
            code, text = ErrorCode.PROVIDER_UNAVAILABLE, "the provider is unavailable or rate-limited"
        elif 400 <= status < 500 and is_context_error(message, kinds):
            code, text = ErrorCode.LIMIT_EXCEEDED, "the conversation exceeds the model's context"
        else:
            code, text = ErrorCode.PROVIDER_PROTOCOL, "the provider rejected the request"
            if _CAP_WORDING.search(f"{message or ''} {kinds}"):
                detail += (" — the output cap: lower the model profile's maxOutputTokens to what this model "
                           "allows, or set it to 0 to send none")
        error = ProviderError(code, text + detail, retryable=retryable)
        hint = response.headers.get("x-should-retry", "").strip().lower()
        if (hint == "true" or (hint != "false" and transient)) and attempt < MAX_RETRIES:
            return _Failure(error, retry_wait(response.headers, attempt))
        return _Failure(error, None)

    @contextmanager
    def _boundary(self, state: _Attempt) -> Iterator[None]:
        """The one place where httpx (and httpx-sse) exceptions become :class:`ProviderError` (``from None``:
        the foreign exception, which may reference the request and its headers, is not chained)."""
        import httpx

        try:
            yield
        except (httpx.HTTPError, httpx.InvalidURL) as exc:  # httpx_sse.SSEError is an httpx.TransportError
            raise ProviderError(*describe(exc, state.streaming, self.idle_timeout)) from None


def describe(exc: Exception, streaming: bool, idle_timeout: float) -> tuple[ErrorCode, str]:
    """Our code and a fixed sanitized wording for an httpx exception (its own text is never used)."""
    import httpx

    unavailable, protocol = ErrorCode.PROVIDER_UNAVAILABLE, ErrorCode.PROVIDER_PROTOCOL
    if isinstance(exc, httpx.ReadTimeout):
        if streaming:
            return unavailable, f"stream stalled: no data from the provider for {idle_timeout:g} s"
        return unavailable, f"the provider did not answer within {idle_timeout:g} s"
    if isinstance(exc, httpx.TimeoutException):
        return unavailable, "timed out connecting or sending to the provider"
    if isinstance(exc, httpx.ConnectError):
        return unavailable, "could not connect to the provider (refused, DNS or TLS failure)"
    if isinstance(exc, httpx.RemoteProtocolError):
        if streaming:
            return protocol, "the provider cut the stream mid-message: truncated"
        return unavailable, "the provider closed the connection without answering"
    if isinstance(exc, httpx.NetworkError):
        return unavailable, "the connection to the provider was lost"
    return protocol, f"unusable HTTP exchange with the provider ({type(exc).__name__})"


@dataclass(frozen=True)
class SSE:
    """One server-sent event: its ``event`` name (``"message"`` when none was given) and its ``data``."""

    event: str
    data: str


#: A blank line (the end of an event) in any of the three line-end styles.
_EVENT_END = re.compile(r"(?:\r\n|\r(?!\n)|\n)(?:\r\n|\r|\n)")
_LINE_END = re.compile(r"[\r\n]")


class _Utf8Body:
    """The view of a response that httpx-sse reads: its ``headers`` and ``aiter_text()``, where the text is
    the body decoded as UTF-8 whatever charset the server declared (the SSE rule; a relay that says
    ``charset=iso-8859-1`` must not turn ``é`` into ``Ã©`` in tool arguments), one leading BOM dropped and
    invalid bytes replaced by U+FFFD. It raises ``PROVIDER_PROTOCOL`` as soon as one line or one event
    grows over ``limit`` characters, before httpx-sse could buffer it (memory bound)."""

    def __init__(self, response: httpx.Response, limit: int) -> None:
        self._response = response
        self._limit = limit
        self.headers = response.headers

    async def aiter_text(self) -> AsyncIterator[str]:
        decoder = codecs.getincrementaldecoder("utf-8-sig")(errors="replace")
        line = event = 0  # characters since the last line end / the last blank line
        tail = ""  # the last characters seen, so a blank line split across chunks is still found
        async for raw in self._response.aiter_bytes():
            text = decoder.decode(raw)
            if not text:
                continue
            ends = [m.end() for m in _LINE_END.finditer(text)]
            line = len(text) - ends[-1] if ends else line + len(text)
            blanks = [end for m in _EVENT_END.finditer(tail + text) if (end := m.end() - len(tail)) > 0]
            event = len(text) - blanks[-1] if blanks else event + len(text)
            if line > self._limit or event > self._limit:
                raise _too_large(self._limit)
            tail = (tail + text)[-3:]
            yield text
        rest = decoder.decode(b"", final=True)
        if rest:
            yield rest


async def aiter_sse(
    response: httpx.Response, max_event_chars: int = MAX_EVENT_CHARS
) -> AsyncGenerator[SSE, None]:
    """The events of an event-stream body, parsed by httpx-sse (WHATWG rules: CRLF, LF or CR line ends,
    ``:`` comments skipped, ``data`` lines joined with ``\n``, an unterminated last event dropped) over
    :class:`_Utf8Body` (always UTF-8, BOM dropped, each line and event at most ``max_event_chars``
    characters, else ``PROVIDER_PROTOCOL``). Events with neither a name nor data are skipped."""
    import httpx_sse  # lazy: importing this module's pure helpers must not load the HTTP stack

    source = httpx_sse.EventSource(_Utf8Body(response, max_event_chars))  # type: ignore[arg-type]  # duck-typed view
    async with aclosing(source.aiter_sse()) as events:
        async for sse in events:
            if sse.data or sse.event != "message":
                yield SSE(sse.event, sse.data)


def _too_large(limit: int) -> ProviderError:
    return ProviderError(ErrorCode.PROVIDER_PROTOCOL, f"the provider sent a stream event over {limit} characters")


def content_type(response: httpx.Response) -> str:
    """The media type of ``response``, lower-cased, without parameters (``""`` when absent)."""
    return response.headers.get("content-type", "").partition(";")[0].strip().lower()


async def read_json_answer(response: httpx.Response, limit: int) -> Any:
    """The whole JSON body of a 2xx answer that is not an event stream (a relay that ignored
    ``stream: true``). Raises ``PROVIDER_PROTOCOL`` when the type is not JSON or the body does not parse."""
    kind = content_type(response)
    if "json" not in kind:
        shown = sanitize_excerpt(kind, None)[:60] or "no content type"
        raise ProviderError(ErrorCode.PROVIDER_PROTOCOL, f"the provider answered {shown!r}, not an event stream")
    try:
        return json.loads(await read_bounded(response, limit))
    except (ValueError, RecursionError):
        raise ProviderError(ErrorCode.PROVIDER_PROTOCOL, "the provider's answer is not valid JSON") from None


async def read_bounded(response: httpx.Response, limit: int) -> str:
    """At most ``limit`` bytes of the body, decoded as UTF-8 (invalid bytes replaced)."""
    buf = bytearray()
    async for part in response.aiter_bytes():
        buf += part
        if len(buf) >= limit:
            break
    return bytes(buf[:limit]).decode("utf-8", errors="replace")
