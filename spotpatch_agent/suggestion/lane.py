"""The suggestion lane's run: bounded excerpts, one request without tools, breakers, checks (docs/design.md §14).

Adapted from the read-only fallback lane precedent: a default-off switch (the trusted config's
``suggestions.enabled``, checked by the caller), three breakers, and a run that never raises — every
failure is an explicit ``outcome: "failed"`` result with its error, every breaker an explicit labelled
``partial`` (or ``failed`` when nothing came before it).

Breakers:

- **single request**: one model turn, no tools offered, no loop. A stream the adapter would ask again
  (:class:`~spotpatch_agent.provider.base.TurnRestart`) ends the lane instead; a tool call in the answer is
  ignored (never run).
- **timeout**: ``timeoutSec`` of wall-clock time for the request; the stream is closed when it passes.
- **output bytes**: ``maxOutputBytes`` of answer text; the adapter stops reading and closes the stream
  (``TurnEnd.stop_reason == "text_limit"``); the text before it is the partial result.

Never: writes a file, calls a tool, runs a check, or sends the model more than the excerpts.
"""

from __future__ import annotations

import logging
import time
from contextlib import aclosing
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import anyio

from spotpatch_agent.errors import SpotPatchError
from spotpatch_agent.policy.redact import REDACTOR, shorten_paths
from spotpatch_agent.protocol.errors import ErrorCode
from spotpatch_agent.protocol.models import (
    ErrorInfo,
    Limits,
    SpotAnnotation,
    SuggestionExcerpt,
    SuggestionResult,
    Suggestions,
)
from spotpatch_agent.provider.base import (
    ProviderAdapter,
    TextDelta,
    ToolCallEvent,
    TurnEnd,
    TurnRequest,
    TurnRestart,
    UserMessage,
)
from spotpatch_agent.provider.http import strip_controls
from spotpatch_agent.suggestion.excerpts import Excerpt, read_excerpts
from spotpatch_agent.suggestion.prompt import SYSTEM_PROMPT, suggestion_task
from spotpatch_agent.suggestion.verify import check_citations, check_diff

log = logging.getLogger("spotpatch.suggestion")

#: The label every suggestion carries, whatever its outcome.
LABEL = ("Draft suggestion — it changed nothing: no file was written, no tool or check ran. "
         "Review it and make the change yourself.")


@dataclass(frozen=True)
class LaneRun:
    """A lane's result and the excerpts it offered (with their files' SHA-256, for the audit ledger)."""

    result: SuggestionResult
    excerpts: tuple[Excerpt, ...]

    def ledger_excerpts(self) -> list[dict[str, object]]:
        """``[{path, startLine, endLine, sha256}]``: what ``ledger.record_suggestion`` records."""
        return [{"path": e.path, "startLine": e.start_line, "endLine": e.end_line, "sha256": e.sha256}
                for e in self.excerpts]


@dataclass
class _Answer:
    text: str = ""
    bytes: int = 0
    stop_reason: str | None = None
    breaker: Literal["none", "timeout", "output-bytes"] = "none"  # SuggestionResult.breaker
    restarted: bool = False
    ignored_calls: int = 0
    error: SpotPatchError | None = None


async def run_suggestion(
    *, job_id: str, annotation: SpotAnnotation, root: Path, limits: Limits, settings: Suggestions,
    adapter: ProviderAdapter, provider_name: str, model: str, max_output_tokens: int | None,
) -> LaneRun:
    """Run the lane once for ``annotation`` against the project at ``root``. Never raises (cancellation
    aside): a failure is a result with ``outcome: "failed"`` and ``error``. Always closes ``adapter``."""
    started = time.monotonic()
    excerpts: tuple[Excerpt, ...] = ()
    answer = _Answer()
    try:
        sources = await read_excerpts(root, list(annotation.targets), limits)
        excerpts = tuple(s.excerpt for s in sources if s.excerpt is not None)
        request = TurnRequest(system=SYSTEM_PROMPT, items=(UserMessage(suggestion_task(annotation, sources)),),
                              tools=(), model=model, max_output_tokens=max_output_tokens,
                              max_text_bytes=settings.max_output_bytes)
        answer = await _ask_once(adapter, request, settings)
    except Exception as exc:  # noqa: BLE001 - the lane never throws: an engine bug is an explicit failure
        log.error("suggestion lane failed unexpectedly", exc_info=exc)
        answer.error = SpotPatchError(ErrorCode.INTERNAL, "Internal error in the suggestion lane (see the engine log).")
    finally:
        with anyio.CancelScope(shield=True):
            try:
                await adapter.aclose()
            except Exception:  # noqa: BLE001 - closing is best effort
                pass
    duration_ms = int((time.monotonic() - started) * 1000)
    return LaneRun(_result(job_id, answer, excerpts, settings, provider_name, model, duration_ms), excerpts)


