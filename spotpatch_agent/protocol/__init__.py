"""The wire contract: models, error codes, limits (docs/design.md §3–§4). Imports nothing internal.

The models live in one module per concern (``base``, ``config``, ``annotation``, ``jobs``, ``session``,
``events``, ``providers``, ``audit``, ``suggestion``); :mod:`spotpatch_agent.protocol.models` re-exports
them all and loads each on first use. ``catalog`` (every method), ``schema`` (the JSON Schema of
``spotpatch-agent schema``) and ``docgen`` (the generated method reference of docs/protocol.md) are imported
on demand, not from here. A model name asked of this package is looked up in ``models`` (loaded then).
"""


from spotpatch_agent.protocol.errors import APPLICATION_ERROR, RETRYABLE, ErrorCode, ToolErrorCode
from spotpatch_agent.protocol.lazy import lazy_exports
from spotpatch_agent.protocol.limits import LIMITS, MAX_FRAME_BYTES

__all__ = ["APPLICATION_ERROR", "ErrorCode", "LIMITS", "MAX_FRAME_BYTES", "RETRYABLE", "ToolErrorCode"]


# ``spotpatch_agent.protocol.<Model>``: the model, from :mod:`spotpatch_agent.protocol.models` (as before the
# split, without loading every model whenever a submodule is imported).
__getattr__ = lazy_exports(__name__, globals(), {}, fallback="models")
