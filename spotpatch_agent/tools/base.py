"""Shared shapes of the file tools: argument models, strict schemas, results, fixed messages (docs/design.md §6).

- :class:`ToolArgs` — base of every argument model: pydantic v2, strict types, unknown keys forbidden,
  camelCase names only (exactly the names in the schema the model sees).
- :func:`strict_schema` — the JSON Schema handed to the model, in OpenAI strict-mode shape:
  ``type: object``, ``additionalProperties: false``, every property in ``required``, optional ones
  nullable via ``"type": [T, "null"]``, no ``default``/``title``.
- :class:`ToolResult` — what one tool call returns to the engine (text for the model + UI facts).
- :class:`ToolDef` — one registered tool: name, description, argument model, handler, write flag.

Retryable results ("tell the model") are :class:`ToolResult` with ``ok=False``; terminal failures ("abort
the job") are raised as :class:`~spotpatch_agent.errors.JobFailure` by the handlers.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from spotpatch_agent.errors import JobFailure
from spotpatch_agent.protocol.errors import ErrorCode, ToolErrorCode

if TYPE_CHECKING:
    from spotpatch_agent.tools.context import WorktreeContext

#: The one uniform answer to every unusable ``read_file`` path (docs/design.md §6): no hint of the reason.
PATH_DENIED_MESSAGE = "This path cannot be read. Use a path returned by list_files or search_text."

#: Largest tool output text handed to the model by list/search, in characters.
OUTPUT_MAX_CHARS = 64 * 1024

#: Longest ``glob`` and ``query`` accepted, in characters; longer is an oversized input (terminal).
MAX_PATTERN_CHARS = 1000


class ToolArgs(BaseModel):
    """Base of tool argument models: strict types, ``extra="forbid"``, camelCase aliases only."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=False,
        extra="forbid",
        strict=True,
        frozen=True,
    )


@dataclass
class ToolResult:
    """The outcome of one tool call (docs/design.md §5, §6).

    ``ok``: the call did what was asked. ``output``: the text returned to the model (bounded, relative
    paths only). ``code``: a :class:`~spotpatch_agent.protocol.errors.ToolErrorCode` value when not ok.
    ``retryable``: the model may correct the call. ``path``: the relative POSIX path the call was about, for
    UI events (None for list/search and for denied or unnormalizable paths). ``wrote``: the worktree changed.
    ``content_sha256``: for a successful ``read_file``, the SHA-256 (hex) of the file's bytes it served
    from (the audit ledger, docs/design.md §13); None otherwise.
    """

    ok: bool
    output: str
    code: str | None = None
    retryable: bool = False
    path: str | None = None
    wrote: bool = False
    content_sha256: str | None = None

    @classmethod
    def success(cls, output: str, *, path: str | None = None, wrote: bool = False) -> ToolResult:
        return cls(ok=True, output=output, path=path, wrote=wrote)

    @classmethod
    def rejected(cls, code: ToolErrorCode, output: str, *, path: str | None = None) -> ToolResult:
        """A retryable failure: nothing changed, the model may correct the call."""
        return cls(ok=False, output=output, code=code.value, retryable=True, path=path)


Handler = Callable[["WorktreeContext", Any], Awaitable[ToolResult]]


@dataclass(frozen=True)
class ToolDef:
    """One tool: ``name``, model-facing ``description``, ``args`` model, async ``handler(ctx, args)``,
    and ``writes`` (True for tools with side effects: run serially, bump the worktree version)."""

    name: str
    description: str
    args: type[ToolArgs]
    handler: Handler
    writes: bool


# ---------------------------------------------------------------- strict schema

_DROP_KEYS = frozenset({"title", "default"})


def strict_schema(model: type[ToolArgs]) -> dict[str, Any]:
    """The strict-mode JSON Schema of a flat argument model (no nested models, no ``$ref``).

    Raises ``ValueError`` for shapes strict mode cannot express (a bug in the model, caught by tests).
    """
    raw = model.model_json_schema(by_alias=True)
    if "$defs" in raw:
        raise ValueError(f"{model.__name__}: nested models are not supported in tool arguments")
    properties = {name: _strict_property(name, spec) for name, spec in raw["properties"].items()}
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


def _strict_property(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in spec.items() if k not in _DROP_KEYS and k != "anyOf"}
    if "anyOf" in spec:
        variants = [{k: v for k, v in alt.items() if k not in _DROP_KEYS} for alt in spec["anyOf"]]
        nulls = [v for v in variants if v == {"type": "null"}]
        others = [v for v in variants if v != {"type": "null"}]
        if len(nulls) != 1 or len(others) != 1 or not isinstance(others[0].get("type"), str):
            raise ValueError(f"property {name!r}: only 'T | None' unions are supported")
        out.update(others[0])
        out["type"] = [others[0]["type"], "null"]
    if not isinstance(out.get("type"), str | list):
        raise ValueError(f"property {name!r} has no type")
    return out


def arguments_guidance(tool: ToolDef, problems: list[str]) -> str:
    """Fixed, sanitized guidance for ``TOOL_ARGUMENTS_INVALID``: the schema to follow, never echoed input.

    ``problems`` may only name the tool's own argument names (never model-supplied text).
    """
    fields = []
    for prop, spec in strict_schema(tool.args)["properties"].items():
        kind = spec["type"]
        kind = " or ".join(kind) if isinstance(kind, list) else kind
        fields.append(f'"{prop}": {kind}')
    lines = [f"Invalid arguments for {tool.name}."]
    lines.extend(problems)
    lines.append(
        "Call it again with a new call id and one JSON object with exactly these fields "
        "(all required; use null where null is allowed, no other fields): {" + ", ".join(fields) + "}."
    )
    return "\n".join(lines)


def unknown_tool_guidance(offered: list[str]) -> str:
    """Fixed guidance for a call to a tool that is not offered in this job."""
    return "Unknown tool. Call only the declared tools: " + ", ".join(offered) + "."


def check_pattern(tool: ToolDef, field: str, value: str) -> ToolResult | None:
    """Shared validation of ``glob``/``query`` text: empty → retryable TOOL_ARGUMENTS_INVALID; over
    :data:`MAX_PATTERN_CHARS` → terminal ``JobFailure(LIMIT_EXCEEDED)`` (oversized input, docs/design.md §6)."""
    if len(value) > MAX_PATTERN_CHARS:
        raise JobFailure(
            ErrorCode.LIMIT_EXCEEDED, f"{tool.name}: {field} is longer than {MAX_PATTERN_CHARS} characters"
        )
    if not value:
        return ToolResult.rejected(
            ToolErrorCode.TOOL_ARGUMENTS_INVALID, arguments_guidance(tool, [f"{field} must not be empty."])
        )
    return None
