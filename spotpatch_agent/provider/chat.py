"""OpenAI Chat Completions adapter (DESIGN.md §11): ``POST {baseUrl}/chat/completions`` streamed over SSE.

Three layers, each testable alone:

- :func:`to_chat_messages` / :func:`build_chat_body` — pure conversion of a :class:`TurnRequest`.
- :class:`ChatStreamAssembler` — pure: parsed stream chunks in, :data:`ProviderEvent` s out. It absorbs the
  relay quirks listed in the module's tests (index/id keying, repeated names and ids, object arguments,
  ``finish_reason`` oddities, usage chunks, pings, errors inside a 200 stream, truncation).
- :class:`ChatCompletionsAdapter` — the HTTP boundary: status mapping, bounded retries before the first
  event, idle timeout, cancellation, and the one place where httpx errors become :class:`ProviderError`.

Every error message is sanitized: status code plus at most 300 characters of the provider's own error
``message`` with the API key replaced by ``[REDACTED]``; never request headers or the URL.
"""

from __future__ import annotations

import email.utils
import json
import re
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import aclosing, contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio

from spotpatch_agent.errors import ProviderError
from spotpatch_agent.protocol.errors import ErrorCode
from spotpatch_agent.provider.base import (AssistantTurn, ProviderEvent, TextDelta, ToolCallEvent, ToolResultMessage,
                                           TurnEnd, TurnRequest, UserMessage)

if TYPE_CHECKING:
    import httpx

#: Assistant text kept per turn, in UTF-8 bytes; the rest is dropped silently.
MAX_TEXT_BYTES = 16 * 1024
#: Streamed arguments kept per call, in characters; a longer call is reported invalid.
MAX_ARGUMENT_CHARS = 4 * 1024 * 1024
#: Retries (after the first attempt) for 408/409/429/5xx answered before any event of the turn.
MAX_RETRIES = 2
#: Default waits, in seconds, before retry 1 and 2 when the provider gives no usable hint.
DEFAULT_BACKOFF = (0.5, 1.0)
#: Upper bound, in seconds, of any single wait, whatever ``retry-after`` says.
MAX_RETRY_WAIT = 10.0
#: Longest excerpt of a provider's error message put into our messages.
MAX_EXCERPT = 300
_ERROR_BODY_BYTES = 64 * 1024
SECRET_MARK = "[REDACTED]"

_CONTEXT_WORDING = re.compile(
    r"context[_ ]length|context[_ ]window|maximum context|prompt is too long|too many (?:input )?tokens"
    r"|reduce the length of the messages",
    re.I,
)
_TOKENISH = re.compile(r"\b(?:sk|rk|pk)-[A-Za-z0-9_\-]{8,}|\bBearer\s+[A-Za-z0-9._~+/=\-]{8,}", re.I)


def sanitize_excerpt(text: str, api_key: str | None) -> str:
    """``text`` with the key (and anything key-shaped) replaced by ``[REDACTED]``, whitespace collapsed,
    cut to :data:`MAX_EXCERPT` characters. Redaction happens before the cut so no key prefix survives."""
    if api_key:
        text = text.replace(api_key, SECRET_MARK)
    text = _TOKENISH.sub(SECRET_MARK, text)
    text = " ".join(text.split())
    return text if len(text) <= MAX_EXCERPT else text[: MAX_EXCERPT - 1] + "…"


def _error_fields(obj: Any) -> tuple[str | None, str]:
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


def _is_context_error(message: str | None, kinds: str) -> bool:
    return bool(_CONTEXT_WORDING.search(f"{message or ''} {kinds}"))


def stream_error(error: Any, api_key: str | None) -> ProviderError:
    """The :class:`ProviderError` for an error object sent inside a 200 stream (``data: {"error": …}``):
    ``LIMIT_EXCEEDED`` when it is about context length, else ``PROVIDER_PROTOCOL``."""
    message, kinds = _error_fields(error)
    excerpt = sanitize_excerpt(message, api_key) if message else "no message"
    if _is_context_error(message, kinds):
        return ProviderError(ErrorCode.LIMIT_EXCEEDED, f"the conversation exceeds the model's context: {excerpt}")
    return ProviderError(ErrorCode.PROVIDER_PROTOCOL, f"the provider reported an error in its answer: {excerpt}")


