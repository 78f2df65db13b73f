"""``job/suggest`` (docs/design.md §14): the read-only suggestion lane's draft, its citations and the
in-memory check of the diff it may hold. It changed nothing."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from spotpatch_agent.protocol.base import WireModel
from spotpatch_agent.protocol.jobs import ErrorInfo

__all__ = ["SuggestionCitation", "SuggestionDiffCheck", "SuggestionExcerpt", "SuggestionResult"]

class SuggestionExcerpt(WireModel):
    """An excerpt the lane offered the model: a path and its line range only (never the lines)."""

    path: str
    start_line: int
    end_line: int


class SuggestionCitation(WireModel):
    """A ``path:line`` or ``path:a-b`` the suggestion cites. ``verified``: the range lies inside an excerpt
    it was given; an unverified citation was never checked against anything."""

    ref: str
    path: str
    start_line: int
    end_line: int
    verified: bool


class SuggestionDiffCheck(WireModel):
    """The unified diff found in the suggestion, parsed with ``apply_patch``'s strict parser and applied to
    the excerpts in memory only (never written). ``reason``: why it does not apply."""

    applies: bool
    summary: Literal["applies cleanly to the excerpts", "does not apply"]
    files: list[str] = Field(default_factory=list)
    reason: str | None = None


class SuggestionResult(WireModel):
    """``job/suggest``: a draft from the read-only suggestion lane (docs/design.md §14). It changed nothing.

    ``outcome``: ``complete``; ``partial`` (a breaker or the model's output limit cut the answer: ``text`` is
    what came before); ``failed`` (no usable answer: ``error`` says why). ``breaker``: ``none``, ``timeout``
    (``timeoutSec``) or ``output-bytes`` (``maxOutputBytes``: the stream was closed). ``verified`` /
    ``unverified`` count ``citations``."""

    kind: Literal["suggestion"] = "suggestion"
    job_id: str
    label: str
    outcome: Literal["complete", "partial", "failed"]
    breaker: Literal["none", "timeout", "output-bytes"]
    message: str
    provider: str
    model: str
    text: str
    excerpts: list[SuggestionExcerpt]
    citations: list[SuggestionCitation]
    verified: int
    unverified: int
    diff: SuggestionDiffCheck | None = None
    error: ErrorInfo | None = None
    duration_ms: int
    output_bytes: int
