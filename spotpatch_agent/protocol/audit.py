"""``job/audit`` (docs/design.md §13): the audit ledger's records and derived summary as the wire carries
them (spotpatch_agent/audit builds them): paths, counts and hashes, never contents."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field
from typing_extensions import TypeAliasType

from spotpatch_agent.protocol.base import WireModel

__all__ = [
    "AuditApplyRecord", "AuditApplySummary", "AuditCheckRecord", "AuditCheckSummary", "AuditContextFile",
    "AuditExcerpt", "AuditFirstWrite", "AuditJobEndRecord", "AuditJobStartRecord", "AuditLimitRecord",
    "AuditLines", "AuditPath", "AuditRecord", "AuditRecordBase", "AuditSuggestionRecord", "AuditSuggestionSummary",
    "AuditSummary", "AuditTargetStart", "AuditTargetSummary", "AuditToolCallRecord", "AuditTruncatedRecord",
    "JobAuditResult",
]

class AuditLines(WireModel):
    """A 1-based inclusive line range."""

    start: int
    end: int


class AuditPath(WireModel):
    """A project-relative POSIX path, or ``pathRejected: true`` when it could not be made one (never raw)."""

    path: str | None = None
    path_rejected: bool | None = None


class AuditTargetStart(AuditPath):
    """A target as offered at job start: its source path and line, the file's SHA-256 in the job's worktree
    (or ``hashSkipped``: ``missing``, ``too-large``, ``not-started``), the instruction's length and SHA-256;
    with a picture (issue 26): its SHA-256, size in bytes and whether it went to the model (``imageSent``),
    never the image."""

    index: int
    line: int | None = None
    sha256: str | None = None
    hash_skipped: Literal["missing", "too-large", "not-started"] | None = None
    instruction_chars: int
    instruction_sha256: str
    image_sha256: str | None = None
    image_bytes: int | None = None
    image_sent: bool | None = None


class AuditContextFile(AuditPath):
    sha256: str
    kind: str


class AuditRecordBase(WireModel):
    seq: int
    recorded_at_ms: int


class AuditJobStartRecord(AuditRecordBase):
    type: Literal["job_start"]
    job_id: str
    provider_id: str
    model_profile_id: str
    mode: str
    limits: dict[str, int]
    local_changes_included: bool
    targets: list[AuditTargetStart]
    context_files: list[AuditContextFile]
    context_files_omitted: int = 0


class AuditToolCallRecord(AuditPath, AuditRecordBase):
    """One completed tool call. Arguments are whitelisted: never contents, diffs or output."""

    type: Literal["tool_call"]
    turn: int
    call_id: str
    tool: str
    start_line: int | None = None
    end_line: int | None = None
    glob: str | None = None
    query: str | None = None
    max_results: int | None = None
    old_text_chars: int | None = None
    old_text_sha256: str | None = None
    new_text_chars: int | None = None
    new_text_sha256: str | None = None
    patch_chars: int | None = None
    patch_sha256: str | None = None
    paths: list[AuditPath] | None = None
    check_id: str | None = None
    ok: bool
    error_code: str | None = None
    retryable: bool | None = None
    duration_ms: int
    #: read_file: the lines it showed and the SHA-256 of the file bytes it served them from.
    served_lines: AuditLines | None = None
    content_sha256: str | None = None


class AuditCheckRecord(AuditRecordBase):
    type: Literal["check"]
    check_id: str
    status: str
    duration_ms: int
    exit_code: int | None = None


class AuditLimitRecord(AuditRecordBase):
    type: Literal["limit"]
    #: The limit's config name (``maxTurns``, ``jobTimeoutSec``, …) or ``other``.
    limit: str


class AuditTruncatedRecord(AuditRecordBase):
    """Stands for every record dropped past the bound (256), with counts of what was dropped."""

    type: Literal["truncated"]
    dropped: int
    dropped_tools: dict[str, int]
    dropped_failed: dict[str, int]


class AuditApplyRecord(AuditRecordBase):
    """An Apply (``apply``) or Revert (``revert``): the job's status after it, files, conflicting paths."""

    type: Literal["apply", "revert"]
    status: str
    file_count: int
    conflict_paths: list[AuditPath] | None = None
    error_code: str | None = None


class AuditExcerpt(AuditPath):
    start_line: int | None = None
    end_line: int | None = None
    sha256: str | None = None


class AuditSuggestionRecord(AuditRecordBase):
    """A suggestion-lane run (``job/suggest``): excerpts offered, breaker outcome, citation counts."""

    type: Literal["suggestion"]
    excerpts: list[AuditExcerpt]
    excerpts_omitted: int = 0
    breaker: str
    verified: int
    unverified: int
    outcome: str


class AuditTargetSummary(AuditPath):
    """Per target: did the agent read its offered file (``read``), a range with the offered line
    (``lineCovered``), before its first write (``readBeforeFirstWrite``), the same bytes it was offered
    (``contentSha256Match``, first read; absent without both hashes); ``lines``: the first read's range."""

    index: int
    line: int | None = None
    read: bool
    line_covered: bool
    read_before_first_write: bool
    content_sha256_match: bool | None = None
    lines: AuditLines | None = None


class AuditFirstWrite(WireModel):
    seq: int
    tool: str
    path: str | None = None


class AuditCheckSummary(WireModel):
    check_id: str
    status: str
    duration_ms: int
    exit_code: int | None = None


class AuditApplySummary(WireModel):
    type: Literal["apply", "revert"]
    status: str
    file_count: int
    conflict_paths: list[AuditPath] | None = None
    error_code: str | None = None


class AuditSuggestionSummary(WireModel):
    outcome: str
    breaker: str
    verified: int
    unverified: int


class AuditSummary(WireModel):
    """The ledger's derived summary (spotpatch_agent/audit/derive.py): recomputable from the records.
    ``outcome``: the job's status when its run ended (``auto-apply`` when the auto modes' Apply followed),
    the current status while it runs."""

    outcome: str
    error_code: str | None = None
    targets: list[AuditTargetSummary]
    first_write: AuditFirstWrite | None = None
    tool_counts: dict[str, int]
    failed_calls: dict[str, int]
    limits_hit: list[str]
    checks: list[AuditCheckSummary]
    applies: list[AuditApplySummary]
    suggestions: list[AuditSuggestionSummary]
    truncated: bool
    dropped_records: int
    audit_write_failed: bool


class AuditJobEndRecord(AuditSummary, AuditRecordBase):
    type: Literal["job_end"]


AuditRecord = TypeAliasType("AuditRecord", Annotated[
    AuditJobStartRecord | AuditToolCallRecord | AuditCheckRecord | AuditLimitRecord | AuditTruncatedRecord
    | AuditApplyRecord | AuditSuggestionRecord | AuditJobEndRecord, Field(discriminator="type")])


class JobAuditResult(WireModel):
    """The job's audit ledger (docs/design.md §13): the live ``summary`` (derived from every record) and the
    ordered, redacted ``records`` — no file contents, diffs, model text, instruction text or absolute paths."""

    job_id: str
    summary: AuditSummary
    records: list[AuditRecord]