# ---------------------------------------------------------------- request conversion (pure)


def to_chat_messages(request: TurnRequest) -> list[dict[str, Any]]:
    """Chat ``messages`` for ``request``: a system message (when non-empty), then per item
    ``{role:"user", content}``, ``{role:"assistant", content: text|None, tool_calls?: [{id, type:"function",
    function:{name, arguments}}]}`` (ids echoed verbatim) and ``{role:"tool", tool_call_id, content}``."""
    messages: list[dict[str, Any]] = []
    if request.system:
        messages.append({"role": "system", "content": request.system})
    for item in request.items:
        if isinstance(item, UserMessage):
            messages.append({"role": "user", "content": item.text})
        elif isinstance(item, AssistantTurn):
            msg: dict[str, Any] = {"role": "assistant", "content": item.text or (None if item.tool_calls else "")}
            if item.tool_calls:
                msg["tool_calls"] = [
                    {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments_json}}
                    for c in item.tool_calls
                ]
            messages.append(msg)
        elif isinstance(item, ToolResultMessage):
            messages.append({"role": "tool", "tool_call_id": item.call_id, "content": item.output})
        else:  # pragma: no cover - the union is closed
            raise TypeError(f"unknown conversation item {type(item).__name__}")
    return messages


def build_chat_body(request: TurnRequest) -> dict[str, Any]:
    """The JSON body of ``POST /chat/completions``: model, messages, strict function tools, tool_choice,
    ``stream: true`` with usage, parallel tool calls, and ``max_tokens`` when set. ``tools``,
    ``tool_choice`` and ``parallel_tool_calls`` are omitted when no tool is offered (providers reject them)."""
    body: dict[str, Any] = {"model": request.model, "messages": to_chat_messages(request)}
    if request.tools:
        body["tools"] = [
            {"type": "function",
             "function": {"name": t.name, "description": t.description, "parameters": t.parameters, "strict": True}}
            for t in request.tools
        ]
        body.update(tool_choice=request.tool_choice, parallel_tool_calls=True)
    body.update(stream=True, stream_options={"include_usage": True})
    if request.max_output_tokens is not None:
        body["max_tokens"] = request.max_output_tokens
    return body


# ---------------------------------------------------------------- stream assembly (pure)


@dataclass
class _Slot:
    seq: int
    index: int | None
    id: str = ""
    name: str = ""
    parts: list[str] = field(default_factory=list)
    size: int = 0
    too_large: bool = False

    def add(self, text: str) -> None:
        if self.too_large or not text:
            return
        self.size += len(text)
        if self.size > MAX_ARGUMENT_CHARS:
            self.too_large, self.parts = True, []
        else:
            self.parts.append(text)


