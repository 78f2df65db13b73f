"""Providers on the wire (docs/design.md §11): ``provider/list`` (ids and display names only, never URLs or
keys) and ``provider/probe``'s capability result."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from spotpatch_agent.protocol.base import InModel, WireModel
from spotpatch_agent.protocol.jobs import ErrorInfo

__all__ = ["ProbeResult", "ProviderInfo", "ProviderListResult", "ProviderModelInfo", "ProviderProbeParams"]

class ProviderModelInfo(WireModel):
    id: str
    display_name: str


class ProviderInfo(WireModel):
    """A provider profile as the page may see it: ids and display names only, never URLs or keys."""

    id: str
    display_name: str
    api: Literal["chat", "responses"]
    #: The key variable is set and the engine speaks this API.
    available: bool
    models: list[ProviderModelInfo]


class ProviderListResult(WireModel):
    providers: list[ProviderInfo]


class ProviderProbeParams(InModel):
    model_profile_id: str = Field(min_length=1, max_length=64)


class ProbeResult(WireModel):
    """Outcome of the explicit capability probe (docs/design.md §11), cached for the engine session.

    ``source``: ``probe`` (this method's model listing and forced tool round trip) or ``inline`` (a job's
    first tool call and its continuation proved it; no extra request). ``models``: the model ids the
    endpoint listed (at most 50), absent when it was not asked or cannot list models. ``vision`` (issue 26):
    absent when the model profile does not say ``vision: true`` (or tool calling failed first); ``true`` when
    the provider accepted the probe's image part; ``false`` when it refused it — ``message`` says why, and no
    job of this profile sends images."""

    model_profile_id: str
    ok: bool
    tool_calling: bool
    cached: bool
    duration_ms: int
    message: str
    error: ErrorInfo | None = None
    source: Literal["probe", "inline"] = "probe"
    models: list[str] | None = None
    vision: bool | None = None
