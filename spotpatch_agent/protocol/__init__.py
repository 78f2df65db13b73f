"""The wire contract: models, error codes, limits (docs/design.md §3–§4). Imports nothing internal.

The models live in one module per concern (``base``, ``config``, ``annotation``, ``jobs``, ``session``,
``events``, ``providers``, ``audit``, ``suggestion``); :mod:`spotpatch_agent.protocol.models` re-exports
them all and loads each on first use. ``catalog`` (every method), ``schema`` (the JSON Schema of
``spotpatch-agent schema``) and ``docgen`` (the generated method reference of docs/protocol.md) are imported
on demand, not from here. A model name asked of this package is looked up in ``models`` (loaded then).
"""

from importlib import import_module
from typing import Any

from spotpatch_agent.protocol.errors import APPLICATION_ERROR, RETRYABLE, ErrorCode, ToolErrorCode
from spotpatch_agent.protocol.limits import LIMITS, MAX_FRAME_BYTES

__all__ = ["APPLICATION_ERROR", "ErrorCode", "LIMITS", "MAX_FRAME_BYTES", "RETRYABLE", "ToolErrorCode"]


def __getattr__(name: str) -> Any:
    """``spotpatch_agent.protocol.<Model>``: the model, from :mod:`spotpatch_agent.protocol.models` (as before
    the split, without loading every model whenever a submodule is imported)."""
    models = import_module("spotpatch_agent.protocol.models")  # not a from-import: that asks this hook again
    if name in models.__all__:
        return getattr(models, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
