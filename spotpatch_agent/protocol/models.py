"""Pydantic v2 models of the wire contract (docs/design.md §3, §4, §12, §13, §14): one name space, loaded by concern.

camelCase on the wire (aliases), snake_case in Python. Everything that comes from a client or from
trusted configuration forbids unknown keys. ``dump()`` gives the wire dict of any model.

The models live in one module per concern; this module re-exports every public name and loads a concern's
module the first time one of its names is asked for, so ``serve`` answering ``initialize`` never creates
the audit, suggestion or event models (cold start, issue 17)::

    base        WireModel (engine output), InModel (client and config input)
    config      TrustedConfig and its parts: providers, model profiles, checks, limits, modes, suggestions, audit
    annotation  SpotAnnotation, Target, TargetImage, SourceLocation, UsageSite, ElementInfo, Rect
    jobs        prompt/render, job/create, the job/* params, JobSnapshot, DiffResult, ErrorInfo, FileStat
    session     initialize, session/get, health/get, EmptyParams, $/cancelRequest, $/logTrace
    events      the job/event kinds, JobEventNotification, JobEvent(), JobEventsResult
    providers   provider/list, provider/probe
    audit       job/audit: the ledger's records and summary
    suggestion  job/suggest: the suggestion lane's draft

Inside the package, import from the concern's module; this module keeps ``from
spotpatch_agent.protocol.models import X`` working for every name (and the per-method names below).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from spotpatch_agent.protocol.lazy import lazy_exports

if TYPE_CHECKING:
    from spotpatch_agent.protocol.annotation import (
        ElementInfo as ElementInfo,
    )
    from spotpatch_agent.protocol.annotation import (
        Rect as Rect,
    )
    from spotpatch_agent.protocol.annotation import (
        SourceLocation as SourceLocation,
    )
    from spotpatch_agent.protocol.annotation import (
        SpotAnnotation as SpotAnnotation,
    )
    from spotpatch_agent.protocol.annotation import (
        Target as Target,
    )
    from spotpatch_agent.protocol.annotation import (
        TargetImage as TargetImage,
    )
    from spotpatch_agent.protocol.annotation import (
        UsageSite as UsageSite,
    )
    from spotpatch_agent.protocol.audit import (
        AuditApplyRecord as AuditApplyRecord,
    )
    from spotpatch_agent.protocol.audit import (
        AuditApplySummary as AuditApplySummary,
    )
    from spotpatch_agent.protocol.audit import (
        AuditCheckRecord as AuditCheckRecord,
    )
    from spotpatch_agent.protocol.audit import (
        AuditCheckSummary as AuditCheckSummary,
    )
    from spotpatch_agent.protocol.audit import (
        AuditContextFile as AuditContextFile,
    )
    from spotpatch_agent.protocol.audit import (
        AuditExcerpt as AuditExcerpt,
    )
    from spotpatch_agent.protocol.audit import (
        AuditFirstWrite as AuditFirstWrite,
    )
    from spotpatch_agent.protocol.audit import (
        AuditJobEndRecord as AuditJobEndRecord,
    )
    from spotpatch_agent.protocol.audit import (
        AuditJobStartRecord as AuditJobStartRecord,
    )
    from spotpatch_agent.protocol.audit import (
        AuditLimitRecord as AuditLimitRecord,
    )
    from spotpatch_agent.protocol.audit import (
        AuditLines as AuditLines,
    )
    from spotpatch_agent.protocol.audit import (
        AuditPath as AuditPath,
    )
    from spotpatch_agent.protocol.audit import (
        AuditRecord as AuditRecord,
    )
    from spotpatch_agent.protocol.audit import (
        AuditRecordBase as AuditRecordBase,
    )
    from spotpatch_agent.protocol.audit import (
        AuditSuggestionRecord as AuditSuggestionRecord,
    )
    from spotpatch_agent.protocol.audit import (
        AuditSuggestionSummary as AuditSuggestionSummary,
    )
    from spotpatch_agent.protocol.audit import (
        AuditSummary as AuditSummary,
    )
    from spotpatch_agent.protocol.audit import (
        AuditTargetStart as AuditTargetStart,
    )
    from spotpatch_agent.protocol.audit import (
        AuditTargetSummary as AuditTargetSummary,
    )
    from spotpatch_agent.protocol.audit import (
        AuditToolCallRecord as AuditToolCallRecord,
    )
    from spotpatch_agent.protocol.audit import (
        AuditTruncatedRecord as AuditTruncatedRecord,
    )
    from spotpatch_agent.protocol.audit import (
        JobAuditResult as JobAuditResult,
    )
    from spotpatch_agent.protocol.base import (
        InModel as InModel,
    )
    from spotpatch_agent.protocol.base import (
        WireModel as WireModel,
    )
    from spotpatch_agent.protocol.config import (
        AUDIT_KEEP_DEFAULT as AUDIT_KEEP_DEFAULT,
    )
    from spotpatch_agent.protocol.config import (
        AUDIT_KEEP_MAX as AUDIT_KEEP_MAX,
    )
    from spotpatch_agent.protocol.config import (
        DEFAULT_MAX_OUTPUT_TOKENS as DEFAULT_MAX_OUTPUT_TOKENS,
    )
    from spotpatch_agent.protocol.config import (
        MAX_OUTPUT_TOKENS_CAP as MAX_OUTPUT_TOKENS_CAP,
    )
    from spotpatch_agent.protocol.config import (
        AuditConfig as AuditConfig,
    )
    from spotpatch_agent.protocol.config import (
        CheckConfig as CheckConfig,
    )
    from spotpatch_agent.protocol.config import (
        CheckLimits as CheckLimits,
    )
    from spotpatch_agent.protocol.config import (
        Limits as Limits,
    )
    from spotpatch_agent.protocol.config import (
        ModelProfile as ModelProfile,
    )
    from spotpatch_agent.protocol.config import (
        Modes as Modes,
    )
    from spotpatch_agent.protocol.config import (
        ProviderProfile as ProviderProfile,
    )
    from spotpatch_agent.protocol.config import (
        Suggestions as Suggestions,
    )
    from spotpatch_agent.protocol.config import (
        TrustedConfig as TrustedConfig,
    )
    from spotpatch_agent.protocol.events import (
        JOB_EVENT_ADAPTER as JOB_EVENT_ADAPTER,
    )
    from spotpatch_agent.protocol.events import (
        ActivityEvent as ActivityEvent,
    )
    from spotpatch_agent.protocol.events import (
        AnyJobEvent as AnyJobEvent,
    )
    from spotpatch_agent.protocol.events import (
        CheckEvent as CheckEvent,
    )
    from spotpatch_agent.protocol.events import (
        DiffEvent as DiffEvent,
    )
    from spotpatch_agent.protocol.events import (
        ErrorEvent as ErrorEvent,
    )
    from spotpatch_agent.protocol.events import (
        EventKind as EventKind,
    )
    from spotpatch_agent.protocol.events import (
        JobEvent as JobEvent,
    )
    from spotpatch_agent.protocol.events import (
        JobEventNotification as JobEventNotification,
    )
    from spotpatch_agent.protocol.events import (
        JobEventsResult as JobEventsResult,
    )
    from spotpatch_agent.protocol.events import (
        MessageEvent as MessageEvent,
    )
    from spotpatch_agent.protocol.events import (
        StatusEvent as StatusEvent,
    )
    from spotpatch_agent.protocol.jobs import (
        TERMINAL_STATUSES as TERMINAL_STATUSES,
    )
    from spotpatch_agent.protocol.jobs import (
        ApplyMode as ApplyMode,
    )
    from spotpatch_agent.protocol.jobs import (
        DiffResult as DiffResult,
    )
    from spotpatch_agent.protocol.jobs import (
        ErrorInfo as ErrorInfo,
    )
    from spotpatch_agent.protocol.jobs import (
        FileStat as FileStat,
    )
    from spotpatch_agent.protocol.jobs import (
        JobCreateParams as JobCreateParams,
    )
    from spotpatch_agent.protocol.jobs import (
        JobEventsParams as JobEventsParams,
    )
    from spotpatch_agent.protocol.jobs import (
        JobIdParams as JobIdParams,
    )
    from spotpatch_agent.protocol.jobs import (
        JobListResult as JobListResult,
    )
    from spotpatch_agent.protocol.jobs import (
        JobSnapshot as JobSnapshot,
    )
    from spotpatch_agent.protocol.jobs import (
        JobStatus as JobStatus,
    )
    from spotpatch_agent.protocol.jobs import (
        PromptRenderParams as PromptRenderParams,
    )
    from spotpatch_agent.protocol.jobs import (
        PromptRenderResult as PromptRenderResult,
    )
    from spotpatch_agent.protocol.jobs import (
        PromptTarget as PromptTarget,
    )
    from spotpatch_agent.protocol.jobs import (
        PromptWarning as PromptWarning,
    )
    from spotpatch_agent.protocol.jobs import (
        PromptWarningCode as PromptWarningCode,
    )
    from spotpatch_agent.protocol.providers import (
        ProbeResult as ProbeResult,
    )
    from spotpatch_agent.protocol.providers import (
        ProviderInfo as ProviderInfo,
    )
    from spotpatch_agent.protocol.providers import (
        ProviderListResult as ProviderListResult,
    )
    from spotpatch_agent.protocol.providers import (
        ProviderModelInfo as ProviderModelInfo,
    )
    from spotpatch_agent.protocol.providers import (
        ProviderProbeParams as ProviderProbeParams,
    )
    from spotpatch_agent.protocol.session import (
        AgentChannelInfo as AgentChannelInfo,
    )
    from spotpatch_agent.protocol.session import (
        CancelRequestParams as CancelRequestParams,
    )
    from spotpatch_agent.protocol.session import (
        Capabilities as Capabilities,
    )
    from spotpatch_agent.protocol.session import (
        ChecksSandbox as ChecksSandbox,
    )
    from spotpatch_agent.protocol.session import (
        ClientInfo as ClientInfo,
    )
    from spotpatch_agent.protocol.session import (
        EmptyParams as EmptyParams,
    )
    from spotpatch_agent.protocol.session import (
        HealthCounts as HealthCounts,
    )
    from spotpatch_agent.protocol.session import (
        HealthDetail as HealthDetail,
    )
    from spotpatch_agent.protocol.session import (
        InitializeParams as InitializeParams,
    )
    from spotpatch_agent.protocol.session import (
        InitializeResult as InitializeResult,
    )
    from spotpatch_agent.protocol.session import (
        LogTraceParams as LogTraceParams,
    )
    from spotpatch_agent.protocol.session import (
        RecoveryReport as RecoveryReport,
    )
    from spotpatch_agent.protocol.session import (
        RepoHealth as RepoHealth,
    )
    from spotpatch_agent.protocol.session import (
        ServerInfo as ServerInfo,
    )
    from spotpatch_agent.protocol.session import (
        SessionGetResult as SessionGetResult,
    )
    from spotpatch_agent.protocol.session import (
        SessionLimits as SessionLimits,
    )
    from spotpatch_agent.protocol.suggestion import (
        SuggestionCitation as SuggestionCitation,
    )
    from spotpatch_agent.protocol.suggestion import (
        SuggestionDiffCheck as SuggestionDiffCheck,
    )
    from spotpatch_agent.protocol.suggestion import (
        SuggestionExcerpt as SuggestionExcerpt,
    )
    from spotpatch_agent.protocol.suggestion import (
        SuggestionResult as SuggestionResult,
    )

#: Concern module → the public names it defines (each module's ``__all__``; a test keeps them equal).
MODULES: dict[str, tuple[str, ...]] = {
    "base": ("InModel", "WireModel"),
    "config": ("AUDIT_KEEP_DEFAULT", "AUDIT_KEEP_MAX", "DEFAULT_MAX_OUTPUT_TOKENS", "MAX_OUTPUT_TOKENS_CAP",
               "AuditConfig", "CheckConfig", "CheckLimits", "Limits", "ModelProfile", "Modes", "ProviderProfile",
               "Suggestions", "TrustedConfig"),
    "annotation": ("MAX_IMAGE_BYTES", "MAX_JOB_IMAGE_BYTES", "AreaElement", "AreaInfo", "ElementInfo", "Rect",
                   "SourceLocation", "SpotAnnotation", "Target", "TargetImage", "UsageSite"),
    "jobs": ("TERMINAL_STATUSES", "ApplyMode", "DiffResult", "ErrorInfo", "FileStat", "JobCreateParams",
             "JobEventsParams", "JobIdParams", "JobListResult", "JobSnapshot", "JobStatus", "PromptRenderParams",
             "PromptRenderResult", "PromptTarget", "PromptWarning", "PromptWarningCode"),
    "session": ("AgentChannelInfo", "CancelRequestParams", "Capabilities", "ChecksSandbox", "ClientInfo",
                "EmptyParams", "HealthCounts", "HealthDetail", "InitializeParams", "InitializeResult",
                "LogTraceParams", "RecoveryReport", "RepoHealth", "ServerInfo", "SessionGetResult", "SessionLimits"),
    "events": ("JOB_EVENT_ADAPTER", "ActivityEvent", "AnyJobEvent", "CheckEvent", "DiffEvent", "ErrorEvent",
               "EventKind", "JobEvent", "JobEventNotification", "JobEventsResult", "MessageEvent", "StatusEvent"),
    "providers": ("ProbeResult", "ProviderInfo", "ProviderListResult", "ProviderModelInfo", "ProviderProbeParams"),
    "audit": ("AuditApplyRecord", "AuditApplySummary", "AuditCheckRecord", "AuditCheckSummary", "AuditContextFile",
              "AuditExcerpt", "AuditFirstWrite", "AuditJobEndRecord", "AuditJobStartRecord", "AuditLimitRecord",
              "AuditLines", "AuditPath", "AuditRecord", "AuditRecordBase", "AuditSuggestionRecord",
              "AuditSuggestionSummary", "AuditSummary", "AuditTargetStart", "AuditTargetSummary",
              "AuditToolCallRecord", "AuditTruncatedRecord", "JobAuditResult"),
    "suggestion": ("SuggestionCitation", "SuggestionDiffCheck", "SuggestionExcerpt", "SuggestionResult"),
}

# ---------------------------------------------------------------- per-method names (catalog.py)
#: One shape often serves several methods; these names only give each method its *Params / *Result.
PER_METHOD: dict[str, str] = {
    "InitializedParams": "EmptyParams",
    "ShutdownParams": "EmptyParams",
    "HealthGetParams": "EmptyParams",
    "HealthGetResult": "RepoHealth",
    "ProviderListParams": "EmptyParams",
    "ProviderProbeResult": "ProbeResult",
    "JobCreateResult": "JobSnapshot",
    **dict.fromkeys(("JobGetParams", "JobCancelParams", "JobApplyParams", "JobRevertParams", "JobCloseParams"),
                    "JobIdParams"),
    **dict.fromkeys(("JobGetResult", "JobCancelResult", "JobApplyResult", "JobRevertResult", "JobCloseResult"),
                    "JobSnapshot"),
    "JobListParams": "EmptyParams",
    **dict.fromkeys(("JobDiffParams", "JobAuditParams", "JobSuggestParams"), "JobIdParams"),
    "JobSuggestResult": "SuggestionResult",
    "JobDiffResult": "DiffResult",
}

_HOME = {name: module for module, names in MODULES.items() for name in names}

__all__ = sorted([*_HOME, *PER_METHOD])  # noqa: PLE0605 - built from MODULES (a test keeps it exact)


# Load the concern module that defines a name (PEP 562) and keep the value here.
__getattr__ = lazy_exports("spotpatch_agent.protocol", globals(), _HOME, aliases=PER_METHOD)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
