"""OpenAI Chat Completions adapter (docs/design.md §11): ``POST {baseUrl}/chat/completions`` streamed over SSE.

Three layers, each testable alone:

- :func:`to_chat_messages` / :func:`build_chat_body` — pure conversion of a :class:`TurnRequest`.
- :class:`ChatStreamAssembler` — pure: parsed stream chunks in, :data:`ProviderEvent` s out. It absorbs the
  relay quirks listed in the module's tests (index/id keying, repeated names and ids, object arguments,
  ``finish_reason`` oddities, usage chunks, pings, errors inside a 200 stream, truncation).
- :class:`ChatCompletionsAdapter` — the endpoint and the two above; the HTTP boundary is shared with the
  Responses adapter (:class:`~spotpatch_agent.provider.http.EndpointAdapter`): status mapping, bounded retries
  before the first event, idle timeout, cancellation, and the one place where httpx errors become
  :class:`ProviderError`.

Every error message is sanitized: status code plus at most 300 characters of the provider's own error
``message`` with the API key replaced by ``[REDACTED]``; never request headers or the URL.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from spotpatch_agent.errors import ProviderError
from spotpatch_agent.protocol.errors import ErrorCode
from spotpatch_agent.provider.base import (
    AssistantTurn,
    ProviderEvent,
    ToolCallEvent,
    ToolResultMessage,
    TurnEnd,
    TurnRequest,
    UserMessage,
)
from spotpatch_agent.provider.calls import (
    CUT_AT_OUTPUT_LIMIT,
    MAX_TEXT_BYTES,
    ArgumentBuffer,
    TextBudget,
    check_call_count,
    claim_call_id,
    tool_call_event,
)
from spotpatch_agent.provider.http import SSE, EndpointAdapter, stream_error
from spotpatch_agent.provider.http import loads as _loads

# ---------------------------------------------------------------- request conversion (pure)


def to_chat_messages(request: TurnRequest) -> list[dict[str, Any]]:
    """Chat ``messages`` for ``request``: a system message (when non-empty), then per item
    ``{role:"user", content}`` (content parts when it carries images), ``{role:"assistant", content: text|None,
    tool_calls?: [{id, type:"function", function:{name, arguments}}]}`` (ids echoed verbatim) and
    ``{role:"tool", tool_call_id, content}``."""
    messages: list[dict[str, Any]] = []
    if request.system:
        messages.append({"role": "system", "content": request.system})
    for item in request.items:
        if isinstance(item, UserMessage):
            messages.append({"role": "user", "content": _user_content(item)})
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


def _user_content(item: UserMessage) -> str | list[dict[str, Any]]:
    """The text alone, or (with images) ``[{type:"text"}, {type:"image_url", image_url:{url:"data:…"}}, …]``."""
    if not item.images:
        return item.text
    return [{"type": "text", "text": item.text},
            *({"type": "image_url", "image_url": {"url": image.data_url}} for image in item.images)]


def build_chat_body(request: TurnRequest) -> dict[str, Any]:
    """The JSON body of ``POST /chat/completions``: model, messages, strict function tools, tool_choice,
    ``stream: true`` with usage, parallel tool calls, and ``max_completion_tokens`` when set (OpenAI's
    current field — its reasoning models reject the deprecated ``max_tokens``; llama.cpp's ``llama-server``
    and vLLM read it too; a relay that ignores it still works: the turn's text budget ends an endless
    answer). ``tools``,
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
        body["max_completion_tokens"] = request.max_output_tokens
    return body


# ---------------------------------------------------------------- stream assembly (pure)


@dataclass
class _Slot:
    seq: int
    index: int | None
    id: str = ""
    name: str = ""
    arguments: ArgumentBuffer = field(default_factory=ArgumentBuffer)


def _as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _as_index(value: Any) -> int | None:
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 6:
        return int(value)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


#: llama-server's ``system_fingerprint``: its build, ``b<number>-<commit>`` (``b0-unknown`` for a source build).
LLAMACPP_BUILD = re.compile(r"b\d{1,9}-[0-9A-Za-z]{1,40}\Z")


