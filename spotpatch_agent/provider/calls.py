"""Stream-assembly rules shared by the adapters (docs/design.md §11): bounded assistant text, bounded
arguments, and the one judgement of a finished tool call's arguments.

A call whose arguments do not parse as one JSON object is never executed and never treated as ``{}``: its
:class:`~spotpatch_agent.provider.base.ToolCallEvent` carries ``invalid`` (a short sanitized reason) and
the engine answers it with a failed tool result. Empty arguments (``""``) mean ``{}``.
"""

from __future__ import annotations

import json

from spotpatch_agent.errors import ProviderError
from spotpatch_agent.protocol.errors import ErrorCode
from spotpatch_agent.provider.base import ProviderEvent, TextDelta, ToolCallEvent
from spotpatch_agent.provider.sanitize import sanitize_excerpt

#: Assistant text accepted per turn, in UTF-8 bytes (unless the request gives another budget). A turn whose
#: text passes it before any tool call started is ended at once (``TurnEnd.stop_reason == "text_limit"``);
#: once a call has started, further text is dropped silently while the call completes.
MAX_TEXT_BYTES = 16 * 1024
#: Streamed arguments kept per call, in characters; a longer call is reported invalid.
MAX_ARGUMENT_CHARS = 4 * 1024 * 1024
#: Tool calls accepted in one turn (above the hard cap of ``maxToolCalls`` for a whole job): more is
#: ``LIMIT_EXCEEDED`` at once, so an endless list of calls cannot grow the engine's memory.
MAX_CALLS_PER_TURN = 256
#: The ``invalid`` reason of a call whose arguments were cut off because the answer reached the output cap.
CUT_AT_OUTPUT_LIMIT = "the arguments were cut off at the output limit"


class TextBudget:
    """The assistant text of one turn, bounded to ``max_bytes`` UTF-8 bytes (whole characters kept)."""

    def __init__(self, max_bytes: int = MAX_TEXT_BYTES) -> None:
        self._max = max_bytes
        self._used = 0
        #: Text arrived past the budget (some of it was dropped).
        self.exceeded = False

    def take(self, content: str) -> list[ProviderEvent]:
        """``[TextDelta(part)]`` for the part of ``content`` that still fits, else ``[]``."""
        room = self._max - self._used
        if not content:
            return []
        if room <= 0:
            self.exceeded = True
            return []
        raw = content.encode("utf-8")
        if len(raw) > room:  # the bound is reached: keep what fits (whole characters), drop the rest
            content, self._used = raw[:room].decode("utf-8", errors="ignore"), self._max
            self.exceeded = True
        else:
            self._used += len(raw)
        return [TextDelta(content)] if content else []


class ArgumentBuffer:
    """The streamed argument text of one call, bounded to :data:`MAX_ARGUMENT_CHARS` characters."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.size = 0
        self.too_large = False

    def add(self, text: str) -> None:
        if self.too_large or not text:
            return
        self.size += len(text)
        if self.size > MAX_ARGUMENT_CHARS:
            self.too_large, self.parts = True, []
        else:
            self.parts.append(text)

    def replace(self, text: str) -> None:
        """Drop what was streamed so far and keep ``text`` (final arguments win over deltas)."""
        self.parts, self.size, self.too_large = [], 0, False
        self.add(text)

    @property
    def text(self) -> str:
        return "".join(self.parts)


def tool_call_event(call_id: str, name: str, arguments: ArgumentBuffer) -> ToolCallEvent:
    """The event of a finished call: valid when ``name`` is set and the arguments are one JSON object
    (``""`` → ``{}``); otherwise ``invalid`` says why (no name, too large, not JSON, not an object)."""
    if arguments.too_large:
        return ToolCallEvent(call_id, name, "", invalid=f"arguments exceed {MAX_ARGUMENT_CHARS} characters",
                             oversized=True)
    text = arguments.text
    if not name:
        return ToolCallEvent(call_id, "", text, invalid="the tool call has no function name")
    if not text.strip():
        return ToolCallEvent(call_id, name, "{}")
    try:
        parsed = json.loads(text)
    except ValueError as exc:
        reason = (f"arguments are not valid JSON ({getattr(exc, 'msg', 'malformed')} "
                  f"at character {getattr(exc, 'pos', '?')})")
        return ToolCallEvent(call_id, name, text, invalid=reason)
    except RecursionError:
        return ToolCallEvent(call_id, name, text, invalid="arguments are nested too deeply")
    if not isinstance(parsed, dict):
        return ToolCallEvent(call_id, name, text, invalid="arguments are not valid JSON (not an object)")
    return ToolCallEvent(call_id, name, text)


def check_call_count(known: int) -> None:
    """Raise ``LIMIT_EXCEEDED`` when a turn that already has ``known`` calls may not start another."""
    if known >= MAX_CALLS_PER_TURN:
        raise ProviderError(ErrorCode.LIMIT_EXCEEDED,
                            f"the model asked for more than {MAX_CALLS_PER_TURN} tool calls in one turn")


def claim_call_id(call_id: str, seen: set[str], api_key: str | None) -> None:
    """Add ``call_id`` to the ids of this turn. Raises ``PROVIDER_PROTOCOL`` when two calls of one turn
    share an id (docs/design.md §5: a same-turn conflict fails; reuse across turns is legal)."""
    if call_id in seen:
        shown = sanitize_excerpt(call_id, api_key)[:64]  # redact first: no key prefix survives the cut
        raise ProviderError(ErrorCode.PROVIDER_PROTOCOL, f"two tool calls of one turn share the id {shown!r}")
    seen.add(call_id)
