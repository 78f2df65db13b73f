"""Pydantic v2 models of the wire contract (docs/design.md §3, §4, §12).

camelCase on the wire (aliases), snake_case in Python. Everything that comes from a client or from
trusted configuration forbids unknown keys. ``dump()`` gives the wire dict of any model.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, TypeAdapter, field_validator, model_validator
from pydantic.alias_generators import to_camel
from typing_extensions import TypeAliasType

from spotpatch_agent.protocol.errors import ErrorCode, ToolErrorCode
from spotpatch_agent.protocol.limits import LIMITS


class WireModel(BaseModel):
    """Base of every model sent by the engine (unknown keys ignored on read)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, frozen=False, defer_build=True)

    def dump(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True, mode="json", exclude_none=True)


class InModel(WireModel):
    """Base of every model received from a client or trusted config: unknown keys are errors."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", defer_build=True)


# ---------------------------------------------------------------- trusted configuration (§12)

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,63}$")


#: The output cap sent with every turn and the probe when a model profile gives no ``maxOutputTokens``.
DEFAULT_MAX_OUTPUT_TOKENS = 8192
#: Largest ``maxOutputTokens`` a model profile may give.
MAX_OUTPUT_TOKENS_CAP = 262_144


class ModelProfile(InModel):
    id: str = Field(pattern=_ID.pattern)
    model: str = Field(min_length=1, max_length=200)
    display_name: str = Field(min_length=1, max_length=120)
    #: The output cap of every turn and of the probe, in tokens (Chat ``max_completion_tokens``, Responses
    #: ``max_output_tokens``); absent: :data:`DEFAULT_MAX_OUTPUT_TOKENS`; ``0``: no cap is sent (for a relay
    #: that rejects the field — the engine's own per-turn text budget still ends the turn).
    max_output_tokens: StrictInt | None = Field(default=None, ge=0, le=MAX_OUTPUT_TOKENS_CAP)

    @property
    def output_cap(self) -> int | None:
        """The cap to send: ``maxOutputTokens``, its default when absent, None when it is ``0``."""
        if self.max_output_tokens is None:
            return DEFAULT_MAX_OUTPUT_TOKENS
        return self.max_output_tokens or None


class ProviderProfile(InModel):
    id: str = Field(pattern=_ID.pattern)
    display_name: str = Field(min_length=1, max_length=120)
    api: Literal["chat", "responses"] = "chat"
    base_url: str = Field(min_length=1, max_length=2000)
    api_key_env: str = Field(pattern=_ENV_NAME.pattern)
    headers: dict[str, str] = Field(default_factory=dict)
    models: list[ModelProfile] = Field(min_length=1)

    @field_validator("headers")
    @classmethod
    def _http_headers(cls, v: dict[str, str]) -> dict[str, str]:
        for name, value in v.items():
            if not re.fullmatch(r"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}", name):
                raise ValueError("header names must be HTTP tokens (letters, digits, '-', …)")
            if not re.fullmatch(r"[\x20-\x7e]{0,4096}", value):
                raise ValueError("header values must be printable ASCII (at most 4096 characters)")
        return v

    @field_validator("base_url")
    @classmethod
    def _http_url(cls, v: str) -> str:
        if not re.match(r"^https?://", v):
            raise ValueError("baseUrl must start with http:// or https://")
        return v.rstrip("/")


class CheckConfig(InModel):
    id: str = Field(pattern=_ID.pattern)
    name: str = Field(min_length=1, max_length=120)
    command: str = Field(min_length=1)
    args: list[str] = Field(default_factory=list)
    required: bool = True
    timeout_sec: int | None = Field(default=None, ge=1)
    #: Extra engine variables the check receives (docs/design.md §9 allowlist); only ``NODE_OPTIONS`` may be listed.
    pass_env: list[Literal["NODE_OPTIONS"]] = Field(default_factory=list)
    #: Per-check opt-out of the sandbox's network rule (trusted config only): the check may use the network.
    network: StrictBool = False
    #: Per-check extra paths the sandboxed check may read (absolute, or ``~/…``); secret stores are refused.
    read_paths: list[str] = Field(default_factory=list, max_length=32)

    @field_validator("pass_env", mode="before")
    @classmethod
    def _no_credentials(cls, v: Any) -> Any:
        for name in v if isinstance(v, list) else ():
            if isinstance(name, str) and re.search(r"KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL|AUTH", name, re.I):
                raise ValueError(f"passEnv: {name!r} looks like a credential; checks never receive credentials")
        if isinstance(v, list) and len(v) != len(set(map(str, v))):
            raise ValueError("passEnv: a variable is listed twice")
        return v

    @field_validator("read_paths")
    @classmethod
    def _no_secret_stores(cls, v: list[str]) -> list[str]:
        from spotpatch_agent.checks.sandbox.plan import read_path_problem  # the sandbox's own rule, loaded here

        for raw in v:
            problem = read_path_problem(raw)
            if problem is not None:
                raise ValueError(f"readPaths: {raw[:200]!r} {problem}")
        return v


def _limit(name: str) -> Any:
    """A ``Limits`` field: absent or null takes the default; the schema shows default, 1 and the hard cap."""
    default, cap = LIMITS[name]
    return Field(default=None, json_schema_extra={"default": default, "minimum": 1, "maximum": cap})


class Limits(InModel):
    """Every key optional; an absent key takes its default, a given one must be 1..hard cap."""

    max_targets: StrictInt | None = _limit("maxTargets")
    max_instruction_chars: StrictInt | None = _limit("maxInstructionChars")
    max_turns: StrictInt | None = _limit("maxTurns")
    max_tool_calls: StrictInt | None = _limit("maxToolCalls")
    max_repeated_failed_calls: StrictInt | None = _limit("maxRepeatedFailedCalls")
    job_timeout_sec: StrictInt | None = _limit("jobTimeoutSec")
    tool_timeout_sec: StrictInt | None = _limit("toolTimeoutSec")
    check_timeout_sec: StrictInt | None = _limit("checkTimeoutSec")
    read_max_lines: StrictInt | None = _limit("readMaxLines")
    read_max_bytes: StrictInt | None = _limit("readMaxBytes")
    list_max_results: StrictInt | None = _limit("listMaxResults")
    search_max_results: StrictInt | None = _limit("searchMaxResults")
    editable_file_max_bytes: StrictInt | None = _limit("editableFileMaxBytes")
    max_changed_files: StrictInt | None = _limit("maxChangedFiles")
    max_diff_bytes: StrictInt | None = _limit("maxDiffBytes")
    local_snapshot_max_files: StrictInt | None = _limit("localSnapshotMaxFiles")
    local_snapshot_max_bytes: StrictInt | None = _limit("localSnapshotMaxBytes")
    check_output_max_bytes: StrictInt | None = _limit("checkOutputMaxBytes")
    write_jobs_per_project: StrictInt | None = _limit("writeJobsPerProject")

    @model_validator(mode="after")
    def _within_caps(self) -> Limits:
        for field in type(self).model_fields:
            value = getattr(self, field)
            name = to_camel(field)
            default, cap = LIMITS[name]
            if value is None:
                setattr(self, field, default)
            elif not 1 <= value <= cap:
                raise ValueError(f"limits.{name} must be between 1 and {cap}")
        return self

    def get(self, name: str) -> int:
        """The effective value of a limit by its wire name (e.g. ``"maxTurns"``)."""
        return getattr(self, _snake(name))


def _snake(name: str) -> str:
    return re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), name)


class Modes(InModel):
    """Which apply modes besides ``review`` the project allows (docs/design.md §10); JSON booleans only."""

    auto: StrictBool = False
    trusted_auto: StrictBool = False


class Suggestions(InModel):
    """The read-only suggestion lane (docs/design.md §14, docs/configuration.md ``suggestions``): off unless
    ``enabled`` is JSON ``true``. ``timeoutSec``: wall-clock seconds for the one request, 1..600 (default
    60); ``maxOutputBytes``: UTF-8 bytes of answer read before the stream is closed, 1024..262144 (default
    16384)."""

    enabled: StrictBool = False
    timeout_sec: StrictInt = Field(default=60, ge=1, le=600)
    max_output_bytes: StrictInt = Field(default=16384, ge=1024, le=262_144)


#: Default and largest ``audit.keep``: ledger files kept per repository.
AUDIT_KEEP_DEFAULT = 100
AUDIT_KEEP_MAX = 10_000


class AuditConfig(InModel):
    """The audit ledger's persistence (docs/design.md §13). ``persist``: also write each job's ledger as
    JSONL under ``<git-common-dir>/spotpatch/audit/`` (default false: memory only, ``job/audit``);
    ``keep``: ledger files kept there, the oldest removed beyond it (1..10000, default 100)."""

    persist: StrictBool = False
    keep: StrictInt = Field(default=AUDIT_KEEP_DEFAULT, ge=1, le=AUDIT_KEEP_MAX)


class TrustedConfig(InModel):
    """The trusted configuration (docs/design.md §12): Vite plugin options or ``spotpatch.config.json``."""

    providers: list[ProviderProfile] = Field(default_factory=list)
    checks: list[CheckConfig] = Field(default_factory=list)
    limits: Limits = Field(default_factory=Limits)
    modes: Modes = Field(default_factory=Modes)
    #: When checks cannot be confined (no sandbox on this platform): ``required`` (default) fails the job
    #: closed before the check runs; ``warn`` runs it unconfined and every surface says so.
    sandbox: Literal["required", "warn"] = "required"
    #: The read-only suggestion lane for models that cannot call tools (off by default).
    suggestions: Suggestions = Field(default_factory=Suggestions)
    #: The ``"$schema"`` line of ``spotpatch.config.json`` (editors complete and validate the file with
    #: protocol/spotpatch.config.schema.json); accepted in the file and in ``initialize``, and ignored.
    json_schema: str | None = Field(default=None, alias="$schema", max_length=2048)
    audit: AuditConfig = Field(default_factory=AuditConfig)

    @model_validator(mode="after")
    def _unique_ids(self) -> TrustedConfig:
        seen: set[str] = set()
        for p in self.providers:
            for m in p.models:
                if m.id in seen:
                    raise ValueError(f"model profile id {m.id!r} is used twice")
                seen.add(m.id)
        ids = [c.id for c in self.checks]
        if len(ids) != len(set(ids)):
            raise ValueError("check ids must be unique")
        return self

    def find_model(self, model_profile_id: str) -> tuple[ProviderProfile, ModelProfile] | None:
        for p in self.providers:
            for m in p.models:
                if m.id == model_profile_id:
                    return p, m
        return None


# ---------------------------------------------------------------- annotation (§4)

_ALLOWED_ATTR = re.compile(r"^(id|class|role|aria-[a-z0-9-]+|data-testid|name|type|href|alt|title)$")


class SourceLocation(InModel):
    file: str = Field(min_length=1, max_length=1024)
    line: int = Field(ge=1)
    column: int = Field(default=1, ge=1)
    component: str | None = Field(default=None, max_length=200)


class Rect(InModel):
    x: float
    y: float
    width: float
    height: float


class ElementInfo(InModel):
    tag_name: str = Field(min_length=1, max_length=64)
    selector: str | None = Field(default=None, max_length=1000)
    text: str = Field(default="", max_length=500)
    attributes: dict[str, str] = Field(default_factory=dict)
    rect: Rect | None = None

    @field_validator("attributes")
    @classmethod
    def _allowed_attributes(cls, v: dict[str, str]) -> dict[str, str]:
        for key, value in v.items():
            if not _ALLOWED_ATTR.match(key):
                raise ValueError("only the attributes id, class, role, aria-*, data-testid, name, type, href, alt, title are allowed")
            if len(value) > 500:
                raise ValueError("an attribute value is longer than 500 characters")
        return v


class UsageSite(InModel):
    """Where an enclosing component instance is used: ``component`` is the used component's name (when
    known), ``file:line:column`` the start of its usage tag (project-relative, never ``node_modules``)."""

    component: str | None = Field(default=None, max_length=200)
    file: str = Field(min_length=1, max_length=1024)
    line: int = Field(ge=1)
    column: int = Field(default=1, ge=1)


class Target(InModel):
    index: int = Field(ge=1)
    instruction: str = Field(min_length=1, max_length=LIMITS["maxInstructionChars"][1])
    source: SourceLocation | None = None
    #: The component usage chain of the picked element, innermost first: the usage site of the component
    #: that renders the element, then of the component using that one, … up to the page (at most 5).
    usage_chain: list[UsageSite] = Field(default_factory=list, max_length=5)
    #: The picked element; absent for a target given as a source location only (``spotpatch-agent run``).
    element: ElementInfo | None = None


class SpotAnnotation(InModel):
    annotation_id: str = Field(min_length=1, max_length=128)
    page_url: str = Field(default="/", max_length=2000)
    targets: list[Target] = Field(min_length=1, max_length=LIMITS["maxTargets"][1])

    @field_validator("page_url")
    @classmethod
    def _path_only(cls, v: str) -> str:
        if not v.startswith("/") or v.startswith("//"):
            raise ValueError("pageUrl must be a path and query only (start with a single '/')")
        return v

    @model_validator(mode="after")
    def _indexes(self) -> SpotAnnotation:
        if [t.index for t in self.targets] != list(range(1, len(self.targets) + 1)):
            raise ValueError("target indexes must be 1, 2, 3, … in order")
        return self


# ---------------------------------------------------------------- methods (§3)

#: Named aliases get their own ``$defs`` entry in the JSON Schema (and one type on the Node side).
ApplyMode = TypeAliasType("ApplyMode", Literal["review", "auto", "trusted-auto"])
JobStatus = TypeAliasType("JobStatus", Literal[
    "preparing", "running", "validating", "awaiting-review", "applying", "applied",
    "reverting", "reverted", "failed", "cancelled", "closed",
])
TERMINAL_STATUSES: frozenset[str] = frozenset({"failed", "cancelled", "closed", "reverted"})


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


class EmptyParams(InModel):
    pass


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
    model_profile_id: str = Field(min_length=1, max_length=64)
    apply_mode: ApplyMode = "review"
    #: Only with ``applyMode: "trusted-auto"`` and only the JSON literal ``true`` (docs/design.md §10).
    trusted_fast_mode_consent: StrictBool | None = None
    local_changes_consent: bool | None = None


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


# ---------------------------------------------------------------- events (§3)

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


class JobListResult(WireModel):
    """Every job of this engine session, oldest first."""

    jobs: list[JobSnapshot]


class JobEventsParams(InModel):
    job_id: str = Field(min_length=1, max_length=64)
    after_seq: int = Field(default=0, ge=0)


class JobEventsResult(WireModel):
    """Every event of the job with ``seq > afterSeq``, in order (for clients that reconnect)."""

    job_id: str
    events: list[JobEventNotification]
    last_seq: int


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
    endpoint listed (at most 50), absent when it was not asked or cannot list models."""

    model_profile_id: str
    ok: bool
    tool_calling: bool
    cached: bool
    duration_ms: int
    message: str
    error: ErrorInfo | None = None
    source: Literal["probe", "inline"] = "probe"
    models: list[str] | None = None


