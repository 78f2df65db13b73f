"""The engine session on the wire (docs/design.md §3, §8): ``initialize`` and its capabilities,
``session/get``, ``health/get``, the params-less methods and the notifications a client sends or may
receive (``$/cancelRequest``, ``$/logTrace``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from spotpatch_agent.protocol.base import InModel, WireModel
from spotpatch_agent.protocol.config import TrustedConfig
from spotpatch_agent.protocol.jobs import ApplyMode

__all__ = [
    "AgentChannelInfo", "CancelRequestParams", "Capabilities", "ChecksSandbox", "ClientInfo", "EmptyParams",
    "HealthCounts", "HealthDetail", "InitializeParams", "InitializeResult", "LogTraceParams", "RecoveryReport",
    "RepoHealth",
    "ServerInfo", "SessionGetResult", "SessionLimits",
]

class ClientInfo(InModel):
    name: str = Field(max_length=200)
    version: str | None = Field(default=None, max_length=200)


class InitializeParams(InModel):
    protocol_version: str = Field(max_length=64)
    process_id: int | None = None
    client_info: ClientInfo | None = None
    project_root: str
    config: TrustedConfig = Field(default_factory=TrustedConfig)


class ServerInfo(WireModel):
    name: str
    version: str


class ChecksSandbox(WireModel):
    """Whether this engine can confine check processes (``session/get``, ``initialize`` capabilities):
    ``state`` ``confined`` (checks run in ``mechanism``, e.g. ``bubblewrap``) or ``unavailable``
    (``reason`` says why and how to fix it); ``policy`` is the trusted config's ``sandbox``."""

    state: Literal["confined", "unavailable"]
    mechanism: str | None = None
    policy: Literal["required", "warn"]
    reason: str | None = None


class Capabilities(WireModel):
    ai_enabled: bool
    apply_modes: list[ApplyMode]
    tools: list[str]
    #: Whether checks run confined (absent when the project configures no checks).
    checks_sandbox: ChecksSandbox | None = None
    #: Whether the read-only suggestion lane (``job/suggest``) is on in the trusted config.
    suggestions: bool = False


class RecoveryReport(WireModel):
    """A half-written Apply or Revert that a crashed engine left and this start repaired (docs/design.md §8).

    ``outcome``: ``rolled-back`` (an Apply undone: every path holds its pre-Apply bytes), ``completed``
    (a Revert finished), ``needs-attention`` (``unresolvedPaths`` held neither image, or HEAD moved:
    left untouched, resolve by hand). ``paths``: every touched path, relative POSIX."""

    job_id: str
    operation: Literal["apply", "revert"]
    outcome: Literal["completed", "rolled-back", "needs-attention"]
    paths: list[str]
    unresolved_paths: list[str] = Field(default_factory=list)


class InitializeResult(WireModel):
    protocol_version: str
    server_info: ServerInfo
    capabilities: Capabilities
    #: Interrupted Apply/Revert operations repaired at this start (crash journal, docs/design.md §8).
    recovered: list[RecoveryReport] = Field(default_factory=list)


class SessionLimits(WireModel):
    """The limits a page enforces before ``job/create`` (the trusted config's, defaults filled in)."""

    max_targets: int
    max_instruction_chars: int


class AgentChannelInfo(WireModel):
    """``session/get``'s ``agents`` (docs/mcp.md): whether a job can be sent to a coding agent attached over MCP."""

    #: The engine listens for agents (``spotpatch-agent mcp``); false with ``reason``.
    available: bool
    #: The agents attached now, by the names their MCP clients give (e.g. ``claude-code``), sorted.
    clients: list[str]
    #: Why no agent can attach (one line, no path), when ``available`` is false.
    reason: str | None = None


class SessionGetResult(WireModel):
    """What the page needs to draw itself (``session/get``): the ``initialize`` capabilities it cares about,
    the per-job limits and the Apply/Revert repairs of this engine start (the same list on every call)."""

    ai_enabled: bool
    apply_modes: list[ApplyMode]
    limits: SessionLimits
    recovered: list[RecoveryReport]
    #: Whether checks run confined (absent when the project configures no checks).
    checks_sandbox: ChecksSandbox | None = None
    #: Whether the read-only suggestion lane (``job/suggest``) is on in the trusted config.
    suggestions: bool = False
    #: Sending jobs to an attached agent (``job/create`` with ``agent: true``); absent where the engine offers no
    #: agent channel at all (an in-process engine: ``run``, ``demo``).
    agents: AgentChannelInfo | None = None


class EmptyParams(InModel):
    pass


class HealthCounts(WireModel):
    staged: int = 0
    unstaged: int = 0
    untracked: int = 0
    conflicted: int = 0


class HealthDetail(WireModel):
    """What one health reason is about and how to fix it (docs/configuration.md "Repository health").

    ``reason`` is the code in ``RepoHealth.reasons`` (or ``local-changes`` for a ``consent-required``
    tree, which has no reasons); ``paths`` are project-relative POSIX paths (a folder ends with ``/``),
    at most 20, redacted; ``morePaths`` counts the ones left out; ``fix`` is one sentence for a person."""

    reason: str
    paths: list[str] = Field(default_factory=list)
    more_paths: int = 0
    fix: str


class RepoHealth(WireModel):
    state: Literal["clean", "consent-required", "blocked"]
    reasons: list[str] = Field(default_factory=list)
    counts: HealthCounts = Field(default_factory=HealthCounts)
    #: One entry per reason, in the same order (one ``local-changes`` entry when ``consent-required``).
    details: list[HealthDetail] = Field(default_factory=list)


class CancelRequestParams(InModel):
    """``$/cancelRequest``: cancel the in-flight request with this JSON-RPC ``id``."""

    id: int | str


class LogTraceParams(WireModel):
    """Sanitized diagnostics for the client's log (no keys, absolute paths or file contents)."""

    message: str
    verbose: str | None = None
