"""OpenAI Responses adapter (docs/design.md §11): ``POST {baseUrl}/responses`` streamed over SSE.

Three layers, each testable alone:

- :func:`~spotpatch_agent.provider.responses_convert.build_responses_body` — pure conversion of a
  :class:`TurnRequest` (``store: false``, full input every turn, flat strict function tools).
- :class:`~spotpatch_agent.provider.responses_convert.ResponsesStreamAssembler` — pure: stream events in,
  :data:`ProviderEvent` s out (calls keyed by ``item_id``, final arguments from the ``.done`` events, EOF
  before ``response.completed`` is an error, ``error`` / ``response.failed`` / ``response.incomplete``).
- :class:`ResponsesAdapter` — the HTTP boundary, shared with the Chat Completions adapter
  (:class:`~spotpatch_agent.provider.http.SSEClient`): status mapping, bounded retries before the first
  event, idle timeout, cancellation, redaction of the key.

``previous_response_id`` is not used: every turn sends the whole conversation, which works with relays
that keep no state and with ``store: false``.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator
from contextlib import aclosing
from typing import Any

import anyio

from spotpatch_agent.provider.base import ProviderEvent, TurnRequest
from spotpatch_agent.provider.calls import MAX_ARGUMENT_CHARS, MAX_TEXT_BYTES
from spotpatch_agent.provider.http import EndpointAdapter, aiter_sse, content_type, read_json_answer
from spotpatch_agent.provider.responses_convert import ResponsesStreamAssembler, build_responses_body

#: Seconds to wait, after an ``error`` event, for the ``response.failed`` that usually follows it (its error
#: is the precise one); the ``error`` event's own error is raised when nothing comes.
ERROR_FOLLOW_UP_WAIT = 1.0


class ResponsesAdapter(EndpointAdapter):
    """:class:`~spotpatch_agent.provider.base.ProviderAdapter` for the OpenAI Responses API.
    Constructor arguments: see :class:`~spotpatch_agent.provider.http.EndpointAdapter`; errors: see
    :meth:`stream_turn`."""

    path = "/responses"

    async def stream_turn(self, request: TurnRequest) -> AsyncIterator[ProviderEvent]:
        """Stream one model turn: :class:`TextDelta` s as they arrive, then :class:`ToolCallEvent` s in
        ``output_index`` order, then :class:`TurnEnd`.

        Raises :class:`ProviderError`: the HTTP errors of :meth:`SSEClient.stream` (``PROVIDER_AUTH``,
        ``PROVIDER_UNAVAILABLE`` after retries, ``LIMIT_EXCEEDED``, ``PROVIDER_PROTOCOL``) and the stream
        errors of :class:`ResponsesStreamAssembler` (``response.failed`` mapped by its error: context length
        → ``LIMIT_EXCEEDED``, rate limit or server error → ``PROVIDER_UNAVAILABLE``; ``response.incomplete``
        other than the output limit, an ``error`` event, a truncated or malformed stream →
        ``PROVIDER_PROTOCOL``). Cancelling the caller's scope closes the connection. Use
        ``contextlib.aclosing`` when abandoning the iterator early.
        """
        body = build_responses_body(request)
        budget = request.max_text_bytes or MAX_TEXT_BYTES
        read = functools.partial(self._read, text_budget=budget)  # a fresh assembler per attempt
        async with aclosing(self._http.stream(body, model=request.model, read=read)) as events:
            async for event in events:
                yield event

    async def _read(self, source: Any, text_budget: int) -> AsyncIterator[ProviderEvent]:
        assembler = ResponsesStreamAssembler(max_text_bytes=text_budget, api_key=self._api_key)
        response = source.response
        if content_type(response) != "text/event-stream":
            answer = await read_json_answer(response, MAX_ARGUMENT_CHARS)  # a relay that ignored stream: true
            for event in assembler.feed_response(answer if isinstance(answer, dict) else {}):
                yield event
        else:
            async with aclosing(aiter_sse(response)) as sse_events:
                while not assembler.done and not assembler.text_limited:  # leaving the block closes the stream
                    if assembler.pending_error is None:
                        sse = await anext(sse_events, None)
                    else:
                        sse = None
                        with anyio.move_on_after(ERROR_FOLLOW_UP_WAIT):
                            sse = await anext(sse_events, None)
                    if sse is None:
                        break
                    for event in assembler.feed_data(sse.event if sse.event != "message" else "", sse.data):
                        yield event
        for event in assembler.finish():
            yield event