# ---------------------------------------------------------------- audit ledger (§13, spotpatch_agent.audit)


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
    (or ``hashSkipped``: ``missing``, ``too-large``, ``not-started``), the instruction's length and SHA-256."""

    index: int
    line: int | None = None
    sha256: str | None = None
    hash_skipped: Literal["missing", "too-large", "not-started"] | None = None
    instruction_chars: int
    instruction_sha256: str


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


# ---------------------------------------------------------------- suggestion lane (§14)


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


# ---------------------------------------------------------------- notifications (§3)


class CancelRequestParams(InModel):
    """``$/cancelRequest``: cancel the in-flight request with this JSON-RPC ``id``."""

    id: int | str


class LogTraceParams(WireModel):
    """Sanitized diagnostics for the client's log (no keys, absolute paths or file contents)."""

    message: str
    verbose: str | None = None


# ---------------------------------------------------------------- per-method names (catalog.py)
# One shape often serves several methods; these names only give each method its *Params / *Result.

InitializedParams = EmptyParams
ShutdownParams = EmptyParams
HealthGetParams = EmptyParams
HealthGetResult = RepoHealth
ProviderListParams = EmptyParams
ProviderProbeResult = ProbeResult
JobCreateResult = JobSnapshot
JobGetParams = JobCancelParams = JobApplyParams = JobRevertParams = JobCloseParams = JobIdParams
JobGetResult = JobCancelResult = JobApplyResult = JobRevertResult = JobCloseResult = JobSnapshot
JobListParams = EmptyParams
JobDiffParams = JobAuditParams = JobSuggestParams = JobIdParams
JobSuggestResult = SuggestionResult
JobDiffResult = DiffResult
