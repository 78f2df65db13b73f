"""The agent's file tools (docs/design.md §6): strict schemas, the executor, per-version caches.

Public surface::

    ToolExecutor(root, limits, *, tools=None).execute(name, arguments_json) -> ToolResult
    TOOL_SPECS: dict[str, ToolSpec]          tool_specs(names) -> tuple[ToolSpec, ...]
    ToolResult(ok, output, code, retryable, path, wrote)
"""

from __future__ import annotations

from spotpatch_agent.tools.base import PATH_DENIED_MESSAGE, ToolDef, ToolResult
from spotpatch_agent.tools.executor import ToolExecutor
from spotpatch_agent.tools.registry import TOOL_DEFS, TOOL_SPECS, register, tool_specs

__all__ = [
    "PATH_DENIED_MESSAGE",
    "TOOL_DEFS",
    "TOOL_SPECS",
    "ToolDef",
    "ToolExecutor",
    "ToolResult",
    "register",
    "tool_specs",
]
