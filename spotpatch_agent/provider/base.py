"""The one small provider interface (docs/design.md §11). Each wire format implements it in its own module.

A turn request is provider-neutral; an adapter converts it (pure functions) to its wire format, streams the
response, and yields internal events in order:

- :class:`TextDelta` — a piece of assistant text (bounded by the adapter to ``max_text_bytes``).
- :class:`ToolCallEvent` — one complete tool call, emitted once its arguments are complete (end of turn for
  Chat Completions). ``arguments_json`` is always a JSON *object* text; when the streamed arguments do not
  parse as an object, ``invalid`` holds a short sanitized reason and the call must be answered with a failed
  tool result (never executed, never treated as ``{}``).
- :class:`TurnRestart` — the stream broke with a transient server-side error before the turn finished and
  the adapter is asking again (within its bounded retry budget): everything streamed so far is void.
  Never sent after a :class:`ToolCallEvent`, so nothing of the void attempt can have run.
- :class:`TurnEnd` — exactly once, last: ``stop_reason`` (``tool_calls`` | ``stop`` | ``length`` |
  ``text_limit`` | … | None),
  ``usage`` (provider's usage object or None) and ``replay`` (opaque items to echo back next turn).
  ``tool_calls`` is said only when the turn carried at least one call (valid or invalid); ``text_limit``
  means the turn's text passed its budget (``TurnRequest.max_text_bytes``) before any tool call started,
  and the adapter stopped reading and closed the stream at once.

Errors are raised as :class:`spotpatch_agent.errors.ProviderError` with codes ``PROVIDER_AUTH`` (401/403),
``PROVIDER_UNAVAILABLE`` (connect/DNS/5xx/timeout), ``PROVIDER_PROTOCOL`` (unparseable or truncated stream,
error object inside a 200 stream), ``LIMIT_EXCEEDED`` (context length). Messages never contain the key.
Cancellation: cancelling the surrounding anyio scope closes the HTTP stream.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True)
class ToolSpec:
    """A function tool offered to the model: strict JSON Schema ``parameters`` (docs/design.md §6)."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True)
class ImagePart:
    """A picture in a user message (issue 26): PNG or WebP, standard base64. Its ``repr`` shows the size only,
    so a logged request never carries the bytes."""

    media_type: str
    data: str = field(repr=False)

    @property
    def data_url(self) -> str:
        """``data:<media type>;base64,<data>``: what both wire formats take as the image's URL."""
        return f"data:{self.media_type};base64,{self.data}"


@dataclass(frozen=True)
class UserMessage:
    text: str
    #: Pictures sent with the text (only to a model profile whose vision the probe proved: engine/loop.py).
    images: tuple[ImagePart, ...] = ()


@dataclass(frozen=True)
class ToolCallRecord:
    """A call as the provider sent it; ``id`` is the provider's original id (echoed back verbatim)."""

    id: str
    name: str
    arguments_json: str


@dataclass(frozen=True)
class AssistantTurn:
    text: str
    tool_calls: tuple[ToolCallRecord, ...] = ()
    #: Opaque items of this turn's answer that the adapter echoes back verbatim before the turn's text and calls
    #: (Responses: ``reasoning`` items carrying ``encrypted_content``; see :attr:`TurnEnd.replay`).
    replay: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True)
class ToolResultMessage:
    call_id: str
    output: str


ConversationItem = UserMessage | AssistantTurn | ToolResultMessage


@dataclass(frozen=True)
class TurnRequest:
    system: str
    items: tuple[ConversationItem, ...]
    tools: tuple[ToolSpec, ...]
    model: str
    #: Ask the model to call a tool this turn ("required") or leave it free ("auto").
    tool_choice: str = "auto"
    #: The output cap sent to the provider (Chat ``max_completion_tokens``, Responses ``max_output_tokens``);
    #: None sends none.
    max_output_tokens: int | None = None
    #: Assistant text accepted this turn, in UTF-8 bytes, before the adapter ends a turn that has not
    #: started a tool call (``TurnEnd.stop_reason == "text_limit"``); None: ``calls.MAX_TEXT_BYTES``.
    max_text_bytes: int | None = None


@dataclass(frozen=True)
class TextDelta:
    text: str


@dataclass(frozen=True)
class ToolCallEvent:
    id: str
    name: str
    arguments_json: str
    invalid: str | None = None
    #: The streamed arguments went over the adapter's bound (``calls.MAX_ARGUMENT_CHARS``) and were dropped: the
    #: loop ends the job with ``LIMIT_EXCEEDED``, like any over-limit argument (docs/security.md §5).
    oversized: bool = False


@dataclass(frozen=True)
class TurnRestart:
    """The turn is asked again after a transient server-side error inside its stream: drop what came."""

    reason: str


@dataclass(frozen=True)
class TurnEnd:
    stop_reason: str | None
    usage: dict[str, Any] | None = field(default=None)
    #: Provider items to send back, in order, with this turn in the next request (never shown, never logged):
    #: the Responses adapter's ``reasoning`` items that carry ``encrypted_content`` (``store: false`` keeps
    #: nothing server-side; an item without it would be a dangling ``rs_`` reference, so it is not kept).
    replay: tuple[dict[str, Any], ...] = ()
    #: The server that answered, when its stream says so: ``"llama.cpp"`` (a Chat chunk's ``system_fingerprint``
    #: is llama-server's build, ``b<number>-<commit>``), else None. Constrained tool calls use it (issue 27).
    server: str | None = None


ProviderEvent = TextDelta | ToolCallEvent | TurnRestart | TurnEnd


class ProviderAdapter(Protocol):
    """One wire format. ``stream_turn`` yields events of one model turn and ends after :class:`TurnEnd`."""

    def stream_turn(self, request: TurnRequest) -> AsyncGenerator[ProviderEvent, None]: ...

    async def aclose(self) -> None: ...
