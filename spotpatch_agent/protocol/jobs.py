"""Jobs on the wire (docs/design.md §3): ``prompt/render``, ``job/create`` and the ``job/*`` methods that
name a job, the job snapshot, its diff and the application error it carries."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, StrictBool, model_validator
from typing_extensions import TypeAliasType

from spotpatch_agent.protocol.annotation import SpotAnnotation
from spotpatch_agent.protocol.base import InModel, WireModel
from spotpatch_agent.protocol.errors import ErrorCode

__all__ = [
    "TERMINAL_STATUSES", "ApplyMode", "DiffResult", "ErrorInfo", "FileStat", "JobCreateParams", "JobEventsParams",
    "JobIdParams", "JobListResult", "JobSnapshot", "JobStatus", "PromptRenderParams", "PromptRenderResult",
    "PromptTarget", "PromptWarning", "PromptWarningCode",
]

#: Named aliases get their own ``$defs`` entry in the JSON Schema (and one type on the Node side).
ApplyMode = TypeAliasType("ApplyMode", Literal["review", "auto", "trusted-auto"])
JobStatus = TypeAliasType("JobStatus", Literal[
    "preparing", "running", "validating", "awaiting-review", "applying", "applied",
    "reverting", "reverted", "failed", "cancelled", "closed",
])
TERMINAL_STATUSES: frozenset[str] = frozenset({"failed", "cancelled", "closed", "reverted"})


class PromptRenderParams(InModel):
    annotation: SpotAnnotation


class PromptTarget(WireModel):
    index: int
    source: str | None


#: Why a target's source location is not usable (``PromptWarning.code``).
PromptWarningCode = TypeAliasType("PromptWarningCode", Literal[
    "location-invalid", "location-protected", "location-missing", "location-unreadable", "line-past-end"])


class PromptWarning(WireModel):
    """A target whose source location could not be used: the prompt says so (without the file's contents).
    ``location-invalid``: not a project-relative path (absolute, ``..``); ``location-protected``: a path the
    path policy never reads; ``location-missing``: no such file; ``location-unreadable``: git-ignored, a
    symlink, binary or too big; ``line-past-end``: the file has fewer lines."""

    index: int
    code: PromptWarningCode
    message: str


class PromptRenderResult(WireModel):
    text: str
    targets: list[PromptTarget]
    #: One per target whose source location is not usable; absent when every location is usable.
    warnings: list[PromptWarning] | None = None


class JobCreateParams(InModel):
    annotation: SpotAnnotation
    #: The model that does the job; required unless ``agent`` is true.
    model_profile_id: str | None = Field(default=None, min_length=1, max_length=64)
    apply_mode: ApplyMode = "review"
    #: Only with ``applyMode: "trusted-auto"`` and only the JSON literal ``true`` (docs/design.md §10).
    trusted_fast_mode_consent: StrictBool | None = None
    local_changes_consent: bool | None = None
    #: "Send to my agent" (docs/mcp.md): the JSON literal ``true`` makes the job wait for a coding agent attached
    #: over MCP (``spotpatch-agent mcp``) to take it and do its turns, instead of a model; review mode only.
    agent: StrictBool | None = None

    @model_validator(mode="after")
    def _who_does_it(self) -> JobCreateParams:
        if self.agent:
            if self.model_profile_id is not None:
                raise ValueError("modelProfileId and agent: true exclude each other")
            if self.apply_mode != "review":
                raise ValueError("a job for an agent runs in applyMode \"review\" only")
        elif self.model_profile_id is None:
            raise ValueError("modelProfileId is required (or agent: true)")
        return self


class JobIdParams(InModel):
    job_id: str = Field(min_length=1, max_length=64)


class ErrorInfo(WireModel):
    """An application error: JSON-RPC ``-32000`` ``data``, ``JobSnapshot.error``, the ``error`` event."""

    code: ErrorCode
    message: str
    retryable: bool


class FileStat(WireModel):
    path: str
    added: int
    removed: int
    status: Literal["added", "modified", "deleted"]


class JobSnapshot(WireModel):
    job_id: str
    status: JobStatus
    annotation_id: str
    model_profile_id: str
    apply_mode: ApplyMode
    created_at: str
    updated_at: str
    turns: int = 0
    tool_calls: int = 0
    last_seq: int = 0
    files: list[FileStat] = Field(default_factory=list)
    message: str | None = None
    error: ErrorInfo | None = None


class DiffResult(WireModel):
    diff: str
    files: list[FileStat]


class JobListResult(WireModel):
    """Every job of this engine session, oldest first."""

    jobs: list[JobSnapshot]


class JobEventsParams(InModel):
    job_id: str = Field(min_length=1, max_length=64)
    after_seq: int = Field(default=0, ge=0)
