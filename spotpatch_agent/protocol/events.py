"""``job/event`` (docs/design.md §3): one event kind per model, tagged by ``kind``, and ``job/events``'
replay result. :func:`JobEvent` builds an event from snake_case fields (engine/events.py)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, TypeAdapter
from pydantic.alias_generators import to_camel
from typing_extensions import TypeAliasType

from spotpatch_agent.protocol.base import WireModel
from spotpatch_agent.protocol.errors import ToolErrorCode
from spotpatch_agent.protocol.jobs import ErrorInfo, FileStat, JobStatus

__all__ = [
    "JOB_EVENT_ADAPTER", "ActivityEvent", "AnyJobEvent", "CheckEvent", "DiffEvent", "ErrorEvent", "EventKind",
    "JobEvent", "JobEventNotification", "JobEventsResult", "MessageEvent", "StatusEvent",
]

EventKind = Literal["status", "activity", "message", "check", "diff", "error"]


class _Event(WireModel):
    """Common head of every ``job/event``: ``{jobId, seq, at, kind}``. ``seq`` starts at 1 per job.

    Built by the engine from keyword fields (``JobEvent``), so a field that does not belong to the kind is
    an engine bug and is rejected (``extra="forbid"``)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", defer_build=True)

    job_id: str
    seq: int = Field(ge=1)
    #: ISO-8601 UTC with milliseconds, e.g. ``2026-11-30T09:56:33.401Z``.
    at: str


class StatusEvent(_Event):
    """The job's status changed; ``message`` is the final model text, the failure or the refusal reason."""

    kind: Literal["status"]
    status: JobStatus
    message: str | None = None


class ActivityEvent(_Event):
    """A tool call started (``phase: started``) or finished (``ok``, ``durationMs``, and ``errorCode`` +
    ``retryable`` when not ok). ``path`` is the relative file the call was about, when there is one."""

    kind: Literal["activity"]
    phase: Literal["started", "finished"]
    tool: str
    tool_call_id: str
    turn: int = Field(ge=1)
    path: str | None = None
    ok: bool | None = None
    duration_ms: int | None = Field(default=None, ge=0)
    error_code: ToolErrorCode | None = None
    retryable: bool | None = None


class MessageEvent(_Event):
    """Bounded model text of one turn (at most 4000 characters)."""

    kind: Literal["message"]
    text: str
    turn: int | None = Field(default=None, ge=1)


class CheckEvent(_Event):
    """A check's final result for this change (docs/design.md §9, §10), emitted while the job is ``validating``:
    one per required check (reused from the model's ``run_check`` on the final version, or run by the
    host) and per non-required check the model ran on the final version. ``ok`` is true only for
    ``passed``. In ``trusted-auto`` every configured check is reported ``skipped`` (never run)."""

    kind: Literal["check"]
    check_id: str
    name: str
    status: Literal["passed", "failed", "timed-out", "skipped"]
    ok: bool
    duration_ms: int = Field(ge=0)
    #: Whether the trusted config marks the check required (a failed required check fails the job).
    required: bool = True
    #: The check's output: cleaned and bounded by ``checkOutputMaxBytes``, then redacted and cut to
    #: 4000 characters in the event.
    output: str | None = None
    #: How the check ran: ``confined`` (in the sandbox) or ``unconfined`` (``sandbox: "warn"`` and no
    #: sandbox available); absent when it did not run (``skipped``).
    sandbox: Literal["confined", "unconfined"] | None = None
    #: True when the check ran with network access (its trusted ``network: true``); absent when skipped.
    network: bool | None = None


class DiffEvent(_Event):
    """The job's reviewable diff is ready (or a failed job kept one): its files, not its text."""

    kind: Literal["diff"]
    files: list[FileStat]


class ErrorEvent(_Event):
    """The job failed with this error; a ``status: failed`` event follows."""

    kind: Literal["error"]
    error: ErrorInfo


#: ``job/event`` params: one of the event kinds, tagged by ``kind`` (docs/design.md §3).
JobEventNotification = TypeAliasType(
    "JobEventNotification",
    Annotated[StatusEvent | ActivityEvent | MessageEvent | CheckEvent | DiffEvent | ErrorEvent,
              Field(discriminator="kind")],
)
AnyJobEvent = StatusEvent | ActivityEvent | MessageEvent | CheckEvent | DiffEvent | ErrorEvent
JOB_EVENT_ADAPTER: TypeAdapter[AnyJobEvent] = TypeAdapter(JobEventNotification, config=ConfigDict(defer_build=True))


def JobEvent(**fields: Any) -> AnyJobEvent:  # noqa: N802 - the builder's name engine/events.py imports
    """Build one ``job/event`` payload from snake_case fields: ``JobEvent(job_id=…, seq=…, at=…, kind=…, …)``.

    Returns the kind's model (``.dump()`` gives the wire dict). Raises ``pydantic.ValidationError`` for an
    unknown kind or a field the kind does not have."""
    return JOB_EVENT_ADAPTER.validate_python(fields)


class JobEventsResult(WireModel):
    """Every event of the job with ``seq > afterSeq``, in order (for clients that reconnect)."""

    job_id: str
    events: list[JobEventNotification]
    last_seq: int
