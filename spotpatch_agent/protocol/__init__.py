"""The wire contract: models, error codes, limits (docs/design.md §3–§4). Imports nothing internal.

``catalog`` (every method), ``schema`` (the JSON Schema of ``spotpatch-agent schema``) and ``docgen`` (the
generated method reference of docs/protocol.md) are imported on demand, not from here.
"""

from spotpatch_agent.protocol.errors import APPLICATION_ERROR, RETRYABLE, ErrorCode, ToolErrorCode
from spotpatch_agent.protocol.limits import LIMITS, MAX_FRAME_BYTES
from spotpatch_agent.protocol.models import *  # noqa: F401,F403

__all__ = ["APPLICATION_ERROR", "ErrorCode", "LIMITS", "MAX_FRAME_BYTES", "RETRYABLE", "ToolErrorCode"]
