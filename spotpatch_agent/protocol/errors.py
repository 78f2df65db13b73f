"""Application error codes of the wire contract (docs/design.md §3) and their ``retryable`` flag.

Application errors travel as JSON-RPC error ``-32000`` with ``data: {code, message, retryable}``.
Tool-level codes (``TOOL_*``, ``PATCH_REJECTED``) are results handed back to the model, never RPC errors.
"""

from __future__ import annotations

from enum import StrEnum

APPLICATION_ERROR = -32000


class ErrorCode(StrEnum):
    INVALID_REQUEST = "INVALID_REQUEST"
    AI_DISABLED = "AI_DISABLED"
    CONSENT_REQUIRED = "CONSENT_REQUIRED"
    REPO_BLOCKED = "REPO_BLOCKED"
    JOB_CONFLICT = "JOB_CONFLICT"
    JOB_NOT_FOUND = "JOB_NOT_FOUND"
    INVALID_STATE = "INVALID_STATE"
    APPLY_CONFLICT = "APPLY_CONFLICT"
    REVERT_CONFLICT = "REVERT_CONFLICT"
    PROVIDER_UNAVAILABLE = "PROVIDER_UNAVAILABLE"
    PROVIDER_AUTH = "PROVIDER_AUTH"
    PROVIDER_PROTOCOL = "PROVIDER_PROTOCOL"
    MODEL_TOOL_CALL_UNSUPPORTED = "MODEL_TOOL_CALL_UNSUPPORTED"
    LIMIT_EXCEEDED = "LIMIT_EXCEEDED"
    CHECK_FAILED = "CHECK_FAILED"
    CHANGESET_REJECTED = "CHANGESET_REJECTED"
    CANCELLED = "CANCELLED"
    INTERNAL = "INTERNAL"


class ToolErrorCode(StrEnum):
    TOOL_ARGUMENTS_INVALID = "TOOL_ARGUMENTS_INVALID"
    TOOL_PATH_DENIED = "TOOL_PATH_DENIED"
    PATCH_REJECTED = "PATCH_REJECTED"


#: Whether a client may retry the same request unchanged and expect a different outcome.
RETRYABLE: dict[ErrorCode, bool] = {
    ErrorCode.INVALID_REQUEST: False,
    ErrorCode.AI_DISABLED: False,
    ErrorCode.CONSENT_REQUIRED: False,
    ErrorCode.REPO_BLOCKED: False,
    ErrorCode.JOB_CONFLICT: True,
    ErrorCode.JOB_NOT_FOUND: False,
    ErrorCode.INVALID_STATE: False,
    ErrorCode.APPLY_CONFLICT: False,
    ErrorCode.REVERT_CONFLICT: False,
    ErrorCode.PROVIDER_UNAVAILABLE: True,
    ErrorCode.PROVIDER_AUTH: False,
    ErrorCode.PROVIDER_PROTOCOL: False,
    ErrorCode.MODEL_TOOL_CALL_UNSUPPORTED: False,
    ErrorCode.LIMIT_EXCEEDED: False,
    ErrorCode.CHECK_FAILED: False,
    ErrorCode.CHANGESET_REJECTED: False,
    ErrorCode.CANCELLED: False,
    ErrorCode.INTERNAL: False,
}