def _as_index(value: Any) -> int | None:
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 6:
        return int(value)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class ChatStreamAssembler:
    """Turns one turn's Chat Completions chunks into events (DESIGN.md §11). Pure; one instance per turn.

    :meth:`feed_data` takes an SSE ``data`` string (``[DONE]`` included), :meth:`feed` a parsed chunk;
    both return the :class:`TextDelta` events due now (text is emitted as it comes, bounded to
    ``max_text_bytes`` UTF-8 bytes per turn). :meth:`finish` returns the :class:`ToolCallEvent` s in index
    order, then one :class:`TurnEnd`. Raises :class:`ProviderError` ``PROVIDER_PROTOCOL`` for a non-JSON
    chunk, an error object in the stream (``LIMIT_EXCEEDED`` for context length), a truncated stream (no
    ``[DONE]`` and no finish reason) and two calls of one turn sharing an id.
    """

    def __init__(self, *, max_text_bytes: int = MAX_TEXT_BYTES, api_key: str | None = None) -> None:
        self._max_text = max_text_bytes
        self._api_key = api_key
        self._text_bytes = 0
        self._slots: list[_Slot] = []
        self._by_index: dict[int, _Slot] = {}
        self._current: _Slot | None = None
        self._finish_reason: str | None = None
        self._usage: dict[str, Any] | None = None
        #: ``data: [DONE]`` was seen; the caller stops reading.
        self.done = False

    def feed_data(self, data: str) -> list[ProviderEvent]:
        """Feed one SSE ``data`` payload: ``[DONE]`` ends the stream, empty data is ignored, else JSON."""
        text = data.strip()
        if text == "[DONE]":
            self.done = True
        if text in ("", "[DONE]"):
            return []
        chunk = _loads(text)
        if not isinstance(chunk, dict):
            raise ProviderError(ErrorCode.PROVIDER_PROTOCOL, "the provider sent a stream chunk that is not a JSON object")
        return self.feed(chunk)

    def feed(self, chunk: dict[str, Any]) -> list[ProviderEvent]:
        """Feed one parsed chunk (``chat.completion.chunk``, or a non-streamed ``chat.completion``)."""
        if chunk.get("error"):
            raise stream_error(chunk["error"], self._api_key)
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self._usage = usage  # any chunk may carry it; the last one wins
        choices = chunk.get("choices")
        if not isinstance(choices, list):
            return []  # {"type": "ping"} and other keep-alive objects
        choice = next((c for c in choices if isinstance(c, dict) and c.get("index", 0) == 0), None)
        if choice is None:
            return []  # choices: [] (usage chunk, Azure prompt_filter_results)
        events: list[ProviderEvent] = []
        delta = choice.get("delta") if "delta" in choice else choice.get("message")  # message: not streamed
        if isinstance(delta, dict):
            content = delta.get("content")
            if isinstance(content, str) and content:
                events.extend(self._text(content))
            calls = delta.get("tool_calls")
            # After the finish reason, relays may repeat every call as a summary: ignore it.
            if isinstance(calls, list) and self._finish_reason is None:
                for call in calls:
                    if isinstance(call, dict):
                        self._tool_delta(call)
        reason = choice.get("finish_reason")
        if isinstance(reason, str) and reason and self._finish_reason is None:
            self._finish_reason = reason  # "" counts as null; the first real one wins
        return events

    def finish(self) -> list[ProviderEvent]:
        """The end of the turn: tool calls in index order (arrival order for unindexed ones), then
        :class:`TurnEnd`. ``stop`` with calls becomes ``tool_calls``."""
        if not self.done and self._finish_reason is None:
            message = "the provider's stream ended before the turn finished (no finish_reason, no [DONE]): truncated"
            raise ProviderError(ErrorCode.PROVIDER_PROTOCOL, message)
        slots = self._slots
        if all(s.index is not None for s in slots):
            slots = sorted(slots, key=lambda s: (s.index, s.seq))
        events: list[ProviderEvent] = []
        seen: set[str] = set()
        for slot in slots:
            call_id = slot.id or f"spotpatch_call_{slot.seq}"
            if call_id in seen:
                shown = sanitize_excerpt(call_id[:64], self._api_key)
                raise ProviderError(ErrorCode.PROVIDER_PROTOCOL, f"two tool calls of one turn share the id {shown!r}")
            seen.add(call_id)
            events.append(self._call_event(call_id, slot))
        reason = "tool_calls" if self._finish_reason == "stop" and events else self._finish_reason
        events.append(TurnEnd(stop_reason=reason, usage=self._usage))
        return events

    # -------------------------------------------------------- internals

    def _text(self, content: str) -> list[ProviderEvent]:
        room = self._max_text - self._text_bytes
        if room <= 0:
            return []
        raw = content.encode("utf-8")
        if len(raw) > room:  # the bound is reached: keep what fits (whole characters), drop the rest
            content, self._text_bytes = raw[:room].decode("utf-8", errors="ignore"), self._max_text
        else:
            self._text_bytes += len(raw)
        return [TextDelta(content)] if content else []

    def _new_slot(self, index: int | None) -> _Slot:
        slot = _Slot(seq=len(self._slots), index=index)
        self._slots.append(slot)
        if index is not None:
            self._by_index[index] = slot
        return slot

    def _tool_delta(self, call: dict[str, Any]) -> None:
        index = _as_index(call.get("index"))
        call_id = call.get("id") if isinstance(call.get("id"), str) else ""
        if index is not None:
            slot = self._by_index.get(index)
            if slot is None or (call_id and slot.id and call_id != slot.id):
                slot = self._new_slot(index)  # a new id at a used index is a new call (Ollama)
        elif call_id:
            slot = next((s for s in self._slots if s.id == call_id), None) or self._new_slot(None)
        else:
            slot = self._current or self._new_slot(None)
        self._current = slot
        if call_id and not slot.id:
            slot.id = call_id
        function = call.get("function") if isinstance(call.get("function"), dict) else {}
        name = function.get("name")
        if isinstance(name, str) and name and not slot.name:
            slot.name = name  # set once; repeated or empty names are ignored
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            slot.add(arguments)
        elif isinstance(arguments, (dict, list)):
            slot.parts, slot.size = [], 0
            slot.add(json.dumps(arguments, ensure_ascii=False))

    def _call_event(self, call_id: str, slot: _Slot) -> ToolCallEvent:
        if slot.too_large:
            return ToolCallEvent(call_id, slot.name, "", invalid=f"arguments exceed {MAX_ARGUMENT_CHARS} characters")
        text = "".join(slot.parts)
        if not slot.name:
            return ToolCallEvent(call_id, "", text, invalid="the tool call has no function name")
        if not text.strip():
            return ToolCallEvent(call_id, slot.name, "{}")
        try:
            parsed = json.loads(text)
        except ValueError as exc:
            reason = f"arguments are not valid JSON ({getattr(exc, 'msg', 'malformed')} at character {getattr(exc, 'pos', '?')})"
            return ToolCallEvent(call_id, slot.name, text, invalid=reason)
        except RecursionError:
            return ToolCallEvent(call_id, slot.name, text, invalid="arguments are nested too deeply")
        if not isinstance(parsed, dict):
            return ToolCallEvent(call_id, slot.name, text, invalid="arguments are not valid JSON (not an object)")
        return ToolCallEvent(call_id, slot.name, text)


