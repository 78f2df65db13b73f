"""Pure conversion for the OpenAI Responses adapter (docs/design.md §11): a :class:`TurnRequest` to the body
of ``POST /responses``, and the streamed events of one response to :data:`ProviderEvent` s.

Request (:func:`build_responses_body`): ``store: false`` and the full conversation as ``input`` every turn
(no ``previous_response_id``: relays rarely keep state), the system prompt as ``instructions``, flat strict
function tools. Each ``function_call`` item is followed at once by its ``function_call_output`` (DeepSeek
rejects anything between the two; OpenAI accepts either order).

Stream (:class:`ResponsesStreamAssembler`): calls are keyed by ``item_id`` (``output_index`` when a relay
sends no item id, the current call when it sends neither); final arguments come from
``response.function_call_arguments.done`` / ``response.output_item.done`` / the completed response and win
over the accumulated deltas; only ``response.completed`` (or ``response.incomplete`` for the output limit)
ends a turn — EOF before it is a truncated stream.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from spotpatch_agent.errors import ProviderError
from spotpatch_agent.protocol.errors import ErrorCode
from spotpatch_agent.provider.base import (
    AssistantTurn,
    ConversationItem,
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
from spotpatch_agent.provider.http import (
    SSE,
    TransientStreamError,
    error_fields,
    is_context_error,
    is_server_side,
    loads,
    sanitize_excerpt,
)

#: ``reasoning`` items kept per turn for replay, and their ``encrypted_content`` characters in all; the rest
#: is dropped (the model then reasons again without it, as with ``store: false`` and no replay at all).
MAX_REPLAY_ITEMS = 32
MAX_REPLAY_CHARS = 1024 * 1024
#: Provider error codes of a failed response that mean "try again later" (PROVIDER_UNAVAILABLE).
TRANSIENT_CODES = ("rate_limit", "server_error", "overloaded", "unavailable", "timeout", "slow_down")

_TEXT_DELTAS = ("response.output_text.delta", "response.refusal.delta")
_KNOWN = frozenset({
    "response.created", "response.in_progress", "response.queued", "response.output_item.added",
    "response.output_item.done", "response.function_call_arguments.delta",
    "response.function_call_arguments.done", "response.output_text.delta", "response.output_text.done",
    "response.refusal.delta", "response.completed", "response.incomplete", "response.failed", "error",
    "response.error",
})


# ---------------------------------------------------------------- request conversion (pure)


def to_responses_input(items: tuple[ConversationItem, ...]) -> list[dict[str, Any]]:
    """Responses ``input`` items for a conversation: ``{type:"message", role:"user", content:[input_text,
    input_image…]}`` (``{type:"input_image", image_url:"data:…"}`` per picture),
    an assistant turn as its replayed ``reasoning`` items (``{type, id, summary, encrypted_content}``, only
    those that carried ``encrypted_content``), ``{type:"message", role:"assistant", content:[output_text]}``
    (when it has text) followed by its ``{type:"function_call", call_id, name, arguments}`` items, each
    immediately followed by the matching ``{type:"function_call_output", call_id, output}``. Ids are echoed verbatim."""
    out: list[dict[str, Any]] = []
    placed: set[int] = set()
    for i, item in enumerate(items):
        if isinstance(item, UserMessage):
            out.append({"type": "message", "role": "user", "content": [
                {"type": "input_text", "text": item.text},
                *({"type": "input_image", "image_url": image.data_url} for image in item.images)]})
        elif isinstance(item, AssistantTurn):
            out.extend(dict(r) for r in item.replay)  # reasoning items first, in their order (they precede calls)
            if item.text:
                out.append({"type": "message", "role": "assistant",
                            "content": [{"type": "output_text", "text": item.text}]})
            for call in item.tool_calls:
                out.append({"type": "function_call", "call_id": call.id, "name": call.name,
                            "arguments": call.arguments_json})
                j = _result_for(items, i, call.id, placed)
                if j is not None:
                    placed.add(j)
                    out.append(_output_item(items[j]))  # type: ignore[arg-type]
        elif isinstance(item, ToolResultMessage):
            if i not in placed:
                out.append(_output_item(item))
        else:  # pragma: no cover - the union is closed
            raise TypeError(f"unknown conversation item {type(item).__name__}")
    return out


def _result_for(items: tuple[ConversationItem, ...], turn_at: int, call_id: str, placed: set[int]) -> int | None:
    """Index of the first unplaced result for ``call_id`` after the assistant turn at ``turn_at`` and
    before the next one (ids may be reused by later turns)."""
    for j in range(turn_at + 1, len(items)):
        item = items[j]
        if isinstance(item, AssistantTurn):
            return None
        if isinstance(item, ToolResultMessage) and item.call_id == call_id and j not in placed:
            return j
    return None


def _output_item(result: ToolResultMessage) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": result.call_id, "output": result.output}


def build_responses_body(request: TurnRequest) -> dict[str, Any]:
    """The JSON body of ``POST /responses``: model, ``instructions`` (when non-empty), the full ``input``,
    flat strict function tools with tool_choice and parallel calls (all omitted when no tool is offered),
    ``store: false``, ``stream: true`` and ``max_output_tokens`` when set."""
    body: dict[str, Any] = {"model": request.model}
    if request.system:
        body["instructions"] = request.system
    body["input"] = to_responses_input(request.items)
    if request.tools:
        body["tools"] = [{"type": "function", "name": t.name, "description": t.description,
                          "parameters": t.parameters, "strict": True} for t in request.tools]
        body.update(tool_choice=request.tool_choice, parallel_tool_calls=True)
    body.update(store=False, stream=True)
    if request.max_output_tokens is not None:
        body["max_output_tokens"] = request.max_output_tokens
    return body


# ---------------------------------------------------------------- errors of a response (pure)


def response_error(error: Any, api_key: str | None, *, where: str) -> ProviderError:
    """The :class:`ProviderError` for the error object of ``response.failed`` or an ``error`` event
    (``where`` names it): ``LIMIT_EXCEEDED`` for context length, ``PROVIDER_UNAVAILABLE`` for rate limits and
    server errors (server-side ones as a :class:`TransientStreamError`, asked again), else ``PROVIDER_PROTOCOL``.
    The provider's code and message are quoted, sanitized."""
    message, kinds = error_fields(error)
    code = error.get("code") if isinstance(error, dict) else None
    shown_code = sanitize_excerpt(str(code), api_key)[:60] if code else "no code"
    excerpt = sanitize_excerpt(message, api_key) if message else "no message"
    if is_context_error(message, kinds):
        return ProviderError(ErrorCode.LIMIT_EXCEEDED,
                             f"the conversation exceeds the model's context ({where}: {shown_code}): {excerpt}")
    if is_server_side(kinds):  # asked again within the retry budget (provider/http.py)
        return TransientStreamError(ErrorCode.PROVIDER_UNAVAILABLE,
                                    "the provider reported a server error before the turn finished "
                                    f"({where}: {shown_code}): {excerpt}")
    if any(word in kinds.lower() for word in TRANSIENT_CODES):
        return ProviderError(ErrorCode.PROVIDER_UNAVAILABLE,
                             f"the provider is unavailable or rate-limited ({where}: {shown_code}): {excerpt}")
    return ProviderError(ErrorCode.PROVIDER_PROTOCOL,
                         f"the provider failed the response ({where}: {shown_code}): {excerpt}")


