"""The tool registry: every tool the executor can run and its strict spec for the model (docs/design.md §6).

``TOOL_DEFS`` maps name → :class:`~spotpatch_agent.tools.base.ToolDef`; ``TOOL_SPECS`` maps name →
:class:`~spotpatch_agent.provider.base.ToolSpec` (strict JSON Schema ``parameters``). Importing this module
registers the seven tools, in this order: ``list_files``, ``search_text``, ``read_file``, ``replace_text``,
``edit_lines``, ``apply_patch``, ``run_check``. :func:`register` adds a tool to both maps; :func:`offered_tools`
is the list one job offers, derived from each tool's declaration (``ToolDef.offer``, ``ToolDef.edit_formats``),
in registration order. :data:`TOOL_SPECS` holds each tool's default description; :func:`tool_specs` gives
the descriptions of the job's edit format.
"""

from __future__ import annotations

from collections.abc import Iterable

from spotpatch_agent.protocol.config import EditFormat
from spotpatch_agent.provider.base import ToolSpec
from spotpatch_agent.tools.apply_patch import APPLY_PATCH
from spotpatch_agent.tools.base import ToolDef, strict_schema
from spotpatch_agent.tools.edit_lines import EDIT_LINES
from spotpatch_agent.tools.list_files import LIST_FILES
from spotpatch_agent.tools.read_file import READ_FILE
from spotpatch_agent.tools.replace_text import REPLACE_TEXT
from spotpatch_agent.tools.run_check import RUN_CHECK
from spotpatch_agent.tools.search_text import SEARCH_TEXT

TOOL_DEFS: dict[str, ToolDef] = {}
TOOL_SPECS: dict[str, ToolSpec] = {}


def register(tool: ToolDef) -> None:
    """Add ``tool`` to :data:`TOOL_DEFS` and :data:`TOOL_SPECS`. Raises ``ValueError`` on a duplicate name
    or an argument model strict mode cannot express."""
    if tool.name in TOOL_DEFS:
        raise ValueError(f"tool {tool.name!r} is already registered")
    spec = ToolSpec(name=tool.name, description=tool.description, parameters=strict_schema(tool.args))
    TOOL_DEFS[tool.name] = tool
    TOOL_SPECS[tool.name] = spec


def offered_tools(*, has_checks: bool, edit_format: EditFormat = "replace") -> tuple[str, ...]:
    """The tools one job offers, in registration order: every tool of ``edit_format`` whose ``offer`` is
    ``always``, and those offered ``with_checks`` when the job has at least one check (docs/design.md §6, §9)."""
    return tuple(name for name, tool in TOOL_DEFS.items()
                 if edit_format in tool.edit_formats and (tool.offer == "always" or has_checks))


def tool_specs(names: Iterable[str], *, edit_format: EditFormat = "replace") -> tuple[ToolSpec, ...]:
    """The specs of ``names``, in the given order, with their descriptions under ``edit_format``, for a
    provider request. Raises ``KeyError`` for a name that is not registered."""
    specs = []
    for name in names:
        spec, tool = TOOL_SPECS[name], TOOL_DEFS[name]
        described = tool.description_for(edit_format)
        specs.append(spec if described == spec.description else
                     ToolSpec(name=spec.name, description=described, parameters=spec.parameters))
    return tuple(specs)


for _tool in (LIST_FILES, SEARCH_TEXT, READ_FILE, REPLACE_TEXT, EDIT_LINES, APPLY_PATCH, RUN_CHECK):
    register(_tool)