# ---------------------------------------------------------------- HTTP boundary


@dataclass
class _Attempt:
    streaming: bool = False  # where the request is, so the one boundary can word its errors


@dataclass
class _Failure:
    error: ProviderError
    wait: float | None  # seconds before the next attempt, or None: raise now


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
    return value if value == value and value >= 0 else None  # rejects NaN and negatives


class ChatCompletionsAdapter:
    """:class:`~spotpatch_agent.provider.base.ProviderAdapter` for OpenAI-compatible Chat Completions.

    ``base_url`` is the profile's base (e.g. ``https://api.openai.com/v1``); ``api_key`` is sent as
    ``Authorization: Bearer …`` and never appears in an error; ``headers`` are the profile's extra headers.
    ``timeout`` (seconds) bounds connecting and sending; ``idle_timeout`` (seconds) is the longest silence
    (no bytes at all) tolerated while waiting for or reading the response. ``transport`` replaces the
    network (tests, proxies). Errors: see :meth:`stream_turn`.
    """

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

        self._url = base_url.rstrip("/") + "/chat/completions"
        self._api_key = api_key or None
        self._idle_timeout = idle_timeout
        sent = {"User-Agent": "spotpatch-agent", **(headers or {})}
        if self._api_key:
            sent["Authorization"] = f"Bearer {self._api_key}"
        self._client = httpx.AsyncClient(
            headers=sent,
            timeout=httpx.Timeout(timeout, read=idle_timeout),
            transport=transport,
            follow_redirects=False,
        )

    async def aclose(self) -> None:
        """Close the HTTP client and its connections."""
        await self._client.aclose()

    async def stream_turn(self, request: TurnRequest) -> AsyncIterator[ProviderEvent]:
        """Stream one model turn: :class:`TextDelta` s as they arrive, then :class:`ToolCallEvent` s in index
        order, then :class:`TurnEnd`.

        Raises :class:`ProviderError`: ``PROVIDER_AUTH`` (401/403); ``PROVIDER_UNAVAILABLE`` (404 — model
        may be missing —, 408/409/429/5xx after up to :data:`MAX_RETRIES` retries, connect/DNS errors,
        timeouts, a stream silent for ``idle_timeout`` s); ``LIMIT_EXCEEDED`` (context length);
        ``PROVIDER_PROTOCOL`` (other 4xx, malformed or truncated stream, error object in a 200 stream).
        The stream is read inside ``async with``: cancelling the caller's scope closes the connection.
        Use ``contextlib.aclosing`` when abandoning the iterator early.
        """
        import httpx_sse

        body = build_chat_body(request)
        assembler = ChatStreamAssembler(api_key=self._api_key)
        attempt_state = _Attempt()
        with self._boundary(attempt_state):
            for attempt in range(MAX_RETRIES + 1):
                attempt_state.streaming = False
                async with httpx_sse.aconnect_sse(self._client, "POST", self._url, json=body) as source:
                    response = source.response
                    if 200 <= response.status_code < 300:
                        attempt_state.streaming = True
                        async with aclosing(self._read(source, assembler)) as events:
                            async for event in events:
                                yield event
                        return
                    failure = await self._status_failure(response, attempt, request.model)
                if failure.wait is None:
                    raise failure.error
                await anyio.sleep(failure.wait)

    async def _read(self, source: Any, assembler: ChatStreamAssembler) -> AsyncIterator[ProviderEvent]:
        response = source.response
        content_type = response.headers.get("content-type", "").partition(";")[0].strip().lower()
        if content_type != "text/event-stream":
            if "json" not in content_type:
                shown = content_type[:60] or "no content type"
                raise ProviderError(ErrorCode.PROVIDER_PROTOCOL, f"the provider answered {shown!r}, not an event stream")
            try:  # a relay that ignored stream:true: a whole completion (or an error) as JSON
                chunk = json.loads(await _read_bounded(response, MAX_ARGUMENT_CHARS))
            except (ValueError, RecursionError):
                raise ProviderError(ErrorCode.PROVIDER_PROTOCOL, "the provider's answer is not valid JSON") from None
            for event in assembler.feed(chunk if isinstance(chunk, dict) else {}):
                yield event
            assembler.feed_data("[DONE]")
        else:
            async with aclosing(source.aiter_sse()) as sse_events:
                async for sse in sse_events:
                    if sse.event == "error":
                        payload = _loads(sse.data)
                        raise stream_error(sse.data if payload is None else payload, self._api_key)
                    for event in assembler.feed_data(sse.data):
                        yield event
                    if assembler.done:
                        break
        for event in assembler.finish():
            yield event

    async def _status_failure(self, response: httpx.Response, attempt: int, model: str) -> _Failure:
        status = response.status_code
        message, kinds = _error_fields(_loads(await _read_bounded(response, _ERROR_BODY_BYTES)))
        detail = f" (HTTP {status})" + (f": {sanitize_excerpt(message, self._api_key)}" if message else "")
        transient = status in (408, 409, 429) or status >= 500
        retryable: bool | None = None
        if status in (401, 403):
            code, text = ErrorCode.PROVIDER_AUTH, "the provider refused the credentials"
        elif status == 404:
            name = sanitize_excerpt(model[:100], self._api_key)
            code, text = ErrorCode.PROVIDER_UNAVAILABLE, f"the model {name!r} may be missing, or the base URL is wrong"
            retryable = False
        elif transient:
            code, text = ErrorCode.PROVIDER_UNAVAILABLE, "the provider is unavailable or rate-limited"
        elif 400 <= status < 500 and _is_context_error(message, kinds):
            code, text = ErrorCode.LIMIT_EXCEEDED, "the conversation exceeds the model's context"
        else:
            code, text = ErrorCode.PROVIDER_PROTOCOL, "the provider rejected the request"
        error = ProviderError(code, text + detail, retryable=retryable)
        hint = response.headers.get("x-should-retry", "").strip().lower()
        if hint == "true" or (hint != "false" and transient):
            if attempt < MAX_RETRIES:
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
            raise ProviderError(*_describe(exc, state.streaming, self._idle_timeout)) from None


def _describe(exc: Exception, streaming: bool, idle_timeout: float) -> tuple[ErrorCode, str]:
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


async def _read_bounded(response: httpx.Response, limit: int) -> str:
    buf = bytearray()
    async for part in response.aiter_bytes():
        buf += part
        if len(buf) >= limit:
            break
    return bytes(buf[:limit]).decode("utf-8", errors="replace")


def _loads(text: str) -> Any:
    """Parsed JSON, or None when ``text`` is not JSON (an HTML error page is never quoted)."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None