def _inner_error(payload: dict[str, Any]) -> Any:
    """The error object of an ``error`` event: ``{"error": {...}}`` or the event's own code/message."""
    inner = payload.get("error")
    return inner if isinstance(inner, (dict, str)) else payload


# ---------------------------------------------------------------- stream assembly (pure)


@dataclass
class _Call:
    seq: int
    item_id: str | None
    output_index: int | None
    call_id: str = ""
    name: str = ""
    args: ArgumentBuffer = field(default_factory=ArgumentBuffer)
    #: Final arguments arrived (``.done``, ``output_item.done`` or the completed response).
    final: bool = False
    #: A ``function_call`` item described this call (``output_item.added`` / ``.done`` / the completed
    #: response); a call known only from argument events of an unknown ``item_id`` is an orphan.
    announced: bool = False


def _as_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _as_str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _arguments_text(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, (dict, list)):  # a relay that sends the object itself
        return json.dumps(value, ensure_ascii=False)
    return None


class ResponsesStreamAssembler:
    """Turns one response's stream events into :data:`ProviderEvent` s (docs/design.md §11). Pure; one per turn.

    :meth:`feed_data` takes an SSE event name and ``data`` string, :meth:`feed` a parsed event; both return
    the :class:`TextDelta` s due now (bounded to ``max_text_bytes`` UTF-8 bytes per turn). :meth:`finish`
    returns the :class:`ToolCallEvent` s in ``output_index`` order, then one :class:`TurnEnd`
    (``tool_calls`` when there are calls, ``length`` for ``response.incomplete`` at the output limit, else
    ``stop``). Raises :class:`ProviderError`: ``response.failed`` (mapped by :func:`response_error`),
    ``response.incomplete`` for any other reason (``content_filter``: the filter stopped the answer), an
    ``error`` event (raised at the next terminal event or at :meth:`finish`, so a following
    ``response.failed`` gives the precise error), non-JSON data, EOF before ``response.completed``, two
    calls of one turn sharing a ``call_id`` and argument events of an item that no ``function_call`` item
    described and that name no function (an orphan: all ``PROVIDER_PROTOCOL`` unless mapped otherwise).
    """

    def __init__(self, *, max_text_bytes: int = MAX_TEXT_BYTES, api_key: str | None = None) -> None:
        self._text = TextBudget(max_text_bytes)
        self._api_key = api_key
        self._calls: list[_Call] = []
        self._by_item: dict[str, _Call] = {}
        self._by_index: dict[int, _Call] = {}
        self._text_items: set[str] = set()  # message items whose text was already emitted
        self._reasoning: dict[str, tuple[int, dict[str, Any]]] = {}  # item id → (position, replay item)
        self._replay_chars = 0
        self._usage: dict[str, Any] | None = None
        self._stop: str | None = None
        #: The response reached ``response.completed`` (or ``response.incomplete`` at the output limit).
        self.done = False
        #: The id of the response (``resp_…``), when the provider sent one.
        self.response_id: str | None = None
        #: An ``error`` event arrived; the turn fails at the next terminal event or at EOF.
        self.pending_error: ProviderError | None = None

    @property
    def text_limited(self) -> bool:
        """The turn's text passed its budget before any function call started: the caller stops reading
        and :meth:`finish` ends the turn with ``text_limit``."""
        return self._text.exceeded and not self._calls

    def feed_data(self, event: str, data: str) -> list[ProviderEvent]:
        """Feed one SSE event: its ``event:`` name (may be empty) and ``data``. Empty data and ``[DONE]`` are
        ignored; non-JSON data is an error unless the event name is one this parser does not know."""
        text = data.strip()
        if text in ("", "[DONE]"):
            return []
        payload = loads(text)
        if not isinstance(payload, dict):
            if event and event not in _KNOWN:
                return []  # a relay's own keep-alive event
            raise ProviderError(ErrorCode.PROVIDER_PROTOCOL,
                                "the provider sent a stream event that is not a JSON object")
        return self.feed(payload, event)

    def feed(self, payload: dict[str, Any], event: str = "") -> list[ProviderEvent]:
        """Feed one parsed event. Its type is ``payload["type"]``, else the SSE event name."""
        kind = _as_str(payload.get("type")) or event
        if kind in ("error", "response.error") or (not kind and payload.get("error")):
            self.pending_error = self.pending_error or response_error(_inner_error(payload), self._api_key,
                                                                      where="error event")
            return []
        if kind in _TEXT_DELTAS:
            item_id = payload.get("item_id")
            if isinstance(item_id, str):
                self._text_items.add(item_id)
            return self._text.take(_as_str(payload.get("delta")))
        handler = _HANDLERS.get(kind)
        return handler(self, payload) if handler is not None else []  # unknown types (pings, reasoning…)

    def feed_sse(self, sse: SSE) -> list[ProviderEvent]:
        """Feed one server-sent event (:meth:`feed_data` of its name, ``""`` for an unnamed one, and data)."""
        return self.feed_data(sse.event if sse.event != "message" else "", sse.data)

    def feed_answer(self, answer: dict[str, Any]) -> list[ProviderEvent]:
        """Feed a whole JSON answer (a relay that ignored ``stream: true``): :meth:`feed_response`."""
        return self.feed_response(answer)

    def feed_response(self, response: dict[str, Any]) -> list[ProviderEvent]:
        """Feed a whole response object (a relay that ignored ``stream: true``) as its terminal event."""
        if response.get("error") and not isinstance(response.get("output"), list):
            self.pending_error = response_error(response["error"], self._api_key, where="response")
            return []
        kind = {"failed": "response.failed", "incomplete": "response.incomplete"}.get(
            _as_str(response.get("status")), "response.completed")
        return self.feed({"type": kind, "response": response})

    def finish(self) -> list[ProviderEvent]:
        """The end of the stream: tool calls, then :class:`TurnEnd`. Raises as described on the class."""
        if self.pending_error is not None:
            raise self.pending_error
        if self.text_limited:
            return [TurnEnd(stop_reason="text_limit", usage=self._usage)]
        if not self.done:
            raise ProviderError(ErrorCode.PROVIDER_PROTOCOL,
                                "the provider's stream ended before response.completed: truncated")
        calls = self._calls
        if all(c.output_index is not None for c in calls):
            calls = sorted(calls, key=lambda c: (c.output_index, c.seq))
        events: list[ProviderEvent] = []
        seen: set[str] = set()
        for call in calls:
            if not call.announced and not call.name:
                # Arguments for an item no function_call item ever described: no name and no call id to answer.
                # Never run, and never echoed as ``{"type": "function_call", "name": ""}`` (OpenAI answers 400).
                shown = sanitize_excerpt(call.item_id or "", self._api_key)[:64] or "no item id"
                raise ProviderError(ErrorCode.PROVIDER_PROTOCOL,
                                    f"the provider sent tool-call arguments for an unknown item ({shown!r}) "
                                    "without a function_call item: no tool name")
            call_id = call.call_id or call.item_id or f"spotpatch_call_{call.seq}"
            claim_call_id(call_id, seen, self._api_key)
            event = tool_call_event(call_id, call.name, call.args)
            if not call.final and self._stop == "length" and event.invalid is None:
                event = ToolCallEvent(call_id, call.name, event.arguments_json, invalid=CUT_AT_OUTPUT_LIMIT)
            events.append(event)
        stop = "tool_calls" if events else (self._stop or "stop")
        replay = tuple(item for _, item in sorted(self._reasoning.values(), key=lambda kept: kept[0]))
        events.append(TurnEnd(stop_reason=stop, usage=self._usage, replay=replay))
        return events

    # -------------------------------------------------------- handlers

    def _on_created(self, payload: dict[str, Any]) -> list[ProviderEvent]:
        response = payload.get("response")
        if isinstance(response, dict) and isinstance(response.get("id"), str):
            self.response_id = response["id"]
        return []

    def _on_item_added(self, payload: dict[str, Any]) -> list[ProviderEvent]:
        item = payload.get("item")
        if isinstance(item, dict) and item.get("type") == "function_call":
            call = self._call_for(item, _as_int(payload.get("output_index")), added=True)
            initial = _arguments_text(item.get("arguments"))
            if initial and not call.final and not call.args.parts:
                call.args.add(initial)
        return []

    def _on_arguments_delta(self, payload: dict[str, Any]) -> list[ProviderEvent]:
        call = self._event_call(payload)
        if not call.final:
            call.args.add(_as_str(payload.get("delta")))
        return []

    def _on_arguments_done(self, payload: dict[str, Any]) -> list[ProviderEvent]:
        call = self._event_call(payload)
        if not call.name and _as_str(payload.get("name")):
            call.name = payload["name"]
        self._finalise(call, _arguments_text(payload.get("arguments")))
        return []

    def _on_item_done(self, payload: dict[str, Any]) -> list[ProviderEvent]:
        item = payload.get("item")
        if not isinstance(item, dict):
            return []
        if item.get("type") == "function_call":
            call = self._call_for(item, _as_int(payload.get("output_index")))
            self._finalise(call, _arguments_text(item.get("arguments")), cut=item.get("status") == "incomplete")
            return []
        if item.get("type") == "reasoning":
            self._keep_reasoning(item, _as_int(payload.get("output_index")))
            return []
        return self._late_text(item)

    def _on_text_done(self, payload: dict[str, Any]) -> list[ProviderEvent]:
        item_id = payload.get("item_id")
        if isinstance(item_id, str) and item_id not in self._text_items:
            self._text_items.add(item_id)  # a relay that sends the text only at the end
            return self._text.take(_as_str(payload.get("text")))
        return []

    def _on_completed(self, payload: dict[str, Any]) -> list[ProviderEvent]:
        if self.pending_error is not None:
            raise self.pending_error
        response = _as_dict(payload.get("response"))
        usage = response.get("usage")
        if isinstance(usage, dict):
            self._usage = usage
        events: list[ProviderEvent] = []
        output = response.get("output")
        for position, item in enumerate(output if isinstance(output, list) else []):
            if not isinstance(item, dict):
                continue
            if item.get("type") == "function_call":
                call = self._call_for(item, position)
                if not call.final:
                    self._finalise(call, _arguments_text(item.get("arguments")), cut=item.get("status") == "incomplete")
            elif item.get("type") == "reasoning":
                self._keep_reasoning(item, position)
            else:
                events.extend(self._late_text(item))
        self.done = True
        return events

    def _on_completed_event(self, payload: dict[str, Any]) -> list[ProviderEvent]:
        """``response.completed`` whose response says ``status: incomplete`` / ``failed`` (seen from relays)
        is handled as that status: a cut answer is never a finished one."""
        response = payload.get("response")
        status = _as_str(response.get("status")) if isinstance(response, dict) else ""
        if status == "incomplete":
            return self._on_incomplete(payload)
        if status == "failed":
            return self._on_failed(payload)
        return self._on_completed(payload)

    def _on_incomplete(self, payload: dict[str, Any]) -> list[ProviderEvent]:
        response = _as_dict(payload.get("response"))
        details = response.get("incomplete_details")
        reason = _as_str(details.get("reason")) if isinstance(details, dict) else ""
        if reason == "max_output_tokens":
            events = self._on_completed(payload)  # keep the calls that did finish; cut ones are invalid
            self._stop = "length"
            return events
        if self.pending_error is not None:
            raise self.pending_error
        if reason == "content_filter":
            raise ProviderError(ErrorCode.PROVIDER_PROTOCOL,
                                "the provider's content filter stopped the answer "
                                "(response.incomplete: content_filter)")
        shown = sanitize_excerpt(reason, self._api_key)[:60] if reason else "no reason given"
        raise ProviderError(ErrorCode.PROVIDER_PROTOCOL, f"the provider left the answer incomplete ({shown})")

    def _on_failed(self, payload: dict[str, Any]) -> list[ProviderEvent]:
        response = _as_dict(payload.get("response"))
        error = response.get("error")
        if error:
            raise response_error(error, self._api_key, where="response.failed")
        if self.pending_error is not None:
            raise self.pending_error
        raise ProviderError(ErrorCode.PROVIDER_PROTOCOL,
                            "the provider failed the response (response.failed: no error given)")

    # -------------------------------------------------------- internals

    def _lookup(self, item_id: Any, output_index: int | None) -> _Call | None:
        """The known call an event refers to, or None (then it starts a new call).

        By item id (or a call id used as item id); an item id never matches a call known under another
        item id, so two calls are never merged. Without a known item id: by ``output_index`` (a call that has
        no item id yet adopts this one); with neither: the current unfinished call (relays without ids)."""
        item_id = item_id if isinstance(item_id, str) and item_id else None
        if item_id is not None:
            found = self._by_item.get(item_id) or next((c for c in self._calls if c.call_id == item_id), None)
            if found is not None:
                return found
        if output_index is not None:
            found = self._by_index.get(output_index)
            if found is None or (item_id is not None and found.item_id is not None):
                return None
            if item_id is not None:
                found.item_id = item_id
                self._by_item[item_id] = found
            return found
        if item_id is None:
            return next((c for c in reversed(self._calls) if not c.final), None)
        return None

    def _new_call(self, item_id: str | None, output_index: int | None) -> _Call:
        check_call_count(len(self._calls))
        call = _Call(seq=len(self._calls), item_id=item_id, output_index=output_index)
        self._calls.append(call)
        if item_id:
            self._by_item[item_id] = call
        if output_index is not None:
            self._by_index[output_index] = call
        return call

    def _event_call(self, payload: dict[str, Any]) -> _Call:
        """The call of an arguments event (``item_id`` / ``output_index``), created when unknown."""
        item_id, index = _as_str(payload.get("item_id")) or None, _as_int(payload.get("output_index"))
        return self._lookup(item_id, index) or self._new_call(item_id, index)

    def _call_for(self, item: dict[str, Any], output_index: int | None, *, added: bool = False) -> _Call:
        """The call of a ``function_call`` item (created when new); fills in its call id and name once.
        ``added``: the item starts now (``output_item.added``), so an item without id or index is new."""
        item_id, call_id = _as_str(item.get("id")) or None, _as_str(item.get("call_id"))
        call = None
        if item_id is not None or output_index is not None or not added:
            call = self._lookup(item_id, output_index)
        if item_id is None and call_id:
            call = next((c for c in self._calls if c.call_id == call_id), None) or call
        if call is None or (call_id and call.call_id and call.call_id != call_id):
            call = self._new_call(item_id, output_index)  # another call id is another call
        call.announced = True
        if not call.call_id and call_id:
            call.call_id = call_id
        if not call.name and _as_str(item.get("name")):
            call.name = item["name"]
        return call

    @staticmethod
    def _finalise(call: _Call, arguments: str | None, *, cut: bool = False) -> None:
        """Final arguments win over the deltas — unless they are empty and the deltas are not (a relay's
        ``.done`` without its text must not erase a streamed call). ``cut``: the item's status is
        ``incomplete`` (output limit), so its arguments are kept but never final."""
        if arguments is None:
            return
        if arguments.strip() or not call.args.text.strip():
            call.args.replace(arguments)
        call.final = call.final or not cut

    def _keep_reasoning(self, item: dict[str, Any], position: int | None) -> None:
        """Keep a finished ``reasoning`` item for replay when it carries ``encrypted_content`` (with
        ``store: false`` an item without it is a reference to nothing: OpenAI answers 404). Only
        ``type``, ``id``, ``summary`` (its ``summary_text`` parts) and ``encrypted_content`` are kept; an
        item seen twice (``output_item.done`` and the completed response) is kept once."""
        item_id, secret = _as_str(item.get("id")), _as_str(item.get("encrypted_content"))
        if not item_id or not secret or item_id in self._reasoning:
            return
        raw = item.get("summary")
        summary = [{"type": "summary_text", "text": p["text"]} for p in (raw if isinstance(raw, list) else [])
                   if isinstance(p, dict) and isinstance(p.get("text"), str)]
        size = len(secret) + sum(len(p["text"]) for p in summary)
        if len(self._reasoning) >= MAX_REPLAY_ITEMS or self._replay_chars + size > MAX_REPLAY_CHARS:
            return
        self._replay_chars += size
        place = position if position is not None else len(self._calls) + len(self._reasoning) + 10**6
        self._reasoning[item_id] = (place, {"type": "reasoning", "id": item_id, "summary": summary,
                                            "encrypted_content": secret})

    def _late_text(self, item: dict[str, Any]) -> list[ProviderEvent]:
        """Text of a finished ``message`` item whose text never came as deltas."""
        item_id = _as_str(item.get("id"))
        if item.get("type") != "message" or not item_id or item_id in self._text_items:
            return []
        self._text_items.add(item_id)
        content = item.get("content")
        parts = [_as_str(p.get("text")) for p in content if isinstance(p, dict)] if isinstance(content, list) else []
        return self._text.take("".join(parts))


_HANDLERS = {
    "response.created": ResponsesStreamAssembler._on_created,
    "response.in_progress": ResponsesStreamAssembler._on_created,
    "response.output_item.added": ResponsesStreamAssembler._on_item_added,
    "response.function_call_arguments.delta": ResponsesStreamAssembler._on_arguments_delta,
    "response.function_call_arguments.done": ResponsesStreamAssembler._on_arguments_done,
    "response.output_item.done": ResponsesStreamAssembler._on_item_done,
    "response.output_text.done": ResponsesStreamAssembler._on_text_done,
    "response.completed": ResponsesStreamAssembler._on_completed_event,
    "response.incomplete": ResponsesStreamAssembler._on_incomplete,
    "response.failed": ResponsesStreamAssembler._on_failed,
}
