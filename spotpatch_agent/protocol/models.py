"""Pydantic v2 models of the wire contract (docs/design.md §3, §4, §12, §13, §14): one name space, loaded by concern.

camelCase on the wire (aliases), snake_case in Python. Everything that comes from a client or from
trusted configuration forbids unknown keys. ``dump()`` gives the wire dict of any model.

The models live in one module per concern; this module re-exports every public name and loads a concern's
module the first time one of its names is asked for, so ``serve`` answering ``initialize`` never creates
the audit, suggestion or event models (cold start, issue 17)::

    base        WireModel (engine output), InModel (client and config input)
    config      TrustedConfig and its parts: providers, model profiles, checks, limits, modes, suggestions, audit
    annotation  SpotAnnotation, Target, SourceLocation, UsageSite, ElementInfo, Rect
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

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from spotpatch_agent.protocol.annotation import ElementInfo, Rect, SourceLocation, SpotAnnotation, Target, UsageSite
    from spotpatch_agent.protocol.audit import (
        AuditApplyRecord,
        AuditApplySummary,
        AuditCheckRecord,
        AuditCheckSummary,
        AuditContextFile,
        AuditExcerpt,
        AuditFirstWrite,
        AuditJobEndRecord,
        AuditJobStartRecord,
        AuditLimitRecord,
        AuditLines,
        AuditPath,
        AuditRecord,
        AuditRecordBase,
        AuditSuggestionRecord,
        AuditSuggestionSummary,
        AuditSummary,
        AuditTargetStart,
        AuditTargetSummary,
        AuditToolCallRecord,
        AuditTruncatedRecord,
        JobAuditResult,
    )
    from spotpatch_agent.protocol.base import InModel, WireModel
    from spotpatch_agent.protocol.config import (
        AUDIT_KEEP_DEFAULT,
        AUDIT_KEEP_MAX,
        DEFAULT_MAX_OUTPUT_TOKENS,
        MAX_OUTPUT_TOKENS_CAP,
        AuditConfig,
        CheckConfig,
        Limits,
        ModelProfile,
        Modes,
        ProviderProfile,
        Suggestions,
        TrustedConfig,
    )
    from spotpatch_agent.protocol.events import (
        JOB_EVENT_ADAPTER,
        ActivityEvent,
        AnyJobEvent,
        CheckEvent,
        DiffEvent,
        ErrorEvent,
        EventKind,
        JobEvent,
        JobEventNotification,
        JobEventsResult,
        MessageEvent,
        StatusEvent,
    )
    from spotpatch_agent.protocol.jobs import (
        TERMINAL_STATUSES,
        ApplyMode,
        DiffResult,
        ErrorInfo,
        FileStat,
        JobCreateParams,
        JobEventsParams,
        JobIdParams,
        JobListResult,
        JobSnapshot,
        JobStatus,
        PromptRenderParams,
        PromptRenderResult,
        PromptTarget,
        PromptWarning,
        PromptWarningCode,
    )
    from spotpatch_agent.protocol.providers import (
        ProbeResult,
        ProviderInfo,
        ProviderListResult,
        ProviderModelInfo,
        ProviderProbeParams,
    )
    from spotpatch_agent.protocol.session import (
        CancelRequestParams,
        Capabilities,
        ChecksSandbox,
        ClientInfo,
        EmptyParams,
        HealthCounts,
        HealthDetail,
        InitializeParams,
        InitializeResult,
        LogTraceParams,
        RecoveryReport,
        RepoHealth,
        ServerInfo,
        SessionGetResult,
        SessionLimits,
    )
    from spotpatch_agent.protocol.suggestion import (
        SuggestionCitation,
        SuggestionDiffCheck,
        SuggestionExcerpt,
        SuggestionResult,
    )

#: Concern module → the public names it defines (each module's ``__all__``; a test keeps them equal).
MODULES: dict[str, tuple[str, ...]] = {
    "base": ("InModel", "WireModel"),
    "config": ("AUDIT_KEEP_DEFAULT", "AUDIT_KEEP_MAX", "DEFAULT_MAX_OUTPUT_TOKENS", "MAX_OUTPUT_TOKENS_CAP",
               "AuditConfig", "CheckConfig", "Limits", "ModelProfile", "Modes", "ProviderProfile", "Suggestions",
               "TrustedConfig"),
    "annotation": ("ElementInfo", "Rect", "SourceLocation", "SpotAnnotation", "Target", "UsageSite"),
    "jobs": ("TERMINAL_STATUSES", "ApplyMode", "DiffResult", "ErrorInfo", "FileStat", "JobCreateParams",
             "JobEventsParams", "JobIdParams", "JobListResult", "JobSnapshot", "JobStatus", "PromptRenderParams",
             "PromptRenderResult", "PromptTarget", "PromptWarning", "PromptWarningCode"),
    "session": ("CancelRequestParams", "Capabilities", "ChecksSandbox", "ClientInfo", "EmptyParams", "HealthCounts",
                "HealthDetail", "InitializeParams", "InitializeResult", "LogTraceParams", "RecoveryReport",
                "RepoHealth", "ServerInfo", "SessionGetResult", "SessionLimits"),
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

__all__ = sorted([*_HOME, *PER_METHOD])


def __getattr__(name: str) -> Any:
    """Load the concern module that defines ``name`` (PEP 562) and keep the value here."""
    target = PER_METHOD.get(name, name)
    home = _HOME.get(target)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"spotpatch_agent.protocol.{home}"), target)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
