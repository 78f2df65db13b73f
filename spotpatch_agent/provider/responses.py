"""OpenAI Responses adapter (docs/design.md §11): ``POST {baseUrl}/responses`` streamed over SSE.

Three layers, each testable alone:

- :func:`~spotpatch_agent.provider.responses_convert.build_responses_body` — pure conversion of a
  :class:`TurnRequest` (``store: false``, full input every turn, flat strict function tools).
- :class:`~spotpatch_agent.provider.responses_convert.ResponsesStreamAssembler` — pure: stream events in,
  :data:`ProviderEvent` s out (calls keyed by ``item_id``, final arguments from the ``.done`` events, EOF
  before ``response.completed`` is an error, ``error`` / ``response.failed`` / ``response.incomplete``).
- :class:`ResponsesAdapter` — the endpoint and the two above; the HTTP boundary is shared with the Chat
  Completions adapter (:class:`~spotpatch_agent.provider.http.EndpointAdapter`): status mapping, bounded
  retries before the first event, idle timeout, cancellation, redaction of the key.

``previous_response_id`` is not used: every turn sends the whole conversation, which works with relays
that keep no state and with ``store: false``.
"""

from __future__ import annotations

from typing import Any

from spotpatch_agent.provider.base import TurnRequest
from spotpatch_agent.provider.http import EndpointAdapter
from spotpatch_agent.provider.responses_convert import ResponsesStreamAssembler, build_responses_body


class ResponsesAdapter(EndpointAdapter):
    """:class:`~spotpatch_agent.provider.base.ProviderAdapter` for the OpenAI Responses API. Constructor
    arguments and :meth:`~spotpatch_agent.provider.http.EndpointAdapter.stream_turn`: see
    :class:`~spotpatch_agent.provider.http.EndpointAdapter`; tool calls come in ``output_index`` order.

    Besides the HTTP errors, a turn raises the stream errors of :class:`ResponsesStreamAssembler`
    (``response.failed`` mapped by its error: context length → ``LIMIT_EXCEEDED``, rate limit or server
    error → ``PROVIDER_UNAVAILABLE``; ``response.incomplete`` other than the output limit, an ``error`` event
    (after waiting :data:`~spotpatch_agent.provider.http.ERROR_FOLLOW_UP_WAIT` s for the ``response.failed``
    that usually follows it), a truncated or malformed stream → ``PROVIDER_PROTOCOL``).
    """

    path = "/responses"

    def build_body(self, request: TurnRequest) -> dict[str, Any]:
        """:func:`~spotpatch_agent.provider.responses_convert.build_responses_body`."""
        return build_responses_body(request)

    def new_assembler(self, max_text_bytes: int) -> ResponsesStreamAssembler:
        """A :class:`~spotpatch_agent.provider.responses_convert.ResponsesStreamAssembler` that redacts this
        adapter's key."""
        return ResponsesStreamAssembler(max_text_bytes=max_text_bytes, api_key=self._api_key)