async def _ask_once(adapter: ProviderAdapter, request: TurnRequest, settings: Suggestions) -> _Answer:
    answer = _Answer()
    pieces: list[str] = []
    with anyio.move_on_after(settings.timeout_sec) as scope:
        try:
            async with aclosing(adapter.stream_turn(request)) as events:
                async for event in events:
                    if isinstance(event, TextDelta):
                        room = settings.max_output_bytes - answer.bytes
                        data = event.text.encode("utf-8")
                        if len(data) > room:  # the adapter's own budget should have ended it already
                            pieces.append(data[:room].decode("utf-8", errors="ignore"))
                            answer.bytes = settings.max_output_bytes
                            answer.breaker = "output-bytes"
                            break
                        pieces.append(event.text)
                        answer.bytes += len(data)
                    elif isinstance(event, ToolCallEvent):
                        answer.ignored_calls += 1  # no tool was offered; a call is never run
                    elif isinstance(event, TurnRestart):
                        answer.restarted = True  # leaving closes the stream before the adapter asks again
                        break
                    elif isinstance(event, TurnEnd):
                        answer.stop_reason = event.stop_reason
                        if event.stop_reason == "text_limit":
                            answer.breaker = "output-bytes"
                        break
        except SpotPatchError as exc:
            answer.error = exc
    if scope.cancelled_caught:
        answer.breaker = "timeout"
    answer.text = "".join(pieces)
    return answer


def printable(text: str) -> str:
    """``text`` without terminal escape sequences, control characters (a carriage return too: it could
    overwrite a line with another) and bidi overrides (:func:`~spotpatch_agent.provider.http.strip_controls`),
    keeping its line breaks and tabs: the draft is shown on a terminal and copied to the clipboard."""
    return "\n".join("\t".join(strip_controls(part) for part in line.split("\t")) for line in text.split("\n"))


def _result(job_id: str, answer: _Answer, excerpts: tuple[Excerpt, ...], settings: Suggestions,
            provider_name: str, model: str, duration_ms: int) -> SuggestionResult:
    cut = answer.breaker != "none" or answer.restarted or answer.error is not None or answer.stop_reason == "length"
    raw = printable(answer.text)
    text = REDACTOR.redact_cut_source(raw) if cut else REDACTOR(raw)
    text = shorten_paths(text)
    error: SpotPatchError | None = answer.error
    if answer.breaker == "timeout":
        message = f"Stopped by the timeout breaker after {settings.timeout_sec} s: the answer is incomplete."
        if not text.strip():
            error = SpotPatchError(
                ErrorCode.LIMIT_EXCEEDED,
                f"The model did not answer within {settings.timeout_sec} s (suggestions.timeoutSec).")
    elif answer.breaker == "output-bytes":
        message = (f"Stopped by the output breaker at {settings.max_output_bytes} bytes (suggestions.maxOutputBytes): "
                   "the stream was closed and the answer is incomplete.")
    elif answer.restarted:
        message = "The provider's stream broke; the lane asks only once, so it did not ask again."
        if not text.strip():
            error = SpotPatchError(ErrorCode.PROVIDER_UNAVAILABLE,
                                   "The provider's stream broke before an answer; ask for a suggestion again later.")
    elif error is not None:
        message = "The request failed: " + REDACTOR(error.message)
    elif answer.stop_reason == "length":
        message = "The answer was cut at the model's output limit: it is incomplete."
    elif not text.strip():
        message = "The model answered with no text."
        error = SpotPatchError(ErrorCode.PROVIDER_PROTOCOL, "The model answered with no text.")
    else:
        message = "Complete."
    if answer.ignored_calls:
        message += f" The answer held {answer.ignored_calls} tool call(s); no tool was offered and none ran."
    outcome: Literal["complete", "partial", "failed"] = (
        "failed" if error is not None else ("partial" if cut else "complete"))
    citations, verified, unverified = check_citations(text, excerpts)
    error_info = None
    if error is not None:
        error_info = ErrorInfo(code=error.code, message=shorten_paths(REDACTOR(error.message))[:2000],
                               retryable=error.retryable)
    return SuggestionResult(
        job_id=job_id, label=LABEL, outcome=outcome, breaker=answer.breaker, message=shorten_paths(message)[:2000],
        provider=provider_name, model=model, text=text,
        excerpts=[SuggestionExcerpt(path=e.path, start_line=e.start_line, end_line=e.end_line) for e in excerpts],
        citations=citations, verified=verified, unverified=unverified, diff=check_diff(text, excerpts),
        error=error_info, duration_ms=duration_ms, output_bytes=answer.bytes)