class ChatStreamAssembler:
    """Turns one turn's Chat Completions chunks into events (docs/design.md §11). Pure; one instance per turn.

    :meth:`feed_data` takes an SSE ``data`` string (``[DONE]`` included), :meth:`feed` a parsed chunk,
    :meth:`feed_sse` a whole server-sent event and :meth:`feed_answer` a non-streamed completion; each returns
    the :class:`TextDelta` events due now (text is emitted as it comes, bounded to
    ``max_text_bytes`` UTF-8 bytes per turn). :meth:`finish` returns the :class:`ToolCallEvent` s in index
    order, then one :class:`TurnEnd`. Raises :class:`ProviderError` ``PROVIDER_PROTOCOL`` for a non-JSON
    chunk, an error object or ``error`` event in the stream (``LIMIT_EXCEEDED`` for context length), a truncated
    stream (no ``[DONE]`` and no finish reason) and two calls of one turn sharing an id.
    """

    #: Chat raises an error in the stream at once: no error ever waits for a follow-up event.
    pending_error: ProviderError | None = None

    def __init__(self, *, max_text_bytes: int = MAX_TEXT_BYTES, api_key: str | None = None) -> None:
        self._text = TextBudget(max_text_bytes)
        self._api_key = api_key
        self._slots: list[_Slot] = []
        self._by_index: dict[int, _Slot] = {}
        self._current: _Slot | None = None
        self._finish_reason: str | None = None
        self._usage: dict[str, Any] | None = None
        self._server: str | None = None
        #: ``data: [DONE]`` was seen; the caller stops reading.
        self.done = False

    @property
    def text_limited(self) -> bool:
        """The turn's text passed its budget before any tool call started: the caller stops reading and
        :meth:`finish` ends the turn with ``text_limit``."""
        return self._text.exceeded and not self._slots

    def feed_data(self, data: str) -> list[ProviderEvent]:
        """Feed one SSE ``data`` payload: ``[DONE]`` ends the stream, empty data is ignored, else JSON."""
        text = data.strip()
        if text == "[DONE]":
            self.done = True
        if text in ("", "[DONE]"):
            return []
        chunk = _loads(text)
        if not isinstance(chunk, dict):
            raise ProviderError(ErrorCode.PROVIDER_PROTOCOL,
                                "the provider sent a stream chunk that is not a JSON object")
        return self.feed(chunk)

    def feed_sse(self, sse: SSE) -> list[ProviderEvent]:
        """Feed one server-sent event: an ``error`` event raises its error, any other is :meth:`feed_data`."""
        if sse.event == "error":
            payload = _loads(sse.data)
            raise stream_error(sse.data if payload is None else payload, self._api_key)
        return self.feed_data(sse.data)

    def feed_answer(self, answer: dict[str, Any]) -> list[ProviderEvent]:
        """Feed a whole ``chat.completion`` (a relay that ignored ``stream: true``): it ends the stream."""
        events = self.feed(answer)
        self.done = True
        return events

    def feed(self, chunk: dict[str, Any]) -> list[ProviderEvent]:
        """Feed one parsed chunk (``chat.completion.chunk``, or a non-streamed ``chat.completion``)."""
        if chunk.get("error"):
            raise stream_error(chunk["error"], self._api_key)
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self._usage = usage  # any chunk may carry it; the last one wins
        fingerprint = chunk.get("system_fingerprint")
        if isinstance(fingerprint, str) and LLAMACPP_BUILD.match(fingerprint):
            self._server = "llama.cpp"
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
                events.extend(self._text.take(content))
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
        :class:`TurnEnd`. ``stop`` or no reason with calls becomes ``tool_calls``; a turn ended by its text
        budget (:attr:`text_limited`) is ``text_limit``. A call of a turn cut at the output limit
        (``length``) whose arguments do not parse is invalid with "cut off at the output limit"."""
        if self.text_limited:
            return [TurnEnd(stop_reason="text_limit", usage=self._usage, server=self._server)]
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
            claim_call_id(call_id, seen, self._api_key)
            event = tool_call_event(call_id, slot.name, slot.arguments)
            if self._finish_reason == "length" and event.invalid is not None and not event.oversized and slot.name:
                event = ToolCallEvent(call_id, slot.name, event.arguments_json, invalid=CUT_AT_OUTPUT_LIMIT)
            events.append(event)
        # ``stop`` (or no reason at all: ``[DONE]`` only, common on relays) with calls means tool calls; a text-only
        # turn keeps its reason (None: accepted as a final answer). ``tool_calls`` without a call stays as sent:
        # the engine fails it (PROVIDER_PROTOCOL) instead of taking it for an empty final answer.
        reason = "tool_calls" if self._finish_reason in ("stop", None) and events else self._finish_reason
        events.append(TurnEnd(stop_reason=reason, usage=self._usage, server=self._server))
        return events

    # -------------------------------------------------------- internals

    def _new_slot(self, index: int | None) -> _Slot:
        check_call_count(len(self._slots))
        slot = _Slot(seq=len(self._slots), index=index)
        self._slots.append(slot)
        if index is not None:
            self._by_index[index] = slot
        return slot

    def _tool_delta(self, call: dict[str, Any]) -> None:
        index = _as_index(call.get("index"))
        call_id = call.get("id") if isinstance(call.get("id"), str) else ""
        function = _as_dict(call.get("function"))
        name = function.get("name")

        def renamed(slot: _Slot) -> bool:  # another non-empty name, not under the slot's id: another call
            same_id = bool(call_id) and call_id == slot.id
            return isinstance(name, str) and bool(name and slot.name) and name != slot.name and not same_id

        if index is not None:
            slot = self._by_index.get(index)
            if slot is None or (call_id and slot.id and call_id != slot.id) or renamed(slot):
                slot = self._new_slot(index)  # a new id (Ollama) or another name at a used index is a new call
        elif call_id:
            slot = next((s for s in self._slots if s.id == call_id), None) or self._new_slot(None)
        else:
            slot = self._current if self._current is not None and not renamed(self._current) else self._new_slot(None)
        self._current = slot
        if call_id and not slot.id:
            slot.id = call_id
        if isinstance(name, str) and name and not slot.name:
            slot.name = name  # set once; repeated or empty names are ignored
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            slot.arguments.add(arguments)
        elif isinstance(arguments, (dict, list)):  # given as an object: serialised, replacing any deltas
            slot.arguments.replace(json.dumps(arguments, ensure_ascii=False))


# ---------------------------------------------------------------- HTTP boundary


class ChatCompletionsAdapter(EndpointAdapter):
    """:class:`~spotpatch_agent.provider.base.ProviderAdapter` for OpenAI-compatible Chat Completions.
    Constructor arguments, :meth:`~spotpatch_agent.provider.http.EndpointAdapter.stream_turn` and its errors:
    see :class:`~spotpatch_agent.provider.http.EndpointAdapter` (with the stream errors of
    :class:`ChatStreamAssembler`); tool calls come in index order."""

    path = "/chat/completions"

    def build_body(self, request: TurnRequest) -> dict[str, Any]:
        """:func:`build_chat_body`."""
        return build_chat_body(request)

    def new_assembler(self, max_text_bytes: int) -> ChatStreamAssembler:
        """A :class:`ChatStreamAssembler` that redacts this adapter's key."""
        return ChatStreamAssembler(max_text_bytes=max_text_bytes, api_key=self._api_key)
